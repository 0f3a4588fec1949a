"""The worker processes of `--workers N`, and the work they do (pool.py hands it out).

A worker is a process with its own model (its own working directories) made by
`worker_model(index)`, running a handler: `ReplayHandler` (a job is one step, taken on
a replay of its world's path) or `FastHandler` (--fast: a job is a whole world's
expansion, taken on copies of a snapshot the worker keeps). A Ray actor runs the same
handlers (rayworkers.py).

A worker dies with the parent, however the parent dies (PR_SET_PDEATHSIG, set
before it does anything, and a check that the parent it was forked from is still
its parent), and so do the node processes under it (theirs is set by the kernel
layer). A worker that dies is seen at once on its pipe: the search ends with an
engine error naming it, never waits for an answer that cannot come.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import signal
import socket
import time
from collections import deque

from .model import EngineLimit, Stats
from .replay import NOT_KEPT, recheck, replay, steps_by_copy, take_step
from .search import Search

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
    """The work of a worker of a replaying search, whatever carries its jobs (a pipe,
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


def serve(conn, handler, *args) -> None:
    """A worker process's loop: each job from the pipe, answered on it by
    `handler(*args)` (with the seconds it took), until None."""
    handler = handler(*args)
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


# -- --fast: workers that keep snapshots ---------------------------------------------------
class FastHandler:
    """The work of a worker of a copying search (--fast): expands worlds on copies,
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
                    and Search.room(len(cache), self.keep)
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
