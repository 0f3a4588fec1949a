"""Transactional histories checked as Elle checks them (docs/model-file.md,
"`transactional NAME LEVEL`"): Maelstrom's txn-rw-register and txn-list-append.

A transaction is a list of micro-operations `[f, k, v]`: `r` reads key k (v: what it
saw), `w` writes v to k (a register), `append` adds v to the end of k's list. Each
written value is unique per key, so a read names the transaction that wrote what it saw.
From the acknowledged transactions this module infers Adya's dependencies, as Elle does:

- list-append: a key's versions are the prefixes of its longest read, and every read
  must be a prefix of it (else `incompatible-order`); T1 ww T2 when T2 appended the
  element after T1's, T1 wr T2 when T2 read a list ending in T1's element, T1 rw T2 when
  T1 read a list that T2's element comes next after.
- rw-register: the versions of a key are ordered only where it is known: nil (the
  initial value) before every value, and a value a transaction read before the value it
  then wrote (writes follow reads: Maelstrom's `wfr-keys`); a cycle there is
  `cyclic-versions`. T1 wr T2 when T2 read T1's value; ww and rw along each known
  version edge.
- real time (strict-serializable only): T1 rt T2 when T1 was acknowledged before T2 was
  sent.

A cycle is named by its edges, as Elle names it: only ww `G0`, ww and wr `G1c`, one rw
`G-single`, more `G2-item`, and the same with `-realtime` when it needs an rt edge.
Besides cycles: `G1a` (a read of a failed transaction's write), `G1b` (a read of a
value its writer overwrote within the transaction), `internal` (a transaction that does
not see its own writes), `duplicate-elements`. A consistency level forbids those of its
rank and below (Elle's consistency_model): read-uncommitted G0, read-committed G1 too,
serializable G-single and G2 too, strict-serializable their real-time forms.

Only transactions a node acknowledged (`txn_ok`) are read from; one refused with a
definite error (Maelstrom's codes 11, 30, ...) did not happen, and its writes must not
be seen (G1a); one with no answer or another error may have happened: its writes are
not looked for (a value read from it is a value from nowhere, as in Elle).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

LEVELS = ("read-uncommitted", "read-committed", "serializable", "strict-serializable")

# What each level forbids, over the ones below it.
_FORBIDS = {
    "read-uncommitted": ("G0", "duplicate-elements", "cyclic-versions"),
    "read-committed": ("G1a", "G1b", "G1c", "incompatible-order"),
    "serializable": ("G-single", "G2-item", "internal"),
    "strict-serializable": ("G0-realtime", "G1c-realtime", "G-single-realtime",
                            "G2-realtime"),
}


def forbidden(level: str) -> frozenset[str]:
    """The anomalies `level` forbids."""
    out: set[str] = set()
    for name in LEVELS[:LEVELS.index(level) + 1]:
        out.update(_FORBIDS[name])
    return frozenset(out)


@dataclass(frozen=True)
class Txn:
    """One transaction of the history: `mops` as the node answered them (as sent when
    it did not answer), `status` ok, fail (a definite error) or info (unknown), and
    the event numbers of its invoke and its completion (None: none)."""
    mops: tuple[tuple[str, str, object], ...]      # (f, key as JSON text, value)
    status: str
    invoke: int
    complete: int | None
    client: str


def _key(value) -> str:
    return json.dumps(value, sort_keys=True)


def _value(value) -> object:
    """A value in a form that can be hashed and compared: lists become tuples."""
    if isinstance(value, list):
        return tuple(_value(v) for v in value)
    if isinstance(value, dict):
        return _key(value)
    return value


def txn_of(request: list, answer: list | None, status: str, invoke: int,
           complete: int | None, client: str) -> Txn:
    """The transaction of `request` (a Maelstrom txn body's list) answered with
    `answer` (None: no answer). An answer that is not the request with its reads
    filled in (other functions, keys or written values) makes it unknown (`info`),
    as Maelstrom's client takes a malformed answer."""
    mops = tuple((str(f), _key(k), _value(v)) for f, k, v in
                 (m if isinstance(m, list) and len(m) == 3 else (None, None, None)
                  for m in request))
    if status == "ok":
        got = tuple((str(m[0]), _key(m[1]), _value(m[2])) if isinstance(m, list)
                    and len(m) == 3 else None for m in (answer or ()))
        same = len(got) == len(mops) and all(
            g is not None and g[:2] == m[:2] and (m[0] == "r" or g[2] == m[2])
            for g, m in zip(got, mops))
        if same:
            mops = got
        else:
            status = "info"
    return Txn(mops, status, invoke, complete if status == "ok" else None, client)


# -- per transaction ------------------------------------------------------------------

def _seq(value) -> tuple:
    """A list read's value as a tuple (null: empty; anything else: itself alone)."""
    if value is None:
        return ()
    return value if isinstance(value, tuple) else (value,)


def _ext_reads(t: Txn) -> dict[str, object]:
    """Key -> what the transaction read of it before writing it (its first read)."""
    out, written = {}, set()
    for f, k, v in t.mops:
        if f == "r" and k not in written and k not in out:
            out[k] = v
        elif f in ("w", "append"):
            written.add(k)
    return out


def _ext_writes(t: Txn) -> dict[str, object]:
    """Key -> the transaction's last write (rw-register) or last append of it."""
    out = {}
    for f, k, v in t.mops:
        if f in ("w", "append"):
            out[k] = v
    return out


def _internal(t: Txn, lists: bool) -> bool:
    """Whether a read of t disagrees with what t itself wrote or read before it: a
    register reads its last value; a list (`lists`) reads what t read of it last with
    t's appends since, or, not read yet, a list that ends with t's appends."""
    known: dict[str, tuple[bool, object]] = {}     # key -> (whole?, value or its tail)
    for f, k, v in t.mops:
        whole, was = known.get(k, (False, ()))
        if f == "w":
            known[k] = (True, v)
        elif f == "append":
            known[k] = (whole, was + (v,))
        else:
            seen = _seq(v) if lists else v
            if k in known and (was != seen if whole else seen[len(seen) - len(was):] != was):
                return True
            known[k] = (True, seen)
    return False


# -- the analysis ---------------------------------------------------------------------

def anomalies(txns: list[Txn], realtime: bool) -> set[str]:
    """Every anomaly named above that the history shows (`realtime`: with rt edges). In
    a history of lists, a transaction answered with a read that is no list is unknown,
    as Maelstrom's client takes a malformed answer."""
    lists = any(f == "append" for t in txns for f, _k, _v in t.mops)
    ok = [t for t in txns if t.status == "ok" and not (lists and any(
        f == "r" and v is not None and not isinstance(v, tuple) for f, _k, v in t.mops))]
    found: set[str] = {"internal"} if any(_internal(t, lists) for t in ok) else set()
    edges: dict[tuple[int, int], set[str]] = {}

    def link(a: int, b: int, kind: str) -> None:
        if a != b:
            edges.setdefault((a, b), set()).add(kind)
    writer: dict[tuple[str, object], int] = {}       # (key, value) -> ok txn that wrote it
    intermediate: dict[tuple[str, object], int] = {}  # ... where it was not its last
    failed: set[tuple[str, object]] = set()
    ext = [_ext_writes(t) for t in ok]
    for i, t in enumerate(ok):
        for f, k, v in t.mops:
            if f in ("w", "append"):
                writer[(k, v)] = i
                if ext[i][k] != v:
                    intermediate[(k, v)] = i
    for t in txns:
        if t.status == "fail":
            failed.update((k, v) for f, k, v in t.mops if f in ("w", "append"))
    reads = [(i, k, v) for i, t in enumerate(ok) for k, v in _ext_reads(t).items()]
    for i, k, v in reads:               # G1b: a value (a list's last) written over
        last = _seq(v)[-1:] if lists else (v,)
        if last and intermediate.get((k, last[0]), i) != i:
            found.add("G1b")
    if lists:
        _list_edges(reads, writer, failed, found, link)
    else:
        _register_edges(ok, ext, reads, writer, failed, found, link)
    if realtime:
        for i, a in enumerate(ok):
            for j, b in enumerate(ok):
                if a.complete is not None and a.complete < b.invoke:
                    link(i, j, "rt")
    found.update(_cycles(len(ok), edges))
    return found


def _register_edges(ok, ext, reads, writer, failed, found, link) -> None:
    versions: dict[str, set[tuple[object, object]]] = {}     # key -> known v1 < v2
    for t, wrote in zip(ok, ext):
        for k, v in wrote.items():
            versions.setdefault(k, set()).add((None, v))
        for k, v in _ext_reads(t).items():
            if v is not None:
                versions.setdefault(k, set()).add((None, v))
                if k in wrote and wrote[k] != v:
                    versions[k].add((v, wrote[k]))
    for i, k, v in reads:
        if (k, v) in failed and (k, v) not in writer:
            found.add("G1a")
        if v is not None and (k, v) in writer:
            link(writer[(k, v)], i, "wr")
    readers: dict[tuple[str, object], list[int]] = {}
    for i, k, v in reads:
        readers.setdefault((k, v), []).append(i)
    final = {(k, v): i for i, wrote in enumerate(ext) for k, v in wrote.items()}
    for k, pairs in versions.items():
        if _has_cycle(pairs):
            found.add("cyclic-versions")
            continue
        for v1, v2 in pairs:
            if (k, v2) not in final:
                continue
            if (k, v1) in final:
                link(final[(k, v1)], final[(k, v2)], "ww")
            for r in readers.get((k, v1), ()):
                link(r, final[(k, v2)], "rw")


def _list_edges(reads, writer, failed, found, link) -> None:
    longest: dict[str, tuple] = {}
    for i, k, v in reads:
        seen = _seq(v)
        if len(set(seen)) != len(seen):
            found.add("duplicate-elements")
        if any((k, e) in failed and (k, e) not in writer for e in seen):
            found.add("G1a")
        old = longest.get(k, ())
        if seen[:len(old)] == old:
            longest[k] = seen
        elif old[:len(seen)] != seen:
            found.add("incompatible-order")
    for k, order in longest.items():
        for a, b in zip(order, order[1:]):
            if (k, a) in writer and (k, b) in writer:
                link(writer[(k, a)], writer[(k, b)], "ww")
    for i, k, v in reads:
        seen, order = _seq(v), longest.get(k, ())
        if seen and (k, seen[-1]) in writer:
            link(writer[(k, seen[-1])], i, "wr")
        if len(seen) < len(order) and order[:len(seen)] == seen and \
                (k, order[len(seen)]) in writer:
            link(i, writer[(k, order[len(seen)])], "rw")


def _has_cycle(pairs: set[tuple[object, object]]) -> bool:
    after: dict[object, list] = {}
    for a, b in pairs:
        after.setdefault(a, []).append(b)
    state: dict[object, int] = {}

    def visit(v) -> bool:
        state[v] = 1
        for w in after.get(v, ()):
            if state.get(w) == 1 or (w not in state and visit(w)):
                return True
        state[v] = 2
        return False
    return any(v not in state and visit(v) for v in list(after))


def _cycles(n: int, edges: dict[tuple[int, int], set[str]]) -> set[str]:
    """The names of the cycles of the dependency graph (simple cycles, each named by
    the least it needs: an rt hop only where no dependency joins the two)."""
    out: set[str] = set()
    succ: dict[int, list[int]] = {}
    for a, b in sorted(edges):
        succ.setdefault(a, []).append(b)

    def name(path: list[int]) -> str:
        kinds = []
        for a, b in zip(path, path[1:] + path[:1]):       # each hop by what joins best
            kinds.append(next(k for k in ("ww", "wr", "rw", "rt") if k in edges[(a, b)]))
        rw = kinds.count("rw")
        base = ("G0" if set(kinds) <= {"ww", "rt"} else "G1c") if rw == 0 else \
            ("G-single" if rw == 1 else "G2-item")
        if "rt" in kinds:
            base = {"G2-item": "G2"}.get(base, base) + "-realtime"
        return base

    def walk(start: int, v: int, path: list[int], on: set[int]) -> None:
        for w in succ.get(v, ()):
            if w == start:
                out.add(name(path))
            elif w > start and w not in on:
                on.add(w)
                path.append(w)
                walk(start, w, path, on)
                path.pop()
                on.discard(w)
    for s in range(n):
        walk(s, s, [s], {s})
    return out
