"""Shrinking a walk's counterexample (`--simulate`): a random walk that violates a
property usually wanders before it gets there, and a 90-step behavior is no
counterexample a person reads.

The walk's actions are shrunk by delta debugging (Zeller's ddmin, as Hypothesis and
seedfall shrink their choice sequences): drop a chunk of the actions, replay what is
left from launch, and keep it when every action is enabled where it comes and the
same property is violated, at the end or at a world on the way (then the shorter
prefix is kept); halve the chunks when none can go. Then, as Hypothesis deletes blocks,
every run of 1 to WINDOW actions anywhere is tried, until none can go: a detour of a few
actions that only make sense together (a connection opened and closed) goes whole,
wherever it lies. Every candidate is a replay of real processes from launch, so
what is kept is a behavior the system has; the engine's counts are not touched.

Only properties checked on one world or one step shrink (invariants, linearizable,
action properties): a quiescent or an `eventually` violation depends on the walk's
whole end, and is shown as the walk found it. A search with a time (`--seconds`) stops
shrinking when its time is up and shows the shortest behavior found by then.
"""
from __future__ import annotations

from .model import Checked, Model, Property

SHRINKABLE = (Checked.STATE, Checked.TRANSITION)
WINDOW = 8          # the longest run of actions the second pass drops at once


def violated_by(model: Model, prop: Property, keys: list[tuple]) -> list[tuple] | None:
    """Replay `keys` from launch: the shortest prefix of them after which `prop` is
    violated, or None (an action not enabled where it comes, or no violation)."""
    system = model.fresh()
    try:
        view = system.view()
        if prop.kind.checked is Checked.STATE and not prop.check(view, None):
            return []
        for i, key in enumerate(keys):
            if key not in {a.key for a in system.actions()}:
                return None
            system.apply(key)
            after = system.view()
            if prop.kind.checked is Checked.STATE:
                bad = not prop.check(after, None)
            else:
                bad = not prop.check(view, after)
            if bad:
                return keys[:i + 1]
            view = after
        return None
    finally:
        system.close()


def shrink(model: Model, prop: Property, keys: list[tuple],
           until=None) -> tuple[list[tuple], int, bool]:
    """A 1-minimal sub-sequence of `keys` that still violates `prop` from launch, how
    many replays it took, and whether it is 1-minimal: False when `until()` said the
    time was up first (the shortest found by then). `keys` must violate it."""
    replays = 0
    n = 2

    def time_up() -> bool:
        return until is not None and until()
    while len(keys) >= 2:
        chunk = -(-len(keys) // n)
        for start in range(0, len(keys), chunk):
            if time_up():
                return keys, replays, False
            candidate = keys[:start] + keys[start + chunk:]
            replays += 1
            found = violated_by(model, prop, candidate)
            if found is not None:
                keys = found
                n = max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(n * 2, len(keys))
    shorter = True
    while shorter:
        shorter = False
        for width in range(1, WINDOW + 1):
            start = 0
            while start + width <= len(keys):
                if time_up():
                    return keys, replays, False
                replays += 1
                found = violated_by(model, prop, keys[:start] + keys[start + width:])
                if found is None:
                    start += 1
                else:
                    keys, shorter = found, True
    return keys, replays, True
