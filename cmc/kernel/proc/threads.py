"""The threads of a node: who they are, what each is doing, and what the kernel
says about those cmc is not holding.

cmc runs the threads of a node one at a time (SPEC §9.1). A thread is, at any
moment, in one of these conditions:

- *held*: cmc has its notification and has not answered it. Either the call is not
  dispatched yet (`block` None: it arrived while another thread was running), or it
  is blocked (`block`, a `Block`: a recv with nothing to read, an emulated futex
  wait, a sleep) until an action or another thread makes it complete;
- *running*: cmc answered its last call and has not seen its next one;
- *natively blocked*: asleep in a call that runs natively (not notified) and that
  only another thread of the node can end (a read of a pipe, a wait for a signal);
- *exited*, when the kernel no longer lists it.

Which of the last three a thread not held is in is read from the kernel
(`/proc/PID/task/TID/stat` and `.../syscall`), never guessed from how long it has
been quiet. A thread's *index* is the lowest number no other live thread of the node
has (over every process of it; 0: the main thread), given when cmc first sees it: a
function of the live threads, so that two worlds alike but for a thread that came and
went number the next thread alike. cmc shows indexes, never tids, which differ from
run to run.

A node is a process tree (SPEC §9.2): each process of it is a `Process`, indexed in
creation order too (0: the program cmc launched). What the kernel keeps per process
-- the descriptor table, the close-on-exec flags, the epoll instances, the futex
queues of its private memory, the descriptor limit, the memory itself -- is the
process's; a handler sees the node through the process that made the call.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..linux import _native
from ..linux.syscalls_x86_64 import NR

# Calls a thread may sleep in natively, not notified, that another thread of the
# node ends (a pipe or AF_UNIX socket between threads, a signal sent by a thread, a
# child reaped): a thread asleep in one does not keep its node from being quiescent.
# The poll family is there too: over real descriptors only and without a timeout, cmc
# lets the real kernel wait (waitcalls.py), for a pipe another thread writes, say.
NATIVE_WAITS = frozenset(NR[n] for n in (
    "read", "readv", "pread64", "recvfrom", "recvmsg", "pause", "rt_sigsuspend",
    "rt_sigtimedwait", "wait4", "waitid", "accept", "accept4", "flock",
    "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2",
))


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


_WAKES = itertools.count(1)     # only the order of two wakes is ever compared


@dataclass
class Waiter:
    """A thread in an emulated futex wait."""
    addr: int
    bitset: int
    thread: int                 # index
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
                 "nofile", "pidfd", "vforked")

    def __init__(self, node, number: int, pid: int, parent: "Process | None" = None):
        self.node = node
        self.number = number            # creation order ("index" is the node's)
        self.pid = pid
        self.parent = parent.number if parent is not None else None
        self.pidfd = -1
        self.vforked = False
        self.futexes = Futexes()
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
        """A copy (fork.py) shares the process by a lease, not the original's pidfd."""
        state = {k: getattr(self, k) for k in Process.__slots__}
        state.update(pidfd=-1)
        return state

    def __setstate__(self, state):
        for k, v in state.items():
            setattr(self, k, v)

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
