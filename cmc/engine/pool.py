"""The executor of `--workers N`: the steps of a breadth-first search taken by worker
processes (parallel.py), with whichever world source and reduction the search has.

Every generated world costs one replay from a fresh launch, or one copy, and those are
independent: they parallelize. The parent keeps the whole search (visited map, queue,
property checks, statistics: bfs.py) and hands out *jobs*, whose answers it merges
strictly in the order the jobs were made, which is the order one search would take the
same steps in. So the generated and distinct counts, the depth, the first violation
and its (shortest) counterexample are exactly those of one worker; only the wall time
differs. Jobs are handed out ahead of the merge (a window of a few per worker) so that
workers never wait for the parent.

What a job is follows the search's world source:

- replaying (`ReplayJobs`): "replay the path to world T, apply action a, and tell me
  the fingerprint, the world and the actions enabled there", each to the least busy
  worker (parallel.ReplayHandler);
- copying (`CopyJobs`, --fast): a whole world's expansion, done on copies of a
  snapshot that the worker keeps; each world goes to the worker holding it
  (parallel.FastHandler).

How the workers are reached is the pool's: processes over pipes here (parallel.py);
Ray actors in rayworkers.py (`RayPool`, the same jobs, handlers and merge).
"""
from __future__ import annotations

import multiprocessing.connection
import time
from contextlib import contextmanager

from .parallel import (FastHandler, ReplayHandler, _Worker, machines, serve, start_workers,
                       stop_workers)
from .worlds import World


class WorkerPool:
    local = False
    WINDOW_PER_WORKER = 4     # jobs handed out ahead per worker: enough to never starve
    ray_address: str | None = None

    def __init__(self, workers: int, worker_model):
        self.workers = workers
        self.worker_model = worker_model    # index -> the worker's own model
        self.moved: dict = {}   # Ray: a lost actor's job (its answer box) -> the actor given it

    @contextmanager
    def running(self, search):
        """Start the workers (before anything is launched, so that they inherit no
        descriptor of the parent's node processes), search, stop them; the workers'
        accounts go in the statistics (`Stats.workers`) as the search goes and when it
        ends."""
        began = time.perf_counter()
        self.search = search
        self.jobs = (CopyJobs if search.worlds.copies else ReplayJobs)(self, search)
        self.pool = self.start(self.jobs.handler, self.jobs.args_of)
        self._clock = (time.perf_counter(), time.process_time(), began)
        self.workers_seen = list(self.pool)
        try:
            yield
        finally:
            try:
                self.stop(self.pool)
            finally:
                search.stats.workers = self.report()

    def report(self) -> dict:
        """The JSON report's `workers`: how many, where, the seconds taken to start them
        and to search, the head's CPU seconds over the search (the merge, and the
        transport's share of the head), and each machine's account."""
        wall, cpu, began = self._clock
        elapsed = time.perf_counter() - wall
        return {"count": self.workers, "ray": self.ray_address,
                "start_seconds": round(wall - began, 3),
                "search_seconds": round(elapsed, 3),
                "head_cpu_seconds": round(time.process_time() - cpu, 3),
                "machines": machines(self.workers_seen, elapsed)}

    def before_progress(self, search) -> None:
        search.stats.workers = self.report()

    # -- how the workers are reached (worker processes over pipes) -----------------------
    def start(self, handler, args_of) -> list:
        return start_workers(self.workers, serve, lambda i: (handler,) + args_of(i))

    def stop(self, pool: list) -> None:
        stop_workers(pool)

    def ready(self, busy: list) -> list:
        """The busy workers with an answer to read (waits for one at least)."""
        conns = multiprocessing.connection.wait([w.conn for w in busy])
        return [next(w for w in busy if w.conn is conn) for conn in conns]

    def pump(self) -> None:
        """Wait for any busy worker's answer and take it."""
        for w in self.ready([w for w in self.pool if w.waiting]):
            w.read_one()

    def least_busy(self):
        return min(self.pool, key=lambda w: (len(w.waiting), w.index))

    # -- the executor of the breadth-first order (bfs.py) --------------------------------
    def window(self, search) -> int:
        return self.workers * self.WINDOW_PER_WORKER * self.jobs.LOOKAHEAD

    def first(self, search, fp0: bytes, view0: dict, system):
        """The initial world's queue item; the launched system is closed (the workers
        take every step)."""
        try:
            actions0 = system.actions()
        finally:
            system.close()
        return fp0, view0, actions0

    @staticmethod
    def fp(item) -> bytes:
        return item[0]

    def open(self, search, item, depth: int) -> World:
        fp, view, actions = item
        return World(fp, view, actions, depth, item)

    def hand_out(self, search, world: World) -> None:
        world.handles = self.jobs.submit(world.fp, world.take, world.depth)

    def successors(self, search, world: World, todo: list, checked=frozenset()):
        """The results of the steps of `todo` from the world, in order: those handed
        out, and any not handed out then (--por: lost from its sleep set since), handed
        out now."""
        handed = dict(zip((a.key for a in world.take), world.handles))
        late = [a for a in todo if a.key not in handed]
        if late:
            handed.update(zip((a.key for a in late), self.jobs.submit(world.fp, late,
                                                                       world.depth)))
        for action in todo:
            result = self.jobs.result(handed[action.key])
            if result[0] == "raise":
                raise result[1]
            _, label, fp2, view2, actions2 = result[:5]
            search.stats.generated += 1
            if search.reduction is not None:         # the step's footprint, as it came
                search.reduction.note(action.key, result[5], fp2 == world.fp)
            yield action.key, fp2, view2, (fp2, view2, actions2)

    def merged(self, search) -> None:
        self.jobs.merged()


class _Answer:
    """The answer to one job sent to a replay worker."""

    def __init__(self, pool: WorkerPool, worker: _Worker, box: list):
        self.pool, self.worker, self.box = pool, worker, box

    def get(self):
        while not self.box:
            self.pool.pump()
        if self.box[0] is _Worker.DIED:
            return ("raise", self.worker.died())
        return self.box[0]


class ReplayJobs:
    """Replaying: one job per step, to the least busy worker."""
    handler = ReplayHandler
    LOOKAHEAD = 1             # steps made ready per job handed out (see CopyJobs)

    def __init__(self, pool: WorkerPool, search):
        self.pool, self.search = pool, search
        por = search.reduction is not None      # --por: the workers say what a step touched
        self.args_of = lambda i: (pool.worker_model, i, por)

    def submit(self, fp, actions, depth) -> list:
        """Hand out the steps from world fp; one handle (with .get()) per action."""
        keys, fps = self.search.path(fp)
        out = []
        for key in (a.key for a in actions):
            w = self.pool.least_busy()
            out.append(_Answer(self.pool, w, w.send((keys, fps, key, self.search.det))))
        return out

    @staticmethod
    def result(handle) -> tuple:
        """A job's result: ("ok", label, fp, world, actions) or ("raise", error)."""
        return handle.get()

    def merged(self) -> None:
        pass

    def forget(self, dead) -> None:
        """A worker was lost (Ray): nothing of it is kept here."""


class _Job:
    """The expansion of one world, made ready in BFS order and sent to a worker when
    one is free (see CopyJobs.dispatch)."""

    def __init__(self, jobs: "CopyJobs", fp, message: tuple):
        self.jobs, self.fp, self.message = jobs, fp, message
        self.worker = None
        self.box = None

    def send(self, worker) -> None:
        self.worker = worker
        self.box = worker.send(self.message + (worker.drop,))
        worker.drop = []

    def results(self) -> list:
        if self.worker is None:
            self.jobs.send_now(self)
        while not self.box:
            self.jobs.pump()
        if self.box[0] is _Worker.DIED:
            return [("raise", self.worker.died())]
        return self.box[0]


class _Handle:
    def __init__(self, job: _Job, i: int):
        self.job, self.i = job, i

    def get(self):
        results = self.job.results()
        return results[min(self.i, len(results) - 1)]


class CopyJobs:
    """Copying (--fast): each worker keeps the worlds it found as snapshots, and a
    world is expanded by the worker holding it, on copies (no replay). Worlds are made
    ready in BFS order LOOKAHEAD times further ahead than they are sent; a free worker
    takes the first ready world it holds, else one nobody holds, and only when it has
    nothing at all to do one held by another worker, which it replays once (and copies
    from there). Which worker expands a world changes nothing in the results, which are
    merged in the same order as ReplayJobs'."""
    handler = FastHandler
    KEEP_PER_WORKER = 128     # snapshots a worker keeps: half of Search.KEEP, so that two
                              # workers hold about as many processes as one search
    LOOKAHEAD = 4

    def __init__(self, pool: WorkerPool, search):
        self.pool, self.search = pool, search
        self.holder: dict = {}          # world -> the worker keeping a snapshot of it
        self.ready: list[_Job] = []     # made ready, not sent, in BFS order
        por = search.reduction is not None
        self.args_of = lambda i: (pool.worker_model, i, self.KEEP_PER_WORKER, por)

    def submit(self, fp, actions, depth) -> list:
        if not actions:
            holder = self.holder.pop(fp, None)
            if holder is not None:
                holder.drop.append(fp)
            return []
        search = self.search
        keys, fps = search.path(fp)
        may_keep = search.max_depth is None or depth + 1 < search.max_depth
        job = _Job(self, fp, (fp, keys, fps, [a.key for a in actions], search.det, may_keep))
        self.ready.append(job)
        self.dispatch()
        return [_Handle(job, i) for i in range(len(actions))]

    def dispatch(self) -> None:
        """Send ready jobs to free workers, keeping each world with its holder."""
        sent = True
        while self.ready and sent:
            sent = False
            for w in sorted(self.pool.pool, key=lambda w: (len(w.waiting), w.index)):
                if len(w.waiting) >= self.pool.WINDOW_PER_WORKER or not self.ready:
                    continue
                pick = next((j for j in self.ready if self.holder.get(j.fp) is w), None) \
                    or next((j for j in self.ready if j.fp not in self.holder), None)
                if pick is None and not w.waiting:
                    pick = self.ready[0]
                if pick is not None:
                    self._send(pick, w)
                    sent = True

    def _send(self, job: _Job, worker) -> None:
        self.ready.remove(job)
        holder = self.holder.pop(job.fp, None)
        if holder is not None and holder is not worker:
            holder.drop.append(job.fp)
        job.send(worker)

    def pump(self) -> None:
        """Wait for any worker's answer, take it, and give free workers more."""
        self.pool.pump()
        self.dispatch()

    def send_now(self, job: _Job) -> None:
        """The merge needs this job's results: send it to its holder, else to the
        least busy worker."""
        self._send(job, self.holder.get(job.fp) or self.pool.least_busy())

    def merged(self) -> None:
        self.dispatch()

    def forget(self, dead) -> None:
        """A worker was lost (Ray): the worlds it kept are gone with it."""
        for fp in [fp for fp, w in self.holder.items() if w is dead]:
            del self.holder[fp]

    def result(self, handle: _Handle) -> tuple:
        """A job's result, as ReplayJobs' (with --por, what the step touched last);
        notes who keeps the world found, if anyone will expand it."""
        job = handle.job
        moved = self.pool.moved.pop(id(job.box), None)      # Ray: its actor was lost
        if moved is not None:
            job.worker = moved
        result = handle.get()
        if result[0] != "ok":
            return result
        _, label, fp2, view2, actions2, copies, kept, replayed, relaunched = result[:9]
        stats = self.search.stats
        stats.copies += copies
        stats.relaunched += relaunched
        for why, n in replayed.items():
            stats.replayed[why] = stats.replayed.get(why, 0) + n
        if kept:
            worker = job.worker
            if fp2 not in self.search.parent and fp2 not in self.holder:
                self.holder[fp2] = worker       # merge is about to queue it
            else:
                worker.drop.append(fp2)
        return result[:5] + result[9:]
