"""A world's history of client operations, as the `linearizable` property sees it
(docs/model-file.md, "Histories").

The kernel keeps, in a world's view, every request a ghost client put in flight
(``history``: the client, the request's text, the event numbers of its invoke and its
complete in one sequence, the states at which they happened, and which reply answered
it). Here the model's ``op`` lines classify those requests: the first line whose regex
matches the whole request makes it a read or a write, with the key of the group
``key`` (none: the one register); a write's value is the group ``val`` of its request,
a read's the group ``val`` of the reply regex on its reply line (null when the reply
has no ``val``). Values are compared as text, as they were written on the wire. A
request no ``op`` line matches is not part of the history; one with no reply is
pending.
"""
from __future__ import annotations

import functools
import json

from cmc.lang.ast import Model
from cmc.lang.linearizable import Op, violations
from cmc.lang.transactions import Txn, anomalies, forbidden, txn_of

__all__ = ["history_rows", "history_violations", "operation_count", "txn_anomalies",
           "txn_count", "txn_rows"]


# Maelstrom's error codes that say an operation did not happen (its protocol's
# "definite" ones); any other error leaves it indefinite: pending.
DEFINITE = frozenset((1, 10, 11, 12, 14, 20, 21, 22, 30))
KEY_DOES_NOT_EXIST = 20


def _maelstrom_op(entry: dict, replies: list) -> Op | None:
    """A Maelstrom client's request as an operation of the history, by its body's type:
    read, write or cas (the lin-kv workload's); None for other types and for a request
    answered with a definite error (it did not happen), except a read of a key that does
    not exist, which read the initial value."""
    body = entry["body"]
    kind, key = body.get("type"), json.dumps(body.get("key"), sort_keys=True)
    if kind not in ("read", "write", "cas"):
        return None
    answer = None if entry["reply"] is None else replies[entry["reply"]]["body"]
    complete = entry["complete"]
    if answer is not None and answer.get("type") == "error":
        code = answer.get("code")
        if kind == "read" and code == KEY_DOES_NOT_EXIST:
            answer = {"value": None}
        elif code in DEFINITE:
            return None
        else:
            complete = None                 # indefinite: it may have happened
    if kind == "write":
        value = _canon(body.get("value"))
    elif kind == "cas":
        value = (_canon(body.get("from")), _canon(body.get("to")))
    else:
        value = None if answer is None else _canon(answer.get("value"))
    return Op(kind, key, value, entry["invoke"], complete, entry["client"])


def _canon(value) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def _operations(model: Model, view: dict) -> list[tuple[Op, dict]]:
    out = []
    replies = view.get("replies", [])
    for entry in view.get("history", []):
        if "body" in entry:                 # a Maelstrom client's
            op = _maelstrom_op(entry, replies)
            if op is not None:
                out.append((op, entry))
            continue
        for decl in model.ops:
            match = decl.regex.fullmatch(entry["req"])
            if match is not None:
                break
        else:
            continue
        groups = match.groupdict()
        key = groups.get("key")
        if decl.kind == "write":
            value = groups.get("val")
        elif entry["reply"] is None:
            value = None
        else:
            value = _reply_val(model, replies[entry["reply"]]["raw"])
        out.append((Op(decl.kind, key, value, entry["invoke"], entry["complete"],
                       entry["client"]), entry))
    return out


def _reply_val(model: Model, raw: str) -> str | None:
    match = model.reply.regex.fullmatch(raw) if model.reply is not None else None
    return match.groupdict().get("val") if match is not None else None


@functools.lru_cache(maxsize=4096)
def _violations(ops: tuple[Op, ...]) -> tuple:
    return tuple(violations(list(ops)))


def history_violations(model: Model, view: dict) -> tuple:
    """The keys whose histories in this world are not linearizable (empty: it is)."""
    return _violations(tuple(op for op, _ in _operations(model, view)))


def _shown(record: dict) -> str:
    """A reply as a history row shows it: its line, or a Maelstrom answer's body."""
    if "raw" in record:
        return record["raw"]
    return json.dumps(record["body"], separators=(",", ":"))


def operation_count(model: Model, view: dict) -> int:
    """How many operations the world's history has (requests an ``op`` line, or a
    Maelstrom body, makes operations)."""
    return len(_operations(model, view))


def history_rows(model: Model, view: dict) -> list[dict]:
    """The history as a report shows it: one row per operation, in invoke order, with
    its client, kind, key, value, request, reply (null: pending), the states at which
    it was invoked and completed, and whether its key's history is not linearizable."""
    ops = _operations(model, view)
    bad = set(_violations(tuple(op for op, _ in ops)))
    replies = view.get("replies", [])
    rows = []
    for op, entry in ops:
        rows.append({
            "client": op.client, "kind": op.kind, "key": op.key, "value": op.value,
            "request": entry["req"],
            "reply": None if entry["reply"] is None else _shown(replies[entry["reply"]]),
            "invoked": entry["invoked"], "completed": entry["completed"],
            "invoke_event": entry["invoke"], "complete_event": entry["complete"],
            "violating": op.key in bad,
        })
    return rows


# -- transactions (a `transactional` property) ----------------------------------------

def _txns(view: dict) -> list[tuple[Txn, dict]]:
    """The Maelstrom clients' `txn` requests of the world as transactions: acknowledged
    (`txn_ok`), failed (an error Maelstrom calls definite) or unknown (no answer, or
    another error)."""
    out = []
    replies = view.get("replies", [])
    for entry in view.get("history", []):
        body = entry.get("body")
        if body is None or body.get("type") != "txn" or not isinstance(body.get("txn"), list):
            continue
        answer = None if entry["reply"] is None else replies[entry["reply"]]["body"]
        status = "info"
        if answer is not None and answer.get("type") == "txn_ok":
            status = "ok"
        elif answer is not None and answer.get("type") == "error" and \
                answer.get("code") in DEFINITE:
            status = "fail"
        got = answer.get("txn") if status == "ok" else None
        out.append((txn_of(body["txn"], got if isinstance(got, list) else None, status,
                           entry["invoke"], entry["complete"], entry["client"]), entry))
    return out


@functools.lru_cache(maxsize=4096)
def _anomalies(txns: tuple[Txn, ...], realtime: bool) -> frozenset[str]:
    return frozenset(anomalies(list(txns), realtime))


def txn_anomalies(level: str, view: dict) -> list[str]:
    """The anomalies of the world's transactions that `level` forbids, sorted (empty:
    none)."""
    found = _anomalies(tuple(t for t, _ in _txns(view)), level == "strict-serializable")
    return sorted(found & forbidden(level))


def txn_count(view: dict) -> int:
    """How many transactions the world's history has."""
    return len(_txns(view))


def txn_rows(level: str, view: dict) -> list[dict]:
    """The transactions as a report shows them (history_rows' fields, `kind` txn), each
    with the forbidden anomalies the history shows (`anomalies`)."""
    bad = txn_anomalies(level, view)
    replies = view.get("replies", [])
    return [{"client": t.client, "kind": "txn", "key": None, "value": t.status,
             "request": entry["req"],
             "reply": None if entry["reply"] is None else _shown(replies[entry["reply"]]),
             "invoked": entry["invoked"], "completed": entry["completed"],
             "invoke_event": entry["invoke"], "complete_event": entry["complete"],
             "violating": bool(bad), "anomalies": bad, "level": level}
            for t, entry in _txns(view)]
