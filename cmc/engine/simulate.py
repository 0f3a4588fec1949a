"""Seeded random walks (`--simulate --seed S --walks W`): the order of a search
(search.py), in this process. A walk moves one system forward, so it never needs a
second one at a world: its world source is not used (under --det each step is taken
again on a replay, which replaces the walk's system).

Walk i (from 0) draws its actions with its own generator seeded S + i, so a walk
is reproduced alone by `--seed S+i --walks 1`, whatever walks ran before it. A
walk starts from a fresh launch and takes up to `max_depth` states (the initial
one included), choosing uniformly among the enabled actions; it ends early at a
world with no enabled action.

A walk's violation of an invariant or an action property is shrunk before it is shown
(shrink.py): the fewest of its actions that still violate the property from launch.

Properties are checked as in the exhaustive searches, on what the walks visit:
invariants and witnesses on each world the first time any walk reaches it,
actions on every step. A world where no DELIVER is enabled but a FIRE is must be
tried to know whether it is quiescent (docs/cmc.md, "Properties: when each is
checked"): when there are quiescent properties, the walk takes its FIREs in order
until one changes the world (the walk goes on from there) or all lead back (the
world is quiescent, and the walk ends there if nothing else is enabled); these steps
are part of the walk and of its trace. `eventually` is checked from the last
world of every walk: the random prefix, then the fair schedule.

A *swarm* of walks (`--swarm`, and the walks a breadth-first search hands its time left
to: `--seconds`) gives each walk its own configuration, drawn first from its seed, as
Groce et al.'s swarm testing gives each test its own subset of features: a weight per
kind of action and per node or channel (some walks crash a lot, some never drop), a cap
on each kind of fault below the model's budget (0 included: the walk has no such
fault), and within the walk a preference for actions not yet taken from the world it is
at (an action that led back to a world of the walk weighs a tenth). A uniform walk
spends its one crash in the first steps; a swarm walk that weighs crashes low crashes a
node late, where a commit point is. Walks from a breadth-first search's frontier start
at a world it found and did not expand (the walk's generator picks which), reached by a
replay of its shortest path.
"""
from __future__ import annotations

import random

from .model import ActionKind, EngineLimit, Outcome
from .replay import recheck, replay
from .shrink import SHRINKABLE, shrink

DEFAULT_WALK_DEPTH = 100   # TLC's own default for -simulate -depth


FAULTS = (ActionKind.DROP, ActionKind.DUP, ActionKind.CRASH)
WEIGHTS = (0.1, 1.0, 10.0)       # a swarm walk's weight of a kind of action, of an actor
CAPS = (0, 1, 2, None)           # its cap on a kind of fault (None: the model's budget)
TAKEN_AGAIN = 0.1                # the weight of an action taken before from the same world


class Swarm:
    """One walk's configuration, drawn from its generator before its first step."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.kinds = {k: rng.choice(WEIGHTS) for k in ActionKind}
        self.caps = {k: rng.choice(CAPS) for k in FAULTS}
        self.actors: dict[str, float] = {}     # drawn when the walk first meets one
        self.spent = {k: 0 for k in FAULTS}
        self.tried: dict[bytes, set] = {}       # world -> keys the walk took from it

    def choose(self, fp: bytes, actions: list):
        allowed = [a for a in actions if self.caps.get(a.kind) is None
                   or self.spent[a.kind] < self.caps[a.kind]] or actions
        tried = self.tried.setdefault(fp, set())
        weights = [self.kinds[a.kind] * self._actor(a)
                   * (TAKEN_AGAIN if a.key in tried else 1.0) for a in allowed]
        action = self.rng.choices(allowed, weights)[0]
        tried.add(action.key)
        if action.kind in self.spent:
            self.spent[action.kind] += 1
        return action

    def _actor(self, action) -> float:
        fields = action.fields or {}
        who = fields.get("dst") or fields.get("node") or ""
        if who not in self.actors:
            self.actors[who] = self.rng.choice(WEIGHTS)
        return self.actors[who]


class Walks:
    pools = False           # its steps are taken in this process

    def __init__(self, seed: int, walks: int | None, swarm: bool = False,
                 starts: list[bytes] = (), until=None):
        self.seed = seed
        self.walks = walks            # None: until `until()` says the time is up
        self.swarm = swarm
        self.starts = list(starts)    # worlds a breadth-first search left unexpanded
        self.until = until
        self.seen: set[bytes] = set()

    def configure(self, search) -> None:
        if search.max_depth is None:
            search.max_depth = DEFAULT_WALK_DEPTH

    def run(self, search) -> Outcome:
        w = 0
        while (w < self.walks) if self.walks is not None else not self.until():
            seed = self.seed + w
            rng = random.Random(seed)
            swarm = Swarm(rng) if self.swarm else None
            start = rng.choice(self.starts) if self.starts else None
            outcome = _Walk(search, self, rng, swarm, start).run()
            search.stats.walks += 1
            w += 1
            if outcome is not None:
                outcome.walk, outcome.seed, outcome.swarm = w, seed, self.swarm
                if start is not None:
                    outcome.walk_from = search.parent[start][2]
                return outcome
            search.reporter.progress(search.stats)
        if self.until is not None:
            return Outcome("ok", search.stats)    # a stopped search judges no witness
        return search.unreached() or Outcome("ok", search.stats)

    def new_world(self, search, fp: bytes, view: dict):
        """Count a generated world; check it if no walk has been there before."""
        stats = search.stats
        stats.generated += 1
        if fp in self.seen:
            return None
        self.seen.add(fp)
        stats.distinct += 1
        if stats.generated == 1:
            search.reporter.initial(stats)
        if search.max_states is not None and stats.distinct > search.max_states:
            raise EngineLimit(f"state cap exceeded: more than {search.max_states} distinct "
                              "states (--max-states); raise the cap or lower the budgets")
        return search.check_state(fp, view)


class _Walk:
    def __init__(self, search, walks: Walks, rng: random.Random, swarm: Swarm | None = None,
                 start: bytes | None = None):
        self.search = search
        self.walks = walks
        self.rng = rng
        self.swarm = swarm
        self.start = start
        self.keys: list[tuple] = []
        self.fps: list[bytes] = []
        self.system = None
        self.limit = search.max_depth

    def run(self) -> Outcome | None:
        search = self.search
        if self.start is None:
            self.system = search.model.fresh()
        else:
            keys, fps = search.path(self.start)
            self.system, _ = replay(search.model, keys, fps)
            self.keys, self.fps = list(keys), list(fps[:-1])
            if self.limit is None:
                self.limit = len(fps) + DEFAULT_WALK_DEPTH
        try:
            fp = self.system.fingerprint()
            view = self.system.view()
            self.fps.append(fp)
            bad = self.walks.new_world(search, fp, view)
            if bad:
                return self.violated(bad)
            while len(self.fps) < self.limit:
                actions = self.system.actions()
                if not actions:
                    break
                if search.quiescent_props and not any(a.moves_messages for a in actions):
                    outcome, moved = self.try_fires(actions, view)
                    if outcome is not None:
                        return outcome
                    if moved:
                        view = self.system.view()
                        continue
                    if all(a.fires for a in actions):
                        break       # only timers that change nothing: the walk is over
                action = self.swarm.choose(self.fps[-1], actions) if self.swarm \
                    else self.rng.choice(actions)
                outcome, view = self.take(action.key, view)
                if outcome is not None:
                    return outcome
            self.ended()
            if search.live.props:
                return self.eventually()
            return None
        finally:
            self.close()

    def take(self, key: tuple, view: dict):
        """One step of the walk; returns (outcome or None, the world's view after)."""
        search = self.search
        action = self.system.apply(key)
        label = action.label
        fp2 = self.system.fingerprint()
        view2 = self.system.view()
        if search.det:
            self.close()
            recheck(search.model, self.keys, self.fps, key, label, fp2, view2)
            self.system, _ = replay(search.model, self.keys + [key], self.fps + [fp2])
        self.keys.append(key)
        self.fps.append(fp2)
        bad = search.check_transition(view, view2, action)
        if bad:
            return self.violated(bad), view2
        bad = self.walks.new_world(search, fp2, view2)
        if bad:
            return self.violated(bad), view2
        return None, view2

    def try_fires(self, actions, view):
        """No DELIVER is enabled: take the FIREs until one changes the world.
        Returns (outcome or None, whether the walk moved to another world)."""
        fp = self.fps[-1]
        for action in actions:
            if not action.fires or len(self.fps) >= self.limit:
                continue
            outcome, view = self.take(action.key, view)
            if outcome is not None:
                return outcome, True
            if self.fps[-1] != fp:
                return None, True
        if len(self.fps) >= self.limit and any(a.fires for a in actions):
            return None, True     # the walk ended before the world's FIREs were all tried
        bad = self.search.check_quiescent(view)
        if bad:
            return self.violated(bad), False
        return None, False

    def eventually(self) -> Outcome | None:
        search = self.search
        system, self.system = self.system, None
        failure = search.live.check(self.fps[-1], lambda: system)
        system.close()
        if failure is None:
            return None
        return search.live_violation(self.keys, self.fps, failure)

    def ended(self) -> None:
        stats = self.search.stats
        stats.depth = max(stats.depth, len(self.fps))
        stats.walk_lengths.append(len(self.fps))

    def violated(self, prop) -> Outcome:
        """The walk's violation of `prop`, its behavior shrunk where it can be."""
        self.ended()
        self.close()
        search = self.search
        keys, fps = list(self.keys), self.fps
        shrunk_from, replays, minimal = None, 0, True
        if prop.kind.checked in SHRINKABLE and len(keys) > 1:
            small, replays, minimal = shrink(search.model, prop, keys, search.shrink_until())
            if len(small) < len(keys):
                shrunk_from, keys, fps = len(keys) + 1, small, None
        return Outcome("violated", search.stats, prop, search.trace(keys, fps),
                       shrunk_from=shrunk_from, shrink_replays=replays,
                       shrink_stopped=not minimal)

    def close(self) -> None:
        if self.system is not None:
            self.system.close()
            self.system = None
