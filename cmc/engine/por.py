"""--por: breadth-first search with sleep sets over footprints observed, never guessed
(docs/design.md, "Partial-order reduction"): the reduction part of a search (search.py),
with either world source, in this process or with --workers N.

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

from .model import Outcome


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
    """The reduction of a breadth-first search (bfs.BreadthFirst asks it what to take
    from each world, and merges through it): each world's sleep set, the worlds
    expanded, those queued again for the actions their sleep set lost, and the merge of
    a world's steps. The steps' footprints come from this process (`watch`, `stepped`:
    Search.step) or from the workers' answers (`note`: pool.py).

    With --workers the order hands a world's steps out when it leaves the queue, for the
    actions not asleep then; its sleep set can only lose actions before it is merged,
    and those are taken then, as one more job, so that the merge takes what one worker
    would have taken at that point: the counts are one worker's.

    `check_por` (one worker): also take every transition skipped (not counted) and
    require, at the end, that each led to a world the search reached."""

    def __init__(self, check_por: bool = False):
        self.check = check_por
        self.asleep: dict[bytes, dict[tuple, Footprint]] = {}
        self.expanded: set[bytes] = set()
        self.again: dict[bytes, set] = {}      # expanded worlds queued again: for these keys
        self.items: dict[bytes, object] = {}    # world -> its queue item (to queue again)
        self.landings: list[tuple[bytes, tuple, bytes]] = []   # --check-por
        self.steps: dict[tuple, Footprint] = {}    # the footprints of the world merged
        self.watching = False       # the steps are taken here: Search.step tells them
        self._at: tuple | None = None          # (world, its traits) while it is expanded
        self.reduce = True

    def configure(self, search) -> None:
        # a model whose properties read transitions keeps them all
        self.reduce = not search.transition_props and not search.live.props
        search.stats.reduced = self.reduce

    def to_take(self, search, world) -> list:
        """The actions to take from a world leaving the queue (its item kept for
        `requeue`)."""
        self.items.setdefault(world.fp, world.item)
        world.first = world.fp not in self.expanded
        return self.taken(world.fp, world.actions, world.first)

    def taken(self, fp: bytes, actions: list, first: bool) -> list:
        """The actions to take from world fp now: those not asleep there (and, with no
        DELIVER enabled, every FIRE: the quiescence rule needs each one's outcome);
        when it is expanded again, those its sleep set lost since."""
        if not first:
            again = self.again.get(fp, ())
            return [a for a in actions if a.key in again]
        base = self.asleep.get(fp, {}) if self.reduce else {}
        idle = not any(a.moves_messages for a in actions)
        return [a for a in actions if a.key not in base or (idle and a.fires)]

    def bounded(self, search, fp: bytes) -> None:
        search.stats.unexplored += fp not in self.expanded
        self.expanded.add(fp)

    # -- what the steps touched ----------------------------------------------------------
    def watch(self, fp: bytes, system) -> None:
        """The steps from world fp are taken here, from `system`, which is at it."""
        self._at = (fp, system.traits())
        self.watching = True

    def stepped(self, system, key: tuple, fp2: bytes) -> None:
        at, before = self._at
        self.note(key, system.changed(before), fp2 == at)

    def note(self, key: tuple, touched: frozenset, loop: bool) -> None:
        self.steps[key] = Footprint(touched, loop)

    # -- what the steps found ----------------------------------------------------------
    def merge(self, search, world, queue: deque) -> Outcome | None:
        """Merge world fp's steps: those its sleep set lets through now (handed out
        when it left the queue, or now for what it lost since)."""
        fp, actions, first = world.fp, world.actions, world.first
        need = self.taken(fp, actions, first)
        self.again.pop(fp, None)
        self.expanded.add(fp)
        search.stats.slept += len(actions) - len(need) if first else -len(need)
        base = dict(self.asleep.get(fp, {})) if self.reduce else {}
        if search.live.props:
            search.live.expanded(fp, actions)
        taken = {a.key for a in need}
        checked = [a for a in actions if a.key not in taken] if first and self.check else []
        self.steps = {}
        successors = search.executor.successors(search, world, need + checked,
                                                {a.key for a in checked})
        return self.merge_reduced(search, fp, world.view, world.depth, actions, base, first,
                                  self.kept(successors), queue, {a.key for a in checked})

    def kept(self, successors):
        """The successors, each world's queue item kept (for `requeue`)."""
        for key, fp2, view2, item in successors:
            self.items.setdefault(fp2, item)
            yield key, fp2, view2, item

    def merge_reduced(self, search, fp: bytes, view: dict, depth: int, actions: list,
                      base: dict, first: bool, successors, queue: deque,
                      checked: frozenset | set = frozenset()) -> Outcome | None:
        enabled = {a.key: a for a in actions}
        busy = any(a.moves_messages for a in actions)
        done: list[tuple[tuple, Footprint]] = []       # taken from this world, in order
        for key, fp2, view2, item in successors:
            action = enabled[key]
            step = self.steps.pop(key)
            if key in checked:
                search.stats.generated -= 1           # not a transition of the search
                self.landings.append((fp, key, fp2))
                continue
            if action.fires and fp2 != fp:
                busy = True
            bad = search.check_transition(view, view2, action)
            if bad:
                return search.violation(bad, fp, key)
            sleep = {k: f for k, f in [*base.items(), *done] if k != key and f.commutes(step)}
            done.append((key, step))
            if fp2 not in search.parent:
                search.found(fp2, fp, key, depth + 1)
                self.asleep[fp2] = sleep
                bad = search.check_state(fp2, view2)
                if bad:
                    return search.violation(bad, fp2)
                queue.append(item)
            else:
                self.arrive(fp2, sleep, queue)
        if first and not busy:
            bad = search.check_quiescent(view)
            if bad:
                return search.violation(bad, fp)
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
                queue.append(self.items[fp])      # expanded again, for `again`
            else:
                pending |= missing

    def finish(self, search) -> None:
        """The search is over: --check-por's landings."""
        for fp, key, fp2 in self.landings:
            if fp2 not in search.parent:
                keys, fps = search.path(fp)
                steps = search.trace(keys + [key], fps)
                raise PorCheckFailed(
                    f"--check-por: the step <{steps[-1].label}> skipped from state "
                    f"{len(keys) + 1} of the path below leads to a world the reduced search "
                    "never reached: two steps taken as commuting do not (a footprint missed "
                    "something they share)\n" + "\n".join(
                        f"  {i}: {s.label or '<Initial predicate>'}"
                        for i, s in enumerate(steps, 1)))
