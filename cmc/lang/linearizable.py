"""Linearizability of a history of client operations on a key-value store of
registers (docs/model-file.md, "Histories"): the check of Knossos and Porcupine.

A history is a list of `Op`: a read or a write of one key, invoked at one time and
completed at a later one, or pending (`complete` None: its client's connection was
reset, its node crashed, or it has no reply yet). Times are any totally ordered
numbers; two operations are ordered when one completed before the other was
invoked, and concurrent otherwise.

The history is linearizable when there is one sequential order of its operations
that respects that real-time order, in which every read returns the value of the
last write before it (`None` before any write) and every completed write took
effect. A pending operation may or may not have taken effect: a pending write may
be placed anywhere after its invocation, including after everything else (which is
the same as never); a pending read constrains nothing.

The search is Wing and Gong's, with Lowe's memoization (a set of (operations
linearized so far, register value) already tried), on each key alone: registers
are independent, so the history is linearizable when every key's is (Porcupine's
partitioning). Nothing here knows of worlds or processes.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Op", "linearizable", "violations"]

_PENDING = float("inf")


@dataclass(frozen=True)
class Op:
    kind: str                   # "read" | "write" | "cas" (a Maelstrom lin-kv's)
    key: object                 # None: the one register
    value: object               # written (write), returned (read; None: the initial
                                # value), or (from, to) (cas)
    invoke: float
    complete: float | None      # None: pending
    client: str = ""


class _Entry:
    __slots__ = ("op", "id", "call", "match", "prev", "next", "time")

    def __init__(self, op, ident, call, time):
        self.op, self.id, self.call, self.time = op, ident, call, time
        self.match = self.prev = self.next = None


def _entries(ops: list[Op]) -> _Entry:
    """A doubly linked list, headed by a sentinel, of every operation's call and
    return entries in time order; at equal times calls come first (concurrent)."""
    items = []
    for i, op in enumerate(ops):
        call = _Entry(op, i, True, op.invoke)
        ret = _Entry(op, i, False, _PENDING if op.complete is None else op.complete)
        call.match = ret
        items += [call, ret]
    items.sort(key=lambda e: (e.time, 0 if e.call else 1, e.id))
    head = _Entry(None, -1, False, None)
    prev = head
    for e in items:
        prev.next, e.prev = e, prev
        prev = e
    return head


def _lift(e: _Entry) -> None:
    e.prev.next = e.next
    if e.next is not None:
        e.next.prev = e.prev
    m = e.match
    m.prev.next = m.next
    if m.next is not None:
        m.next.prev = m.prev


def _unlift(e: _Entry) -> None:
    m = e.match
    m.prev.next = m
    if m.next is not None:
        m.next.prev = m
    e.prev.next = e
    if e.next is not None:
        e.next.prev = e


def _step(state, op: Op):
    """(allowed, state after) of applying op to a register holding `state`. A cas's
    value is (from, to): it took effect, so the register held `from`; a pending one
    that could not have taken effect here is one that failed, or never happened."""
    if op.kind == "write":
        return True, op.value
    if op.kind == "cas":
        before, after = op.value
        if state == before:
            return True, after
        return op.complete is None, state
    if op.complete is None:           # a pending read: it returned nothing to check
        return True, state
    return op.value == state, state


def _register(ops: list[Op]) -> bool:
    """Whether the history of one register is linearizable (initially None)."""
    if not ops:
        return True
    head = _entries(ops)
    state = None
    linearized = 0
    tried = set()
    calls = []
    entry = head.next
    while head.next is not None:
        if entry.call:
            ok, after = _step(state, entry.op)
            if ok:
                now = linearized | (1 << entry.id)
                if (now, after) not in tried:
                    tried.add((now, after))
                    calls.append((entry, state))
                    state, linearized = after, now
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
        else:
            # An operation's return is reached before it was placed: undo the last
            # choice and try the next candidate after it.
            if not calls:
                return False
            entry, state = calls.pop()
            linearized &= ~(1 << entry.id)
            _unlift(entry)
            entry = entry.next
    return True


def violations(ops: list[Op]) -> list:
    """The keys whose histories are not linearizable, in order of first appearance
    (empty: the history is linearizable)."""
    by_key: dict = {}
    for op in ops:
        by_key.setdefault(op.key, []).append(op)
    return [key for key, mine in by_key.items() if not _register(mine)]


def linearizable(ops: list[Op]) -> bool:
    return not violations(ops)
