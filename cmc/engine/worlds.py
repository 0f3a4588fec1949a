"""Two of the parts a search is made of (search.py): where a world's successors come
from, and the executor that takes the steps in this process.

A *world source* takes steps from a world held open (`held`), one per action key, and
yields each step's result with the system it left, if any, for the search to keep or
close:

- `Replaying`: the first step on `held`, every other on a replay of the world's path
  from a fresh launch (replay.py). Only the last system may be left open (the
  depth-first search expands that child next); every other is closed.
- `Copying` (--fast): every step on a copy of `held` (fork: cmc/kernel/proc/fork.py),
  the last on `held` itself; a world that cannot be copied, or a failed copy, falls
  back to replay (replay.steps_by_copy). Every system is left open: the search keeps it
  as the snapshot to expand that world from (Search.keep), or closes it.

On workers the same two ways are the workers' handlers (parallel.py: ReplayHandler,
FastHandler), chosen by `copies` (pool.py).

`InProcess` is the executor of a search whose steps are taken here, by the world
source: the default, and the only one of depth-first search and the walks. It opens a
world when the breadth-first order takes it from the queue (bfs.py) and takes its steps
when they are merged; a `World` is what the order knows of a world being expanded.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

from .replay import replay, steps_by_copy


class Replaying:
    copies = False

    def steps(self, search, held, keys: list, fps: list, todo: list, keep_last: bool = False):
        """(key, system left open or None, (label, fingerprint, view)) per key of `todo`,
        taken from the world reached by `keys`; with `keep_last` the last step's system
        is left open (not under --det, whose second run replaces it)."""
        for i, key in enumerate(todo):
            system = held if i == 0 else replay(search.model, keys, fps)[0]
            keep = keep_last and i == len(todo) - 1 and not search.det
            yield key, system if keep else None, search.step(system, keys, fps, key,
                                                             close=not keep)


class Copying:
    copies = True

    def steps(self, search, held, keys: list, fps: list, todo: list, keep_last: bool = False):
        """The same, each step on a copy of `held`, every system left open."""
        if not todo:
            return

        def step(system, key):
            return search.step(system, keys, fps, key, close=False)
        yield from steps_by_copy(search.model, held, keys, fps, todo, step, search.stats)


@dataclass
class World:
    """A world the breadth-first order took from its queue to expand: what it knows of
    it (its queue item, the world, its enabled actions and depth), the actions taken
    from it (`take`, as the reduction says), and what the executor needs to take them
    (InProcess: the system held open at it and its path; a pool: the jobs handed out)."""
    fp: bytes
    view: dict
    actions: list
    depth: int
    item: object
    take: list | None = None
    first: bool = True          # --por: expanded for the first time (not again)
    held: object = None
    keys: list | None = None
    fps: list | None = None
    handles: list | None = None


class InProcess:
    """The steps taken in this process by the search's world source. A world is opened
    (its snapshot, else a replay of its path) when it is taken from the queue, and its
    steps are taken as the merge asks for them, so nothing is handed out ahead
    (`window` 0): the breadth-first order expands one world at a time."""
    local = True

    def running(self, search):
        return nullcontext()

    def window(self, search) -> int:
        return 0

    def first(self, search, fp0: bytes, view0: dict, system):
        """The initial world's queue item: the launched system is its snapshot."""
        search.snapshots[fp0] = system
        return fp0

    @staticmethod
    def fp(item) -> bytes:
        return item

    def open(self, search, item, depth: int) -> World:
        held, keys, fps, view, actions = search.open_world(item)
        return World(item, view, actions, depth, item, held=held, keys=keys, fps=fps)

    def hand_out(self, search, world: World) -> None:
        """Nothing is handed out: the steps are taken when merged."""

    def successors(self, search, world: World, todo: list, checked=frozenset()):
        """(key, fingerprint, world after, queue item) per action of `todo`, in order.
        A system the world source leaves at a new world is kept as its snapshot; one
        at a world already found (or a step --check-por takes only to check it) goes
        to --check-merges, if on, else is closed."""
        held = world.held
        if not todo:
            if world.actions:
                held.close()
            return
        if search.reduction is not None:
            search.reduction.watch(world.fp, held)
        for key, system, (_, fp2, view2) in search.worlds.steps(
                search, held, world.keys, world.fps, [a.key for a in todo]):
            if system is not None:
                if fp2 not in search.parent and key not in checked:
                    search.keep(fp2, system, world.depth + 1)
                elif search.merges is not None and key not in checked:
                    search.merges.arrivals[key] = system
                else:
                    system.close()
            yield key, fp2, view2, fp2

    def merged(self, search) -> None:
        """After a world's merge."""

    def before_progress(self, search) -> None:
        """Bring what the progress shows up to date."""
