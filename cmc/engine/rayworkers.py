"""`--ray ADDRESS`: the workers of `--workers N` as Ray actors (issue 18, first part).

`RayPool` is the executor of pool.py with another transport: the parent keeps the
visited map, the queue and the properties, hands out the same self-contained jobs and
merges the answers in the order the jobs were made, so counts and counterexamples are
one worker's. Only the transport differs: a job goes to an actor's `handle` (which runs the same
ReplayHandler or FastHandler a worker process runs) and its answer comes back as a
Ray future, waited for with `ray.wait`. Ray is imported only here, and only when
`--ray` is given (`pip install 'cmc[ray]'`).

An actor that dies (its machine lost, killed) costs only the jobs it had not answered:
every job carries its world's path, so they go to the live actors, which replay the
worlds (the snapshots the dead one kept are gone), and since answers are still merged
in the order the jobs were made, the result is unchanged. Only with no actor left does
the search end (exit 3).

At start each actor checks its machine (cmc/machines.py: cmc's version, the programs
and files the commands name, by content; a scratch directory at the head's path where
there is none): what is missing is a usage error naming the machine. Each answer
carries the seconds its job took, so the head keeps every machine's account (the
Progress lines and the JSON report's `workers`). docs/distributed.md says how to run
it on a real cluster.
"""
from __future__ import annotations

import socket
import sys
from collections import deque

from ..errors import UnsupportedMachine, UsageError
from .model import EngineLimit
from .parallel import Accounted, _Worker, timed
from .pool import WorkerPool


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

    def __init__(self, handler, args, machine_check):
        self.handler = handler(*args)
        self.machine_check = machine_check

    def check(self) -> tuple[str, list[str]]:
        """The start-up check of this machine (cmc/machines.py): its host name, and
        what it lacks to run the model."""
        if self.machine_check is None:
            return socket.gethostname(), []
        return self.machine_check.run()

    def pin(self, rank: int) -> None:
        if self.machine_check is not None:
            self.machine_check.pin_here(rank)

    def handle(self, job):
        answer, seconds = timed(self.handler, job)
        return _here(answer), seconds

    def close(self) -> None:
        try:
            self.handler.close()
        finally:
            if self.machine_check is not None:
                self.machine_check.close()


def _here(answer):
    """A job's answer, with a machine error (no seccomp user notification, say) naming
    this machine, since the head raises it as its own."""
    last = answer[-1] if isinstance(answer, list) and answer else answer
    if isinstance(last, tuple) and last[0] == "raise" and \
            isinstance(last[1], UnsupportedMachine):
        named = ("raise", UnsupportedMachine(f"on the Ray node {socket.gethostname()}: "
                                             f"{last[1]}"))
        return answer[:-1] + [named] if isinstance(answer, list) else named
    return answer


class RayWorker(Accounted):
    """parallel._Worker's interface over a Ray actor: `send` returns the box the
    answer lands in; answers are read in the order the jobs were sent."""

    DIED = _Worker.DIED

    def __init__(self, ray, index: int, handler, args: tuple, owner):
        self.ray, self.index, self.owner = ray, index, owner
        self.actor = ray.remote(_Handled).options(num_cpus=1).remote(handler, args,
                                                                     owner.machine_check)
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
            answer, seconds = self.ray.get(future)
        except (self.ray.exceptions.RayActorError, self.ray.exceptions.ObjectLostError):
            # the actor died, or its machine did with answers held in its object store
            orphans = [(b, m) for b, _, m in self.waiting]
            self.waiting.clear()
            self.owner.lost(self, orphans)
            return
        self.waiting.popleft()
        self.account(answer, seconds)
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


class RayPool(WorkerPool):
    """--ray ADDRESS: the pool's workers as Ray actors, each checked on its machine
    (`machine_check`: what each machine must have, cmc/machines.py, from check.py)."""

    def __init__(self, workers: int, worker_model, ray_address: str = "local",
                 machine_check=None):
        super().__init__(workers, worker_model)
        self.ray_address = ray_address
        self.machine_check = machine_check

    def lost(self, dead: RayWorker, orphans: list) -> None:
        """An actor died: its unanswered jobs go to the live ones (without the list of
        snapshots to drop, which were the dead one's), the worlds it kept are
        forgotten. With none left, every box says so (the search ends, exit 3)."""
        self.pool.remove(dead)
        dead.lost = True
        try:
            dead.ray.kill(dead.actor)           # if only its answers were lost
        except Exception:       # noqa: BLE001 — it is dead already
            pass
        self.jobs.forget(dead)
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
            live = self.least_busy()
            live.send(message, box)
            self.moved[id(box)] = live

    def start(self, handler, args_of) -> list:
        """The actors, each checked on its machine (docs/distributed.md): a machine
        that lacks cmc, a program or a file is a usage error naming it and them."""
        ray = connect(self.ray_address)
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if self.workers > cpus:         # the actors past that would wait for ever
            disconnect()
            raise UsageError(f"cmc: --ray: --workers {self.workers} needs {self.workers} "
                             f"CPUs (one per actor); the Ray cluster has {cpus}")
        pool = [RayWorker(ray, i, handler, args_of(i), self) for i in range(self.workers)]
        try:
            for w in pool:
                w.checked = w.actor.check.remote()
            faults = []
            for w in pool:
                try:
                    w.host, problems = ray.get(w.checked)
                except ray.exceptions.RayError as e:
                    first = next((line for line in str(e).splitlines()
                                  if "Error" in line), str(e).splitlines()[0])
                    faults.append(f"Ray actor {w.index} could not start: {first.strip()}")
                    continue
                faults += [f"Ray actor {w.index} on {w.host}: {p}" for p in problems]
            ranks: dict[str, int] = {}      # each actor's place among those on its host
            pinned = []
            for w in pool:
                if w.host != "?":
                    pinned.append(w.actor.pin.remote(ranks.setdefault(w.host, 0)))
                    ranks[w.host] += 1
            ray.get(pinned)
            if faults:
                raise UsageError("cmc: --ray: not every machine can run this model:\n  "
                                 + "\n  ".join(faults) + "\nEvery machine needs cmc (the "
                                 "same version), the node programs and the files their "
                                 "commands name, at the same paths as here "
                                 "(docs/distributed.md).")
        except BaseException:
            self.stop(pool)
            raise
        return pool

    def stop(self, pool: list) -> None:
        try:
            for w in pool:
                w.stop()
        finally:
            disconnect()

    def ready(self, busy: list) -> list:
        busy = [w for w in busy if w in self.pool]
        heads = [w.waiting[0][1] for w in busy]
        done, _ = busy[0].ray.wait(heads, num_returns=1)
        return [busy[heads.index(done[0])]]

