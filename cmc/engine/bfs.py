"""Breadth-first search over worlds, with TLC's semantics: the order of a search
(search.py), whatever its world source, executor and reduction.

Exact generated and distinct counts (the initial world counts as generated,
and so does every successor, self-loops and already-seen worlds included),
depth counting the initial world as 1, and the first violation in BFS order,
so that the counterexample is a shortest one. The visited set maps each
fingerprint to its parent and the action from it; a world's action sequence is
rebuilt from there and replayed to visit it.

The queue holds what the executor needs of a world to expand it (in this process its
fingerprint; for workers also the world and its enabled actions, which a worker's
answer brought). A world taken from the queue is opened and its steps handed out:
in this process (worlds.InProcess) one world at a time, taken as they are merged;
workers (pool.py) get the steps of the worlds ahead of the merge, up to the executor's
window, and the merge waits for the answers. Either way the steps are merged strictly
in the order of the queue, which is what makes the counts, the order and the
counterexample those of one search, however many workers take the steps.

Replaying (worlds.Replaying), expanding a world replays it once per enabled action,
except that the first action reuses the system the world was reached with when there
is one (the initial launch). Copying (--fast, worlds.Copying), a world is copied
instead, one copy per enabled action but the last, which takes the snapshot itself; a
new world found this way is kept as the snapshot to expand it from, up to KEEP
snapshots; a world without one is replayed once and copied from there. Counts, order
and verdicts are those of replay.

Which actions are taken from a world is the reduction's to say: every one (`Full`, no
reduction; it also runs --check-merges), or those not asleep (por.SleepSets, --por).
"""
from __future__ import annotations

from collections import deque

from .merges import MergeCheck
from .model import EngineLimit, Outcome

__all__ = ["BreadthFirst", "EngineLimit", "Full"]


class BreadthFirst:
    pools = True            # its steps may be handed to workers

    def __init__(self, check_merges: bool = False):
        self.check_merges = check_merges

    def configure(self, search) -> None:
        if self.check_merges:
            if not search.executor.local:
                raise ValueError("--check-merges takes the steps in this process")
            search.merges = MergeCheck(search)

    def run(self, search) -> Outcome:
        try:
            return self._run(search)
        finally:
            if search.merges is not None:
                search.merges.close()

    def _run(self, search) -> Outcome:
        system, fp0, view0, outcome = search.begin()
        if outcome is not None:
            return outcome
        executor = search.executor
        reduction = search.reduction or FULL
        queue = deque([executor.first(search, fp0, view0, system)])   # found, not handed out
        pending: deque = deque()                    # handed out, not yet merged
        window = executor.window(search)
        outstanding = 0                             # steps handed out, not merged
        while queue or pending:
            if search.time_up():
                search.stats.queue = len(queue) + len(pending)
                # the worlds found and not expanded (pending: handed out, not merged)
                frontier = [world.fp for world in pending] + [executor.fp(i) for i in queue]
                return search.stopped(frontier)
            while queue and (outstanding < window or not pending):
                item = queue.popleft()
                fp = executor.fp(item)
                depth = search.parent[fp][2]
                if search.max_depth is not None and depth >= search.max_depth:
                    reduction.bounded(search, fp)
                    continue
                world = executor.open(search, item, depth)
                world.take = reduction.to_take(search, world)
                executor.hand_out(search, world)
                outstanding += len(world.take)
                pending.append(world)
            if not pending:
                break
            world = pending.popleft()
            outstanding -= len(world.take)
            search.stats.queue = len(queue) + len(pending)
            try:
                outcome = reduction.merge(search, world, queue)
            finally:
                executor.merged(search)
            if outcome is not None:
                search.stats.queue = len(queue) + len(pending)
                return outcome
            search.expanded[world.depth] += 1
            search.tick(len(queue) + len(pending))
        reduction.finish(search)
        return search.finish()


class Full:
    """No reduction: every enabled action is taken from every world."""

    @staticmethod
    def bounded(search, fp: bytes) -> None:
        search.stats.unexplored += 1

    @staticmethod
    def to_take(search, world) -> list:
        return world.actions

    @staticmethod
    def finish(search) -> None:
        pass

    def merge(self, search, world, queue: deque) -> Outcome | None:
        fair_key = search.live.expanded(world.fp, world.actions) if search.live.props else None
        successors = search.executor.successors(search, world, world.actions)
        try:
            return self.merge_steps(search, world.fp, world.view, world.depth, world.actions,
                                    fair_key, successors, queue)
        finally:
            if search.merges is not None:
                search.merges.drop_arrivals()        # left by a violation

    @staticmethod
    def merge_steps(search, fp: bytes, view: dict, depth: int, actions: list, fair_key,
                    successors, queue: deque) -> Outcome | None:
        """Take the steps from world `fp`, in the order of its `actions`: `successors`
        yields (action key, fingerprint, world after it, what to queue if it is new)."""
        busy = False
        enabled = {a.key: a for a in actions}
        reached = {}
        merges = search.merges
        for key, fp2, view2, item in successors:
            action = enabled[key]
            reached[key] = fp2
            if key == fair_key:
                search.live.edge(fp, actions, key, fp2)
            if action.moves_messages or (action.fires and fp2 != fp):
                busy = True
            bad = search.check_transition(view, view2, action)
            if bad:
                return search.violation(bad, fp, key)
            if fp2 not in search.parent:
                search.found(fp2, fp, key, depth + 1)
                bad = search.check_state(fp2, view2)
                if bad:
                    return search.violation(bad, fp2)
                queue.append(item)
            elif merges is not None:
                merges.arrived(fp2, fp, key, merges.arrivals.pop(key, None))
        if merges is not None:
            merges.expanded(fp, reached)
        if not busy:
            bad = search.check_quiescent(view)
            if bad:
                return search.violation(bad, fp)
        return None


FULL = Full()
