"""The frozen syntax tree of a model file: declarations, properties and expressions.

Everything here is plain data, built once by ``load_model`` and shared read-only by the
kernel, the engine and the reporters. Every node carries a ``Loc`` so that any error
about it can be shown as ``FILE:LINE:COL`` with the line and a caret.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from cmc.errors import ModelError
from cmc.lang.values import render


@dataclass(frozen=True)
class Loc:
    """A place in a model file. ``line`` and ``col`` are 1-based; ``col`` counts
    characters; ``source_line`` is the text of that line, without its line ending."""

    file: str
    line: int
    col: int
    source_line: str


# --- declarations --------------------------------------------------------------------

@dataclass(frozen=True)
class BuildDecl:
    """``build "COMMAND"``: run once through ``sh -c`` in ``cwd`` before checking.
    ``command`` is after ``{param}`` substitution; ``loc`` is the command string."""

    command: str
    cwd: str
    loc: Loc


@dataclass(frozen=True)
class NodeDecl:
    """``node NAME = "COMMAND"``. ``index`` is the declaration order from 0. ``argv``
    is the command after ``{param}`` substitution, split like a POSIX shell, with
    ``argv[0]`` made absolute (see docs/model-file.md). ``loc`` is the command string."""

    name: str
    index: int
    argv: tuple[str, ...]
    loc: Loc
    protocol: str | None = None     # "maelstrom": JSON messages on stdin and stdout


@dataclass(frozen=True)
class MaelstromClientDecl:
    """``client NAME -> NODE: {...}, ...``: a Maelstrom client of node NODE. ``bodies``
    are its requests' bodies as compact JSON text, in order. ``loc`` is its name."""

    name: str
    node: str
    bodies: tuple[str, ...]
    loc: Loc
    after_ns: int | None = None


@dataclass(frozen=True)
class MaelstromDecl:
    """The Maelstrom part of a model (docs/maelstrom.md): the nodes that speak the
    protocol (their node_ids, in declaration order), their clients, the services."""

    nodes: tuple[str, ...]
    clients: tuple[MaelstromClientDecl, ...]
    services: tuple[str, ...]


@dataclass(frozen=True)
class ClientDecl:
    """``client NAME -> "HOST:PORT": "REQ", ...``: a ghost peer. ``host`` has no
    brackets (an IPv6 literal is plain ``::1``). ``loc`` is the client's name."""

    name: str
    host: str
    port: int
    requests: tuple[bytes, ...]
    loc: Loc
    after_ns: int | None = None     # time virtual: its first request waits for the clock


@dataclass(frozen=True)
class ReplyDecl:
    """``reply /REGEX/``: how a reply line becomes a record. ``loc`` is the regex."""

    regex: re.Pattern[str]
    loc: Loc


@dataclass(frozen=True)
class OpDecl:
    """``op read|write /REGEX/`` (docs/model-file.md, "Histories"): the client requests
    whose whole text the regex matches are reads or writes of the key-value store a
    ``linearizable`` property checks; group ``key`` names the key (none: the one
    register), a write's group ``val`` the value written. ``loc`` is the kind (read or
    write)."""

    kind: str
    regex: re.Pattern[str]
    loc: Loc


# --- expressions ---------------------------------------------------------------------
# ``loc`` is where the expression starts, except for operators (Binary, Unary), which
# are located at their operator: that is what a caret should point at when the operator
# cannot be applied.

@dataclass(frozen=True)
class Literal:
    """``1``, ``"text"``, ``true``, ``false``, ``null`` (value None)."""

    value: object
    loc: Loc


@dataclass(frozen=True)
class ListExpr:
    """``[a, b, ...]``."""

    items: tuple[Expr, ...]
    loc: Loc


@dataclass(frozen=True)
class Name:
    """A world name (``node``, ``replies`` ...), a param, or a quantifier variable.
    ``primed`` is true for ``node'`` etc.: the world after the transition."""

    name: str
    primed: bool
    loc: Loc


@dataclass(frozen=True)
class Field:
    """``base.name``; ``loc`` is the field name."""

    base: Expr
    name: str
    loc: Loc


@dataclass(frozen=True)
class Index:
    """``base[key]``; ``loc`` is the opening bracket."""

    base: Expr
    key: Expr
    loc: Loc


@dataclass(frozen=True)
class Call:
    """``func(args)``: one of the built-in functions."""

    func: str
    args: tuple[Expr, ...]
    loc: Loc


@dataclass(frozen=True)
class Unary:
    """``op`` is ``"-"`` or ``"not"``."""

    op: str
    operand: Expr
    loc: Loc


@dataclass(frozen=True)
class Binary:
    """``op`` is one of ``=> or and == != < <= > >= in "not in" + - * / %``."""

    op: str
    left: Expr
    right: Expr
    loc: Loc


@dataclass(frozen=True)
class Quantifier:
    """``all VAR in DOMAIN: BODY`` or ``some VAR in DOMAIN: BODY``."""

    kind: str
    var: str
    domain: Expr
    body: Expr
    loc: Loc


Expr = Union[Literal, ListExpr, Name, Field, Index, Call, Unary, Binary, Quantifier]

PROPERTY_KINDS = ("invariant", "witness", "quiescent", "action", "eventually", "linearizable",
                  "transactional")


@dataclass(frozen=True)
class Property:
    """A named property of one of PROPERTY_KINDS. ``loc`` is the property's name.
    A ``linearizable`` property has no expression (``expr`` None): it is checked on
    the history of the model's ``op`` lines; nor has a ``transactional`` one, checked on
    the Maelstrom clients' transactions at its consistency ``level``."""

    kind: str
    name: str
    expr: Expr | None
    loc: Loc
    level: str | None = None


@dataclass(frozen=True)
class TimeDecl:
    """A model's `time` line (docs/model-file.md, "`time async` | `time virtual`"):
    each node's clock moves on its own FIREs (async, the default), or the cluster has
    one clock (virtual), a message may arrive up to `latency_ns` after it was sent,
    the clock never passes `horizon_ns` after launch, and faults are taken only while
    it is before `faults_ns` (None: all the time)."""
    mode: str = "async"
    latency_ns: int = 0
    horizon_ns: int = 60 * 10**9
    faults_ns: int | None = None

    @property
    def virtual(self) -> bool:
        return self.mode == "virtual"


ASYNC = TimeDecl()


@dataclass(frozen=True)
class MachineDecl:
    """The machine every node sees (docs/model-file.md, "`machine`"): its CPUs and its
    memory, the same on every host and in every worker, so that a runtime that sizes
    itself by them (Go's scheduler, a thread pool) does the same everywhere."""
    cpus: int = 2
    memory: int = 4 << 30
    disk: int = 16 << 30        # the size of the file system a node's directory is on
    # shared: the host's ids; private: each node numbers its processes from 1; auto (no
    # line): shared, but a node whose start makes a process group of its own is private
    pids: str = "auto"


MACHINE = MachineDecl()


@dataclass(frozen=True)
class Model:
    """A loaded model file. ``params`` hold the values after ``-D`` overrides;
    ``budgets`` has keys crash, drop, dup (default 0) and fire (default None:
    unlimited)."""

    path: str
    folder: str
    source: str
    params: dict[str, object]
    build: BuildDecl | None
    nodes: tuple[NodeDecl, ...]
    clients: tuple[ClientDecl, ...]
    reply: ReplyDecl | None
    network: str
    budgets: dict[str, int | None]
    properties: tuple[Property, ...]
    disk: str = "fsync"         # fsync | fsync partial | strict | off (docs/model-file.md)
    ops: tuple[OpDecl, ...] = ()    # op lines, in declaration order (docs/model-file.md)
    time: TimeDecl = ASYNC          # the time line (docs/model-file.md)
    machine: MachineDecl = MACHINE  # the machine lines (docs/model-file.md)
    maelstrom: MaelstromDecl | None = None  # nodes speaking Maelstrom's protocol
    # `peers NODE: A, B` lines: (node, the nodes it may connect or send to), in order
    peers: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)


# --- names the language knows ----------------------------------------------------------

# Per-node lists: `node[i]` takes an index or a node's name.
PER_NODE_NAMES = ("node", "volatile", "durable", "alive", "crashes")
WORLD_NAMES = PER_NODE_NAMES + ("replies", "network")
FUNCTIONS = ("len", "set", "sorted", "min", "max", "sum")
KEYWORDS = ("and", "or", "not", "in", "all", "some", "true", "false", "null")


KNOWN_EXPRESSIONS = (Literal, ListExpr, Name, Field, Index, Call, Unary, Binary, Quantifier)


def subexpressions(expr: Expr | None):
    """`expr` and every expression inside it (an object of a kind not in
    KNOWN_EXPRESSIONS is yielded, not entered)."""
    stack = [expr] if expr is not None else []
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, Field):
            stack.append(e.base)
        elif isinstance(e, Index):
            stack += (e.base, e.key)
        elif isinstance(e, ListExpr):
            stack += e.items
        elif isinstance(e, Call):
            stack += e.args
        elif isinstance(e, Unary):
            stack.append(e.operand)
        elif isinstance(e, Binary):
            stack += (e.left, e.right)
        elif isinstance(e, Quantifier):
            stack += (e.domain, e.body)


def unparse(expr: Expr) -> str:
    """The expression as source text with every operator parenthesised: the tests use
    it to check precedence and associativity."""
    if isinstance(expr, Literal):
        return render(expr.value, limit=None)
    if isinstance(expr, ListExpr):
        return "[" + ", ".join(unparse(item) for item in expr.items) + "]"
    if isinstance(expr, Name):
        return expr.name + ("'" if expr.primed else "")
    if isinstance(expr, Field):
        return f"{unparse(expr.base)}.{expr.name}"
    if isinstance(expr, Index):
        return f"{unparse(expr.base)}[{unparse(expr.key)}]"
    if isinstance(expr, Call):
        return f"{expr.func}({', '.join(unparse(arg) for arg in expr.args)})"
    if isinstance(expr, Unary):
        space = " " if expr.op == "not" else ""
        return f"({expr.op}{space}{unparse(expr.operand)})"
    if isinstance(expr, Binary):
        return f"({unparse(expr.left)} {expr.op} {unparse(expr.right)})"
    if isinstance(expr, Quantifier):
        return f"({expr.kind} {expr.var} in {unparse(expr.domain)}: {unparse(expr.body)})"
    raise TypeError(f"not an expression: {expr!r}")


def error_at(loc: Loc, message: str, cls: type[ModelError] = ModelError) -> ModelError:
    """A ModelError (or subclass) that renders as ``FILE:LINE:COL: message`` + caret."""
    return cls(message, loc.file, loc.line, loc.col, loc.source_line)
