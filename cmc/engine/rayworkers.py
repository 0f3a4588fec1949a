"""`--ray ADDRESS`: the workers of `--workers N` as Ray actors (issue 18, first part).

The search is parallel.py's, unchanged: the parent keeps the visited map, the queue
and the properties, hands out the same self-contained jobs and merges the answers in
the order the jobs were made, so counts and counterexamples are one worker's. Only
the transport differs: a job goes to an actor's `handle` (which runs the same
ReplayHandler or FastHandler a worker process runs) and its answer comes back as a
Ray future, waited for with `ray.wait`. Ray is imported only here, and only when
`--ray` is given (`pip install 'cmc[ray]'`).

An actor that dies (its machine lost, killed) costs only the jobs it had not answered:
every job carries its world's path, so they go to the live actors, which replay the
worlds (the snapshots the dead one kept are gone), and since answers are still merged
in the order the jobs were made, the result is unchanged. Only with no actor left does
the search end (exit 3). Not yet: per-machine progress, and the check that every
machine has the model's binaries (docs/design.md, the plan).
"""
from __future__ import annotations

import socket
import sys
from collections import deque

from ..errors import UsageError
from .model import EngineLimit
from .parallel import FastParallelBreadthFirst, ParallelBreadthFirst, _Worker


def _ray():
    try:
        import ray
    except ImportError:
        raise UsageError("cmc: --ray needs Ray: pip install 'cmc[ray]' (or pip install "
                         "ray)") from None
    return ray


_STARTED: list = []        # the address this process connected to (and so disconnects)


def disconnect() -> None:
    ray = _ray()
    if _STARTED and ray.is_initialized():
        _STARTED.clear()
        ray.shutdown()


def connect(address: str):
    """ray.init for --ray ADDRESS: `local` starts a Ray instance for the run, `auto` joins
    the cluster this machine belongs to, anything else (ray://HOST:PORT) is passed on."""
    ray = _ray()
    if not ray.is_initialized():
        _STARTED.append(address)
        if address == "local":
            ray.init(include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    return ray


class _Handled:
    """The actor: a handler of parallel.py's, and the host it runs on."""

    def __init__(self, handler, args):
        self.handler = handler(*args)

    def handle(self, job):
        return self.handler.handle(job)

    def host(self) -> str:
        return socket.gethostname()

    def close(self) -> None:
        self.handler.close()


class RayWorker:
    """parallel._Worker's interface over a Ray actor: `send` returns the box the
    answer lands in; answers are read in the order the jobs were sent."""

    DIED = _Worker.DIED

    def __init__(self, ray, index: int, handler, args: tuple, owner):
        self.ray, self.index, self.owner = ray, index, owner
        self.actor = ray.remote(_Handled).options(num_cpus=1).remote(handler, args)
        self.waiting: deque = deque()   # (box, future, job) of the jobs sent, in order
        self.drop: list = []
        self.host = "?"

    def send(self, message, box: list | None = None) -> list:
        box = [] if box is None else box
        self.waiting.append((box, self.actor.handle.remote(message), message))
        return box

    def read_one(self) -> None:
        box, future, message = self.waiting[0]
        try:
            answer = self.ray.get(future)
        except self.ray.exceptions.RayActorError:
            orphans = [(b, m) for b, _, m in self.waiting]
            self.waiting.clear()
            self.owner._lost(self, orphans)
            return
        self.waiting.popleft()
        box.append(answer)

    def died(self) -> EngineLimit:
        return EngineLimit(f"Ray actor {self.index} (on {self.host}) died (its machine "
                           "lost, killed, or out of memory?); the search cannot go on "
                           "without its answers")

    def stop(self) -> None:
        try:
            self.ray.get(self.actor.close.remote(), timeout=60)
        except Exception:       # noqa: BLE001 — it may be dead already
            pass
        self.ray.kill(self.actor)


class _OnRay:
    ray_address = "local"

    def _lost(self, dead: RayWorker, orphans: list) -> None:
        """An actor died: its unanswered jobs go to the live ones (without the list of
        snapshots to drop, which were the dead one's), the worlds it kept are
        forgotten. With none left, every box says so (the search ends, exit 3)."""
        self.pool.remove(dead)
        for fp in [fp for fp, w in getattr(self, "holder", {}).items() if w is dead]:
            del self.holder[fp]
        print(f"cmc: Ray actor {dead.index} (on {dead.host}) was lost; its "
              f"{len(orphans)} unanswered job{'s' if len(orphans) != 1 else ''} went to the "
              f"{len(self.pool)} left", file=sys.stderr)
        if not self.pool:
            self.pool.append(dead)              # for stopping; its boxes say it died
            for box, _ in orphans:
                box.append(dead.DIED)
            return
        for box, message in orphans:
            if isinstance(message, tuple) and len(message) == 7:    # FastHandler's: drop
                message = message[:6] + ([],)
            live = min(self.pool, key=lambda w: (len(w.waiting), w.index))
            live.send(message, box)
            self._moved[id(box)] = live

    def _result(self, handle):
        job = getattr(handle, "job", None)          # --fast: note who now holds it
        moved = self._moved.pop(id(job.box), None) if job is not None else None
        if moved is not None:
            job.worker = moved
        return super()._result(handle)

    def _start_pool(self, target, handler, args_of) -> list:
        ray = connect(self.ray_address)
        self._moved: dict = {}
        pool = [RayWorker(ray, i, handler, args_of(i), self) for i in range(self.workers)]
        for w, host in zip(pool, ray.get([w.actor.host.remote() for w in pool])):
            w.host = host
        return pool

    def _stop_pool(self, pool: list) -> None:
        try:
            for w in pool:
                w.stop()
        finally:
            disconnect()

    def _ready(self, busy: list) -> list:
        busy = [w for w in busy if w in self.pool]
        heads = [w.waiting[0][1] for w in busy]
        done, _ = busy[0].ray.wait(heads, num_returns=1)
        return [busy[heads.index(done[0])]]


class RayBreadthFirst(_OnRay, ParallelBreadthFirst):
    """--ray --no-fast: replay workers as actors."""


class FastRayBreadthFirst(_OnRay, FastParallelBreadthFirst):
    """--ray (copying): workers that keep snapshots, as actors."""
