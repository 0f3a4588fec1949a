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
"""
from __future__ import annotations

import multiprocessing
import pickle
import signal
import time
from collections import deque

from .bfs import PROGRESS_EVERY, BreadthFirst
from .model import Outcome
from .replay import recheck, replay, take_step

_worker = {}


def _init_worker(worker_model, counter) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    _worker["model"] = worker_model(index)


def _job(keys: list[tuple], fps: list[bytes], key: tuple, det: bool):
    """In a worker: replay to a world, take one step, describe the result."""
    model = _worker["model"]
    try:
        label, fp2, view2, actions2 = take_step(replay(model, keys, fps)[0], key,
                                                with_actions=True)
        if det:
            recheck(model, keys, fps, key, label, fp2, view2)
        return ("ok", label, fp2, view2, actions2)
    except Exception as e:          # noqa: BLE001 — carried to the parent, raised there
        try:
            pickle.loads(pickle.dumps(e))
            return ("raise", e)
        except Exception:           # noqa: BLE001
            return ("raise", RuntimeError(f"{type(e).__name__}: {e}"))


class ParallelBreadthFirst(BreadthFirst):
    WINDOW_PER_WORKER = 4     # jobs handed out ahead per worker: enough to never starve

    def __init__(self, model, properties, reporter, workers: int, worker_model, **kw):
        super().__init__(model, properties, reporter, **kw)
        self.workers = workers
        self.worker_model = worker_model

    def run(self) -> Outcome:
        ctx = multiprocessing.get_context("fork")
        counter = ctx.Value("i", 0)
        # The pool is made before anything is launched, so that workers inherit no
        # descriptor of the parent's node processes.
        pool = ctx.Pool(self.workers, initializer=_init_worker,
                        initargs=(self.worker_model, counter))
        try:
            return self._search(pool)
        finally:
            pool.terminate()
            pool.join()

    def _search(self, pool) -> Outcome:
        system, fp0, view0, outcome = self.begin()
        if outcome is not None:
            return outcome
        try:
            actions0 = [(a.key, a.label) for a in system.actions()]
        finally:
            system.close()
        queue = deque([(fp0, view0, actions0)])     # found, not yet handed out
        pending = deque()                           # handed out, not yet merged
        window = self.workers * self.WINDOW_PER_WORKER
        outstanding = 0
        last_progress = time.monotonic()
        while queue or pending:
            while queue and (outstanding < window or not pending):
                fp, view, actions = queue.popleft()
                depth = self.parent[fp][2]
                if self.max_depth is not None and depth >= self.max_depth:
                    self.stats.unexplored += 1
                    continue
                keys, fps = self.path(fp)
                jobs = [pool.apply_async(_job, (keys, fps, key, self.det)) for key, _ in actions]
                outstanding += len(jobs)
                pending.append((fp, view, actions, depth, jobs))
            if not pending:
                break
            fp, view, actions, depth, jobs = pending.popleft()
            outstanding -= len(jobs)
            self.stats.queue = len(queue) + len(pending)
            outcome = self._merge(fp, view, actions, depth, jobs, queue)
            if outcome is not None:
                self.stats.queue = len(queue) + len(pending)
                return outcome
            now = time.monotonic()
            if now - last_progress >= PROGRESS_EVERY:
                last_progress = now
                self.reporter.progress(self.stats)
        return self.finish()

    def _merge(self, fp, view, actions, depth, jobs, queue) -> Outcome | None:
        """BreadthFirst.merge, with the results of the workers' jobs."""
        action_keys = [key for key, _ in actions]
        fair_key = self.live.expanded(fp, action_keys) if self.live.props else None

        def successors():
            for (key, _), job in zip(actions, jobs):
                result = job.get()
                if result[0] == "raise":
                    raise result[1]
                _, label, fp2, view2, actions2 = result
                self.stats.generated += 1
                yield key, fp2, view2, (fp2, view2, actions2)
        return self.merge(fp, view, depth, action_keys, fair_key, successors(), queue)
