"""From a model file to a checked Model: the load-time rules of docs/model-file.md.

parse_source gives statements in file order; this module checks what the grammar
cannot (names declared twice, unknown names in expressions, budgets, addresses ...),
applies ``-D`` overrides typed by each param's default, substitutes ``{param}`` in
commands and resolves each node's program against the model's folder.
"""
from __future__ import annotations

from dataclasses import replace
import ipaddress
import os
import re
import shlex
import shutil

from cmc.errors import ModelError
from cmc.lang.ast import (FUNCTIONS, KEYWORDS, WORLD_NAMES, Binary, BuildDecl, Call,
                          ClientDecl, Expr, Field, Index, ListExpr, Literal, Loc,
                          Model, Name, NodeDecl, Property, Quantifier, ReplyDecl, TimeDecl,
                          MachineDecl, Unary, error_at)
from cmc.lang import maelstrom as maelstrom_lines
from cmc.lang.load_history import check_history, op_decl, reply_decl, suggest
from cmc.lang.transactions import LEVELS
from cmc.lang.parser import (BudgetStmt, BuildStmt, ClientStmt, DiskStmt,
                             MachineStmt, NetworkStmt, NodeStmt, PeersStmt, ServiceStmt,
                             OpStmt, ParamStmt, PropertyStmt, ReplyStmt, Source, Statement, Text,
                             TimeStmt, parse_source)

NETWORKS = ("fifo", "bag")
# The modes of a `disk` line (docs/model-file.md); the first is the default.
DISKS = ("fsync", "fsync partial", "strict", "off")
BUDGET_DEFAULTS: dict[str, int | None] = {"crash": 0, "drop": 0, "dup": 0, "fire": None}
# delay (time virtual): only in a model's budgets when its line gives it
BUDGET_KINDS = tuple(BUDGET_DEFAULTS) + ("delay",)
_ONE_ARGUMENT = ("len", "set", "sorted", "sum")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DECIMAL = re.compile(r"-?[0-9]+")


def load_model(path: str, defines: dict[str, str] | None = None) -> Model:
    """Read, parse and check a model file. ``defines`` are the ``-D name=value``
    overrides. Every problem is a ModelError located in the file (an unknown ``-D``
    name names the file only). Binaries are not checked here: see check_binaries."""
    source = Source(path, _read(path))
    statements = parse_source(source)
    return _Assembler(source, defines or {}).assemble(statements)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as err:
        raise ModelError(f"cannot read the model file: {err.strerror or err}", path) from None
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        before = raw[:err.start].decode("utf-8", "replace")
        lines = before.split("\n")
        line_text = raw.split(b"\n")[len(lines) - 1].decode("utf-8", "replace")
        raise ModelError(f"the model file is not UTF-8 text (byte 0x{raw[err.start]:02x})",
                         path, len(lines), len(lines[-1]) + 1, line_text) from None


def _first_at(loc: Loc) -> str:
    return f"the first is at line {loc.line}"


def _disk(stmt: DiskStmt) -> str:
    """The disk mode of a `disk` line (docs/model-file.md)."""
    what = ("a disk is fsync (the default: a CRASH keeps what a node made durable), "
            "fsync partial, strict (names durable only after an fsync of their "
            "directory) or off (files survive a CRASH as written)")
    if stmt.kind not in ("fsync", "strict", "off"):
        raise error_at(stmt.kind_loc, f"unknown disk {stmt.kind}{suggest(stmt.kind, ('fsync', 'strict', 'off'))}: {what}")
    if stmt.variant is not None and (stmt.kind, stmt.variant) != ("fsync", "partial"):
        raise error_at(stmt.variant_loc, f"unexpected {stmt.variant} after disk {stmt.kind}: "
                       f"only fsync takes a second word (partial); {what}")
    return stmt.kind if stmt.variant is None else f"{stmt.kind} {stmt.variant}"


# Units of a duration in a `time` line, in nanoseconds.
UNITS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9}
TIME_OPTIONS = ("latency", "horizon", "faults")


def _time(stmt: TimeStmt) -> TimeDecl:
    """The clock of a `time` line (docs/model-file.md)."""
    if stmt.kind not in ("async", "virtual"):
        raise error_at(stmt.kind_loc, f"unknown time {stmt.kind}"
                       f"{suggest(stmt.kind, ('async', 'virtual'))}: time is async (the "
                       "default: each node's clock moves on its own FIREs) or virtual (one "
                       "clock for the cluster)")
    values = {}
    for name, name_loc, number, unit, value_loc in stmt.options:
        if stmt.kind != "virtual":
            raise error_at(name_loc, f"unexpected {name} after time async: only time virtual "
                           "takes a latency, a horizon or a faults window")
        if name not in TIME_OPTIONS:
            raise error_at(name_loc, f"unknown time option {name}{suggest(name, TIME_OPTIONS)}: "
                           "time virtual takes latency D, horizon D and faults D")
        if name in values:
            raise error_at(name_loc, f"{name} is given twice")
        values[name] = _duration(number, unit, value_loc)
    if values.get("horizon") == 0:
        raise error_at(stmt.kind_loc, "a horizon of 0 leaves no time to run: give one > 0")
    return TimeDecl(stmt.kind, values.get("latency", 0), values.get("horizon", 60 * 10**9),
                    values.get("faults"))


MACHINE_ITEMS = ("cpus", "memory", "disk", "pids")
PIDS = ("shared", "private")
MEMORY_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
MAX_CPUS = 1024                 # what a cpu_set_t holds


def _peers(lines: list[PeersStmt], nodes: list) -> tuple:
    """The `peers NODE: A, B` lines (docs/model-file.md): each names a node and the
    nodes it may connect or send to; one line per node, each peer a node, once."""
    names = [n.name for n in nodes]
    seen: dict[str, Loc] = {}
    out = []
    for stmt in lines:
        if stmt.node not in names:
            raise error_at(stmt.node_loc, f"peers {stmt.node}: no node is named {stmt.node}"
                           f"{suggest(stmt.node, names)}")
        if stmt.node in seen:
            raise error_at(stmt.node_loc, f"a second peers line for node {stmt.node} "
                           f"({_first_at(seen[stmt.node])})")
        seen[stmt.node] = stmt.node_loc
        listed: list[str] = []
        for name, loc in stmt.peers:
            if name not in names:
                raise error_at(loc, f"peers {stmt.node}: no node is named {name}"
                               f"{suggest(name, names)} (a peer is a node of the model)")
            if name == stmt.node:
                raise error_at(loc, f"peers {stmt.node}: a node need not list itself "
                               "(it may always reach itself)")
            if name in listed:
                raise error_at(loc, f"peers {stmt.node}: {name} is listed twice")
            listed.append(name)
        out.append((stmt.node, tuple(listed)))
    return tuple(out)


def _machine(stmt: MachineStmt, machine: MachineDecl, seen: dict) -> MachineDecl:
    """A `machine cpus N`, `machine memory SIZE`, `machine disk SIZE` or `machine pids
    private` line (docs/model-file.md)."""
    if stmt.item not in MACHINE_ITEMS:
        raise error_at(stmt.item_loc, f"unknown machine item {stmt.item}"
                       f"{suggest(stmt.item, MACHINE_ITEMS)}: a machine line gives cpus N, "
                       "memory SIZE or disk SIZE (KiB, MiB, GiB), or pids shared or private")
    if stmt.item in seen:
        raise error_at(stmt.item_loc, f"machine {stmt.item} is given twice "
                       f"({_first_at(seen[stmt.item])})")
    seen[stmt.item] = stmt.item_loc
    if stmt.item == "pids":
        if stmt.number is not None or stmt.unit not in PIDS:
            raise error_at(stmt.value_loc, "machine pids is shared or private"
                           f"{suggest(stmt.unit or '', PIDS)}")
        return replace(machine, pids=stmt.unit)
    if stmt.number is None:
        raise error_at(stmt.value_loc, f"machine {stmt.item} takes "
                       + ("a count (machine cpus 2)" if stmt.item == "cpus"
                          else f"a size (machine {stmt.item} 4GiB)"))
    if stmt.item == "cpus":
        if stmt.unit is not None:
            raise error_at(stmt.value_loc, f"machine cpus takes a count, not {stmt.unit}")
        if not 1 <= stmt.number <= MAX_CPUS:
            raise error_at(stmt.value_loc, f"machine cpus must be 1 to {MAX_CPUS}")
        return replace(machine, cpus=stmt.number)
    if stmt.unit not in MEMORY_UNITS:
        raise error_at(stmt.value_loc, f"machine {stmt.item} needs a unit"
                       f"{suggest(stmt.unit or '', MEMORY_UNITS)}: KiB, MiB or GiB "
                       f"(machine {stmt.item} 4GiB)")
    if stmt.number <= 0:
        raise error_at(stmt.value_loc, f"machine {stmt.item} must be more than 0")
    return replace(machine, **{stmt.item: stmt.number * MEMORY_UNITS[stmt.unit]})


def _duration(number: int, unit: str, loc: Loc) -> int:
    if unit not in UNITS:
        raise error_at(loc, f"unknown unit {unit}{suggest(unit, UNITS)}: a duration "
                       "is a whole number of ns, us, ms or s (10ms)")
    return number * UNITS[unit]


def _after(stmt: ClientStmt) -> int | None:
    """When a client's first request goes (`client NAME after 2s -> ...`), or None."""
    return None if stmt.after is None else _duration(*stmt.after)


# {model_dir} in a command is the model file's folder, absolute (docs/model-file.md,
# `node NAME = "COMMAND"`).
MODEL_DIR = "model_dir"


class _Assembler:
    def __init__(self, source: Source, defines: dict[str, str]):
        self.source = source
        self.defines = defines
        self.path = os.path.abspath(source.file)
        self.folder = os.path.dirname(self.path)
        self.params: dict[str, object] = {}

    def assemble(self, statements: list[Statement]) -> Model:
        self.params = self.read_params([s for s in statements if isinstance(s, ParamStmt)])
        singles: dict[str, Loc] = {}  # build, reply, network, disk, time: one line each
        endpoints: dict[str, Loc] = {}  # nodes and clients share names: both are network ends
        budget_lines: dict[str, Loc] = {}
        property_lines: dict[str, Loc] = {}
        build, reply, network, disk, time = None, None, "fifo", DISKS[0], TimeDecl()
        machine, machine_lines = MachineDecl(), {}
        peer_lines: list[PeersStmt] = []
        nodes, clients, properties, ops = [], [], [], []
        maelstrom_clients, services, service_lines = [], [], {}
        budgets = dict(BUDGET_DEFAULTS)
        for stmt in statements:
            if stmt.keyword in ("build", "reply", "network", "disk", "time"):
                if stmt.keyword in singles:
                    raise error_at(stmt.loc, f"a second {stmt.keyword} line; a model has at "
                                   f"most one ({_first_at(singles[stmt.keyword])})")
                singles[stmt.keyword] = stmt.loc
            if isinstance(stmt, (NodeStmt, ClientStmt)):
                if stmt.name in endpoints:
                    raise error_at(stmt.name_loc, f"the name {stmt.name} is already used by a "
                                   f"node or client ({_first_at(endpoints[stmt.name])})")
                endpoints[stmt.name] = stmt.name_loc
            if isinstance(stmt, BuildStmt):
                build = self.build(stmt)
            elif isinstance(stmt, NodeStmt):
                nodes.append(self.node(stmt, len(nodes)))
            elif isinstance(stmt, ClientStmt) and stmt.node is not None:
                maelstrom_clients.append(stmt)
            elif isinstance(stmt, ServiceStmt):
                services.append(maelstrom_lines.service(stmt, services, service_lines))
            elif isinstance(stmt, ClientStmt):
                maelstrom_lines.no_bodies(stmt)
                host, port = _address(stmt.address)
                clients.append(ClientDecl(stmt.name, host, port,
                                          tuple(r.data for r in stmt.requests), stmt.name_loc,
                                          _after(stmt)))
            elif isinstance(stmt, ReplyStmt):
                reply = reply_decl(stmt)
            elif isinstance(stmt, NetworkStmt):
                if stmt.kind not in NETWORKS:
                    raise error_at(stmt.kind_loc, f"unknown network {stmt.kind}: it is fifo "
                                   "(ordered connections, the default) or bag (any message "
                                   "in flight may arrive next)")
                network = stmt.kind
            elif isinstance(stmt, DiskStmt):
                disk = _disk(stmt)
            elif isinstance(stmt, TimeStmt):
                time = _time(stmt)
            elif isinstance(stmt, MachineStmt):
                machine = _machine(stmt, machine, machine_lines)
            elif isinstance(stmt, PeersStmt):
                peer_lines.append(stmt)
            elif isinstance(stmt, BudgetStmt):
                budgets[stmt.kind] = self.budget(stmt, budget_lines)
            elif isinstance(stmt, OpStmt):
                ops.append(op_decl(stmt))
            elif isinstance(stmt, PropertyStmt):
                if stmt.name in property_lines:
                    raise error_at(stmt.name_loc, f"property {stmt.name} is declared twice "
                                   f"({_first_at(property_lines[stmt.name])})")
                property_lines[stmt.name] = stmt.name_loc
                properties.append(self.property(stmt))
        if not nodes:
            raise error_at(self.source.loc(1, 1), 'no node declared: a model needs at least '
                           'one line like  node NAME = "COMMAND"')
        peers = _peers(peer_lines, nodes)
        maelstrom = maelstrom_lines.maelstrom(nodes, maelstrom_clients, services, service_lines,
                                              _after)
        check_history(properties, ops, reply, maelstrom)
        late = next((c for c in clients + list(maelstrom.clients if maelstrom else ())
                     if c.after_ns is not None), None)
        if late is not None and not time.virtual:
            raise error_at(late.loc, f"client {late.name} after ...: a client waits for the "
                           "clock only under time virtual (add a line `time virtual`)")
        if "delay" in budget_lines and not time.virtual:
            raise error_at(budget_lines["delay"], "budget delay is for time virtual: under "
                           "time async a message may arrive at any time already")
        return Model(self.path, self.folder, self.source.text, self.params, build,
                     tuple(nodes), tuple(clients), reply, network, budgets, tuple(properties),
                     disk, tuple(ops), time, machine, maelstrom, peers)

    # params and -D

    def read_params(self, stmts: list[ParamStmt]) -> dict[str, object]:
        declared: dict[str, ParamStmt] = {}
        for stmt in stmts:
            if stmt.name in WORLD_NAMES or stmt.name in FUNCTIONS or stmt.name in KEYWORDS:
                raise error_at(stmt.name_loc, f"{stmt.name} cannot be a param's name: the "
                               "expression language already uses it")
            if stmt.name == MODEL_DIR:
                raise error_at(stmt.name_loc, f"{MODEL_DIR} cannot be a param's name: it is "
                               "built in ({model_dir} is the model file's folder)")
            if stmt.name in declared:
                raise error_at(stmt.name_loc, f"param {stmt.name} is declared twice "
                               f"({_first_at(declared[stmt.name].name_loc)})")
            declared[stmt.name] = stmt
        values = {name: stmt.value for name, stmt in declared.items()}
        for name, text in self.defines.items():
            if name == MODEL_DIR:
                raise ModelError(f"-D {MODEL_DIR}: {{{MODEL_DIR}}} is built in (the absolute "
                                 "path of the model file's folder); -D cannot change it",
                                 self.source.file)
            if name not in declared:
                known = ", ".join(declared) if declared else "none"
                raise ModelError(f"-D {name}: the model has no param {name} (its params: "
                                 f"{known}){suggest(name, declared)}", self.source.file)
            values[name] = _typed(declared[name], text)
        return values

    def substitute(self, text: Text, what: str) -> str:
        """``{name}`` → the param's value; ``{{`` and ``}}`` are literal braces."""
        out, done = [], 0
        for match in _PLACEHOLDER.finditer(text.value):
            out.append(text.value[done:match.start()])
            name = match.group(1)
            if name is None:
                out.append(match.group(0)[0])
            elif name == MODEL_DIR:
                # quoted for the shell-like split only where the path needs it (a space)
                out.append(shlex.quote(self.folder))
            elif name in self.params:
                out.append(_as_text(self.params[name]))
            else:
                raise error_at(text.loc_of(match.start()), f"unknown param {{{name}}} in the "
                               f"{what}{suggest(name, [*self.params, MODEL_DIR])} (write {{{{ and }}}} "
                               "for literal braces)")
            done = match.end()
        out.append(text.value[done:])
        return "".join(out)

    # statements

    def build(self, stmt: BuildStmt) -> BuildDecl:
        command = self.substitute(stmt.command, "build command")
        if not command.strip() or "\0" in command:
            raise error_at(stmt.command.loc, "the build command is empty or holds a NUL "
                           "character")
        return BuildDecl(command, self.folder, stmt.command.loc)

    def node(self, stmt: NodeStmt, index: int) -> NodeDecl:
        command = self.substitute(stmt.command, f"command of node {stmt.name}")
        where = stmt.command.loc
        if "\0" in command:
            raise error_at(where, f"node {stmt.name}: a command cannot contain a NUL character")
        try:
            argv = shlex.split(command)
        except ValueError as err:
            raise error_at(where, f"node {stmt.name}: cannot split the command like a "
                           f"shell does: {err}") from None
        if not argv:
            raise error_at(where, f"node {stmt.name}: the command is empty")
        argv[0] = self.program(argv[0])
        protocol = maelstrom_lines.node_kind(*stmt.kind) if stmt.kind is not None else None
        return NodeDecl(stmt.name, index, tuple(argv), where, protocol)

    def program(self, word: str) -> str:
        if "/" in word:
            if os.path.isabs(word):
                return word
            return os.path.normpath(os.path.join(self.folder, word))
        found = shutil.which(word)
        return os.path.abspath(found) if found else word

    def budget(self, stmt: BudgetStmt, seen: dict[str, Loc]) -> int:
        if stmt.kind not in BUDGET_KINDS:
            raise error_at(stmt.kind_loc, f"unknown budget {stmt.kind}: a budget is for "
                           f"crash, drop, dup, fire or delay{suggest(stmt.kind, BUDGET_KINDS)}")
        if stmt.kind in seen:
            raise error_at(stmt.kind_loc, f"budget {stmt.kind} is given twice "
                           f"({_first_at(seen[stmt.kind])})")
        seen[stmt.kind] = stmt.kind_loc
        if stmt.value < 0:
            raise error_at(stmt.value_loc, "a budget cannot be negative")
        return stmt.value

    def property(self, stmt: PropertyStmt) -> Property:
        if stmt.level is not None:          # transactional NAME LEVEL
            if stmt.level not in LEVELS:
                raise error_at(stmt.level_loc, f"transactional {stmt.name}: {stmt.level} is "
                               "no consistency level cmc checks; the levels are "
                               + ", ".join(LEVELS))
            return Property(stmt.keyword, stmt.name, None, stmt.name_loc, stmt.level)
        if stmt.expr is None:               # linearizable NAME
            return Property(stmt.keyword, stmt.name, None, stmt.name_loc)
        try:
            _check_names(stmt.expr, stmt.keyword, self.params, frozenset())
        except RecursionError:
            raise error_at(stmt.name_loc, f"property {stmt.name} is nested too deeply") from None
        return Property(stmt.keyword, stmt.name, stmt.expr, stmt.name_loc)


def _typed(stmt: ParamStmt, text: object) -> object:
    """A -D value in the type of the param's default (docs/model-file.md,
    `param NAME = VALUE`)."""
    if isinstance(text, bool):
        text = "true" if text else "false"
    text = str(text)
    default = stmt.value
    if isinstance(default, bool):
        if text in ("true", "false"):
            return text == "true"
        kind = "a bool (true or false)"
    elif isinstance(default, int):
        if _DECIMAL.fullmatch(text) and len(text) < 4000:
            return int(text)
        kind = "an int"
    else:
        return text
    raise error_at(stmt.value_loc, f"-D {stmt.name}={text}: param {stmt.name} is {kind}, "
                   "the type of its default here")


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _address(text: Text) -> tuple[str, int]:
    """``HOST:PORT`` with an IPv4 host, or ``[IPV6]:PORT``."""
    value = text.value
    if value.startswith("["):
        close = value.find("]")
        if close < 0 or value[close + 1:close + 2] != ":":
            raise error_at(text.loc, f"bad address {value!r}: write an IPv6 address as "
                           "[ADDRESS]:PORT, as in [::1]:7000")
        host, port_at = value[1:close], close + 2
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise error_at(text.loc_of(1), f"bad address: {host!r} is not an IPv6 "
                           "address") from None
    else:
        host, colon, _port = value.rpartition(":")
        if not colon:
            raise error_at(text.loc, f"bad address {value!r}: an address is HOST:PORT, as "
                           "in 127.0.0.1:7000")
        if ":" in host:
            raise error_at(text.loc, f"bad address {value!r}: write an IPv6 address in "
                           "brackets, as in [::1]:7000")
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise error_at(text.loc_of(0), f"bad address: {host!r} is not an IPv4 address "
                           "(the network is cmc's: use the address a node listens on, "
                           "as in 127.0.0.1)") from None
        port_at = len(host) + 1
    port = value[port_at:]
    if not (port.isascii() and port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535):
        raise error_at(text.loc_of(port_at), f"bad address: port {port!r} is not a number "
                       "from 1 to 65535")
    return host, int(port)


def _check_names(expr: Expr, kind: str, params: dict, bound: frozenset) -> None:
    """Every name in a property is a world name, a param or a bound variable; primes
    only in action properties; calls only to the built-in functions."""
    if isinstance(expr, Literal):
        return
    if isinstance(expr, Name):
        if expr.primed:
            if expr.name not in WORLD_NAMES:
                raise error_at(expr.loc, f"{expr.name}' cannot be primed: only the world "
                               "names are (" + ", ".join(n + "'" for n in WORLD_NAMES) + ")")
            if kind != "action":
                raise error_at(expr.loc, f"{expr.name}' is the world after a transition: "
                               f"it can only appear in an action property, not in {kind}")
        elif expr.name in FUNCTIONS:
            raise error_at(expr.loc, f"{expr.name} is a function: call it, as in "
                           f"{expr.name}(x)")
        elif expr.name not in bound and expr.name not in WORLD_NAMES and expr.name not in params:
            raise error_at(expr.loc, f"unknown name {expr.name}"
                           f"{suggest(expr.name, [*WORLD_NAMES, *params, *bound])}; a "
                           "property can use node, volatile, durable, alive, crashes, "
                           "replies, network, the params and quantifier variables")
        return
    if isinstance(expr, Call):
        if expr.func not in FUNCTIONS:
            raise error_at(expr.loc, f"unknown function {expr.func}"
                           f"{suggest(expr.func, FUNCTIONS)}; the functions are "
                           + ", ".join(FUNCTIONS))
        if expr.func in _ONE_ARGUMENT and len(expr.args) != 1:
            raise error_at(expr.loc, f"{expr.func} takes one argument, not {len(expr.args)}")
        if not expr.args:
            raise error_at(expr.loc, f"{expr.func} takes a list, or two or more values")
    if isinstance(expr, Quantifier):
        var = expr.var
        if var in KEYWORDS or var in WORLD_NAMES or var in FUNCTIONS or var in params:
            raise error_at(expr.loc, f"{expr.kind} {var}: {var} cannot be a variable's "
                           "name: it already means something here")
        if var in bound:
            raise error_at(expr.loc, f"{expr.kind} {var}: {var} is already a variable "
                           "here; choose another name")
        _check_names(expr.domain, kind, params, bound)
        _check_names(expr.body, kind, params, bound | {var})
        return
    for child in _children(expr):
        _check_names(child, kind, params, bound)


def _children(expr: Expr) -> tuple[Expr, ...]:
    if isinstance(expr, ListExpr):
        return expr.items
    if isinstance(expr, Field):
        return (expr.base,)
    if isinstance(expr, Index):
        return (expr.base, expr.key)
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, Unary):
        return (expr.operand,)
    if isinstance(expr, Binary):
        return (expr.left, expr.right)
    return ()


# --- for the kernel ------------------------------------------------------------------

def check_binaries(model: Model) -> None:
    """After the build: every node's program exists and is executable."""
    for node in model.nodes:
        program = node.argv[0]
        path = program if "/" in program else shutil.which(program)
        if path is None or not os.path.isfile(path):
            raise error_at(node.loc, f"node {node.name}: binary not found: {program} "
                           "(run the build, or fix the path)")
        if not os.access(path, os.X_OK):
            raise error_at(node.loc, f"node {node.name}: binary is not executable: {path} "
                           "(chmod +x it, or fix the path)")


def reply_record(reply: ReplyDecl | None, client: str, node: int, index: int, req: str,
                 raw: str) -> dict:
    """The record a reply line becomes (docs/model-file.md, `reply /REGEX/`): client,
    node, index, req, raw, and the regex's named groups when it matches the whole line.
    A group whose text is a decimal integer (``-?[0-9]+``) is an int; an optional group that did not take part is null."""
    record = {"client": client, "node": node, "index": index, "req": req, "raw": raw}
    match = reply.regex.fullmatch(raw) if reply is not None else None
    if match:
        for name, text in match.groupdict().items():
            if text is not None and _DECIMAL.fullmatch(text) and len(text) < 4000:
                record[name] = int(text)
            else:
                record[name] = text
    return record
