"""Maelstrom's workloads as model files (docs/maelstrom.md, "cmc maelstrom"): the model
text `cmc maelstrom WORKLOAD --bin CMD` checks, which `--write-model` keeps to edit.

Each workload is client lines and properties over `replies`, small by default (two
nodes, two operations, one for broadcast and g-set): a search grows with every message
in flight. Operation i goes to node i mod N. Where messages go between the nodes, the
model lets the network lose one (`budget drop 1`) and runs under `time virtual` in
Maelstrom's phases: faults only within the time limit (`time virtual faults T`), then
Maelstrom's recovery time for the nodes' timers to mend what the faults did, then the
final reads (`after T + R`).
"""
from __future__ import annotations

import json
import shlex

from .load import UNITS

WORKLOADS = ("echo", "unique-ids", "broadcast", "g-set", "g-counter", "pn-counter", "lin-kv",
             "kafka", "txn-rw-register", "txn-list-append")
NOT_YET: tuple[str, ...] = ()
TXN = ("txn-rw-register", "txn-list-append")
# Maelstrom's --consistency-models default (core.clj), for the txn workloads.
DEFAULT_LEVEL = "strict-serializable"
# The operations of a check by default: a broadcast's value travels to every node, and
# each more one multiplies the orders its gossip can take (two take minutes).
DEFAULT_OPS = {"broadcast": 1, "g-set": 1}

# Payloads whose JSON types a node must keep (a number is not its text).
_ECHOES = ("hello", 7, ["a", 1], {"k": None}, -3, True)


def _body(**fields) -> str:
    return json.dumps(fields, separators=(", ", ": "))


# Where messages go between the nodes (or to a service), by default one may be lost
# (`budget drop 1`) within the time limit, by default this many seconds of the virtual
# clock (Maelstrom's --time-limit); then the nodes have RECOVERY_S to recover, as
# Maelstrom gives them ("Waiting for recovery...", core.clj), before the final reads;
# virtual time ends a second after those.
_TIME_LIMIT_S = {"broadcast": 3, "g-set": 3, "g-counter": 1, "pn-counter": 1, "lin-kv": 1,
                 "kafka": 1, "txn-rw-register": 1, "txn-list-append": 1}
RECOVERY_S = 10
BUDGET_FLAGS = ("crash", "drop", "dup")


def has_phases(workload: str) -> bool:
    """Whether `workload`'s model has a time limit and final reads."""
    return workload in _TIME_LIMIT_S


def horizon_ns(text: str) -> int | None:
    """A --horizon such as 4s or 2500ms, in nanoseconds (None: not a duration)."""
    digits = text.rstrip("nums")
    unit = text[len(digits):]
    if not digits.isdigit() or unit not in UNITS or int(digits) == 0:
        return None
    return int(digits) * UNITS[unit]


def _limit(workload: str, time_limit: int | None) -> int:
    """The time limit of `workload`'s model in seconds: `time_limit`, or its default."""
    return _TIME_LIMIT_S[workload] if time_limit is None else time_limit


def _reads_at(workload: str, time_limit: int | None, recovery: int | None) -> int:
    """When the final reads of `workload` go, in seconds of the virtual clock."""
    return _limit(workload, time_limit) + (RECOVERY_S if recovery is None else recovery)


def check_horizon(workload: str, text: str, time_limit: int | None = None,
                  recovery: int | None = None) -> str | None:
    """Why `text` is no horizon for `workload`'s model (None: it is one)."""
    ns = horizon_ns(text)
    if ns is None:
        return f"--horizon {text}: a duration > 0 such as 4s or 2500ms (units ns, us, ms, s)"
    if has_phases(workload):
        after = _reads_at(workload, time_limit, recovery)
        if ns <= after * 10**9:
            return (f"--horizon {text}: the final reads of {workload} come after {after}s "
                    "(the time limit and the recovery time), so the horizon must be later "
                    "than that")
    return None


def _settings(workload: str, budgets: dict[str, int], horizon: str | None,
              time_limit: int | None, recovery: int | None) -> list[str]:
    """The service, time and budget lines: the workload's defaults, `budgets` (kind ->
    units, 0 for none), `horizon` (a duration's text), `time_limit` and `recovery`
    (seconds) over them."""
    lines = ["service seq-kv"] if workload in ("g-counter", "pn-counter") else []
    if workload in ("kafka",) + TXN:       # Gossip Glomers' solutions keep state in these
        lines = ["service lin-kv", "service seq-kv"]
    if has_phases(workload):
        horizon = horizon or f"{_reads_at(workload, time_limit, recovery) + 1}s"
        lines.append(f"time virtual faults {_limit(workload, time_limit)}s horizon {horizon}")
    elif horizon:
        lines.append(f"time virtual horizon {horizon}")
    spent = {**({"drop": 1} if has_phases(workload) else {}), **budgets}
    lines += [f"budget {kind} {spent[kind]}" for kind in BUDGET_FLAGS if spent.get(kind)]
    return lines + [""] if lines else []


def model_text(workload: str, command: str, nodes: int, ops: int,
               budgets: dict[str, int] | None = None, horizon: str | None = None,
               time_limit: int | None = None, recovery: int | None = None,
               level: str | None = None, total: bool = False) -> str:
    """The model of `workload` over `nodes` copies of `command`, with `ops` operations;
    `budgets`, `horizon`, `time_limit`, `recovery`, `level` and `total` as `cmc
    maelstrom`'s --crash/--drop/--dup, --horizon, --time-limit, --recovery,
    --consistency-models and --availability total give them (over the workload's
    defaults)."""
    names = [f"n{i + 1}" for i in range(nodes)]
    flags = "".join(f" --{kind} {n}" for kind, n in (budgets or {}).items())
    flags += f" --horizon {horizon}" if horizon else ""
    flags += f" --time-limit {time_limit}" if time_limit is not None else ""
    flags += f" --recovery {recovery}" if recovery is not None else ""
    flags += f" --consistency-models {level}" if level is not None else ""
    flags += " --availability total" if total else ""
    reads = (_reads_at(workload, time_limit, recovery),) if has_phases(workload) else ()
    head = [f"# cmc maelstrom {workload} --bin {shlex.quote(command)} --node-count {nodes} "
            f"--ops {ops}{flags}",
            "# (docs/maelstrom.md; edit it and run cmc --model-file on it)"]
    head += [f"node {n} = maelstrom {json.dumps(command)}" for n in names]
    head += [""] + _settings(workload, budgets or {}, horizon, time_limit, recovery)
    to = [names[i % nodes] for i in range(ops)]       # the node of operation i
    if workload == "echo":
        lines = [f"client c{i + 1} -> {to[i]}: "
                 + _body(type="echo", echo=_ECHOES[i % len(_ECHOES)]) for i in range(ops)]
        lines += ["", "invariant echoed:",
                  '    all r in replies: r.body.type == "echo_ok" and r.body.echo == r.req.echo',
                  f"quiescent all_answered: len(replies) == {ops}"]
    elif workload == "unique-ids":
        lines = [f"client c{i + 1} -> {to[i]}: {_body(type='generate')}" for i in range(ops)]
        lines += ["", "invariant unique:",
                  "    all a in replies: all b in replies: a.index != b.index => "
                  "a.body.id != b.body.id",
                  f"quiescent all_answered: len(replies) == {ops}"]
    elif workload in ("broadcast", "g-set"):
        lines = _sets(workload, names, to, ops, *reads)
    elif workload in ("g-counter", "pn-counter"):
        lines = _counters(workload, names, to, ops, *reads)
    elif workload == "lin-kv":
        lines = _lin_kv(names, to, ops, *reads)
    elif workload == "kafka":
        lines = _kafka(names, to, ops, *reads)
    elif workload in TXN:
        lines = _txn(workload, names, to, ops, *reads, level or DEFAULT_LEVEL, total)
    else:
        raise ValueError(workload)
    return "\n".join(head + lines) + "\n"


_FINAL = "# the final reads: after the time limit, its faults healed, and the recovery time"


def _sets(workload: str, names: list[str], to: list[str], ops: int, at: int) -> list[str]:
    """broadcast and g-set: every value acknowledged is in every final read. A node's
    client sends broadcast's topology first (a full mesh), then that node's values."""
    add, field, listed = (("broadcast", "message", "messages") if workload == "broadcast"
                          else ("add", "element", "value"))
    topology = {n: [m for m in names if m != n] for n in names}
    lines = []
    for k, n in enumerate(names):
        bodies = [_body(type="topology", topology=topology)] if workload == "broadcast" else []
        bodies += [_body(**{"type": add, field: i + 1}) for i in range(ops) if to[i] == n]
        if bodies:
            lines.append(f"client c{k + 1} -> {n}: " + ", ".join(bodies))
    lines.append(_FINAL)
    lines += [f"client r{k + 1} after {at}s -> {n}: {_body(type='read')}"
              for k, n in enumerate(names)]
    lines += ["", "invariant final_reads_have_every_ack:",
              '    all r in replies: r.req.type == "read" =>',
              f'        all b in replies: b.body.type == "{add}_ok" => '
              f"b.req.{field} in r.body.{listed}",
              'witness read: some r in replies: r.req.type == "read"']
    return lines


def _counters(workload: str, names: list[str], to: list[str], ops: int,
              at: int) -> list[str]:
    """g-counter and pn-counter over seq-kv: once every add was acknowledged, a final
    read is their sum. One client per add (the language has no sum over a filter)."""
    deltas = [-(i + 1) if workload == "pn-counter" and i % 2 else i + 1 for i in range(ops)]
    lines = [f"client c{i + 1} -> {to[i]}: {_body(type='add', delta=deltas[i])}"
              for i in range(ops)]
    lines.append(_FINAL)
    lines += [f"client r{k + 1} after {at}s -> {n}: {_body(type='read')}"
              for k, n in enumerate(names)]
    lines += ["", "invariant final_reads_count_every_ack:",
              '    all r in replies: r.req.type == "read" =>']
    lines += [f'        (some a in replies: a.client == "c{i + 1}" and a.body.type == "add_ok") =>'
              for i in range(ops)]
    lines.append(f"        r.body.value == {sum(deltas)}")
    return lines


def _lin_kv(names: list[str], to: list[str], ops: int, at: int) -> list[str]:
    """lin-kv: one key; operation i writes i + 1, reads, or compare-and-sets what the
    write before it wrote, in turn; a final read on every node; the history must be
    linearizable."""
    lines = []
    for i in range(ops):
        if i % 3 == 0:
            body = _body(type="write", key=0, value=i + 1)
        elif i % 3 == 1:
            body = _body(type="read", key=0)
        else:
            body = _body(type="cas", key=0, **{"from": i - 1, "to": i + 1})
        lines.append(f"client c{i + 1} -> {to[i]}: {body}")
    lines.append(_FINAL)
    lines += [f"client r{k + 1} after {at}s -> {n}: "
              f"{_body(type='read', key=0)}"
              for k, n in enumerate(names)]
    lines += ["", "linearizable kv_is_linearizable"]
    return lines


def _kafka(names: list[str], to: list[str], ops: int, at: int) -> list[str]:
    """kafka: operation i sends i + 1 to key "k1" (one key: where offsets collide); a
    node's client sends its messages, then polls from offset 0; a final poll on every
    node. The properties are the errors of Jepsen's kafka checker that Maelstrom's
    counts (docs/maelstrom.md, "kafka")."""
    poll = _body(type="poll", offsets={"k1": 0})
    lines = []
    for k, n in enumerate(names):
        sends = [_body(type="send", key="k1", msg=i + 1) for i in range(ops) if to[i] == n]
        if sends:
            lines.append(f"client c{k + 1} -> {n}: " + ", ".join(sends + [poll]))
    lines.append(_FINAL)
    lines += [f"client r{k + 1} after {at}s -> {n}: {poll}" for k, n in enumerate(names)]
    sent = 'all s in replies: s.body.type == "send_ok" =>'
    polled = "p.body.msgs[s.req.key]"
    return lines + [
        "", "# duplicate, inconsistent-offsets: one offset, one message",
        "invariant offsets_are_unique:",
        f"    {sent} all t in replies: t.body.type == \"send_ok\" and",
        "        t.req.key == s.req.key and t.index != s.index => t.body.offset != s.body.offset",
        "invariant polls_agree_with_sends:",
        '    all p in replies: p.body.type == "poll_ok" =>',
        f"        {sent} all m in {polled}: m[0] == s.body.offset => m[1] == s.req.msg",
        "# int-nonmonotonic-poll: a poll's offsets go up",
        "invariant polls_are_in_order:",
        '    all p in replies: p.body.type == "poll_ok" => all k in p.body.msgs:',
        "        sorted(p.body.msgs[k]) == p.body.msgs[k] and "
        "len(set(p.body.msgs[k])) == len(p.body.msgs[k]) and",
        "        (all a in p.body.msgs[k]: all b in p.body.msgs[k]: a[0] == b[0] => a == b)",
        "# int-poll-skip, lost-write: a poll skips no acknowledged offset",
        "invariant polls_skip_nothing:",
        '    all p in replies: p.body.type == "poll_ok" =>',
        f"        {sent} len({polled}) > 0 and min({polled})[0] <= s.body.offset and",
        f"        s.body.offset <= max({polled})[0] => [s.body.offset, s.req.msg] in {polled}",
        "# nonmonotonic-send: a client's offsets go up",
        "invariant sends_are_in_order:",
        f"    {sent} all t in replies: t.body.type == \"send_ok\" and t.client == s.client and",
        "        t.req.key == s.req.key and s.index < t.index => s.body.offset < t.body.offset",
        "# unseen: at the end, every acknowledged message has been polled",
        "quiescent every_ack_is_polled:",
        f"    {sent} some p in replies: p.body.type == \"poll_ok\" and",
        f"        [s.body.offset, s.req.msg] in {polled}",
        'witness final_poll: some p in replies: p.client == "r1" and p.body.type == "poll_ok"']


def _txn(workload: str, names: list[str], to: list[str], ops: int, at: int, level: str,
         total: bool) -> list[str]:
    """txn-rw-register and txn-list-append: operation i writes (appends to) key a twice
    (once), reads key b, and, for list-append, appends to b too, where a and b are keys
    1 and 2 in turn; a final read-only transaction of both keys on every node; the
    transactions at `level` (docs/model-file.md, `transactional`)."""
    lines = []
    for i in range(ops):
        a, b = 1 + i % 2, 2 - i % 2
        if workload == "txn-rw-register":
            txn = [["w", a, 2 * i + 1], ["w", a, 2 * i + 2], ["r", b, None]]
        else:
            txn = [["append", a, i + 1], ["r", b, None], ["append", b, i + 1]]
        lines.append(f"client c{i + 1} -> {to[i]}: {_body(type='txn', txn=txn)}")
    lines.append(_FINAL)
    final = _body(type="txn", txn=[["r", 1, None], ["r", 2, None]])
    lines += [f"client r{k + 1} after {at}s -> {n}: {final}" for k, n in enumerate(names)]
    lines += ["", f"transactional txns_are_{level.replace('-', '_')} {level}"]
    if total:
        clients = ", ".join(f'"c{i + 1}"' for i in range(ops))
        clients += "".join(f', "r{k + 1}"' for k in range(len(names)))
        lines += ["# --availability total: every transaction is acknowledged",
                  "quiescent totally_available:",
                  f"    all c in [{clients}]: some r in replies: r.client == c and "
                  'r.body.type == "txn_ok"']
    return lines
