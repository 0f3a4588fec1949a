"""A node's processes and threads as cmc tracks them: who they are, finding the new
ones (a clone, a fork), forgetting those gone, ending them all, and naming them in
messages. The loop that runs them is the scheduler (scheduler.py), which is this
table with the notification loop on top; a node holds one (`Node.tasks`) per
incarnation.

A node's processes are watched on pidfds (`_poller`, with the seccomp listener): a
copy of a world shares the lent processes until it runs them (fork.py), and then
`take_over` (the last user: as they are) or `adopt` (a fork of them) makes them this
record's; `let_go`, when the record gives them up to the worlds still using them.
"""
from __future__ import annotations

import os
import select
import signal
import time

from ...interrupts import interrupts_held
from ..calls.handler import fd_arg
from ..linux import _native, procfs
from ..linux.procfs import task_state
from ..linux.syscalls_x86_64 import NAME, NR
from ..world.net import fmt_addr
from .threads import NATIVE_WAITS, Futexes, Process, Thread


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


class Tasks:
    """The processes and threads of one incarnation of a node (`node`)."""

    def __init__(self, node):
        self.node = node
        self.pid = 0                   # the launched process (0: none, or it exited)
        self.pgid = 0                  # the node's process group: all its processes
        self.listener = -1
        self.tap = None                # the Tap (node.py) its processes' calls come on
        self.alive = False
        # pid -> Process (threads.py), in creation order (0: the launched program);
        # each has its descriptor table, epoll instances, futex queues and limit.
        self.procs: dict[int, Process] = {}
        self.next_proc = 0             # the index of the next process seen
        self.forking = None            # (Process, tid) that forked, the child not seen yet
        self.reapable: list[int] = []  # pids of processes gone that cmc may have to reap
        self.ends = 0                  # processes of the node that ended
        self.shared_futexes = Futexes()  # futexes not private to one process
        # tid -> Thread (threads.py), in creation order: a thread is added when first
        # seen, with the next index, and never moved.
        self.threads: dict[int, Thread] = {}
        self.next_thread = 0           # the index of the next thread seen
        self.clones = 0                # threads created and not yet seen
        self.clone_parent = 0          # the tid that created the last one
        self.clone_ctid = 0            # its CLONE_CHILD_CLEARTID address
        self._yields = 0               # sched_yield calls, to order those who gave way
        self._poller = None

    def __getstate__(self) -> dict:
        """A copy of a node's record (fork.py) shares the processes with the original
        by a lease: without a poller of its own (`take_over`, `adopt` make one)."""
        state = dict(self.__dict__)
        state["_poller"] = None
        return state

    def unwatch(self) -> None:
        """The processes are lent (fork.lend): this record stops watching their ends."""
        for proc in self.procs.values():
            if proc.pidfd >= 0:
                os.close(proc.pidfd)
                proc.pidfd = -1
        self._poller = None

    @property
    def main(self) -> Process | None:
        """The process cmc launched (or, after it exited, the oldest left)."""
        return next(iter(self.procs.values()), None)

    def process(self, tid: int) -> Process:
        """The process thread tid belongs to."""
        return self.threads[tid].proc

    def take_over(self, notif) -> None:
        """The lease's processes are this record's now (Lease.take): watch their ends;
        `notif`: the one thread's held call as it now is (a fork moves it)."""
        self._poller = select.poll()
        self._poller.register(self.listener, select.POLLIN)
        for proc in self.procs.values():
            proc.pidfd = os.pidfd_open(proc.pid)
            self._poller.register(proc.pidfd, select.POLLIN)
        if notif is not None:
            self.rebind(notif)

    def let_go(self) -> None:
        """The lease's processes stay with the worlds still using it: this record
        has none (it is closed, or the node crashes here)."""
        self.pid = self.pgid = 0
        self.tap = None
        self.listener = -1
        self.alive = False
        self.procs = {}
        self.threads = {}

    def attach(self, pid: int, tap: Tap) -> None:
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
            proc = Process(self.node, 0, pid)
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

    def detach(self) -> None:
        """Forget every process of the node (they are gone)."""
        for proc in list(self.procs.values()):
            self.forget(proc)
        if self.pgid:
            _native.guard_forget(self.pgid)
        self.tap = None
        self.pid = self.pgid = 0
        self.listener = -1
        self.alive = False
        self.threads = {}

    def forget(self, proc: Process) -> None:
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
        self.detach()
        reap_orphans(others, self.node.cluster.watchdog_s)

    def _new_task(self, tid: int) -> Thread:
        """The first call of a thread cmc has not seen: a new thread of one of the
        node's processes, or the first thread of a new process (tid == its pid)."""
        tgid, ppid = _ids(tid)
        if tgid != tid and tgid in self.procs:
            return self._add_thread(tid, self.procs[tgid])
        parent = self.procs.get(ppid)
        if parent is None and self.forking is not None:
            parent = self.forking[0]
        return self._add_process(tid, parent or self.main)

    def _add_thread(self, tid: int, proc: Process) -> Thread:
        t = Thread(self._free_index(), tid, proc, ctid=self.clone_ctid)
        self.next_thread += 1
        self.clone_ctid = 0
        self.clones = max(self.clones - 1, 0)
        self.threads[tid] = t
        return t

    def _free_index(self) -> int:
        """A new thread's index: the lowest no live thread has. Not the count of
        threads ever made: that would be state the fingerprint leaves out (two
        worlds alike but for a thread that came and went would number the next
        thread apart, and act apart; --check-merges found it in demo/tlog)."""
        used = {t.index for t in self.threads.values()}
        return next(i for i in range(len(used) + 1) if i not in used)

    def _add_process(self, pid: int, parent: Process) -> Thread:
        """A new process of the node, forked by `parent`: copies of its descriptors,
        and its first thread."""
        proc = Process(self.node, self.next_proc, pid, parent)
        self.next_proc += 1
        if self.forking is not None and self.forking[0] is parent:
            self.forking = None
        self.procs[pid] = proc
        self.tap.pids.add(pid)
        try:
            proc.pidfd = os.pidfd_open(pid)
            self._poller.register(proc.pidfd, select.POLLIN)
        except OSError:
            pass                         # gone already: seen so by task_state
        t = Thread(self._free_index(), pid, proc)
        self.next_thread += 1
        self.threads[pid] = t
        return t

    def _thread_gone(self, t: Thread) -> None:
        """The kernel dropped the thread; what it does then for CLONE_CHILD_CLEARTID
        (clear the word, wake one waiter) cmc does for its own futex queues."""
        del self.threads[t.tid]
        if t.ctid:
            self.shared_futexes.wake(t.ctid, 1)     # the kernel's wake is a shared one

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
        or (index, the native call it sleeps in) or (index, None: running); the
        index is (process index, thread index) in a node that has had processes."""
        if len(self.threads) == 1 and self.next_thread == 1:
            t = next(iter(self.threads.values()))
            return (t.block.what, t.block.timeout_ns) if t.block is not None else None
        out = []
        for t in self.threads.values():
            who = (t.proc.number, t.index) if self.next_proc > 1 else t.index
            if t.block is not None:
                out.append((who, t.block.what, t.block.timeout_ns) + _blocked_on(t))
            else:
                out.append((who, NAME.get(t.native) if t.native is not None else None))
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

    def _mine(self, tid: int) -> bool:
        """Whether a notification of thread tid is this node's: a thread of it, or a
        new thread or process of one of its processes (a copy's are not)."""
        if tid in self.threads:
            return True
        if tid in self.tap.pids:
            return False                  # a process of a copy
        tgid, ppid = _ids(tid)
        return tgid in self.procs if tgid != tid else ppid in self.procs

    def _stuck(self) -> str:
        """Who kept running, for the watchdog's message."""
        if len(self.threads) <= 1 and self.next_proc <= 1:
            return "ran"
        loose = [t for t in self.threads.values() if t.notif is None]
        shown = []
        for t in loose:
            _, nr = task_state(t.proc.pid, t.tid)
            shown.append(self.who(t) + (f" (in {NAME.get(nr, nr)})" if nr is not None else ""))
        if self.forking is not None:
            shown.append(f"the child process {self.who(self.forking[0])} forked, not seen")
        return ", ".join(shown) + (" ran" if len(shown) == 1 else " were running")

    def fire_names(self, t: Thread, several: bool) -> dict:
        """How a FIRE of thread t names it (by creation order): not at all when it is
        the node's only timed wait; else its process, in a node that has had more
        than one, and its thread, where its process has more than one."""
        if not several:
            return {}
        if self.next_proc <= 1:
            return {"thread": t.index}
        return {"process": t.proc.number,
                "thread": t.index if self._threaded(t.proc) else None}

    def who(self, t) -> str:
        """A thread (or a process) as messages name it: by creation order."""
        if isinstance(t, Process):
            return f"process {t.number}"
        if self.next_proc > 1:
            return f"process {t.proc.number}" + (f" thread {t.index}"
                                                 if self._threaded(t.proc) else "")
        return f"thread {t.index}"

    def _threaded(self, proc: Process) -> bool:
        """Whether process proc has more than one thread now."""
        return sum(1 for u in self.threads.values() if u.proc is proc) > 1


def _past_fork(pid: int, tid: int) -> bool:
    """Whether thread tid has returned from its fork and sleeps natively (a parent in
    wait4): inside the fork it may sleep too, before its child is listed."""
    state, nr = task_state(pid, tid)
    return state in "XZ" or (state == "S" and nr in NATIVE_WAITS)


def _ids(tid: int) -> tuple[int, int]:
    """(Tgid, PPid) of task tid, from one read of its status; zeros when it is gone."""
    st = procfs.status(tid)
    return int(st.get("Tgid", 0) or 0), int(st.get("PPid", 0) or 0)


def _reaped(pid: int) -> bool:
    """Reap pid if it is a child of cmc that ended (an orphan of a node, which came
    to cmc as its subreaper); True when it is gone for good."""
    try:
        got, _ = os.waitpid(pid, os.WNOHANG)
        return got == pid
    except ChildProcessError:
        return not procfs.listed(pid)


def reap_orphans(pids: list[int], timeout_s: float) -> None:
    """After a node's group was killed: reap those of its processes that come to
    cmc as orphans (each does once its parent is gone), within timeout_s."""
    deadline = time.monotonic() + timeout_s
    left = list(pids)
    while left:
        left = [pid for pid in left if not _reaped(pid)]
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.001)


def _blocked_on(t: Thread) -> tuple:
    """What a thread's held call waits on: for a futex wait, its place in the
    queue; for a call on a virtual socket of a connection or a listener, that
    connection's or listener's address, so that two worlds in which threads wait on
    the same sockets the other way round (one thread per connection, connections
    accepted in another order) are two worlds, not one (--check-merges found it in
    demo/tlog). Empty otherwise."""
    if t.block is not None and t.block.waiter is not None:
        # Which word a futex waiter waits on (named by its rank among the words
        # waited on, not by its address, which --det's shifted stack would move)
        # and its place among that word's waiters (a wake takes the first): two
        # worlds that differ in either are two worlds (--check-merges, demo/tlog).
        w = t.block.waiter
        waiters = t.block.queue.waiters
        words = sorted({x.addr for x in waiters})
        same = [x for x in waiters if x.addr == w.addr]
        return next((("queued", words.index(w.addr), i) for i, x in enumerate(same)
                     if x is w), ())
    notif = t.notif
    if notif is None or notif.nr not in _ON_FD:
        return ()
    sock = t.proc.fds.get(fd_arg(notif.args[0]))
    if sock is None or not hasattr(sock, "conn"):
        return ()
    if sock.conn is not None:
        return (sock.conn.key(),)
    return (fmt_addr(sock.local),) if sock.listening and sock.local is not None else ()


_ON_FD = frozenset(NR[n] for n in ("read", "readv", "recvfrom", "recvmsg", "write", "writev",
                                   "sendto", "sendmsg", "accept", "accept4", "connect"))
