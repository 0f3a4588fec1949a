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

from cmc.lang.ast import Model
from cmc.lang.linearizable import Op, violations

__all__ = ["history_rows", "history_violations"]


def _operations(model: Model, view: dict) -> list[tuple[Op, dict]]:
    out = []
    replies = view.get("replies", [])
    for entry in view.get("history", []):
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
            "reply": None if entry["reply"] is None else replies[entry["reply"]]["raw"],
            "invoked": entry["invoked"], "completed": entry["completed"],
            "invoke_event": entry["invoke"], "complete_event": entry["complete"],
            "violating": op.key in bad,
        })
    return rows
