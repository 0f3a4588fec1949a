"""Seeded random walks (`--simulate --seed S --walks W`).

Walk i (from 0) draws its actions with its own generator seeded S + i, so a walk
is reproduced alone by `--seed S+i --walks 1`, whatever walks ran before it. A
walk starts from a fresh launch and takes up to `max_depth` states (the initial
one included), choosing uniformly among the enabled actions; it ends early at a
world with no enabled action.

Properties are checked as in the exhaustive searches, on what the walks visit:
invariants and witnesses on each world the first time any walk reaches it,
actions on every step. A world where no DELIVER is enabled but a FIRE is must be
tried to know whether it is quiescent (docs/cmc.md, "Properties: when each is
checked"): when there are quiescent properties, the walk takes its FIREs in order
until one changes the world (the walk goes on from there) or all lead back (the
world is quiescent, and the walk ends there if nothing else is enabled); these steps
are part of the walk and of its trace. `eventually` is checked from the last
world of every walk: the random prefix, then the fair schedule.
"""
from __future__ import annotations

import random

from .model import EngineLimit, Outcome
from .replay import recheck, replay
from .search import Search

DEFAULT_WALK_DEPTH = 100   # TLC's own default for -simulate -depth


class Simulation(Search):
    def __init__(self, *args, seed: int, walks: int, **kwargs):
        super().__init__(*args, **kwargs)
        if self.max_depth is None:
            self.max_depth = DEFAULT_WALK_DEPTH
        self.seed = seed
        self.walks = walks
        self.seen: set[bytes] = set()

    def run(self) -> Outcome:
        for w in range(self.walks):
            seed = self.seed + w
            outcome = _Walk(self, random.Random(seed)).run()
            self.stats.walks += 1
            if outcome is not None:
                outcome.walk, outcome.seed = w + 1, seed
                return outcome
            self.reporter.progress(self.stats)
        outcome = None
        for p in self.state_props:
            if p.kind == "witness" and p.name not in self.witnessed:
                outcome = Outcome("violated", self.stats, p, [])
                break
        return outcome or Outcome("ok", self.stats)

    def new_world(self, fp: bytes, view: dict):
        """Count a generated world; check it if no walk has been there before."""
        self.stats.generated += 1
        if fp in self.seen:
            return None
        self.seen.add(fp)
        self.stats.distinct += 1
        if self.stats.generated == 1:
            self.reporter.initial(self.stats)
        if self.max_states is not None and self.stats.distinct > self.max_states:
            raise EngineLimit(f"state cap exceeded: more than {self.max_states} distinct "
                              "states (--max-states); raise the cap or lower the budgets")
        return self.check_state(fp, view)


class _Walk:
    def __init__(self, sim: Simulation, rng: random.Random):
        self.sim = sim
        self.rng = rng
        self.keys: list[tuple] = []
        self.fps: list[bytes] = []
        self.system = None

    def run(self) -> Outcome | None:
        sim = self.sim
        self.system = sim.model.fresh()
        try:
            fp = self.system.fingerprint()
            view = self.system.view()
            self.fps.append(fp)
            bad = sim.new_world(fp, view)
            if bad:
                return self.violated(bad)
            while len(self.fps) < sim.max_depth:
                actions = self.system.actions()
                if not actions:
                    break
                if sim.quiescent_props and not any(a.moves_messages for a in actions):
                    outcome, moved = self.try_fires(actions, view)
                    if outcome is not None:
                        return outcome
                    if moved:
                        view = self.system.view()
                        continue
                    if all(a.fires for a in actions):
                        break       # only timers that change nothing: the walk is over
                action = self.rng.choice(actions)
                outcome, view = self.take(action.key, view)
                if outcome is not None:
                    return outcome
            self.ended()
            if sim.live.props:
                return self.eventually()
            return None
        finally:
            self.close()

    def take(self, key: tuple, view: dict):
        """One step of the walk; returns (outcome or None, the world's view after)."""
        sim = self.sim
        label = self.system.apply(key).label
        fp2 = self.system.fingerprint()
        view2 = self.system.view()
        if sim.det:
            self.close()
            recheck(sim.model, self.keys, self.fps, key, label, fp2, view2)
            self.system, _ = replay(sim.model, self.keys + [key], self.fps + [fp2])
        self.keys.append(key)
        self.fps.append(fp2)
        bad = sim.check_transition(view, view2)
        if bad:
            return self.violated(bad), view2
        bad = sim.new_world(fp2, view2)
        if bad:
            return self.violated(bad), view2
        return None, view2

    def try_fires(self, actions, view):
        """No DELIVER is enabled: take the FIREs until one changes the world.
        Returns (outcome or None, whether the walk moved to another world)."""
        fp = self.fps[-1]
        for action in actions:
            if not action.fires or len(self.fps) >= self.sim.max_depth:
                continue
            outcome, view = self.take(action.key, view)
            if outcome is not None:
                return outcome, True
            if self.fps[-1] != fp:
                return None, True
        if len(self.fps) >= self.sim.max_depth and any(a.fires for a in actions):
            return None, True     # the walk ended before the world's FIREs were all tried
        bad = self.sim.check_quiescent(view)
        if bad:
            return self.violated(bad), False
        return None, False

    def eventually(self) -> Outcome | None:
        sim = self.sim
        system, self.system = self.system, None
        failure = sim.live.check(self.fps[-1], lambda: system)
        system.close()
        if failure is None:
            return None
        return sim.live_violation(self.keys, self.fps, failure)

    def ended(self) -> None:
        stats = self.sim.stats
        stats.depth = max(stats.depth, len(self.fps))
        stats.walk_lengths.append(len(self.fps))

    def violated(self, prop) -> Outcome:
        self.ended()
        self.close()
        return Outcome("violated", self.sim.stats, prop, self.sim.trace(self.keys, self.fps))

    def close(self) -> None:
        if self.system is not None:
            self.system.close()
            self.system = None
