"""A search, composed of parts chosen when it is made (cmc/check.py, `make_search`),
and what every search shares: the properties sorted by when they are checked, the
visited map, traces, and the checks made at the end of a search.

The parts:

- an *order*, which runs the search: which world is expanded next, and what is done
  with the worlds its steps reach (bfs.BreadthFirst: a queue, merged in order;
  dfs.DepthFirst: a stack, to a depth bound; simulate.Walks: seeded random walks);
- a *world source*, how the steps from a world are taken (worlds.Replaying: on replays
  from launch; worlds.Copying, --fast: on copies of it);
- an *executor*, where they are taken (worlds.InProcess: here; pool.WorkerPool,
  --workers N: worker processes; rayworkers.RayPool, --ray: Ray actors); only the
  breadth-first order hands its steps to workers;
- a *reduction*, or None (por.SleepSets, --por: of a breadth-first search).

When each kind of property is checked (docs/cmc.md, "Properties: when each is checked";
model.PropertyKind says it of each kind, `checked`):

- invariant, witness: on every world when it is first generated, in declaration
  order (a witness is only noted as reached);
- action: on every transition, also into a world already seen;
- quiescent: when a world is expanded and turns out to be quiescent (no DELIVER
  enabled, and every enabled FIRE leads back to the same world);
- eventually: once the safety search is over, from every world in the order it
  was found (TLC, too, checks liveness after the state graph is built); a
  witness never reached is reported before that.
"""
from __future__ import annotations

import collections
import time

from .liveness import LOOPED, FairWalker, LiveFailure
from .model import (Action, Checked, EngineLimit, Model, NullObserver, Observer, Outcome,
                    Property, Proven, Reporter, Stats, Step)
from .replay import NOT_KEPT, explained, recheck, recheck_initial, replay, take_step
from .simulate import Walks
from .worlds import InProcess, Replaying

DEFAULT_LIVE_STEPS = 100
PROGRESS_EVERY = 0.25   # seconds between progress events: a live display stays smooth;
                        # the plain reporter prints one line a minute


class Search:
    # --fast: snapshots kept alive. Each holds every node's processes: 256 worlds of
    # three nodes are some 800 processes, far below the pid and memory limits of a
    # machine. More, up to KEEP_MAX, while `more_room` says the machine has room (the
    # memory bound's watcher: resources.Bound.room_for_more, installed by the command
    # line); a world that finds none is replayed from launch when its turn comes
    # (docs/design.md, "How many worlds are kept").
    KEEP = 256
    KEEP_MAX = 4096
    no_more_room = staticmethod(lambda: False)
    more_room = no_more_room

    def __init__(self, model: Model, properties: list[Property], reporter: Reporter,
                 order, worlds=None, executor=None, reduction=None, *,
                 max_depth: int | None = None, max_states: int | None = None,
                 det: bool = False, live_steps: int = DEFAULT_LIVE_STEPS,
                 observer: Observer | None = None, seconds: float | None = None,
                 walk_seed: int | None = None, clock=time.monotonic):
        self.order = order
        self.worlds = worlds or Replaying()
        self.executor = executor or InProcess()
        self.reduction = reduction
        if not self.executor.local and not order.pools:
            raise ValueError(f"{type(order).__name__} takes its steps in this process")
        self.model = model
        self.props = list(properties)
        self.reporter = reporter
        self.max_depth = max_depth
        self.max_states = max_states
        self.det = det
        self.observer = observer or NullObserver()
        # --seconds: a breadth-first search stops expanding worlds once `clock` passes
        # this (the one thing in a search that real time decides: how far it gets)
        # With `walk_seed` (check.py sets it with --seconds) the search has half of its
        # seconds, and the walks from its frontier the rest (stopped).
        self.seconds = seconds
        self.clock = clock
        self.deadline = None if seconds is None else clock() + seconds
        self.walk_seed = walk_seed
        self.per_depth: collections.Counter = collections.Counter()   # distinct worlds
        self.expanded: collections.Counter = collections.Counter()    # their steps taken
        checked = {when: [p for p in self.props if p.kind.checked is when] for when in Checked}
        self.state_props = checked[Checked.STATE]
        self.transition_props = checked[Checked.TRANSITION]
        self.quiescent_props = checked[Checked.QUIESCENCE]
        self.live = FairWalker(checked[Checked.LIVENESS], live_steps)
        self.witnessed: set[str] = set()
        # fingerprint -> (parent fingerprint, action key from it, depth); insertion order
        # is the order in which worlds were found.
        self.parent: dict[bytes, tuple[bytes | None, tuple | None, int]] = {}
        self.stats = Stats()
        self.snapshots: dict = {}      # world -> a live system at it, to expand it from
        self.merges = None             # --check-merges (bfs.py)
        self._last_progress = time.monotonic()
        order.configure(self)
        if reduction is not None:
            reduction.configure(self)

    def run(self) -> Outcome:
        """The search (its order's), with its executor running (workers are started
        before anything is launched); whatever way it ends, the snapshots it kept are
        closed."""
        try:
            with self.executor.running(self):
                return self.order.run(self)
        finally:
            for system in self.snapshots.values():
                system.close()
            self.snapshots.clear()

    def keep(self, fp: bytes, system, depth: int) -> None:
        """--fast: keep `system`, at world `fp` (of depth `depth`) that the search
        will expand, as the snapshot to expand it from, if there is room and it will
        be expanded at all; else close it."""
        if (fp not in self.snapshots and self.room(len(self.snapshots), self.KEEP)
                and (self.max_depth is None or depth < self.max_depth)):
            self.snapshots[fp] = system
        else:
            system.close()

    @classmethod
    def room(cls, kept: int, keep: int) -> bool:
        """Room for one more snapshot where `kept` are kept and `keep` always may be."""
        return kept < keep or (kept < keep * cls.KEEP_MAX // cls.KEEP and cls.more_room())

    def tick(self, left: int) -> None:
        """After each expansion: `left` worlds wait (queue or stack); a progress
        event every PROGRESS_EVERY seconds."""
        self.stats.queue = left
        now = time.monotonic()
        if now - self._last_progress >= PROGRESS_EVERY:
            self._last_progress = now
            self.before_progress()
            self.reporter.progress(self.stats)

    def before_progress(self) -> None:
        """Bring what the progress shows up to date (the workers' accounts)."""
        self.executor.before_progress(self)

    # -- the visited map -------------------------------------------------------------
    def path(self, fp: bytes) -> tuple[list[tuple], list[bytes]]:
        """The action keys from the initial world to `fp`, and the fingerprint of
        every world on the way (the initial one first)."""
        keys, fps = [], [fp]
        while True:
            parent, key, _ = self.parent[fp]
            if parent is None:
                break
            keys.append(key)
            fps.append(parent)
            fp = parent
        return keys[::-1], fps[::-1]

    def found(self, fp: bytes, parent: bytes | None, key: tuple | None, depth: int) -> None:
        """A new distinct world."""
        self.parent[fp] = (parent, key, depth)
        self.per_depth[depth] += 1
        self.stats.distinct += 1
        self.stats.depth = max(self.stats.depth, depth)
        if self.max_states is not None and self.stats.distinct > self.max_states:
            raise EngineLimit(f"state cap exceeded: more than {self.max_states} distinct "
                              "states (--max-states); raise the cap or lower the budgets")

    def begin(self):
        """Launch the initial world, count it as generated and distinct, and check it.
        Returns (system, fingerprint, view, outcome): outcome is the violation found in
        the initial world (the system is closed then), else None. With --det the
        initial world is launched shifted first (one world at a time: replay shares
        the working directories), and must be the same."""
        shifted = recheck_initial(self.model) if self.det else None
        system = self.model.fresh()
        try:
            fp0 = system.fingerprint()
            view0 = system.view()
            if shifted is not None and shifted != (fp0, view0):
                raise explained(self.model, [], 1)
        except BaseException:
            system.close()
            raise
        self.stats.generated = 1
        self.found(fp0, None, None, 1)
        self.reporter.initial(self.stats)
        bad = self.check_state(fp0, view0)
        if bad:
            system.close()
            return None, fp0, view0, self.violation(bad, fp0)
        return system, fp0, view0, None

    def open_world(self, fp: bytes):
        """The world `fp` to expand: its snapshot if one was kept, else a replay of its
        path. Returns (system, keys, fps, view, actions); the system is closed when no
        action is enabled."""
        keys, fps = self.path(fp)
        system = self.snapshots.pop(fp, None)
        if system is None:
            copies = self.worlds.copies
            if copies:
                self.stats.relaunched += 1
            system, _ = replay(self.model, keys, fps, why=NOT_KEPT if copies else None)
        try:
            view = system.view()
            actions = system.actions()
        except BaseException:
            system.close()
            raise
        if not actions:
            system.close()
        return system, keys, fps, view, actions

    # -- checks ------------------------------------------------------------------------
    def check_state(self, fp: bytes, view: dict) -> Property | None:
        """Invariants and witnesses of a newly found world; the first violated."""
        for p in self.state_props:
            if not p.kind.reached:
                if not p.check(view, None):
                    return p
            elif p.name not in self.witnessed and p.check(view, None):
                self.witnessed.add(p.name)
        self.live.see(fp, view)
        known = self.parent.get(fp)
        self.observer.world(view, known[2] if known is not None else None)
        return None

    def check_transition(self, view: dict, view2: dict, action: Action) -> Property | None:
        """Action properties on the step `action` from world `view` to `view2`."""
        for p in self.transition_props:
            if not p.check(view, view2):
                return p
        self.observer.step(action, view, view2)
        return None

    def check_quiescent(self, view: dict) -> Property | None:
        for p in self.quiescent_props:
            if not p.check(view, None):
                return p
        self.observer.quiescent(view)
        return None

    def step(self, system, keys: list[tuple], fps: list[bytes], key: tuple,
             close: bool = True):
        """Apply `key` to `system` (at the world reached by `keys`) and close it
        (unless not `close`); --por notes what the step touched; under --det take the
        same step again from a fresh launch. Returns (label, fingerprint, view) of the
        world after the step."""
        watched = self.reduction is not None and self.reduction.watching
        label, fp2, view2 = take_step(system, key, close=close and not watched)
        if watched:
            try:
                self.reduction.stepped(system, key, fp2)
            finally:
                if close:
                    system.close()
        self.stats.generated += 1
        if self.det:
            recheck(self.model, keys, fps, key, label, fp2, view2)
        return label, fp2, view2

    # -- outcomes ----------------------------------------------------------------------
    def trace(self, keys: list[tuple], fps: list[bytes] | None) -> list[Step]:
        system, steps = replay(self.model, keys, fps, collect=True)
        system.close()
        return steps

    def violation(self, prop: Property, fp: bytes, extra: tuple | None = None) -> Outcome:
        """`prop` is violated at world `fp` (or on the step `extra` from it)."""
        keys, fps = self.path(fp)
        if extra is not None:
            keys.append(extra)
        return Outcome("violated", self.stats, prop, self.trace(keys, fps))

    def live_violation(self, keys: list[tuple], fps: list[bytes],
                       failure: LiveFailure) -> Outcome:
        """The shortest known prefix to a world, then the fair schedule from it."""
        suffix_keys, suffix_fps = list(failure.keys), list(failure.fps)
        loop_to = None
        if failure.why == LOOPED:
            suffix_keys.pop()          # shown as "Back to state N", not as a state
            suffix_fps.pop()
            loop_to = len(keys) + 1 + failure.loop_to
        steps = self.trace(keys + suffix_keys, fps + suffix_fps)
        return Outcome("violated", self.stats, failure.prop, steps,
                       suffix_from=len(keys) + 1, loop_to=loop_to, why=failure.why)

    def time_up(self) -> bool:
        """--seconds: whether the search's time is up (with walks to follow: its half)."""
        if self.deadline is None:
            return False
        half = self.seconds / 2 if self.walk_seed is not None else 0
        return self.clock() >= self.deadline - half

    def shrink_until(self):
        """--seconds: when shrinking a walk's violation stops (a callable saying whether
        it is time; None: no time): at the search's deadline, but not before a quarter
        of its seconds has gone to it."""
        if self.deadline is None:
            return None
        end = max(self.deadline, self.clock() + self.seconds / 4)
        return lambda: self.clock() >= end

    def proven(self, why: str) -> Proven:
        """What a breadth-first search has proven so far (Proven): the worlds are
        expanded in order of depth, so every world at a depth below the first one with
        a world not expanded was found and checked, and so was every world at that
        depth."""
        depths = sorted(self.per_depth)
        complete = next((d for d in depths if self.expanded[d] < self.per_depth[d]),
                        depths[-1] if depths else 0)
        return Proven(why, complete, self.expanded[complete], self.per_depth[complete],
                      tuple(self.per_depth[d] for d in range(1, (depths or [0])[-1] + 1)))

    def stopped(self, frontier: list[bytes] = ()) -> Outcome:
        """--seconds: the time is up before the search ended, with no violation found.
        With `walk_seed`, the rest of the time goes to swarm walks from `frontier`, the
        worlds found and not expanded (simulate.py)."""
        self.before_progress()
        proven = self.proven(f"--seconds {self.seconds:g}")
        if self.walk_seed is None or not frontier:
            return Outcome("ok", self.stats, bounded=True, stopped=proven)
        walks = Walks(self.walk_seed, None, swarm=True, starts=frontier,
                      until=lambda: self.clock() >= self.deadline)
        walks.seen = set(self.parent)
        self.stats.queue = 0
        outcome = walks.run(self)
        if outcome.verdict == "ok":
            outcome.bounded, outcome.stopped = True, proven
            outcome.walk_seed = self.walk_seed
        return outcome

    def finish(self) -> Outcome:
        """The search is over without a safety violation."""
        self.stats.queue = 0
        return self.final_checks() or Outcome("ok", self.stats,
                                              bounded=self.stats.unexplored > 0)

    def unreached(self) -> Outcome | None:
        """The first witness never reached, if any."""
        for p in self.state_props:
            if p.kind.reached and p.name not in self.witnessed:
                return Outcome("violated", self.stats, p, [])
        return None

    def final_checks(self) -> Outcome | None:
        """After the safety search: witnesses never reached, then `eventually` from
        every world in the order found."""
        unreached = self.unreached()
        if unreached is not None or not self.live.props:
            return unreached
        for fp in list(self.parent):
            keys, fps = self.path(fp)
            failure = self.live.check(fp, lambda k=keys, f=fps: replay(self.model, k, f)[0])
            if failure is not None:
                return self.live_violation(keys, fps, failure)
        return None
