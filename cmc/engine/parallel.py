"""Breadth-first search with N replay workers (`--workers N`).

Every generated world costs one replay from a fresh launch, and replays are
independent: they parallelize. The parent keeps the whole search — visited map,
queue, property checks, statistics — and hands out *jobs*: "replay the path to
world T, apply action a, and tell me the fingerprint, the world and the actions
enabled there". Results are merged strictly in the order the jobs were made,
which is the order sequential breadth-first search would take the same steps
in. So the generated and distinct counts, the depth, the first violation and
its (shortest) counterexample are exactly those of one worker; only the wall
time differs. Jobs are handed out ahead of the merge (a window of a few per
worker) so that workers never wait for the parent.

Each worker is a process with its own model (its own working directories) made
by `worker_model(index)`; the parent launches only the initial world and the
replays that show a counterexample.

A worker dies with the parent, however the parent dies (PR_SET_PDEATHSIG, set
before it does anything, and a check that the parent it was forked from is still
its parent), and so do the node processes under it (theirs is set by the kernel
layer). A worker that dies is seen at once on its pipe: the search ends with an
engine error naming it, never waits for an answer that cannot come.

With --fast (FastParallelBreadthFirst) a job is a whole world's expansion, done on
copies of a snapshot that the worker keeps; each world goes to the worker holding
it. The merge is the same.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import socket
import time
from collections import deque

from .bfs import BreadthFirst
from .model import EngineLimit, Outcome, Stats
from .replay import NOT_KEPT, recheck, replay, steps_by_copy, take_step

PR_SET_PDEATHSIG = 1


def _worker_main(target, conn, parent: int, inherited: list[int], *args) -> None:
    """The start of every worker process: die with the parent, hand Ctrl-C to the
    parent, close the pipes of the workers started before it, then run target."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:          # the parent died before the line above
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for fd in inherited:
        try:
            os.close(fd)
        except OSError:
            pass
    target(conn, *args)


def _carried(e: Exception) -> tuple:
    """An exception, as it can reach the parent (which raises it)."""
    try:
        pickle.loads(pickle.dumps(e))
        return ("raise", e)
    except Exception:               # noqa: BLE001
        return ("raise", RuntimeError(f"{type(e).__name__}: {e}"))


class ReplayHandler:
    """The work of a ParallelBreadthFirst worker, whatever carries its jobs (a pipe,
    or a Ray actor: cmc/engine/rayworkers.py). A job is (keys, fps, key, det): replay
    to a world, take one step; the answer is ("ok", label, fingerprint, world,
    actions) or ("raise", error)."""

    def __init__(self, worker_model, index: int, por: bool = False):
        self.model = worker_model(index)
        self.por = por          # --por: each answer ends with what the step touched

    def handle(self, job) -> tuple:
        keys, fps, key, det = job
        model = self.model
        try:
            system = replay(model, keys, fps)[0]
            before = system.traits() if self.por else None
            label, fp2, view2, actions2 = take_step(system, key, with_actions=True,
                                                    close=False)
            try:
                touched = (system.changed(before),) if self.por else ()
            finally:
                system.close()
            if det:
                recheck(model, keys, fps, key, label, fp2, view2)
            return ("ok", label, fp2, view2, actions2) + touched
        except Exception as e:      # noqa: BLE001 — carried to the parent, raised there
            return _carried(e)

    def close(self) -> None:
        self.model.close_all()


def timed(handler, job) -> tuple:
    """A job's answer and the seconds the handler took for it (a worker's busy time)."""
    started = time.perf_counter()
    answer = handler.handle(job)
    return answer, time.perf_counter() - started


def states_in(answer) -> int:
    """The states one answer carries: a replay job's one, a --fast job's list."""
    if isinstance(answer, list):
        return sum(1 for r in answer if r[0] == "ok")
    return 1 if answer[0] == "ok" else 0


class Accounted:
    """What a worker did, for the progress lines and the JSON report's `workers`: the
    states it generated and the seconds it spent on jobs, on which machine."""

    host = socket.gethostname()
    lost = False
    generated = 0
    busy = 0.0

    def account(self, answer, seconds: float) -> None:
        self.generated += states_in(answer)
        self.busy += seconds


def machines(workers: list, elapsed: float) -> list[dict]:
    """The workers' accounts summed per machine, in the order of the first worker on
    each; `busy` is the share of the machine's workers' time spent on jobs."""
    out: dict[str, dict] = {}
    for w in sorted(workers, key=lambda w: w.index):
        m = out.setdefault(w.host, {"host": w.host, "workers": 0, "lost": 0,
                                    "generated": 0, "busy_seconds": 0.0})
        m["workers"] += 1
        m["lost"] += int(w.lost)
        m["generated"] += w.generated
        m["busy_seconds"] += w.busy
    for m in out.values():
        m["states_per_second"] = round(m["generated"] / elapsed, 1) if elapsed > 0 else None
        m["busy"] = round(m["busy_seconds"] / (m["workers"] * elapsed), 3) if elapsed > 0 \
            else None
        m["busy_seconds"] = round(m["busy_seconds"], 3)
    return list(out.values())


def _serve(conn, handler) -> None:
    """A worker process's loop: each job from the pipe, answered on it (with the
    seconds it took), until None."""
    try:
        while True:
            job = conn.recv()
            if job is None:
                return
            conn.send(timed(handler, job))
    except (EOFError, OSError):
        return
    finally:
        handler.close()


def _replay_worker(conn, worker_model, index: int, por: bool = False) -> None:
    """A worker process of ParallelBreadthFirst (ReplayHandler's jobs)."""
    _serve(conn, ReplayHandler(worker_model, index, por))


class _Worker(Accounted):
    """A worker process and the pipe to it. Answers come back in the order the
    jobs were sent; each job's answer lands in the box `send` returned."""

    DIED = object()

    def __init__(self, ctx, index: int, target, args: tuple, inherited: list[int]):
        self.index = index
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main,
                                args=(target, theirs, os.getpid(), inherited) + args,
                                daemon=True)
        self.proc.start()
        theirs.close()
        self.waiting: deque = deque()       # jobs sent, not answered: answer boxes
        self.drop: list = []                # --fast: snapshots it keeps that will not be used

    def send(self, message) -> list:
        box: list = []
        try:
            self.conn.send(message)
        except OSError:
            box.append(self.DIED)
            return box
        self.waiting.append(box)
        return box

    def read_one(self) -> None:
        try:
            answer, seconds = self.conn.recv()
        except (EOFError, OSError):
            for box in self.waiting:
                box.append(self.DIED)
            self.waiting.clear()
            return
        self.account(answer, seconds)
        self.waiting.popleft().append(answer)

    def died(self) -> EngineLimit:
        """The error for a worker that went away in the middle of the search."""
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        if code is None or code >= 0:
            how = "" if code is None else f" with status {code}"
        else:
            how = f" of {signal.Signals(-code).name}"
        return EngineLimit(f"worker process {self.index} died{how} (killed, or out of "
                           "memory?); the search cannot go on without its answers")

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass

    def end(self) -> None:
        """After stop: wait for it a little, then kill it (and so its nodes)."""
        self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


def start_workers(n: int, target, args_of) -> list[_Worker]:
    """n worker processes running target(conn, *args_of(i))."""
    ctx = multiprocessing.get_context("fork")
    pool: list[_Worker] = []
    for i in range(n):
        pool.append(_Worker(ctx, i, target, args_of(i), [w.conn.fileno() for w in pool]))
    return pool


def stop_workers(pool: list[_Worker]) -> None:
    for w in pool:
        w.stop()
    for w in pool:
        w.end()


class _Answer:
    """The answer to one job sent to a replay worker."""

    def __init__(self, owner, worker: _Worker, box: list):
        self.owner, self.worker, self.box = owner, worker, box

    def get(self):
        while not self.box:
            self.owner._pump()
        if self.box[0] is _Worker.DIED:
            return ("raise", self.worker.died())
        return self.box[0]


class ParallelBreadthFirst(BreadthFirst):
    WINDOW_PER_WORKER = 4     # jobs handed out ahead per worker: enough to never starve
    por = False               # --por (engine/por.py): the workers say what each step touched
    LOOKAHEAD = 1             # steps made ready per job handed out (see the --fast subclass)

    def __init__(self, model, properties, reporter, workers: int, worker_model, **kw):
        super().__init__(model, properties, reporter, **kw)
        self.workers = workers
        self.worker_model = worker_model

    ray_address: str | None = None

    def run(self) -> Outcome:
        # The workers are made before anything is launched, so that they inherit no
        # descriptor of the parent's node processes.
        return self._with_pool(_replay_worker, ReplayHandler,
                               lambda i: (self.worker_model, i, self.por))

    def _with_pool(self, target, handler, args_of) -> Outcome:
        """Start the workers, search, stop them; the workers' accounts go in the
        statistics (`Stats.workers`) as the search goes and when it ends."""
        began = time.perf_counter()
        self.pool = self._start_pool(target, handler, args_of)
        self._clock = (time.perf_counter(), time.process_time(), began)
        self.workers_seen = list(self.pool)
        try:
            return self._search()
        finally:
            try:
                self._stop_pool(self.pool)
            finally:
                self.stats.workers = self.workers_report()

    def workers_report(self) -> dict:
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

    def before_progress(self) -> None:
        self.stats.workers = self.workers_report()

    # How the workers are reached: worker processes over pipes here; Ray actors in
    # cmc/engine/rayworkers.py (the same jobs, handlers and merge).
    def _start_pool(self, target, handler, args_of) -> list:
        return start_workers(self.workers, target, args_of)

    def _stop_pool(self, pool: list) -> None:
        stop_workers(pool)

    def _ready(self, busy: list) -> list:
        """The busy workers with an answer to read (waits for one at least)."""
        conns = multiprocessing.connection.wait([w.conn for w in busy])
        return [next(w for w in busy if w.conn is conn) for conn in conns]

    def _pump(self) -> None:
        """Wait for any busy worker's answer and take it."""
        for w in self._ready([w for w in self.pool if w.waiting]):
            w.read_one()

    def _search(self) -> Outcome:
        system, fp0, view0, outcome = self.begin()
        if outcome is not None:
            return outcome
        try:
            actions0 = system.actions()
        finally:
            system.close()
        queue = deque([(fp0, view0, actions0)])     # found, not yet handed out
        pending = deque()                           # handed out, not yet merged
        window = self.workers * self.WINDOW_PER_WORKER * self.LOOKAHEAD
        outstanding = 0
        while queue or pending:
            while queue and (outstanding < window or not pending):
                fp, view, actions = queue.popleft()
                depth = self.parent[fp][2]
                if self.max_depth is not None and depth >= self.max_depth:
                    self._bounded(fp)
                    continue
                handed = self._hand_out(fp, view, actions, depth)
                outstanding += len(handed[4])
                pending.append(handed)
            if not pending:
                break
            handed = pending.popleft()
            outstanding -= len(handed[4])
            self.stats.queue = len(queue) + len(pending)
            outcome = self._merge_handed(handed, queue)
            if outcome is not None:
                self.stats.queue = len(queue) + len(pending)
                return outcome
            self.tick(len(queue) + len(pending))
        return self.finish()

    # What the loop of _search does with a world (--por's search, engine/por.py, does
    # more): one at the depth bound, one handed out (a tuple whose fifth item is its
    # jobs), one whose answers are all in.
    def _bounded(self, fp) -> None:
        self.stats.unexplored += 1

    def _hand_out(self, fp, view, actions, depth) -> tuple:
        return fp, view, actions, depth, self._submit(fp, actions, depth)

    def _merge_handed(self, handed: tuple, queue) -> Outcome | None:
        return self._merge(*handed, queue)

    def _submit(self, fp, actions, depth) -> list:
        """Hand out the steps from world fp, each to the least busy worker; one
        handle (with .get()) per action."""
        keys, fps = self.path(fp)
        out = []
        for key in (a.key for a in actions):
            w = min(self.pool, key=lambda w: (len(w.waiting), w.index))
            out.append(_Answer(self, w, w.send((keys, fps, key, self.det))))
        return out

    def _merge(self, fp, view, actions, depth, jobs, queue) -> Outcome | None:
        """BreadthFirst.merge, with the results of the workers' jobs."""
        fair_key = self.live.expanded(fp, actions) if self.live.props else None

        def successors():
            for action, job in zip(actions, jobs):
                key = action.key
                result = self._result(job)
                if result[0] == "raise":
                    raise result[1]
                _, label, fp2, view2, actions2 = result
                self.stats.generated += 1
                yield key, fp2, view2, (fp2, view2, actions2)
        return self.merge(fp, view, depth, actions, fair_key, successors(), queue)

    def _result(self, job) -> tuple:
        """A job's result: ("ok", label, fp, world, actions) or ("raise", error)."""
        return job.get()


# -- --fast: workers that keep snapshots ---------------------------------------------------
class FastHandler:
    """The work of a FastParallelBreadthFirst worker: expands worlds on copies,
    keeping the worlds it found as snapshots (at most `keep`) until told to drop
    them. A job is (fp, keys, fps, action keys, det, may keep, drop); its answer
    one result per action, as ReplayHandler's plus (copied, kept); an error ends the
    list."""

    def __init__(self, worker_model, index: int, keep: int, por: bool = False):
        self.model = worker_model(index)
        self.keep = keep
        self.cache: dict = {}
        self.por = por          # --por: each result ends with what the step touched

    def handle(self, job) -> list:
        model, cache = self.model, self.cache

        def step(system, key):
            return take_step(system, key, with_actions=True, close=False)
        fp, keys, fps, action_keys, det, may_keep, drop = job
        for gone in drop:
            system = cache.pop(gone, None)
            if system is not None:
                system.close()
        out = []
        try:
            counted = Stats()
            held = cache.pop(fp, None)
            if held is None:
                counted.relaunched = 1
                held = replay(model, keys, fps, why=NOT_KEPT)[0]
            before = held.traits() if self.por else None
            for key, system, (label, fp2, view2, actions2) in steps_by_copy(
                    model, held, keys, fps, action_keys, step, counted):
                touched = (system.changed(before),) if self.por else ()
                kept = may_keep and bool(actions2) and fp2 not in cache \
                    and BreadthFirst.room(len(cache), self.keep)
                if kept:
                    cache[fp2] = system
                else:
                    system.close()
                if det:
                    recheck(model, keys, fps, key, label, fp2, view2)
                out.append(("ok", label, fp2, view2, actions2, counted.copies, kept,
                            counted.replayed, counted.relaunched) + touched)
                counted.copies, counted.replayed, counted.relaunched = 0, {}, 0
        except Exception as e:      # noqa: BLE001
            out.append(_carried(e))
        return out

    def close(self) -> None:
        for system in self.cache.values():
            system.close()
        self.cache.clear()
        self.model.close_all()


def _fast_worker(conn, worker_model, index: int, keep: int, por: bool = False) -> None:
    """A worker process of FastParallelBreadthFirst (FastHandler's jobs)."""
    _serve(conn, FastHandler(worker_model, index, keep, por))


class _Job:
    """The expansion of one world, made ready in BFS order and sent to a worker when
    one is free (see FastParallelBreadthFirst._dispatch)."""

    def __init__(self, owner, fp, message: tuple):
        self.owner, self.fp, self.message = owner, fp, message
        self.worker = None
        self.box = None

    def send(self, worker) -> None:
        self.worker = worker
        self.box = worker.send(self.message + (worker.drop,))
        worker.drop = []

    def results(self) -> list:
        if self.worker is None:
            self.owner._send_now(self)
        while not self.box:
            self.owner._pump()
        if self.box[0] is _Worker.DIED:
            return [("raise", self.worker.died())]
        return self.box[0]


class _Handle:
    def __init__(self, job: _Job, i: int):
        self.job, self.i = job, i

    def get(self):
        results = self.job.results()
        return results[min(self.i, len(results) - 1)]


class FastParallelBreadthFirst(ParallelBreadthFirst):
    """--fast --workers N. Each worker keeps the worlds it found as snapshots, and a
    world is expanded by the worker holding it, on copies (no replay). Worlds are
    made ready in BFS order LOOKAHEAD times further ahead than they are sent; a free
    worker takes the first ready world it holds, else one nobody holds, and only
    when it has nothing at all to do one held by another worker, which it replays
    once (and copies from there). Which worker expands a world changes nothing in
    the results, which are merged in the same order as ParallelBreadthFirst's."""

    KEEP_PER_WORKER = 128     # snapshots a worker keeps: half of Search.KEEP, so that two
                              # workers hold about as many processes as one search
    LOOKAHEAD = 4

    def run(self) -> Outcome:
        self.holder: dict = {}          # world -> the worker keeping a snapshot of it
        self.ready: list[_Job] = []     # made ready, not sent, in BFS order
        return self._with_pool(_fast_worker, FastHandler,
                               lambda i: (self.worker_model, i, self.KEEP_PER_WORKER, self.por))

    def _submit(self, fp, actions, depth) -> list:
        if not actions:
            holder = self.holder.pop(fp, None)
            if holder is not None:
                holder.drop.append(fp)
            return []
        keys, fps = self.path(fp)
        may_keep = self.max_depth is None or depth + 1 < self.max_depth
        job = _Job(self, fp, (fp, keys, fps, [a.key for a in actions], self.det, may_keep))
        self.ready.append(job)
        self._dispatch()
        return [_Handle(job, i) for i in range(len(actions))]

    def _dispatch(self) -> None:
        """Send ready jobs to free workers, keeping each world with its holder."""
        sent = True
        while self.ready and sent:
            sent = False
            for w in sorted(self.pool, key=lambda w: (len(w.waiting), w.index)):
                if len(w.waiting) >= self.WINDOW_PER_WORKER or not self.ready:
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

    def _pump(self) -> None:
        """Wait for any worker's answer, take it, and give free workers more."""
        super()._pump()
        self._dispatch()

    def _send_now(self, job: _Job) -> None:
        """The merge needs this job's results: send it to its holder, else to the
        least busy worker."""
        holder = self.holder.get(job.fp)
        self._send(job, holder or min(self.pool, key=lambda w: (len(w.waiting), w.index)))

    def _merge(self, fp, view, actions, depth, jobs, queue) -> Outcome | None:
        try:
            return super()._merge(fp, view, actions, depth, jobs, queue)
        finally:
            self._dispatch()

    def _result(self, handle: "_Handle") -> tuple:
        """Also note who keeps the world found, if anyone will expand it."""
        result = handle.get()
        if result[0] != "ok":
            return result
        _, label, fp2, view2, actions2, copies, kept, replayed, relaunched = result[:9]
        self.stats.copies += copies
        self.stats.relaunched += relaunched
        for why, n in replayed.items():
            self.stats.replayed[why] = self.stats.replayed.get(why, 0) + n
        if kept:
            worker = handle.job.worker
            if fp2 not in self.parent and fp2 not in self.holder:
                self.holder[fp2] = worker       # merge is about to queue it
            else:
                worker.drop.append(fp2)
        return result[:5] + result[9:]      # with --por, what the step touched
