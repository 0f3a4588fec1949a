"""Depth-first search to a depth bound (`--dfs D`): the order of a search
(search.py), with either world source, in this process.

Every world within D states of the initial one (the initial world has depth 1)
is visited and checked like in breadth-first search, but deep behaviors are
reached early and the frontier is a stack, not a level of the graph. A world
found again by a shorter path is expanded again from there, so that the bound
cuts off exactly the worlds farther than D from the initial one. The
counterexample is the path the search took, not necessarily a shortest one.

The children of a world are generated with its actions in reverse order: the
last system used is then at the child of the first action, which is the next
world the search expands, so that child needs no replay.

Copying (--fast, worlds.Copying), the children are taken on copies of the world, and
every child pushed on the stack keeps its system as the snapshot it will be expanded
from (at most KEEP at a time; others are replayed when their turn comes). Replaying,
the system of the child pushed last is kept the same way, for the next expansion.
"""
from __future__ import annotations

from .model import Outcome


class DepthFirst:
    pools = False           # its steps are taken in this process

    def __init__(self, depth: int):
        self.depth = depth
        self.cut: set[bytes] = set()    # worlds at the bound, not expanded (yet)

    def configure(self, search) -> None:
        search.max_depth = self.depth

    def run(self, search) -> Outcome:
        system, fp0, _, outcome = search.begin()
        if outcome is not None:
            return outcome
        search.snapshots[fp0] = system
        stack = [fp0]
        while stack:
            fp = stack.pop()
            outcome = self.expand(search, fp, stack)
            if outcome is not None:
                search.stats.queue = len(stack)
                return outcome
            search.tick(len(stack))
        return search.finish()

    def expand(self, search, fp: bytes, stack: list) -> Outcome | None:
        """Generate the children of `fp`, pushing those to expand (again)."""
        depth = search.parent[fp][2]
        if depth >= self.depth:
            system = search.snapshots.pop(fp, None)
            if system is not None:
                system.close()
            self.cut.add(fp)
            search.stats.unexplored = len(self.cut)
            return None
        self.cut.discard(fp)            # found again closer to the initial world
        search.stats.unexplored = len(self.cut)
        system, keys, fps, view, actions = search.open_world(fp)
        fair_key = search.live.expanded(fp, actions) if search.live.props else None
        busy = False
        ordered = list(reversed(actions))
        children = search.worlds.steps(search, system, keys, fps, [a.key for a in ordered],
                                       keep_last=True)
        for action, (_, kept, (label, fp2, view2)) in zip(ordered, children):
            if action.key == fair_key:
                search.live.edge(fp, actions, action.key, fp2)
            if action.moves_messages or (action.fires and fp2 != fp):
                busy = True
            bad = search.check_transition(view, view2, action)
            if bad:
                if kept is not None:
                    kept.close()
                return search.violation(bad, fp, action.key)
            known = search.parent.get(fp2)
            if known is None or known[2] > depth + 1:
                if known is None:
                    search.found(fp2, fp, action.key, depth + 1)
                    bad = search.check_state(fp2, view2)
                    if bad:
                        if kept is not None:
                            kept.close()
                        return search.violation(bad, fp2)
                else:
                    search.parent[fp2] = (fp, action.key, depth + 1)
                stack.append(fp2)
                if kept is not None:
                    self.hold(search, fp2, kept, depth + 1)
            elif kept is not None:
                kept.close()
        if not busy:
            bad = search.check_quiescent(view)
            if bad:
                return search.violation(bad, fp)
        return None

    @staticmethod
    def hold(search, fp: bytes, system, depth: int) -> None:
        """Keep the system a step left at a child pushed: copying, as its snapshot
        (Search.keep); replaying, it is the last child pushed, expanded next."""
        if search.worlds.copies:
            search.keep(fp, system, depth)
        else:
            old = search.snapshots.pop(fp, None)
            if old is not None:
                old.close()
            search.snapshots[fp] = system
