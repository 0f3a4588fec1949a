"""A node: one program under check, its processes, and what cmc keeps for it:
launching it, killing and reaping every process of it, its logical clocks and random
stream, the state it writes on fd 3 and fd 193. Running it -- its threads and
processes one at a time, until it is quiescent -- is tasks.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import time

from ...errors import TargetError, UnsupportedMachine
from ...interrupts import interrupts_held
from ..linux import _native
from ..linux.abi import VFD_BASE
from ..world.disk import Disk
from ..linux.filter import PASS_FLAGS, PASS_NEEDLES, PASS_OPEN, build_filter
from .tasks import COUNTERS, Tasks, reap_orphans
from .threads import Futexes, Process, Thread

# SPEC §8: CLOCK_REALTIME starts at 2026-01-01T00:00:00Z, CLOCK_MONOTONIC at 1000 s.
REALTIME_START_NS = 1767225600 * 10**9
MONOTONIC_START_NS = 1000 * 10**9

_FILTERS = {False: build_filter(), True: build_filter(disk=True)}   # with a page cache?
_native.pass_through(PASS_OPEN, PASS_FLAGS, PASS_NEEDLES)

_DEVNULL: list[int] = []

# The longest line a node may write on fd 3 or 193: each world keeps its state.
STATE_LINE_MAX = 1 << 20


def _devnull() -> tuple[int, int]:
    """/dev/null for reading and for writing, opened once (close-on-exec)."""
    if not _DEVNULL:
        _DEVNULL.extend((os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC),
                         os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)))
    return _DEVNULL[0], _DEVNULL[1]


# The RLIMIT_NOFILE a program is shown at launch (calls.py): the kernel's own
# defaults (INR_OPEN_CUR, INR_OPEN_MAX), the same on every machine, and above the
# virtual descriptors (from VFD_BASE), which are numbered below the soft limit.
NOFILE_START = (1024, 4096)

# --det launches a world a second time with an extra environment variable, which
# moves the initial stack, and so every stack address, by about 13.6 KiB: a program
# whose behaviour depends on memory it never wrote (an uninitialised variable, a
# stale pointer) then behaves differently, and cmc reports nondeterminism instead of
# counts that depend on the size of the environment. Shift k (1, 2, 3; the engine
# varies it with the step) adds 16·(k-1) bytes, so that the shifts differ in their
# low bits too: a program that reads only a few bits of an old address is caught
# by one of them.
DET_PAD_NAME = "CMC_DET_PAD"


def det_pad(shift: int) -> str:
    return "x" * (13635 + 16 * (shift - 1))




class Tap:
    """A seccomp listener. A node's copies made by --fast (cmc/kernel/fork.py) share
    the listener of the process they were forked from, so it is closed when its
    last process is gone, and a notification is taken for the process it came
    from (`pids`: every process on it; `stash`: notifications taken early)."""

    def __init__(self, fd: int, pid: int):
        self.fd = fd
        self.pids = {pid}
        self.stash: dict[int, object] = {}

    def release(self, pid: int) -> None:
        self.pids.discard(pid)
        self.stash.pop(pid, None)
        if not self.pids and self.fd >= 0:
            fd, self.fd = self.fd, -1      # forgotten first: never closed twice
            os.close(fd)

    def recv_for(self, pid: int, timeout_s: float):
        """The next notification of process pid, within timeout_s, else None."""
        if pid in self.stash:
            return self.stash.pop(pid)
        deadline = time.monotonic() + timeout_s
        p = select.poll()
        p.register(self.fd, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not p.poll(int(left * 1000) + 1):
                return None
            try:
                n = _native.recv(self.fd)
            except OSError:
                return None
            if n is None:
                continue
            if n.pid == pid:
                return n
            self.stash[n.pid] = n


class Node(Tasks):
    def __init__(self, cluster, index: int, name: str, argv: list[str], cwd: str):
        self.cluster = cluster
        self.index = index
        self.name = name
        self.argv = argv
        self.cwd = cwd
        self.incarnation = 0
        self.crashes = 0
        self.elapsed_ns = 0            # logical time since first launch
        self.ever_wrote_state = False
        self.history: list = []        # input history (SPEC §3), for nodes without fd-3 state
        self.durable = None
        self.disk = Disk(cluster.spec.disk, cwd)   # its files' page cache (disk.py)
        self.pid = 0
        self.listener = -1
        self.tap: Tap | None = None
        self.alive = False
        # Copying (fork.py): the Lease this record shares the node's processes and
        # directory by, else None; `root`, the world root its own directory is in.
        self.lease = None
        self.root: str | None = None
        self._reset_incarnation()

    # -- per-incarnation state -----------------------------------------------
    def _reset_incarnation(self) -> None:
        self.volatile = None
        self.volatile_emitted = False
        self.bufs = {3: bytearray(), 193: bytearray()}
        # pid -> Process (threads.py), in creation order (0: the launched program);
        # each has its descriptor table, epoll instances, futex queues and limit.
        self.procs: dict[int, Process] = {}
        self.next_proc = 0             # the index of the next process seen
        self.forking = None            # (Process, tid) that forked, the child not seen yet
        self.reapable: list[int] = []  # pids of processes gone that cmc may have to reap
        self.ends = 0                  # processes of the node that ended (tasks.py)
        self.pgid = 0                  # the node's process group: all its processes
        self.shared_futexes = Futexes()  # futexes not private to one process
        # tid -> Thread (threads.py), in creation order: a thread is added when first
        # seen, with the next index, and never moved.
        self.threads: dict[int, Thread] = {}
        self.next_thread = 0           # the index of the next thread seen
        self.clones = 0                # threads created and not yet seen
        self.clone_parent = 0          # the tid that created the last one
        self.clone_ctid = 0            # its CLONE_CHILD_CLEARTID address
        self._yields = 0               # sched_yield calls, to order those who gave way
        self.next_ino = 0              # st_ino of the next virtual socket
        self.moved = None              # bytes the current call moved (for the call log)
        self.random_offset = 0
        self.exec_count = 0

    nofile_start = NOFILE_START

    @property
    def main(self) -> Process | None:
        """The process cmc launched (or, after it exited, the oldest left)."""
        return next(iter(self.procs.values()), None)

    def process(self, tid: int) -> Process:
        """The process thread tid belongs to."""
        return self.threads[tid].proc

    # -- process ---------------------------------------------------------------
    def launch(self) -> None:
        self.own()                       # its directory, when it is another world's too
        self._reset_incarnation()
        out = self.cluster.output_path(self)
        null_in, null_out = _devnull()
        with open(out + ".stdout", "ab") as so, open(out + ".stderr", "ab") as se:
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "LANG": "C",
                "HOME": self.cwd,
                "CMC_NODE": str(self.index),
                "CMC_INCARNATION": str(self.incarnation),
            }
            if self.cluster.shift:
                env[DET_PAD_NAME] = det_pad(self.cluster.shift)
            fds = [null_in, so.fileno(), se.fileno(), null_out, null_out]
            with interrupts_held():       # no process started and not recorded
                try:
                    pid, listener, keepalive = _native.spawn(
                        self.argv[0], self.argv, env, self.cwd, fds,
                        _FILTERS[self.disk.on], VFD_BASE)
                except OSError as e:
                    raise UnsupportedMachine(
                        f"cannot start node {self.name} under the seccomp filter: "
                        f"{e.strerror} (cmc needs Linux >= 5.9 with seccomp user "
                        "notification)") from None
                self._attach(pid, Tap(listener, pid))
        COUNTERS["launches"] += 1
        self.run(None)        # answers the first execve: only then may keepalive go
        del keepalive

    def __getstate__(self) -> dict:
        """A copy of a node's record (fork.py) shares the process with the original
        by a lease: without a poller of its own (`_take_over`, `_attach` make one)."""
        state = dict(self.__dict__)
        state.pop("_poller", None)
        return state

    def own(self, keep_process: bool = True) -> None:
        """Before the node runs, crashes or starts again here: take it from the
        worlds it is lent to (fork.Lease)."""
        if self.lease is not None:
            self.lease.take(self, keep_process)

    def _take_over(self, notif) -> None:
        """The lease's processes are this record's now (Lease.take): watch their ends;
        `notif`: the one thread's held call as it now is (a fork moves it)."""
        self._poller = select.poll()
        self._poller.register(self.listener, select.POLLIN)
        for proc in self.procs.values():
            proc.pidfd = os.pidfd_open(proc.pid)
            self._poller.register(proc.pidfd, select.POLLIN)
        if notif is not None:
            self.rebind(notif)

    def _forget_lent(self) -> None:
        """The lease's processes stay with the worlds still using it: this record
        has none (it is closed, or the node crashes here)."""
        self.pid = self.pgid = 0
        self.tap = None
        self.listener = -1
        self.alive = False
        self.procs = {}
        self.threads = {}

    def give_back(self) -> bool:
        """Closing: True when the node's processes are this record's to end (its own,
        or a lease of which it was the last user)."""
        return self.lease is None or self.lease.give_back(self)

    def _attach(self, pid: int, tap: Tap) -> None:
        """Take process pid, on listener tap, as this node's process. Its end is
        seen on a pidfd: a listener shared with copies hangs up only when all
        of them are gone."""
        self.pid = self.pgid = pid
        self.tap = tap
        self.listener = tap.fd
        tap.pids.add(pid)
        _native.guard_watch(pid)
        self.alive = True
        proc = self.main                               # a copy's: the original's
        if proc is None:
            proc = Process(self, 0, pid)
            self.next_proc = 1
        proc.pid = pid
        proc.pidfd = os.pidfd_open(pid)
        self.procs = {pid: proc}
        main = next(iter(self.threads.values()), None)
        if main is None:
            main = Thread(0, pid, proc)
            self.next_thread = 1
        main.tid, main.proc = pid, proc
        self.threads = {pid: main}
        self._poller = select.poll()
        self._poller.register(self.listener, select.POLLIN)
        self._poller.register(proc.pidfd, select.POLLIN)

    def _detach(self) -> None:
        """Forget every process of the node (they are gone)."""
        for proc in list(self.procs.values()):
            self._forget(proc)
        if self.pgid:
            _native.guard_forget(self.pgid)
        self.tap = None
        self.pid = self.pgid = 0
        self.listener = -1
        self.alive = False
        self.threads = {}

    def _forget(self, proc: Process) -> None:
        """Process proc is gone: its threads, its listener reference and its pidfd."""
        self.procs.pop(proc.pid, None)
        for t in [t for t in self.threads.values() if t.proc is proc]:
            del self.threads[t.tid]
        if self.tap is not None:
            self.tap.release(proc.pid)
        if proc.pidfd >= 0:
            fd, proc.pidfd = proc.pidfd, -1
            try:
                self._poller.unregister(fd)
            except (KeyError, AttributeError):
                pass
            os.close(fd)

    def kill(self) -> None:
        """SIGKILL every process of the node (a CRASH, or cleanup) and reap them:
        whole, an interrupt waits until it is done (cmc/interrupts.py)."""
        with interrupts_held():
            self.send_kill()
            self.reap()

    def send_kill(self) -> None:
        """SIGKILL the node's process group (every process of it), without waiting
        for their end."""
        if self.pgid:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in self.procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def reap(self) -> None:
        """Wait for the end of every process of the node: the launched one is cmc's
        child; the others become cmc's once their parents are gone (cmc is their
        subreaper), and cmc reaps those too."""
        if self.pid:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        others = [p for p in self.procs if p != self.pid] + self.reapable
        self.reapable = []
        self._detach()
        reap_orphans(others, self.cluster.watchdog_s)

    # -- memory (of the launched process; a handler's is its caller's) -----------
    def read(self, addr: int, length: int) -> bytes | None:
        return self.main.read(addr, length)

    def write(self, addr: int, data: bytes) -> bool:
        return self.main.write(addr, data)

    # -- logical time and randomness -----------------------------------------
    def realtime_ns(self) -> int:
        return REALTIME_START_NS + self.elapsed_ns

    def monotonic_ns(self) -> int:
        return MONOTONIC_START_NS + self.elapsed_ns

    def random_bytes(self, n: int) -> bytes:
        """A deterministic stream per (node, incarnation)."""
        out = bytearray()
        while len(out) < n:
            block = self.random_offset // 64
            skip = self.random_offset % 64
            h = hashlib.blake2b(f"cmc/{self.index}/{self.incarnation}/{block}".encode(),
                                digest_size=64).digest()
            take = h[skip:skip + n - len(out)]
            out += take
            self.random_offset += len(take)
        return bytes(out)

    # -- fd 3 and fd 193 -------------------------------------------------------
    def take_state_bytes(self, fd: int, data: bytes) -> None:
        buf = self.bufs[fd]
        buf += data
        while True:
            nl = buf.find(b"\n")
            if nl < 0 and len(buf) > STATE_LINE_MAX or nl > STATE_LINE_MAX:
                raise TargetError(self.cluster.where(self) +
                                  f"wrote a line of more than {STATE_LINE_MAX} bytes on fd {fd} "
                                  f"(it starts {bytes(buf[:80])!r}); a state line is kept in "
                                  "every world, so it is at most 1 MiB "
                                  "(docs/target-contract.md)")
            if nl < 0:
                return
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            try:
                value = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise TargetError(self.cluster.where(self) +
                                  f"wrote a line that is not JSON on fd {fd}: {line[:200]!r}") from None
            if fd == 3:
                self.volatile = value
                self.volatile_emitted = True
                self.ever_wrote_state = True
            else:
                self.durable = value
