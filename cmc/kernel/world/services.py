"""Maelstrom's built-in services (docs/maelstrom.md, "Services"): what they hold and how
they answer a request delivered to them.

- `lin-kv`: one copy of a map; read, write and cas (with `create_if_not_exists`), each
  at the moment it is delivered: linearizable.
- `seq-kv`: the same updates in one order (a log), but a read may see the map as it was
  some updates ago: not before what the reading node has already seen (its updates and
  its failed cas, which saw the newest map; its earlier reads). That is sequential consistency for reads; an update is applied to
  the newest map (Maelstrom's seq-kv may also apply one to an older map, which is not
  modelled). Which past a read sees is the environment's choice, so a read delivered to
  seq-kv is several actions, one per answer it can give (`stale_reads`).
- `lin-tso`: the next of 1, 2, 3, ...

Answers are Maelstrom's: `read_ok`, `write_ok`, `cas_ok`, `ts_ok`, or an error with
its code (20: no such key, 22: a cas from a value the key does not have, 10: a type the
service does not answer).
"""
from __future__ import annotations

import json

KEY_DOES_NOT_EXIST, PRECONDITION_FAILED, NOT_SUPPORTED = 20, 22, 10
_ABSENT = object()


def compact_json(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _error(code: int, text: str) -> dict:
    return {"type": "error", "code": code, "text": text}


class Services:
    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self.lin: dict[str, object] = {}        # lin-kv: key (JSON text) -> value
        self.log: list[tuple[str, object]] = []  # seq-kv: its updates, (key, value)
        self.seen: dict[str, int] = {}          # seq-kv: node -> updates it has seen
        self.tso = 0

    # -- seq-kv's past ----------------------------------------------------------------
    def _value_at(self, at: int, key: str):
        """seq-kv's value of key after its first `at` updates (_ABSENT: none)."""
        for k, v in reversed(self.log[:at]):
            if k == key:
                return v
        return _ABSENT

    def stale_reads(self, service: str, src: str, body: dict) -> list[tuple[int, int]]:
        """The answers a read by node src may get from seq-kv other than the newest
        value: (position, updates behind the newest) for each value the key had since
        what src has seen, the earliest position of each (it allows every later read
        that a later one allows). Empty for anything but a seq-kv read."""
        if service != "seq-kv" or body.get("type") != "read":
            return []
        key, latest = compact_json(body.get("key")), len(self.log)
        newest = self._value_at(latest, key)
        out, values = [], []
        for at in range(self.seen.get(src, 0), latest):
            value = self._value_at(at, key)
            if value != newest and value not in values:
                values.append(value)
                out.append((at, latest - at))
        return out

    def _fresh(self, src: str, key: str) -> int:
        """Where a seq-kv read that sees the newest value is placed: the earliest
        position, since what src has seen, with the newest value."""
        latest = len(self.log)
        newest = self._value_at(latest, key)
        return next(at for at in range(self.seen.get(src, 0), latest + 1)
                    if self._value_at(at, key) == newest or at == latest)

    # -- answers ----------------------------------------------------------------------
    def answer(self, service: str, src: str, body: dict, at: int | None = None) -> dict:
        """Service's answer to node src's request; `at`: a seq-kv read's stale
        position (stale_reads), None for the newest value."""
        kind = body.get("type")
        if service == "lin-tso":
            if kind != "ts":
                return _error(NOT_SUPPORTED, f"lin-tso answers ts, not {kind}")
            self.tso += 1
            return {"type": "ts_ok", "ts": self.tso}
        if kind not in ("read", "write", "cas"):
            return _error(NOT_SUPPORTED, f"{service} answers read, write and cas, not {kind}")
        key = compact_json(body.get("key"))
        if service == "seq-kv" and kind == "read":
            where = self._fresh(src, key) if at is None else at
            self.seen[src] = where
            current = self._value_at(where, key)
        elif service == "seq-kv":           # an update sees the newest map, and so has src
            self.seen[src] = len(self.log)
            current = self._value_at(len(self.log), key)
        else:
            current = self.lin.get(key, _ABSENT)
        if kind == "read":
            if current is _ABSENT:
                return _error(KEY_DOES_NOT_EXIST, "key does not exist")
            return {"type": "read_ok", "value": current}
        if kind == "write":
            value, reply = body.get("value"), {"type": "write_ok"}
        else:
            if current is _ABSENT and not body.get("create_if_not_exists"):
                return _error(KEY_DOES_NOT_EXIST, "key does not exist")
            if current is not _ABSENT and current != body.get("from"):
                return _error(PRECONDITION_FAILED,
                              f"expected {compact_json(body.get('from'))}, "
                              f"had {compact_json(current)}")
            value, reply = body.get("to"), {"type": "cas_ok"}
        if service == "seq-kv":
            self.log.append((key, value))
            self.seen[src] = len(self.log)
        else:
            self.lin[key] = value
        return reply

    # -- what a world holds -----------------------------------------------------------
    def state(self) -> dict[str, object]:
        """Each service's part of the world, for the fingerprint and --por."""
        out: dict[str, object] = {}
        if "lin-kv" in self.names:
            out["lin-kv"] = tuple(sorted((k, compact_json(v)) for k, v in self.lin.items()))
        if "seq-kv" in self.names:
            out["seq-kv"] = (tuple((k, compact_json(v)) for k, v in self.log),
                             tuple(sorted(self.seen.items())))
        if "lin-tso" in self.names:
            out["lin-tso"] = self.tso
        return out
