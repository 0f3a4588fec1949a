"""A node: one program under check, its process, and what cmc keeps for it.

The process runs until it makes a notified call. `Node.run` answers calls that can
complete at once and stops at the first one that cannot: the node is then
*quiescent*, holding one pending notification that an environment action (a
delivery, a timeout firing, a reset) may complete later. A node whose process
has exited is quiescent too.

How the notification loop works, and why (`run`, `_next_notification`, `_answer`):

- *One listener, several processes.* A node's seccomp listener belongs to the
  filter, and a process forked from the node (a --fast copy, fork.py) runs under the
  same filter: its calls arrive on the same listener. So a notification is taken for
  the process it came from (`Notification.pid`); one of another process on the
  listener is put aside in the `Tap`'s stash, and that process takes it from there
  when it runs. The listener is closed when its last process is gone.
- *The end of a process is seen on a pidfd,* not on the listener: the listener hangs
  up (POLLHUP) only when every process under the filter has exited, which for a node
  with copies may be never while the node is long dead. Both are polled together,
  with the watchdog as the only timeout: a node that neither blocks nor exits within
  it is a target error, never a hang.
- *An answer to a target that is gone* fails with ENOENT: it was killed (with
  WAIT_KILLABLE_RECV a non-fatal signal waits for the answer instead of withdrawing
  the call, so a call is not re-issued behind cmc's back). `_answer` reports that as
  False and the loop collects the exit.
- *CONTINUE* lets the call run natively in the target (a file, a pipe, the exec
  that `calls.sys_execve` traces). Most opens never reach this loop: the C helper
  answers them with CONTINUE itself (filter.PASS_OPEN).
- *A call that cannot complete* is held: its notification stays unanswered, which
  keeps the target frozen inside the call until an environment action lets the
  handler's `attempt` complete it (`try_wake`) or its timeout fires (`fire`).
"""
from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import time

from ..errors import TargetError, UnsupportedMachine
from ..interrupts import interrupts_held
from . import _native
from .abi import VFD_BASE
from .answer import ANSWERED, CONTINUE, Block, Err
from .calllog import render
from .filter import PASS_NEEDLE, PASS_OPEN, build_filter
from .syscalls_x86_64 import NAME
from .threads import NATIVE_WAITS, Futexes, Thread, task_ids, task_state

# SPEC §8: CLOCK_REALTIME starts at 2026-01-01T00:00:00Z, CLOCK_MONOTONIC at 1000 s.
REALTIME_START_NS = 1767225600 * 10**9
MONOTONIC_START_NS = 1000 * 10**9

_FILTER = build_filter()
_native.pass_through(PASS_OPEN, PASS_NEEDLE)

_DEVNULL: list[int] = []


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


# Totals for benchmarks (experiments/bench.py): launches and notifications answered.
COUNTERS = {"launches": 0, "notifications": 0}


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


class Node:
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
        self.pid = 0
        self.listener = -1
        self.tap: Tap | None = None
        self.pidfd = -1
        self.alive = False
        self._reset_incarnation()

    # -- per-incarnation state -----------------------------------------------
    def _reset_incarnation(self) -> None:
        self.volatile = None
        self.volatile_emitted = False
        self.bufs = {3: bytearray(), 193: bytearray()}
        self.fds: dict[int, object] = {}
        self.cloexec: set[int] = set()
        self.epolls: dict[int, dict] = {}   # epoll fd -> {virtual fd: Registration}
        # tid -> Thread (threads.py), in creation order: a thread is added when first
        # seen, with the next index, and never moved.
        self.threads: dict[int, Thread] = {}
        self.next_thread = 0           # the index of the next thread seen
        self.clones = 0                # threads created and not yet seen
        self.clone_parent = 0          # the tid that created the last one
        self.clone_ctid = 0            # its CLONE_CHILD_CLEARTID address
        self.futexes = Futexes()
        self._yields = 0               # sched_yield calls, to order those who gave way
        self.next_ino = 0              # st_ino of the next virtual socket
        self.moved = None              # bytes the current call moved (for the call log)
        self.random_offset = 0
        self.exec_count = 0
        self.nofile = NOFILE_START

    # -- process ---------------------------------------------------------------
    def launch(self) -> None:
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
                        self.argv[0], self.argv, env, self.cwd, fds, _FILTER, VFD_BASE)
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
        """A copy of a node's record (fork.py) has no process until one is attached:
        the process, its listener and its pidfd stay with the original."""
        state = dict(self.__dict__)
        state.pop("_poller", None)
        state.update(pid=0, tap=None, listener=-1, pidfd=-1, alive=False)
        return state

    def _attach(self, pid: int, tap: Tap) -> None:
        """Take process pid, on listener tap, as this node's process. Its end is
        seen on a pidfd: a listener shared with copies hangs up only when all
        of them are gone."""
        self.pid = pid
        self.tap = tap
        self.listener = tap.fd
        tap.pids.add(pid)
        self.pidfd = os.pidfd_open(pid)
        self.alive = True
        main = next(iter(self.threads.values()), None)   # a copy's: the original's
        if main is None:
            main = Thread(0, pid)
            self.next_thread = 1
        main.tid = pid
        self.threads = {pid: main}
        self._poller = select.poll()
        self._poller.register(self.listener, select.POLLIN)
        self._poller.register(self.pidfd, select.POLLIN)

    def _detach(self) -> None:
        if self.tap is not None:
            self.tap.release(self.pid)
            self.tap = None
        if self.pidfd >= 0:
            fd, self.pidfd = self.pidfd, -1
            os.close(fd)
        self.pid = 0
        self.listener = -1
        self.alive = False
        self.threads = {}

    def kill(self) -> None:
        """SIGKILL the process (a CRASH, or cleanup) and reap it: whole, an interrupt
        waits until it is done (cmc/interrupts.py)."""
        with interrupts_held():
            self.send_kill()
            self.reap()

    def send_kill(self) -> None:
        """SIGKILL the process and its group, without waiting for its end."""
        if self.pid:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def reap(self) -> None:
        if self.pid:
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        self._detach()

    # -- memory ----------------------------------------------------------------
    def read(self, addr: int, length: int) -> bytes:
        try:
            return _native.read_mem(self.pid, addr, length)
        except OSError:
            return None

    def write(self, addr: int, data: bytes) -> bool:
        try:
            _native.write_mem(self.pid, addr, data)
            return True
        except OSError:
            return False

    def read_cstr(self, addr: int, limit: int = 4096) -> bytes | None:
        out = b""
        while len(out) < limit:
            chunk_len = min(256, 4096 - (addr + len(out)) % 4096)
            chunk = self.read(addr + len(out), chunk_len)
            if chunk is None:
                return None
            nul = chunk.find(b"\0")
            if nul >= 0:
                return out + chunk[:nul]
            out += chunk
        return out

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

    # -- running ---------------------------------------------------------------
    def run(self, outcome) -> None:
        """Answer a held call (`outcome`: (thread, result), or None) and run the
        node, one thread at a time, until no thread can run: each is held in a call
        that cannot complete yet, natively blocked or gone (the node is quiescent),
        or the process has exited."""
        # The watchdog is real time per step: a node that keeps making calls that
        # complete at once (a busy loop of EAGAINs) is caught as well as a silent one.
        self._deadline = time.monotonic() + self.cluster.watchdog_s
        while True:
            if outcome is not None and not self._resume(*outcome):
                return
            if not self._gather():
                return
            outcome = self._runnable()
            if outcome is None:
                return

    def _resume(self, thread: Thread, result) -> bool:
        """Answer thread's held call: it runs. False: the process is gone."""
        notif = thread.notif
        thread.notif = thread.block = None
        thread.yielded = 0
        if result is ANSWERED or self._answer(notif, result):
            return True
        self._wait_exit()
        return False

    def _gather(self) -> bool:
        """Wait until no thread of the node is running: each is held (cmc has its
        next call), natively blocked or gone, as the kernel shows them. A node of
        one thread simply waits for its next call. False: the process exited."""
        rounds = 0
        while True:
            loose = [t for t in self.threads.values() if t.notif is None]
            if not loose and not self.clones:
                return True
            single = len(self.threads) == 1 and not self.clones
            notif = self._next_notification(None if single else min(1 << rounds, 64) - 1)
            if notif is False:
                return False
            if notif is not None:
                self._arrive(notif)
                continue
            rounds += 1
            if not self._settled(loose):
                continue
            # A thread seen asleep may be asleep in a notified call whose notification
            # the kernel queued before it slept: look once more, after.
            notif = self._next_notification(0)
            if notif is False:
                return False
            if notif is None:
                return True
            self._arrive(notif)

    def _settled(self, loose: list[Thread]) -> bool:
        """Look at the threads not held, in the kernel: find the new one (after a
        clone), forget those gone; True when none is running."""
        if self.clones:
            new = [tid for tid in task_ids(self.pid) if tid not in self.threads]
            for tid in new:
                loose.append(self._add_thread(tid))
            parent = self.threads.get(self.clone_parent)
            if not new and (parent is None or parent.notif is not None):
                self.clones = 0          # the clone failed: no thread came of it
        running = False
        for t in loose:
            state, nr = task_state(self.pid, t.tid)
            if state in "XZ":
                self._thread_gone(t)
            elif t.exiting or state != "S" or nr not in NATIVE_WAITS:
                t.native = None
                running = True
            else:
                t.native = nr
        return not running and not self.clones

    def _arrive(self, notif) -> None:
        t = self.threads.get(notif.pid) or self._add_thread(notif.pid)
        t.notif, t.block, t.native = notif, None, None

    def _add_thread(self, tid: int) -> Thread:
        t = Thread(self.next_thread, tid, ctid=self.clone_ctid)
        self.next_thread += 1
        self.clone_ctid = 0
        self.clones = max(self.clones - 1, 0)
        self.threads[tid] = t
        return t

    def _thread_gone(self, t: Thread) -> None:
        """The kernel dropped the thread; what it does then for CLONE_CHILD_CLEARTID
        (clear the word, wake one waiter) cmc does for its own futex queues."""
        del self.threads[t.tid]
        if t.ctid:
            self.futexes.wake(t.ctid, 1)

    def _runnable(self):
        """The next thread to run and the answer to its call, or None: in creation
        order, the first whose call (dispatched now if it just arrived) completes;
        a thread that gave way (sched_yield) only when no other can run, the one
        that gave way first, first."""
        dispatch = self.cluster.dispatch
        held = [t for t in self.threads.values() if t.notif is not None]
        for t in held:
            if t.block is None:
                result = dispatch(self, t.notif)
                if not isinstance(result, Block):
                    return t, result
                t.block = result
            if t.yielded:
                continue
            done = t.block.attempt()
            if done is None and t.block.timeout_ns == 0:
                done = t.block.on_fire()
            if done is not None:
                return t, done
        gave_way = [t for t in held if t.yielded]
        if gave_way:
            t = min(gave_way, key=lambda t: t.yielded)
            return t, t.block.attempt()
        return None

    def thread_of(self, tid: int) -> Thread | None:
        return self.threads.get(tid)

    def give_way(self, tid: int) -> None:
        """Thread tid called sched_yield: it runs again only when no other thread
        can, after those that gave way before it."""
        self._yields += 1
        self.threads[tid].yielded = self._yields

    def blocked(self) -> list[Thread]:
        """The threads held in a blocked call, in creation order."""
        return [t for t in self.threads.values() if t.block is not None]

    def blocked_calls(self):
        """The node's blocked calls, for the fingerprint: (call, timeout) for a node
        of one thread; else, per thread in creation order, (index, call, timeout),
        or (index, the native call it sleeps in) or (index, None: running)."""
        if len(self.threads) == 1 and self.next_thread == 1:
            t = next(iter(self.threads.values()))
            return (t.block.what, t.block.timeout_ns) if t.block is not None else None
        out = []
        for t in self.threads.values():
            if t.block is not None:
                out.append((t.index, t.block.what, t.block.timeout_ns))
            else:
                out.append((t.index, NAME.get(t.native) if t.native is not None else None))
        return tuple(out)

    @property
    def pending(self):
        """(notification, Block) of a node of one thread held in a blocked call
        (what --fast copies); None otherwise."""
        if len(self.threads) != 1:
            return None
        t = next(iter(self.threads.values()))
        return (t.notif, t.block) if t.block is not None else None

    def rebind(self, notif) -> None:
        """The one thread's held call is now notification `notif` (fork.py)."""
        next(iter(self.threads.values())).notif = notif

    def _answer(self, notif, result) -> bool:
        if self.cluster.recording:
            self.cluster.calls.append((self.name, render(notif.nr, notif.args, result,
                                                         self.moved)))
            self.moved = None
        if result is CONTINUE:
            return _native.respond(self.listener, notif.id, cont=True)
        if isinstance(result, Err):
            return _native.respond(self.listener, notif.id, err=result.errno)
        return _native.respond(self.listener, notif.id, val=result.val)

    def try_wake(self) -> bool:
        """Run a held thread whose call the world now lets complete, and on."""
        if not self.alive or not any(t.block is not None for t in self.threads.values()):
            return False
        outcome = self._runnable()
        if outcome is None:
            return False
        self.run(outcome)
        return True

    def fire(self, index: int = 0) -> None:
        """The timeout of thread `index`'s blocked call expires."""
        t = next(t for t in self.threads.values() if t.index == index)
        self.elapsed_ns += t.block.timeout_ns
        self.run((t, t.block.on_fire()))

    def _next_notification(self, timeout_ms: int | None = None):
        """The next notification of this process (any of its threads); None when
        `timeout_ms` passes first; False when the process has exited."""
        tap = self.tap
        if self.pid in tap.stash:
            return tap.stash.pop(self.pid)
        while True:
            left = self._deadline - time.monotonic()
            wait = max(int(left * 1000), 0) if left > 0 else 0
            if timeout_ms is not None:
                wait = min(wait, timeout_ms)
            events = dict(self._poller.poll(wait))
            if not events:
                if left > 0 and timeout_ms is not None:
                    return None
                if time.monotonic() < self._deadline:
                    continue
                raise TargetError(self.cluster.where(self) + self._stuck() +
                                  f" for {self.cluster.watchdog_s:g} s without blocking in an "
                                  "emulated call (watchdog; raise it with --watchdog)")
            if events.get(self.listener, 0) & select.POLLIN:
                try:
                    notif = _native.recv(self.listener)
                except OSError:
                    continue
                if notif is None:
                    continue
                if notif.pid != self.pid and notif.pid in tap.pids:
                    tap.stash[notif.pid] = notif       # a copy's; not this process's
                    continue
                COUNTERS["notifications"] += 1
                return notif
            if self.pidfd in events or events.get(self.listener, 0) & select.POLLHUP:
                break
        self._wait_exit()
        return False

    def _stuck(self) -> str:
        """Who kept running, for the watchdog's message."""
        if len(self.threads) <= 1:
            return "ran"
        loose = [t for t in self.threads.values() if t.notif is None]
        shown = []
        for t in loose:
            _, nr = task_state(self.pid, t.tid)
            shown.append(f"thread {t.index}" + (f" (in {NAME.get(nr, nr)})" if nr is not None
                                                else ""))
        return ", ".join(shown) + (" ran" if len(shown) == 1 else " were running")

    def _wait_exit(self) -> None:
        _, status = os.waitpid(self.pid, 0)
        self._detach()
        if os.WIFSIGNALED(status):
            sig = signal.Signals(os.WTERMSIG(status)).name
            raise TargetError(self.cluster.where(self) + f"died of signal {sig} outside a CRASH action")
        code = os.WEXITSTATUS(status)
        self.cluster.node_exited(self)
        if code != 0:
            raise TargetError(self.cluster.where(self) +
                              f"exited with status {code} outside a CRASH action" +
                              self.cluster.stderr_tail(self))
