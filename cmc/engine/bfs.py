"""Breadth-first search over worlds, with TLC's semantics.

Exact generated and distinct counts (the initial world counts as generated),
depth counting the initial world as 1, and the first violation in BFS order,
so that the counterexample is a shortest one. The visited set maps each
fingerprint to its parent and the action from it; a world's action sequence is
rebuilt from there and replayed to visit it.
"""
from __future__ import annotations

import time
from collections import deque

from .model import Model, Outcome, Property, Reporter, Stats
from .replay import replay


class EngineLimit(Exception):
    """A cap was exceeded (e.g. --max-states): never a silent truncation."""


class BreadthFirst:
    def __init__(self, model: Model, properties: list[Property], reporter: Reporter,
                 max_depth: int | None = None, max_states: int | None = None):
        self.model = model
        self.props = properties
        self.reporter = reporter
        self.max_depth = max_depth
        self.max_states = max_states
        self.parent: dict[bytes, tuple[bytes | None, tuple | None, int]] = {}
        self.stats = Stats()

    def _path(self, fp: bytes) -> tuple[list[tuple], list[bytes]]:
        keys, fps = [], [fp]
        while True:
            parent, key, _ = self.parent[fp]
            if parent is None:
                break
            keys.append(key)
            fps.append(parent)
            fp = parent
        return keys[::-1], fps[::-1]

    def _trace(self, fp: bytes, extra: tuple | None = None):
        keys, fps = self._path(fp)
        if extra is not None:
            keys.append(extra)
        system, steps = replay(self.model, keys, fps, collect=True)
        system.close()
        return steps

    def _violation(self, prop: Property, fp: bytes, extra: tuple | None = None) -> Outcome:
        self.stats.queue = len(self.queue)
        return Outcome("violated", self.stats, prop, self._trace(fp, extra))

    def _state_props(self, view) -> Property | None:
        for p in self.props:
            if p.kind == "invariant" and not p.check(view, None):
                return p
            if p.kind == "witness" and p.name not in self.witnessed and p.check(view, None):
                self.witnessed.add(p.name)
        return None

    def run(self) -> Outcome:
        self.witnessed: set[str] = set()
        self.queue: deque = deque()
        system = self.model.fresh()
        fp0 = system.fingerprint()
        self.parent[fp0] = (None, None, 1)
        self.stats.generated = self.stats.distinct = self.stats.depth = 1
        view0 = system.view()
        self.reporter.initial(self.stats)
        bad = self._state_props(view0)
        if bad:
            system.close()
            return self._violation(bad, fp0)
        self.queue.append(fp0)
        last_progress = time.monotonic()
        held = system            # the launched system is already at fp0
        action_props = [p for p in self.props if p.kind == "action"]
        quiescent_props = [p for p in self.props if p.kind == "quiescent"]
        while self.queue:
            fp = self.queue.popleft()
            depth = self.parent[fp][2]
            if self.max_depth is not None and depth >= self.max_depth:
                continue
            keys, fps = self._path(fp)
            if held is None:
                held, _ = replay(self.model, keys, fps)
            view = held.view()
            actions = held.actions()
            busy = False
            if not actions:
                held.close()
                held = None
            for i, action in enumerate(actions):
                system = held if i == 0 else replay(self.model, keys, fps)[0]
                held = None
                try:
                    system.apply(action.key)
                    fp2 = system.fingerprint()
                    view2 = system.view()
                finally:
                    system.close()
                self.stats.generated += 1
                if action.key[0] == "DELIVER" or (action.key[0] == "FIRE" and fp2 != fp):
                    busy = True
                for p in action_props:
                    if not p.check(view, view2):
                        return self._violation(p, fp, action.key)
                if fp2 not in self.parent:
                    self.parent[fp2] = (fp, action.key, depth + 1)
                    self.stats.distinct += 1
                    self.stats.depth = max(self.stats.depth, depth + 1)
                    if self.max_states is not None and self.stats.distinct > self.max_states:
                        raise EngineLimit(f"state cap exceeded: more than {self.max_states} "
                                          "distinct states (--max-states)")
                    bad = self._state_props(view2)
                    if bad:
                        return self._violation(bad, fp2)
                    self.queue.append(fp2)
            if not busy:
                for p in quiescent_props:
                    if not p.check(view, None):
                        return self._violation(p, fp)
            now = time.monotonic()
            self.stats.queue = len(self.queue)
            if now - last_progress >= 1.0:
                last_progress = now
                self.reporter.progress(self.stats)
        self.stats.queue = 0
        for p in self.props:
            if p.kind == "witness" and p.name not in self.witnessed:
                return Outcome("violated", self.stats, p, [])
        return Outcome("ok", self.stats)
