"""A node's processes and threads as cmc tracks them: who they are, what each is
doing, finding the new ones (a clone, a fork), forgetting those gone, ending them
all. The loop that runs them is the scheduler (scheduler.py), which is this table
with the notification loop on top; a node holds one (`Node.tasks`) per incarnation.

cmc runs the threads of a node one at a time (docs/target-contract.md, "Threads").
A thread is, at any moment, in one of these conditions:

- *held*: cmc has its notification and has not answered it. Either the call is not
  dispatched yet (`block` None: it arrived while another thread was running), or it
  is blocked (`block`, a `Block`: a recv with nothing to read, an emulated futex
  wait, a sleep) until an action or another thread makes it complete;
- *running*: cmc answered its last call and has not seen its next one;
- *natively blocked*: asleep in a call that runs natively (not notified) and that
  only another thread of the node can end (a read of a pipe, a wait for a signal);
- *exited*, when the kernel no longer lists it.

Which of the last three a thread not held is in is read from the kernel
(linux/procfs.py: a task's stat and syscall files), never guessed from how long it
has been quiet. A thread's *index* is the lowest number no other live thread of the
node has (over every process of it; 0: the main thread), given when cmc first sees
it: a function of the live threads, so that two worlds alike but for a thread that
came and went number the next thread alike. cmc shows indexes, never tids, which
differ from run to run.

A node is a process tree (docs/target-contract.md, "Process trees"): each process of
it is a `Process`, indexed in creation order too (0: the program cmc launched). What
the kernel keeps per process -- the descriptor table, the close-on-exec flags, the
epoll instances, the futex queues of its private memory, the descriptor limit, the
memory itself -- is the process's; a handler is given the process that made the
call, and reaches the node through it.

A node's processes are watched on pidfds (`_poller`, with the seccomp listener): a
copy of a world shares the lent processes until it runs them (fork.py), and then
`take_over` (the last user: as they are) or `attach` (a fork of them) makes them this
record's; `let_go`, when the record gives them up to the worlds still using them.
"""
from __future__ import annotations

import contextlib
import errno
import itertools
import os
import select
import signal
from dataclasses import dataclass, field

from ...interrupts import interrupts_held
from ..linux import _native, procfs
from ..linux.procfs import task_state
from ..linux.syscalls import nrs
from .reaping import _reaped, reap_killed, reap_orphans
from .tap import Tap


# Calls a thread may sleep in natively, not notified, that another thread of the
# node ends (a pipe or AF_UNIX socket between threads, a signal sent by a thread, a
# child reaped): a thread asleep in one does not keep its node from being quiescent.
# The poll family is there too: over real descriptors only and without a timeout, cmc
# lets the real kernel wait (calls/waits.py), for a pipe another thread writes, say.
# (Their rows' `sleeps`, linux/syscalls.py.)
NATIVE_WAITS = nrs(lambda row: row.sleeps is not None)


@dataclass
class Thread:
    index: int                  # the lowest free when it came (0: main)
    tid: int
    proc: object = None         # the Process it belongs to
    notif: object = None        # the held notification, None when not held
    block: object = None        # the held call's Block once dispatched and blocked
    ctid: int = 0               # CLONE_CHILD_CLEARTID: cleared and woken at its exit
    exiting: bool = False       # it called exit(): gone once the kernel drops it
    native: int | None = None   # the native call it sleeps in (NATIVE_WAITS), if any
    native_at: int = 0          # ... seen when the node's processes had ended this often
    yielded: int = 0            # its call is sched_yield (the how-manyth): others first
    known: int = 0              # in a copy of a world (fork.py): the id the program knows
                                # it by, the original's (0: its own, tid); `kept`: what
    kept: bytes | None = field(default=None, compare=False)  # a fork read of it, unrun

    @property
    def tag(self) -> int:
        """The thread in an action's key (a FIRE's) and a futex queue: its index in its
        process, and the process's number above bit 16 (0 in a node of one process)."""
        return (self.proc.number << 16 | self.index) if self.proc is not None else self.index


_WAKES = itertools.count(1)     # only the order of two wakes is ever compared


@dataclass
class Waiter:
    """A thread in an emulated futex wait."""
    addr: int
    bitset: int
    thread: int                 # its tag (Thread.tag)
    woken: int = 0              # when woken: a number every wake makes larger (> 0)


@dataclass
class Futexes:
    """The node's emulated futex wait queues: waiters in the order they came."""
    waiters: list[Waiter] = field(default_factory=list)

    def wait(self, addr: int, bitset: int, thread: int) -> Waiter:
        w = Waiter(addr, bitset, thread)
        self.waiters.append(w)
        return w

    def leave(self, w: Waiter) -> None:
        if w in self.waiters:
            self.waiters.remove(w)

    def wake(self, addr: int, n: int, bitset: int = 0xFFFFFFFF) -> int:
        """Wake up to n waiters on addr whose bitset meets `bitset`; how many."""
        woken = 0
        for w in list(self.waiters):
            if woken >= n:
                break
            if w.addr == addr and w.bitset & bitset:
                w.woken = next(_WAKES)
                self.waiters.remove(w)
                woken += 1
        return woken

    def requeue(self, addr: int, addr2: int, n: int) -> int:
        """Move up to n waiters on addr to addr2; how many."""
        moved = 0
        for w in self.waiters:
            if moved >= n:
                break
            if w.addr == addr:
                w.addr = addr2
                moved += 1
        return moved


class Process:
    """One process of a node: what the kernel keeps per process (its descriptor
    table, close-on-exec flags, epoll instances, the futex queues of its private
    memory, its descriptor limit, its memory). A handler is given the Process that
    made the call; what is the node's (clocks, disk, state lines, scheduler) it
    reaches through `node`."""
    __slots__ = ("node", "number", "pid", "parent", "fds", "cloexec", "epolls", "futexes",
                 "nofile", "pidfd", "vforked", "segv", "fault", "wipes")

    def __init__(self, node, number: int, pid: int, parent: "Process | None" = None):
        self.node = node
        self.number = number            # creation order ("index" is the node's)
        self.pid = pid
        self.parent = parent.number if parent is not None else None
        self.pidfd = -1
        self.vforked = False
        self.futexes = Futexes()
        # the program's own action for SIGSEGV (the kernel's is the TSC trap's:
        # calls/tsc.py), as the 32 bytes of a struct kernel_sigaction
        self.segv = parent.segv if parent is not None else bytes(32)
        self.fault = None               # the last fault its threads met (calls/tsc.py)
        # memory it asked to be wiped in a fork (calls/memory.py): not copied
        self.wipes = parent.wipes if parent is not None else False
        if parent is None:
            self.fds = {}
            self.cloexec = set()
            self.epolls = {}
            self.nofile = node.nofile_start
        else:                       # a child: copies of its parent's descriptors
            self.fds = dict(parent.fds)
            for sock in self.fds.values():
                sock.refs += 1
            self.cloexec = set(parent.cloexec)
            self.epolls = dict(parent.epolls)   # the same instances
            self.nofile = parent.nofile

    def __getstate__(self):
        """A copy (fork.py) shares the process by a lease, not the original's pidfd
        (the slots as pickle sets them: no dict, then the slots)."""
        state = {k: getattr(self, k) for k in Process.__slots__}
        state.update(pidfd=-1)
        return None, state

    def __repr__(self) -> str:
        return f"<process {self.number} of node {self.node.name}>"

    # -- memory ---------------------------------------------------------------------
    def read(self, addr: int, length: int) -> bytes | None:
        try:
            return _native.read_mem(self.pid, addr, length)
        except OSError:
            return None

    def write(self, addr: int, data: bytes) -> bool:
        self.node.own()                 # a process lent to other worlds is forked first
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


class Tasks:
    """The processes and threads of one incarnation of a node (`node`)."""

    def __init__(self, node):
        self.node = node
        self.pid = 0                   # the launched process (0: none, or it exited)
        self.pgid = 0                  # the node's process group: its first processes
        self.groups: set[int] = set()  # groups its processes made (setsid, setpgid)
        self.listener = -1
        self.tap = None                # the Tap (above) its processes' calls come on
        self.alive = False
        # pid -> Process (above), in creation order (0: the launched program);
        # each has its descriptor table, epoll instances, futex queues and limit.
        self.procs: dict[int, Process] = {}
        self.next_proc = 0             # the index of the next process seen
        self.forking = None            # (Process, tid) that forked, the child not seen yet
        self.reapable: list[int] = []  # pids of processes gone that cmc may have to reap
        self.ends = 0                  # processes of the node that ended
        # a process of the node signalled one of its own (kill, tkill, tgkill): a
        # parent parked in wait4 may have been woken (`signalled`), so parked threads
        # are looked at again once the sender is seen settled (`stirs` counts that)
        self.signalled = False
        self.stirs = 0
        self.shared_futexes = Futexes()  # futexes not private to one process
        # tid -> Thread (above), in creation order: a thread is added when first
        # seen, with the next index, and never moved.
        self.threads: dict[int, Thread] = {}
        self.next_thread = 0           # the index of the next thread seen
        self.clones = 0                # threads created and not yet seen
        self.clone_parent = 0          # the tid that created the last one
        self.clone_ctid = 0            # its CLONE_CHILD_CLEARTID address
        self._yields = 0               # sched_yield calls, to order those who gave way
        self._poller = None
        # stop before a call `pausing` (thread -> bool) finds (a FIRE tried for folding:
        # a visible one; a zygote's start: the first outside it); who stopped (`paused`)
        self.pausing = None
        self.paused: Thread | None = None
        # a copy of a process tree (fork.py): its first process is process 1 of a PID
        # namespace of its own (`ns_root`), the program knows it by `root_known` (the
        # original's pid) and its parent by `parent_known`; `origin`, the lease it was
        # copied from when that one must outlive it (fork.Lease: a template)
        self.ns_root = False
        self.root_known = 0
        self.parent_known = 0
        self.origin = None

    def __getstate__(self) -> dict:
        """A copy of a node's record (fork.py) shares the processes with the original
        by a lease: without a poller of its own (`take_over`, `adopt` make one)."""
        state = dict(self.__dict__)
        state["_poller"] = None
        state.pop("_last", None)         # the scheduler's, for one run (Scheduler.run)
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

    def take_over(self, held: dict) -> None:
        """The lease's processes are this record's now (Lease.take): watch their ends;
        `held`: each thread's held call as it now is (a fork moves it)."""
        self._poller = select.poll()
        self._poller.register(self.listener, select.POLLIN)
        for proc in self.procs.values():
            proc.pidfd = os.pidfd_open(proc.pid)
            self._poller.register(proc.pidfd, select.POLLIN)
        self.rebind(held)

    def let_go(self) -> None:
        """The lease's processes stay with the worlds still using it: this record
        has none (it is closed, or the node crashes here)."""
        self.pid = self.pgid = 0
        self.tap = None
        self.listener = -1
        self.alive = False
        self.procs = {}
        self.threads = {}
        self.origin = None               # the lease has it now

    def attach(self, pid: int, tap: Tap, copies: dict[int, int] | None = None) -> None:
        """Take process pid, on listener tap, as this node's process. Its end is
        seen on a pidfd: a listener shared with copies hangs up only when all
        of them are gone. `copies`: pid is a fork of the record's process, its
        threads copies of the record's (original tid -> copy's)."""
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
        if copies:
            self.threads = {copies[t.tid]: t for t in self.threads.values()}
            for tid, t in self.threads.items():
                t.known = t.known or t.tid
                t.tid, t.proc = tid, proc
        else:
            main = Thread(0, pid, proc)
            self.next_thread = 1
            self.threads = {pid: main}
        self._poller = select.poll()
        self._poller.register(self.listener, select.POLLIN)
        self._poller.register(proc.pidfd, select.POLLIN)

    def attach_tree(self, tap: Tap, pids: dict[int, int], copies: dict[int, int],
                    zombies: list[int], parent_known: int) -> None:
        """Take a copy of the record's process tree (fork.py) as this node's: `pids`,
        each original process's copy (the root's first), `copies` each original thread's
        copy, `zombies` the copies of its ended children not reaped yet. The root's copy
        is process 1 of a PID namespace, its pid in the program's eyes the original's."""
        root = next(iter(pids.values()))
        if not self.ns_root and not self.node.own_pids:
            self.root_known = self.root_known or self.pid   # a start's copy's: the start's
            self.parent_known = self.parent_known or parent_known
        self.ns_root = True
        self.pid = self.pgid = root
        self.tap = tap
        self.listener = tap.fd
        _native.guard_watch(root)
        self.alive = True
        procs = {}
        for old, proc in self.procs.items():
            proc.pid = pids[old]
            proc.pidfd = os.pidfd_open(proc.pid)
            procs[proc.pid] = proc
            tap.pids.add(proc.pid)
        self.procs = procs
        self.threads = {copies[t.tid]: t for t in self.threads.values()}
        for tid, t in self.threads.items():
            t.known = t.known or t.tid
            t.tid = tid
        self.reapable = list(zombies)
        self._poller = select.poll()
        self._poller.register(self.listener, select.POLLIN)
        for proc in procs.values():
            self._poller.register(proc.pidfd, select.POLLIN)

    def detach(self) -> None:
        """Forget every process of the node (they are gone)."""
        origin, self.origin = self.origin, None
        if origin is not None:
            origin.dependent_gone()
        for proc in list(self.procs.values()):
            self.forget(proc)
        if self.pgid:
            _native.guard_forget(self.pgid)
        for group in sorted(self.groups):
            _native.guard_forget(group)
        self.groups = set()
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

    def reaped_since(self) -> list[int]:
        """The pids of processes gone that nobody has reaped yet: those their parents
        waited for natively since their end drop out (a shell wrapper that ran a
        command substitution, then exec'd the program, leaves none)."""
        self.reapable = [pid for pid in self.reapable if not _reaped(pid)]
        return self.reapable

    def prune_groups(self) -> None:
        """Forget the node's empty process groups (an id is a pid, given again once
        its group is empty: a CRASH, a held world's end or the guard would kill another's),
        where the node is quiescent only: a setsid answered may not have run yet."""
        for group in [g for g in (self.pgid, *self.groups) if g and not _group_alive(g)]:
            _native.guard_forget(group)
            if group == self.pgid:
                self.pgid = 0
            self.groups.discard(group)

    def kill(self) -> None:
        """SIGKILL every process of the node (a CRASH, or cleanup) and reap them:
        whole, an interrupt waits until it is done (cmc/interrupts.py)."""
        with interrupts_held():
            self.send_kill()
            self.reap()

    def new_group(self, pgid: int) -> None:
        """A process of the node made process group pgid (a session of its own, a
        group for a job): it is the node's too, killed by a CRASH, and by the guard
        should cmc be gone."""
        if pgid != self.pgid and pgid not in self.groups:
            self.groups.add(pgid)
            _native.guard_watch(pgid)

    def send_kill(self) -> None:
        """SIGKILL the node's process groups (those a process of it is in: another's
        may have the id of one emptied, prune_groups) and every process of it cmc
        knows, without waiting for their end, which is not cmc's time (move_away)."""
        mine = set()
        _native.move_away(list(self.threads))
        for pid in self.procs:
            with contextlib.suppress(OSError):
                mine.add(os.getpgid(pid))
        for group in [self.pgid, *sorted(self.groups)]:
            if not group or group not in mine:
                continue
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in self.procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def reap(self, later: bool = False) -> None:
        """Reap every process of the node: the launched one is cmc's child (at a world's
        end, `later`, and alone, the C helper reaps it as cmc goes on; a CRASH waits: the
        relaunch must not meet its locks); the others come to cmc, their subreaper, as
        orphans. A copied tree's root is its original's child (`STRAYS`)."""
        others = [p for p in self.procs if p != self.pid] + self.reapable
        if self.pid:
            reap_killed(self.pid, later and not others and not self.ns_root)
        self.reapable = []
        self.detach()
        reap_orphans(others, self.node.setting.watchdog_s)

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
        t = Thread(self._free_index(proc), tid, proc, ctid=self.clone_ctid)
        self.next_thread += 1
        self.clone_ctid = 0
        self.clones = max(self.clones - 1, 0)
        self.threads[tid] = t
        return t

    def _free_index(self, proc: Process) -> int:
        """A new thread's index in its process: the lowest no live thread of the
        process has. Not the count of threads ever made: that would be state the
        fingerprint leaves out (two worlds alike but for a thread that came and went
        would number the next thread apart, and act apart; --check-merges found it in
        demo/tlog). Per process, so that the first thread of a new process is 0
        however soon another process's end is seen (a daemon's parent exits while
        its child runs: docs/target-contract.md, "Process trees")."""
        used = {t.index for t in self.threads.values() if t.proc is proc}
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
        t = Thread(self._free_index(proc), pid, proc)
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

    def known_thread(self, tid: int) -> Thread | None:
        """The thread its program knows by id tid: a copied thread by its original's
        id (Thread.known), else the thread of that id."""
        for t in self.threads.values():
            if t.known == tid:
                return t
        return self.threads.get(tid)

    def known_pids(self, proc: Process) -> set[int]:
        """The ids proc's program may know it by: its pid, and the original's in a copy."""
        return {proc.pid} | {t.known for t in self.threads.values()
                             if t.proc is proc and t.tid == proc.pid and t.known}

    def host_pid(self, pid: int) -> int:
        """The pid, as cmc sees it, of the process (or group) a program of the node names
        `pid`: under `machine pids private` the node numbers its processes in a
        namespace of its own (procfs: NSpid); otherwise the same number."""
        if self.root_known and pid == self.root_known:
            return self.pid
        if not (self.node.own_pids or self.ns_root) or pid <= 0:
            return pid
        for proc in self.procs.values():
            if procfs.ns_pid(proc.pid) == pid:
                return proc.pid
        return pid

    def give_way(self, tid: int) -> None:
        """Thread tid called sched_yield: it runs again only when no other thread
        can, after those that gave way before it."""
        self._yields += 1
        self.threads[tid].yielded = self._yields

    def blocked(self) -> list[Thread]:
        """The threads held in a blocked call, in creation order."""
        return [t for t in self.threads.values() if t.block is not None]

    def rebind(self, held: dict) -> None:
        """Each thread's held call is now a new notification (tid -> it: fork.py)."""
        for tid, notif in held.items():
            self.threads[tid].notif = notif

    def _mine(self, tid: int) -> bool:
        """Whether a notification of thread tid is this node's: a thread of it, or a
        new thread or process of one of its processes (a copy's are not)."""
        if tid in self.threads:
            return True
        if tid in self.tap.pids:
            return False                  # a process of a copy
        tgid, ppid = _ids(tid)
        return tgid in self.procs if tgid != tid else ppid in self.procs


def _group_alive(pgid: int) -> bool:
    """Whether a process (a zombie too) is in process group pgid."""
    try:
        return os.killpg(pgid, 0) is None
    except OSError as e:
        return e.errno != errno.ESRCH      # EPERM: someone's


def _past_fork(pid: int, tid: int) -> bool:
    """Whether thread tid has returned from its fork and sleeps natively (a parent in
    wait4): inside the fork it may sleep too, before its child is listed."""
    state, nr = task_state(pid, tid)
    return state in "XZ" or (state == "S" and nr in NATIVE_WAITS)


def _ids(tid: int) -> tuple[int, int]:
    """(Tgid, PPid) of task tid, from one read of its status; zeros when it is gone."""
    st = procfs.status(tid)
    return int(st.get("Tgid", 0) or 0), int(st.get("PPid", 0) or 0)
