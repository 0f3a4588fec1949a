"""A node: one program under check and what cmc keeps for it -- launching it, its
logical clocks and random stream, the state it writes on fd 3 and fd 193, its disk
model -- and, as a part it holds (`tasks`, one per incarnation), its processes and
threads and the loop that runs them one at a time until the node is quiescent
(scheduler.py). A copy of a world lends the node's processes to both worlds
(fork.py): `take_over`, `adopt` and `let_go` are how a lease hands them over.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os

from ...errors import EngineError, NotForkable, TargetError, UnsupportedMachine
from ...interrupts import interrupts_held
from ..linux import _native
from ..linux.abi import VFD_BASE
from ..world import clock
from ..world.disk import Disk
from ..linux.filter import PASS_FLAGS, PASS_NEEDLES, PASS_OPEN, build_filter
from .scheduler import COUNTERS, MONOTONIC_START_NS, REALTIME_START_NS, Scheduler
from .tap import Tap
from .zygote import Zygotes, zygote_stop


# with a page cache? with stdin and stdout cmc's (a Maelstrom node)?
_FILTERS = {(disk, stdio): build_filter(disk=disk, stdio=stdio)
            for disk in (False, True) for stdio in (False, True)}
_native.pass_through(PASS_OPEN, PASS_FLAGS, PASS_NEEDLES)

_DEVNULL: list[int] = []

# Under time virtual, a thread that reads a clock this many times in a row with no other
# call between is polling it, and sees it move (Node.polls). A runtime reads the
# clock a few times in a row on its own (Go's scheduler: two or three), and how many
# times may depend on what cmc does not control yet (the TSC): below this, the count
# changes nothing, so the worlds do not depend on it.
POLLING = 8

# The longest line a node may write on fd 3 or 193: each world keeps its state.
STATE_LINE_MAX = 1 << 20


def _devnull() -> tuple[int, int]:
    """/dev/null for reading and for writing, opened once (close-on-exec)."""
    if not _DEVNULL:
        _DEVNULL.extend((os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC),
                         os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)))
    return _DEVNULL[0], _DEVNULL[1]


# The RLIMIT_NOFILE a program is shown at launch (calls/limits.py): the kernel's own
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




class Node:
    def __init__(self, setting, index: int, name: str, argv: list[str], cwd: str):
        self.setting = setting         # what it is handed of its world (world/setting.py)
        self.index = index
        self.name = name
        self.argv = argv
        self.cwd = cwd
        self.incarnation = 0
        self.crashes = 0
        self.elapsed_ns = 0            # logical time since first launch
        self.ever_wrote_state = False
        self.history: list = []        # input history, for nodes without fd-3 state
                                       # (docs/target-contract.md, "Worlds and actions")
        self.durable = None
        self.disk = Disk(setting.spec.disk, cwd)   # its files' page cache (disk.py)
        # Copying (fork.py): the Lease this record shares the node's processes and
        # directory by, else None; `root`, the world root its own directory is in.
        self.lease = None
        self.root: str | None = None
        # Whether its stdin and stdout are cmc's (a Maelstrom node): each launch, before
        # the program runs, the cluster gives fds 0 and 1 to it (`open_stdio`).
        self.stdio = False
        self._reset_incarnation()

    # -- per-incarnation state -----------------------------------------------
    def _reset_incarnation(self) -> None:
        self.volatile = None
        self.volatile_emitted = False
        self.bufs = {3: bytearray(), 193: bytearray()}
        self.tasks = Scheduler(self)   # its processes and threads, and running them
        self.next_ino = 0              # st_ino of the next virtual socket
        self.spin = (0, 0, 0)          # (thread, reads, buffer): a thread polling the clock
        self.random_offset = 0
        self.exec_count = 0

    nofile_start = NOFILE_START

    @property
    def own_pids(self) -> bool:
        """Whether each launch of this node numbers its processes in a PID namespace of
        its own (`machine pids private`, or a start that made a process group)."""
        spec = self.setting.spec
        return spec.private_pids or self.index in spec.own_pids

    @property
    def net(self):
        """The network of the world this node is in (its setting's)."""
        return self.setting.net

    def where(self) -> str:
        """The start of a message about this node: its name and the step being taken."""
        return self.setting.where(self)

    # -- process ---------------------------------------------------------------
    def launch(self) -> None:
        self.own()                       # its directory, when it is another world's too
        zygotes = Zygotes.of(self.setting)                # copying (--fast)
        key = zygotes.key(self) if zygotes is not None else None
        zygote = zygotes.find(key) if zygotes is not None else None
        if zygote is not None and self._start_from(zygotes, key, zygote):
            return                       # the start this key makes, run once (zygote.py)
        self._reset_incarnation()
        out = self.setting.output_path(self)
        null_in, null_out = _devnull()
        with open(out + ".stdout", "ab") as so, open(out + ".stderr", "ab") as se:
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "LANG": "C",
                "HOME": self.cwd,
                "CMC_NODE": str(self.index),
                "CMC_INCARNATION": str(self.incarnation),
            }
            if self.setting.shift:
                env[DET_PAD_NAME] = det_pad(self.setting.shift)
            fds = [null_in, so.fileno(), se.fileno(), null_out, null_out]
            with interrupts_held():       # no process started and not recorded
                try:
                    pid, listener, keepalive = _native.spawn(
                        self.argv[0], self.argv, env, self.cwd, fds,
                        _FILTERS[self.disk.on, self.stdio], VFD_BASE,
                        self.own_pids)
                except OSError as e:
                    if self.own_pids and e.errno == errno.EPERM:
                        raise UnsupportedMachine(
                            f"cannot start node {self.name} in a PID namespace of its own "
                            "(machine pids private): making one needs CAP_SYS_ADMIN "
                            "(run cmc as root)") from None
                    raise UnsupportedMachine(
                        f"cannot start node {self.name} under the seccomp filter: "
                        f"{e.strerror} (cmc needs Linux >= 5.9 with seccomp user "
                        "notification)") from None
                self.tasks.attach(pid, Tap(listener, pid))
        if self.stdio:
            self.net.open_stdio(self)
        COUNTERS["launches"] += 1
        if zygotes is not None and zygotes.wanted(key):
            self.tasks.pausing = zygote_stop    # at the end of its start: kept (zygote.py)
            _native.watch_start(self.cwd)
        try:
            self.tasks.run(None)  # answers the first execve: only then may keepalive go
        finally:
            self.tasks.pausing = None
            _native.watch_start(None)
        del keepalive
        paused, self.tasks.paused = self.tasks.paused, None
        if paused is None:
            return
        last = self.tasks.last_answered()
        zygote = zygotes.make(self, key, last)
        if zygote is None:
            self.tasks.go_on(last)
        elif not self._start_from(zygotes, key, zygote):
            for stream in (".stdout", ".stderr"):   # its start's output: printed again
                os.truncate(out + stream, 0)
            self.launch()

    def _start_from(self, zygotes, key: tuple, zygote) -> bool:
        """This incarnation forked from `zygote`, the one of `key`, and on; False when
        the fork fails (the key is launched from then on: Zygotes.drop)."""
        try:
            zygote.start(self)
        except (NotForkable, EngineError, OSError) as e:
            zygotes.drop(key, str(e))
            if self.tasks.alive:
                self.kill()
            return False
        COUNTERS["zygote starts"] += 1
        self.tasks.go_on(zygote.last)
        return True

    @property
    def alive(self) -> bool:
        """Whether a process of the node runs (it was launched and has not ended)."""
        return self.tasks.alive

    def kill(self) -> None:
        """SIGKILL every process of the node (a CRASH, or cleanup) and reap them."""
        self.tasks.kill()

    def own(self, keep_process: bool = True) -> None:
        """Before the node runs, crashes or starts again here: take it from the
        worlds it is lent to (fork.Lease)."""
        if self.lease is not None:
            self.lease.take(self, keep_process)

    def give_back(self) -> bool:
        """Closing: True when the node's processes are this record's to end (its own,
        or a lease of which it was the last user)."""
        return self.lease is None or self.lease.give_back(self)

    # -- how a lease (fork.py) hands the node's processes over ----------------------
    def take_over(self, held: dict) -> None:
        """The lent processes are this record's now, as they are (the lease's last
        user); `held`: each thread's held call as it now is (tid -> notification)."""
        self.tasks.take_over(held)

    def adopt(self, pid: int, tap: Tap, copies: dict[int, int]) -> None:
        """Process pid, a fork of the lent one on the same listener, is this record's;
        `copies`: the tid of each thread's copy in it (original tid -> copy's)."""
        self.tasks.attach(pid, tap, copies)

    def let_go(self) -> None:
        """The lent processes stay with the worlds still using them: this record has
        none (its world is closed, or the node crashes in it)."""
        self.tasks.let_go()

    # -- logical time and randomness -----------------------------------------
    def now_ns(self) -> int:
        """The node's logical time since its first launch: its own (time async: it
        moves only on its FIREs) or the cluster's one clock (time virtual)."""
        return self.net.clock if self.setting.virtual else self.elapsed_ns

    def realtime_ns(self) -> int:
        return REALTIME_START_NS + self.now_ns()

    def monotonic_ns(self) -> int:
        return MONOTONIC_START_NS + self.now_ns()

    def pass_time(self, ns: int) -> None:
        """A call of the node takes `ns` of its time (an expired futex deadline, a read
        of a clock that is being polled): under time virtual, the cluster's clock
        moves, never past a deadline or a message's latency bound (world/clock.py)."""
        if self.setting.virtual:
            clock.advance(self.setting, ns)
        else:
            self.elapsed_ns += ns

    def polls(self, tid: int, reads_clock: bool, buf: int = 0) -> None:
        """Time virtual, thread tid makes a notified call (dispatch.py). A thread that
        reads a clock again and again into the same buffer (`buf`: a loop's) with no
        other call between sees it move: from the POLLING-th read in a row, each twice
        as far as the one before, from 1 us (so polling for an instant takes a number of
        reads that grows with the logarithm of the wait, not with the wait). Any other
        call, or a read into another buffer, ends the run: CPython reads the clock
        dozens of times while it imports modules, from many frames, between file calls
        that run natively, and is not polling it."""
        if not reads_clock:
            self.spin = (0, 0, 0)
            return
        who, n, last = self.spin
        n = n + 1 if who == tid and last == buf else 0
        self.spin = (tid, n, buf)
        if n >= POLLING:
            self.pass_time(1000 << min(n - POLLING, 40))

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
                raise TargetError(self.where() +
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
                raise TargetError(self.where() +
                                  f"wrote a line that is not JSON on fd {fd}: {line[:200]!r}") from None
            if fd == 3:
                self.volatile = value
                self.volatile_emitted = True
                self.ever_wrote_state = True
            else:
                self.durable = value
