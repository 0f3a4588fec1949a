"""Breadth-first search over worlds, with TLC's semantics.

Exact generated and distinct counts (the initial world counts as generated,
and so does every successor, self-loops and already-seen worlds included),
depth counting the initial world as 1, and the first violation in BFS order,
so that the counterexample is a shortest one. The visited set maps each
fingerprint to its parent and the action from it; a world's action sequence is
rebuilt from there and replayed to visit it.

Expanding a world replays it once per enabled action, except that the first
action reuses the system the world was reached with when there is one (the
initial launch).

With `fast` (--fast), a world is copied instead: the processes of a world held
in a snapshot are forked (cmc/kernel/proc/fork.py), one copy per enabled action but
the last, which takes the snapshot itself. A new world found this way is kept as
the snapshot to expand it from, up to KEEP snapshots; a world without one is
replayed once and copied from there. A world that cannot be copied, a copy that
fails, and a step that goes wrong in a copy (so that every error is reported
exactly as replay reports it) fall back to replay. Counts, order and verdicts are
those of replay.
"""
from __future__ import annotations

from collections import deque

from .merges import MergeCheck
from .model import EngineLimit, Outcome
from .replay import replay, steps_by_copy
from .search import Search

__all__ = ["BreadthFirst", "EngineLimit"]


class BreadthFirst(Search):
    def __init__(self, *args, check_merges: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.merges = MergeCheck(self) if check_merges else None
        self.arrivals: dict = {}   # --check-merges --fast: action -> system at a seen world

    def _run(self) -> Outcome:
        system, fp0, _, outcome = self.begin()
        if outcome is not None:
            return outcome
        queue = deque([fp0])
        held = system            # the launched system is already at fp0
        try:
            while queue:
                fp = queue.popleft()
                self.stats.queue = len(queue)
                outcome = self.expand(fp, held, queue)
                held = None
                if outcome is not None:
                    self.stats.queue = len(queue)
                    return outcome
                self.tick(len(queue))
        finally:
            if held is not None:
                held.close()
            if self.merges is not None:
                self.merges.close()
        return self.finish()

    def expand(self, fp: bytes, held, queue: deque) -> Outcome | None:
        depth = self.parent[fp][2]
        if self.max_depth is not None and depth >= self.max_depth:
            if held is not None:
                held.close()
            self.stats.unexplored += 1
            return None
        held, keys, fps, view, actions, fair_key = self.open_world(fp, held)
        if self.fast and actions:
            successors = self.copied_successors(held, keys, fps, actions, depth)
        else:
            successors = self.replayed_successors(held, keys, fps, actions)
        try:
            return self.merge(fp, view, depth, actions, fair_key, successors, queue)
        finally:
            for system in self.arrivals.values():     # left by a violation
                system.close()
            self.arrivals.clear()

    def replayed_successors(self, held, keys, fps, actions):
        for i, action in enumerate(actions):
            system = held if i == 0 else replay(self.model, keys, fps)[0]
            _, fp2, view2 = self.step(system, keys, fps, action.key)
            yield action.key, fp2, view2, fp2

    def copied_successors(self, held, keys, fps, actions, depth):
        def step(system, key):
            return self.step(system, keys, fps, key, close=False)
        for key, system, (_, fp2, view2) in steps_by_copy(self.model, held, keys, fps,
                                                          [a.key for a in actions], step,
                                                          self.stats):
            if fp2 in self.parent:         # seen: it will not be queued
                if self.merges is not None:
                    self.arrivals[key] = system    # --check-merges may take it on
                else:
                    system.close()
            else:
                self.keep(fp2, system, depth + 1)
            yield key, fp2, view2, fp2

    def merge(self, fp: bytes, view: dict, depth: int, actions: list, fair_key,
              successors, queue: deque) -> Outcome | None:
        """Take the steps from world `fp`, in the order of its `actions`: `successors`
        yields (action key, fingerprint, world after it, what to queue if it is new)."""
        busy = False
        enabled = {a.key: a for a in actions}
        reached = {}
        for key, fp2, view2, item in successors:
            action = enabled[key]
            reached[key] = fp2
            if key == fair_key:
                self.live.edge(fp, actions, key, fp2)
            if action.moves_messages or (action.fires and fp2 != fp):
                busy = True
            bad = self.check_transition(view, view2)
            if bad:
                return self.violation(bad, fp, key)
            if fp2 not in self.parent:
                self.found(fp2, fp, key, depth + 1)
                bad = self.check_state(fp2, view2)
                if bad:
                    return self.violation(bad, fp2)
                queue.append(item)
            elif self.merges is not None:
                self.merges.arrived(fp2, fp, key, self.arrivals.pop(key, None))
        if self.merges is not None:
            self.merges.expanded(fp, reached)
        if not busy:
            bad = self.check_quiescent(view)
            if bad:
                return self.violation(bad, fp)
        return None

