"""Depth-first search to a depth bound (`--dfs D`).

Every world within D states of the initial one (the initial world has depth 1)
is visited and checked like in breadth-first search, but deep behaviors are
reached early and the frontier is a stack, not a level of the graph. A world
found again by a shorter path is expanded again from there, so that the bound
cuts off exactly the worlds farther than D from the initial one. The
counterexample is the path the search took, not necessarily a shortest one.

The children of a world are generated with its actions in reverse order: the
last system used is then at the child of the first action, which is the next
world the search expands, so that child needs no replay.

With `fast` (--fast), the children are taken on copies of the world (see bfs.py),
and every child pushed on the stack keeps its system as the snapshot it will be
expanded from (at most KEEP at a time; others are replayed when their turn comes).
"""
from __future__ import annotations

from .model import Outcome
from .replay import replay, steps_by_copy
from .search import Search


class DepthFirst(Search):
    def __init__(self, *args, depth: int, **kwargs):
        super().__init__(*args, max_depth=depth, **kwargs)
        self.cut: set[bytes] = set()    # worlds at the bound, not expanded (yet)

    def _run(self) -> Outcome:
        system, fp0, _, outcome = self.begin()
        if outcome is not None:
            return outcome
        stack = [fp0]
        held = (fp0, system)
        try:
            while stack:
                fp = stack.pop()
                system = None
                if held is not None:
                    if held[0] == fp:
                        system = held[1]
                    else:
                        held[1].close()
                    held = None
                outcome, held = self.expand(fp, system, stack)
                if outcome is not None:
                    self.stats.queue = len(stack)
                    return outcome
                self.tick(len(stack))
        finally:
            if held is not None:
                held[1].close()
        return self.finish()

    def expand(self, fp: bytes, system, stack: list):
        """Generate the children of `fp`; returns (outcome or None, the system left
        at the child pushed last, or None)."""
        depth = self.parent[fp][2]
        if depth >= self.max_depth:
            if system is not None:
                system.close()
            self.cut.add(fp)
            self.stats.unexplored = len(self.cut)
            return None, None
        self.cut.discard(fp)            # found again closer to the initial world
        self.stats.unexplored = len(self.cut)
        system, keys, fps, view, actions, fair_key = self.open_world(fp, system)
        busy = False
        left = None
        ordered = list(reversed(actions))
        children = (self._copied(system, keys, fps, ordered) if self.fast and ordered
                    else self._replayed(system, keys, fps, ordered))
        for action, (label, fp2, view2, kept) in zip(ordered, children):
            if action.key == fair_key:
                self.live.edge(fp, actions, action.key, fp2)
            if action.moves_messages or (action.fires and fp2 != fp):
                busy = True
            bad = self.check_transition(view, view2)
            if bad:
                if kept is not None:
                    kept.close()
                return self.violation(bad, fp, action.key), None
            known = self.parent.get(fp2)
            if known is None or known[2] > depth + 1:
                if known is None:
                    self.found(fp2, fp, action.key, depth + 1)
                    bad = self.check_state(fp2, view2)
                    if bad:
                        if kept is not None:
                            kept.close()
                        return self.violation(bad, fp2), None
                else:
                    self.parent[fp2] = (fp, action.key, depth + 1)
                stack.append(fp2)
                if kept is not None and self.fast:
                    self.keep(fp2, kept, depth + 1)
                elif kept is not None:
                    left = (fp2, kept)
            elif kept is not None:
                kept.close()
        if not busy:
            bad = self.check_quiescent(view)
            if bad:
                if left is not None:
                    left[1].close()
                return self.violation(bad, fp), None
        return None, left

    def _replayed(self, system, keys, fps, ordered):
        """(label, fingerprint, world, system kept or None) per action: the first on
        `system`, the others on replays; the last child's system is kept."""
        for n, action in enumerate(ordered):
            if n > 0:
                system, _ = replay(self.model, keys, fps)
            yield self._step(system, keys, fps, action.key, keep=n == len(ordered) - 1)

    def _copied(self, system, keys, fps, ordered):
        """The same, each child on a copy of `system` (--fast), every system kept."""
        def step(world, key):
            return self.step(world, keys, fps, key, close=False)
        for _, child, (label, fp2, view2) in steps_by_copy(
                self.model, system, keys, fps, [a.key for a in ordered], step, self.stats):
            yield label, fp2, view2, child

    def _step(self, system, keys, fps, key, keep: bool):
        """Like Search.step, but the system of the last child may be kept open for
        the next expansion (not under --det, whose second run replaces it)."""
        if not keep or self.det:
            label, fp2, view2 = self.step(system, keys, fps, key)
            return label, fp2, view2, None
        try:
            label = system.apply(key).label
            fp2 = system.fingerprint()
            view2 = system.view()
        except BaseException:
            system.close()
            raise
        self.stats.generated += 1
        return label, fp2, view2, system
