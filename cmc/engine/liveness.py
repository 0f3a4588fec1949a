"""Bounded liveness: `eventually` properties over the fair fault-free schedule.

From every reachable world (docs/cmc.md, "Properties: when each is checked"), the
fair fault-free schedule must make the property true within `--live-steps` steps.
The schedule injects no fault (no DROP, DUP or CRASH) and goes in rounds:

1. deliver: while some DELIVER is enabled, take the first one (in the system's
   action order);
2. fire: take a FIRE for each node that had a pending timeout when the phase
   began, once, in node order (a FIRE no longer enabled at its turn, e.g. because
   `budget fire` ran out, is skipped);
3. back to 1. When nothing is deliverable and no FIRE is enabled, the schedule
   *stops*.

So the schedule is deterministic: its state is the world plus where it is inside
a round, `(fingerprint, to_fire)`, where `to_fire` is None at a round boundary and
otherwise the FIRE keys still due in this round. Every world a search checks is
at a round boundary, which makes a run from a world W share its tail with the run
from any round-boundary world it passes through.

The property fails at W when, from W, the schedule

- stops before the property became true,
- comes back to a schedule state it has already been in (a lasso: it would go
  round forever without the property ever becoming true), or
- takes `--live-steps` steps without the property becoming true.

`FairWalker` keeps the schedule as a graph, one successor per schedule state,
plus the property values of every world seen. Searches fill it as they expand
worlds (the successor of `(W, None)` is one of W's successors anyway); deciding a
world then walks the graph and runs the real system only for schedule states
nobody has expanded yet (worlds past a depth bound, or inside a fire phase).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .model import Property, System

STOPPED, LOOPED, OUT_OF_STEPS = "stopped", "looped", "out of steps"


def fair_choice(actions: list, to_fire: tuple | None) -> tuple[tuple | None, tuple | None]:
    """The fair schedule's next action from a world whose enabled actions are
    `actions`, and the schedule's position after it: (its key or None if it stops,
    the keys of the FIREs still due in this round)."""
    if to_fire is not None:
        enabled = {a.key for a in actions}
        for i, key in enumerate(to_fire):
            if key in enabled:
                return key, (to_fire[i + 1:] or None)
        # nothing still due in this round is enabled: a new round begins here
    for a in actions:
        if a.moves_messages:
            return a.key, None
    fires = tuple(a.key for a in actions if a.fires)
    if not fires:
        return None, None
    return fires[0], (fires[1:] or None)


@dataclass(frozen=True)
class Edge:
    key: tuple
    fp: bytes
    to_fire: tuple | None


@dataclass
class LiveFailure:
    """How the fair schedule from a world fails a property: `keys` and `fps` are the
    schedule's steps (the world it starts from not included), `why` is one of
    STOPPED, LOOPED, OUT_OF_STEPS and `loop_to` the index (0 = the start) of the
    schedule state it came back to."""
    prop: Property
    keys: list[tuple]
    fps: list[bytes]
    why: str
    loop_to: int | None = None


class FairWalker:
    def __init__(self, props: list[Property], steps: int):
        self.props = props
        self.steps = steps
        self.edges: dict[tuple, Edge | None] = {}     # schedule state -> its successor
        self.goals: dict[bytes, tuple[bool, ...]] = {}

    def see(self, fp: bytes, view: dict) -> None:
        """Record the properties' values at a world (once per fingerprint)."""
        if self.props and fp not in self.goals:
            self.goals[fp] = tuple(p.check(view, None) for p in self.props)

    def expanded(self, fp: bytes, actions: list) -> tuple | None:
        """A search is expanding world `fp` with enabled `actions`: the key of the fair
        schedule's first step from it (None if it stops there). The search then calls
        `edge(fp, actions, key, fp2)` once it has that step's result."""
        key, _ = fair_choice(actions, None)
        if key is None:
            self.edges[(fp, None)] = None
        return key

    def edge(self, fp: bytes, actions: list, key: tuple, fp2: bytes) -> None:
        _, to_fire = fair_choice(actions, None)
        self.edges[(fp, None)] = Edge(key, fp2, to_fire)

    def _successor(self, state: tuple, position: "_Position") -> Edge | None:
        if state in self.edges:
            return self.edges[state]
        system = position.at()
        key, to_fire = fair_choice(system.actions(), state[1])
        if key is None:
            self.edges[state] = None
            return None
        system.apply(key)
        fp2 = system.fingerprint()
        self.see(fp2, system.view())
        position.moved()
        self.edges[state] = Edge(key, fp2, to_fire)
        return self.edges[state]

    def check(self, fp: bytes, opener: Callable[[], System]) -> LiveFailure | None:
        """The first property (in declaration order) that the fair schedule from
        world `fp` does not make true in time. `opener()` gives a system at `fp`,
        called only if the schedule has to be run further than anyone has yet."""
        pending = [i for i, holds in enumerate(self.goals[fp]) if not holds]
        if not pending:
            return None
        start = (fp, None)
        states = [start]
        index = {start: 0}
        keys: list[tuple] = []
        position = _Position(opener)
        try:
            while True:
                if len(keys) == self.steps:
                    return self._failure(pending, keys, states, OUT_OF_STEPS)
                edge = self._successor(states[-1], position)
                if edge is None:
                    return self._failure(pending, keys, states, STOPPED)
                state = (edge.fp, edge.to_fire)
                keys.append(edge.key)
                if state in index:
                    return self._failure(pending, keys, states + [state], LOOPED, index[state])
                index[state] = len(states)
                states.append(state)
                goals = self.goals[edge.fp]
                pending = [i for i in pending if not goals[i]]
                if not pending:
                    return None
                position.follow(len(states) - 1, keys)
        finally:
            position.close()

    def _failure(self, pending, keys, states, why, loop_to=None) -> LiveFailure:
        return LiveFailure(self.props[pending[0]], list(keys), [s[0] for s in states[1:]],
                           why, loop_to)


class _Position:
    """Where the real system (if one was opened) stands on the walk being decided.
    It is opened lazily and moved along the walk's known steps only when a step
    nobody has taken yet must be run."""

    def __init__(self, opener: Callable[[], System]):
        self.opener = opener
        self.system: System | None = None
        self.walk_index = 0
        self.target_index = 0
        self.keys: list[tuple] = []

    def follow(self, index: int, keys: list[tuple]) -> None:
        self.target_index = index
        self.keys = keys

    def at(self) -> System:
        if self.system is None:
            self.system = self.opener()
            self.walk_index = 0
        while self.walk_index < self.target_index:
            self.system.apply(self.keys[self.walk_index])
            self.walk_index += 1
        return self.system

    def moved(self) -> None:
        self.walk_index += 1
        self.target_index = self.walk_index

    def close(self) -> None:
        if self.system is not None:
            self.system.close()
            self.system = None
