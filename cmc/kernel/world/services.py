"""Maelstrom's built-in services (docs/maelstrom.md, "Services"): what they hold and how
they answer a request delivered to them, as Maelstrom's service.clj does.

- `lin-kv`: one copy of a map; read, write and cas (with `create_if_not_exists`), each
  at the moment it is delivered: linearizable.
- `seq-kv`: the same updates in one order (a log), but a request that changes nothing
  (a read, a cas that fails) may see the map as it was some updates ago: not before
  what the requesting node has already seen (its updates, its earlier requests). That
  is sequential consistency; an update is applied to the newest map (as Maelstrom does
  where the past would change it). Which past a request sees is the environment's
  choice, so such a request delivered to seq-kv is several actions, one per answer it
  can give (`choices`).
- `lww-kv`: two replicas, each a map, and each request is answered by either (two
  actions where they differ). Maelstrom's documentation says its replicas gossip and
  merge by timestamp; its code (`Eventual` in service.clj, at the version cmc follows)
  computes a merge and drops it, so its replicas never converge, and cmc's do not
  either.
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
        self.lww: tuple[dict, dict] = ({}, {})  # lww-kv: its two replicas
        self.tso = 0

    # -- seq-kv's past ----------------------------------------------------------------
    def _value_at(self, at: int, key: str):
        """seq-kv's value of key after its first `at` updates (_ABSENT: none)."""
        for k, v in reversed(self.log[:at]):
            if k == key:
                return v
        return _ABSENT

    def choices(self, service: str, src: str, body: dict) -> list[tuple[int, str]]:
        """The answers to node src's request other than the one `answer` gives by
        default, each (`at`, what it is): for seq-kv, a read or a failing cas that sees
        the map some updates ago (`at`: its position in the log; the earliest position
        of each answer, which allows whatever a later one allows); for lww-kv, the
        second replica's answer where it differs (`at` 1)."""
        kind = body.get("type")
        if service == "lww-kv":
            a, b = self.lww
            key = compact_json(body.get("key"))
            same = a.get(key, _ABSENT) == b.get(key, _ABSENT) if kind == "read" else a == b
            return [] if same else [(1, "the second replica")]
        if service != "seq-kv" or kind not in ("read", "cas"):
            return []
        key, latest = compact_json(body.get("key")), len(self.log)
        newest = self._past(latest, key, body)
        out, answers = [], []
        for at in range(self.seen.get(src, 0), latest):
            got = self._past(at, key, body)
            if got is not None and got != newest and got not in answers:
                answers.append(got)
                what = "a stale read" if kind == "read" else "a cas on a past map"
                out.append((at, f"{what}, {latest - at} behind"))
        return out

    def _past(self, at: int, key: str, body: dict) -> dict | None:
        """seq-kv's answer to a read or cas on the map after its first `at` updates;
        None for a cas that would change it (Maelstrom applies that one to the newest)."""
        value = self._value_at(at, key)
        if body.get("type") == "read":
            return _read(value)
        changed, reply = _cas(value, body)
        return reply if changed is _ABSENT else None

    def _fresh(self, src: str, key: str) -> int:
        """Where a seq-kv read that sees the newest value is placed: the earliest
        position, since what src has seen, with the newest value."""
        latest = len(self.log)
        newest = self._value_at(latest, key)
        return next(at for at in range(self.seen.get(src, 0), latest + 1)
                    if self._value_at(at, key) == newest or at == latest)

    # -- answers ----------------------------------------------------------------------
    def answer(self, service: str, src: str, body: dict, at: int | None = None) -> dict:
        """Service's answer to node src's request; `at`: one of `choices`, None for
        the default (seq-kv: the newest map; lww-kv: the first replica)."""
        kind = body.get("type")
        if service == "lin-tso":
            if kind != "ts":
                return _error(NOT_SUPPORTED, f"lin-tso answers ts, not {kind}")
            self.tso += 1
            return {"type": "ts_ok", "ts": self.tso}
        if kind not in ("read", "write", "cas"):
            return _error(NOT_SUPPORTED, f"{service} answers read, write and cas, not {kind}")
        key = compact_json(body.get("key"))
        if service == "lww-kv":
            store = self.lww[at or 0]
        elif service == "lin-kv":
            store = self.lin
        else:
            return self._sequential(src, key, body, at)
        current = store.get(key, _ABSENT)
        value, reply = _update(current, body)
        if value is not _ABSENT:
            store[key] = value
            if service == "lww-kv":         # the replicas in one order: alike worlds merge
                self.lww = tuple(sorted(self.lww, key=_replica))
        return reply

    def _sequential(self, src: str, key: str, body: dict, at: int | None) -> dict:
        if body.get("type") == "read":
            where = self._fresh(src, key) if at is None else at
            self.seen[src] = where
            return _read(self._value_at(where, key))
        if at is not None:                  # a cas that fails on a past map
            self.seen[src] = at
            return _cas(self._value_at(at, key), body)[1]
        self.seen[src] = len(self.log)      # an update sees the newest map, and so has src
        value, reply = _update(self._value_at(len(self.log), key), body)
        if value is not _ABSENT:
            self.log.append((key, value))
            self.seen[src] = len(self.log)
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
        if "lww-kv" in self.names:
            out["lww-kv"] = tuple(_replica(r) for r in self.lww)
        if "lin-tso" in self.names:
            out["lin-tso"] = self.tso
        return out


def _replica(store: dict) -> tuple:
    return tuple(sorted((k, compact_json(v)) for k, v in store.items()))


def _read(current) -> dict:
    if current is _ABSENT:
        return _error(KEY_DOES_NOT_EXIST, "key does not exist")
    return {"type": "read_ok", "value": current}


def _cas(current, body: dict) -> tuple[object, dict]:
    """A cas on `current`: (the key's new value, or _ABSENT where it fails; the answer)."""
    if current is _ABSENT and not body.get("create_if_not_exists"):
        return _ABSENT, _error(KEY_DOES_NOT_EXIST, "key does not exist")
    if current is not _ABSENT and current != body.get("from"):
        return _ABSENT, _error(PRECONDITION_FAILED, f"expected {compact_json(body.get('from'))}, "
                               f"had {compact_json(current)}")
    return body.get("to"), {"type": "cas_ok"}


def _update(current, body: dict) -> tuple[object, dict]:
    """A read, write or cas on `current`: (the key's new value, _ABSENT for none; the
    answer)."""
    kind = body.get("type")
    if kind == "read":
        return _ABSENT, _read(current)
    if kind == "write":
        return body.get("value"), {"type": "write_ok"}
    return _cas(current, body)
