"""`--ray ADDRESS`: the workers of `--workers N` as Ray actors (issue 18, first part).

The search is parallel.py's, unchanged: the parent keeps the visited map, the queue
and the properties, hands out the same self-contained jobs and merges the answers in
the order the jobs were made, so counts and counterexamples are one worker's. Only
the transport differs: a job goes to an actor's `handle` (which runs the same
ReplayHandler or FastHandler a worker process runs) and its answer comes back as a
Ray future, waited for with `ray.wait`. Ray is imported only here, and only when
`--ray` is given (`pip install 'cmc[ray]'`).

Not yet: a dead actor's jobs replayed by another (today its death ends the search
with an engine error, as a dead worker process does), per-machine progress, and the
check that every machine has the model's binaries (docs/design.md, the plan).
"""
from __future__ import annotations

import socket
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

    def __init__(self, ray, index: int, handler, args: tuple):
        self.ray, self.index = ray, index
        self.actor = ray.remote(_Handled).options(num_cpus=1).remote(handler, args)
        self.waiting: deque = deque()       # (box, future) of the jobs sent, in order
        self.drop: list = []
        self.host = "?"

    def send(self, message) -> list:
        box: list = []
        self.waiting.append((box, self.actor.handle.remote(message)))
        return box

    def read_one(self) -> None:
        box, future = self.waiting.popleft()
        try:
            box.append(self.ray.get(future))
        except self.ray.exceptions.RayActorError:
            box.append(self.DIED)
            for other, _ in self.waiting:
                other.append(self.DIED)
            self.waiting.clear()

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

    def _start_pool(self, target, handler, args_of) -> list:
        ray = connect(self.ray_address)
        pool = [RayWorker(ray, i, handler, args_of(i)) for i in range(self.workers)]
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
        heads = [w.waiting[0][1] for w in busy]
        done, _ = busy[0].ray.wait(heads, num_returns=1)
        return [busy[heads.index(done[0])]]


class RayBreadthFirst(_OnRay, ParallelBreadthFirst):
    """--ray --no-fast: replay workers as actors."""


class FastRayBreadthFirst(_OnRay, FastParallelBreadthFirst):
    """--ray (copying): workers that keep snapshots, as actors."""
