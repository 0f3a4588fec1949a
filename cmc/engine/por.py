"""--por: breadth-first search with sleep sets over footprints observed, never guessed
(docs/design.md, "Partial-order reduction").

Every step is taken on real processes, so cmc sees what it touched: the world as parts
(`System.traits`: a digest per node, and one part "" for what belongs to the world as a
whole: budgets, replies and clients, the clock, which connections exist and in what
condition) before and after, and the node the action acted on (`System.touched`). A
step's *footprint* is the parts that differ, with that node. Two steps commute when
neither footprint holds "" and the nodes in them are disjoint: each ran nodes the other
did not, sent nothing that made or reset a connection, answered no client, spent no
budget and did not move the clock. Taken in either order from one world they reach the
same world (for a deterministic program; replay checks that on every world it visits).

Sleep sets (Godefroid, "Partial-Order Methods for the Verification of Concurrent
Systems", ch. 5, with state matching): when world s is expanded its actions are taken in
order; the world reached by the i-th, t_i, gets as its sleep set the actions of s's own
sleep set and t_1..t_{i-1} whose footprints commute with t_i's. An action asleep in a
world is not taken from it: the world it would lead to is reached by taking it first
from an earlier world, and then the other action. A world reached again with a sleep
set that lacks some of its own loses those from it, and if it was expanded already,
it is expanded again for them alone.

Every world is still reached, and at its shortest depth (docs/design.md says why): the
distinct count, the depth, every verdict of a state property (invariant, witness,
linearizable, quiescent) and the length of every shortest counterexample are those of
the full search; the generated count is that of the transitions taken. `action` and
`eventually` properties read transitions, which sleep sets skip: a model with either
keeps them all (the search is then the full one, and says so).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .bfs import BreadthFirst
from .parallel import FastParallelBreadthFirst, ParallelBreadthFirst
from .model import Outcome
from .replay import replay, steps_by_copy


@dataclass(frozen=True)
class Footprint:
    """What a step touched: the parts of the world it read or changed (System.traits'
    names; "" the world as a whole), and whether it led back to the world it was
    taken from."""
    parts: frozenset
    loop: bool

    def commutes(self, other: "Footprint") -> bool:
        return ("" not in self.parts and "" not in other.parts
                and self.parts.isdisjoint(other.parts))


class PorCheckFailed(Exception):
    """--check-por: a transition the reduction skipped led to a world it never reached."""


class SleepSets:
    """What the reduced searches share (mixed in before a breadth-first search class):
    each world's sleep set, the worlds expanded, those queued again for the actions
    their sleep set lost, and the merge of a world's steps (`merge_reduced`).
    `check_por` (one worker): also take every transition skipped (not counted) and
    require, at the end, that each led to a world the search reached."""

    def __init__(self, *args, check_por: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        # a model whose properties read transitions keeps them all
        self.reduce = not self.transition_props and not self.live.props
        self.stats.reduced = self.reduce
        self.asleep: dict[bytes, dict[tuple, Footprint]] = {}
        self.expanded: set[bytes] = set()
        self.again: dict[bytes, set] = {}      # expanded worlds queued again: for these keys
        self.check = check_por
        self.landings: list[tuple[bytes, tuple, bytes]] = []   # --check-por
        self._steps: dict[tuple, Footprint] = {}

    def to_take(self, fp: bytes, actions: list, first: bool) -> list:
        """The actions to take from world fp now: those not asleep there (and, with no
        DELIVER enabled, every FIRE: the quiescence rule needs each one's outcome);
        when it is expanded again, those its sleep set lost since."""
        if not first:
            again = self.again.get(fp, ())
            return [a for a in actions if a.key in again]
        base = self.asleep.get(fp, {}) if self.reduce else {}
        idle = not any(a.moves_messages for a in actions)
        return [a for a in actions if a.key not in base or (idle and a.fires)]

    # -- what the steps found ----------------------------------------------------------
    def merge_reduced(self, fp: bytes, view: dict, depth: int, actions: list, base: dict,
                      first: bool, successors, queue: deque,
                      checked: frozenset | set = frozenset()) -> Outcome | None:
        enabled = {a.key: a for a in actions}
        busy = any(a.moves_messages for a in actions)
        done: list[tuple[tuple, Footprint]] = []       # taken from this world, in order
        for key, fp2, view2, item in successors:
            action = enabled[key]
            step = self._steps.pop(key)
            if key in checked:
                self.stats.generated -= 1             # not a transition of the search
                self.landings.append((fp, key, fp2))
                continue
            if action.fires and fp2 != fp:
                busy = True
            bad = self.check_transition(view, view2)
            if bad:
                return self.violation(bad, fp, key)
            sleep = {k: f for k, f in [*base.items(), *done] if k != key and f.commutes(step)}
            done.append((key, step))
            if fp2 not in self.parent:
                self.found(fp2, fp, key, depth + 1)
                self.asleep[fp2] = sleep
                bad = self.check_state(fp2, view2)
                if bad:
                    return self.violation(bad, fp2)
                queue.append(item)
            else:
                self.arrive(fp2, sleep, queue)
        if first and not busy:
            bad = self.check_quiescent(view)
            if bad:
                return self.violation(bad, fp)
        return None

    def arrive(self, fp: bytes, sleep: dict, queue: deque) -> None:
        """World fp, found before, reached again with sleep set `sleep`: what its own
        holds and this one lacks is taken from it (now, or when it is expanded)."""
        own = self.asleep.get(fp)
        if not own:
            return
        missing = own.keys() - sleep.keys()
        if not missing:
            return
        self.asleep[fp] = {k: f for k, f in own.items() if k in sleep}
        if fp in self.expanded:
            pending = self.again.get(fp)
            if pending is None:
                self.again[fp] = set(missing)
                self.requeue(fp, queue)
            else:
                pending |= missing

    def requeue(self, fp: bytes, queue: deque) -> None:
        """Queue world fp, expanded already, to be expanded again (`again`)."""
        queue.append(fp)

    def verify_landings(self) -> None:
        for fp, key, fp2 in self.landings:
            if fp2 not in self.parent:
                keys, fps = self.path(fp)
                steps = self.trace(keys + [key], fps)
                raise PorCheckFailed(
                    f"--check-por: the step <{steps[-1].label}> skipped from state "
                    f"{len(keys) + 1} of the path below leads to a world the reduced search "
                    "never reached: two steps taken as commuting do not (a footprint missed "
                    "something they share)\n" + "\n".join(
                        f"  {i}: {s.label or '<Initial predicate>'}"
                        for i, s in enumerate(steps, 1)))


class ReducedBreadthFirst(SleepSets, BreadthFirst):
    """BreadthFirst with sleep sets, one worker."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._at: tuple | None = None          # (world, its traits) while it is expanded

    def finish(self) -> Outcome:
        """The search is over (BreadthFirst._run): --check-por's landings first."""
        self.verify_landings()
        return super().finish()

    def expand(self, fp: bytes, held, queue: deque) -> Outcome | None:
        depth = self.parent[fp][2]
        first = fp not in self.expanded
        if self.max_depth is not None and depth >= self.max_depth:
            if held is not None:
                held.close()
            self.stats.unexplored += first
            self.expanded.add(fp)
            return None
        held, keys, fps, view, actions, fair_key = self.open_world(fp, held)
        base = dict(self.asleep.get(fp, {})) if self.reduce else {}
        take = self.to_take(fp, actions, first)
        self.again.pop(fp, None)
        self.expanded.add(fp)
        taken = {a.key for a in take}
        skipped = [a for a in actions if a.key not in taken] if first else []
        # skipped: not taken from this world, ever (taken again: no longer skipped)
        self.stats.slept += len(skipped) if first else -len(take)
        checked = skipped if self.check else []
        todo = take + checked
        if not todo:
            if actions:
                held.close()
            return self.merge_reduced(fp, view, depth, actions, base, first, iter(()), queue)
        self._at = (fp, held.traits())
        self._steps = {}
        if self.fast:
            successors = self._copied(held, keys, fps, todo, depth, {a.key for a in checked})
        else:
            successors = self._replayed(held, keys, fps, todo)
        return self.merge_reduced(fp, view, depth, actions, base, first, successors, queue,
                                  {a.key for a in checked})

    # -- taking the steps ------------------------------------------------------------
    def step(self, system, keys, fps, key, close: bool = True):
        label, fp2, view2 = super().step(system, keys, fps, key, close=False)
        try:
            at, before = self._at
            self._steps[key] = Footprint(system.changed(before), fp2 == at)
        finally:
            if close:
                system.close()
        return label, fp2, view2

    def _replayed(self, held, keys, fps, todo):
        for i, action in enumerate(todo):
            system = held if i == 0 else replay(self.model, keys, fps)[0]
            _, fp2, view2 = self.step(system, keys, fps, action.key)
            yield action.key, fp2, view2, fp2

    def _copied(self, held, keys, fps, todo, depth, checked: set):
        def step(system, key):
            return self.step(system, keys, fps, key, close=False)
        for key, system, (_, fp2, view2) in steps_by_copy(self.model, held, keys, fps,
                                                          [a.key for a in todo], step,
                                                          self.stats):
            if fp2 in self.parent or key in checked:
                system.close()
            else:
                self.keep(fp2, system, depth + 1)
            yield key, fp2, view2, fp2



class _ReducedPool(SleepSets):
    """Sleep sets with --workers (mixed in before ParallelBreadthFirst or its --fast
    subclass): the parent keeps the sleep sets and merges in breadth-first order, as
    one worker does, so the counts are one worker's. A world's steps are handed out
    when it leaves the queue, for the actions not asleep then; its sleep set can only
    lose actions before it is merged, and those are taken then, as one more job, so
    that the merge takes what one worker would have taken at that point."""
    por = True                  # the workers say what each step touched

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._items: dict[bytes, tuple] = {}    # world -> its queue item (to queue again)

    def requeue(self, fp: bytes, queue: deque) -> None:
        queue.append(self._items[fp])

    def _bounded(self, fp) -> None:
        self.stats.unexplored += fp not in self.expanded
        self.expanded.add(fp)

    def _hand_out(self, fp, view, actions, depth) -> tuple:
        """Hand out world fp's steps for what is not asleep now (ParallelBreadthFirst's
        loop; fp's queue item kept, for `requeue`)."""
        self._items.setdefault(fp, (fp, view, actions))
        first = fp not in self.expanded
        take = self.to_take(fp, actions, first)
        return fp, view, actions, depth, self._submit(fp, take, depth), first, take

    def _merge_handed(self, handed: tuple, queue) -> Outcome | None:
        fp, view, actions, depth, jobs, first, take = handed
        return self._merge_reduced_world(fp, view, actions, depth, first, take, jobs, queue)

    def _merge_reduced_world(self, fp, view, actions, depth, first, take, jobs, queue):
        """Merge world fp's steps: those its sleep set lets through now (handed out
        then, or now for what it lost since)."""
        need = self.to_take(fp, actions, first)
        self.again.pop(fp, None)
        self.expanded.add(fp)
        self.stats.slept += len(actions) - len(need) if first else -len(need)
        base = dict(self.asleep.get(fp, {})) if self.reduce else {}
        handed = {a.key: job for a, job in zip(take, jobs)}
        late = [a for a in need if a.key not in handed]
        if late:                                  # lost from its sleep set since
            handed.update(zip((a.key for a in late), self._submit(fp, late, depth)))

        def successors():
            for action in need:
                result = self._result(handed[action.key])
                if result[0] == "raise":
                    raise result[1]
                _, label, fp2, view2, actions2, touched = result
                self.stats.generated += 1
                self._steps[action.key] = Footprint(touched, fp2 == fp)
                item = (fp2, view2, actions2)
                if fp2 not in self._items:
                    self._items[fp2] = item
                yield action.key, fp2, view2, item
        return self.merge_reduced(fp, view, depth, actions, base, first, successors(), queue)


class ReducedParallelBreadthFirst(_ReducedPool, ParallelBreadthFirst):
    """--por --no-fast --workers N."""


class ReducedFastParallelBreadthFirst(_ReducedPool, FastParallelBreadthFirst):
    """--por --workers N (worlds copied)."""
