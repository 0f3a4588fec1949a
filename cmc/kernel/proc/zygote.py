"""Zygotes: a node's start, run once and copied at every later launch with the same
inputs (docs/design.md, "Zygotes: a start run once").

A launched program first starts up (its runtime, its threads, its configuration) and
only then touches the world: its network, its directory, the names of shared memory,
the state channels. What it did up to there depends on nothing but what it was started
with: its node and incarnation (its environment, AT_RANDOM and random stream), its
clock, and what its directory shows to a program that opens none of its files (it may
`stat` them unseen). With copying on (`--fast`), the launch stops at the first call
outside the start (`starts_up` is False), and the node as it is there -- its processes
held, cmc's record of them -- is kept as a *zygote*: a Lease (fork.py) that no world
ever runs. The launch then goes on in a fork of it, and every later launch with the
same inputs (`key`) is a fork of it too, in its own world's directory, with a copy of
the record.

A zygote is made only where that is faithful: not under time virtual (the clock is the
cluster's), --det's second launch, a Maelstrom node, `machine pids private`, while calls
are recorded, nor when the start changed the node's directory (natively, unseen) or
left a process, a thread not held or a descriptor a fork cannot copy (`Zygotes.make`
then remembers the key as one to launch).
"""
from __future__ import annotations

import os
from collections import Counter, OrderedDict

from ...errors import NotForkable
from ..calls.handler import fd_arg
from ..calls.threads import clone_flags
from ..linux import _native, procfs
from ..linux.abi import CLONE_NEWIPC, CLONE_THREAD, F_GETFD, F_GETFL, VFD_BASE
from ..linux.syscalls import (ROWS, START_ANY, START_EPOLL, START_EXEC, START_FLAGS, START_OWN,
                              START_PATH, START_REAL, START_THREAD, nrs)
from ..world.content import directory_shape
from .copyplan import directory_names, fd_plan
from .fork import Lease
from .record import _BY_IDENTITY, load_record, save_record

# Calls a start makes (their rows' `start`, linux/syscalls.py) that act on nothing but
# the incarnation's own record: its threads and their signal state, its clocks and
# sleeps, its random stream, its limits, the machine's description, its own new sockets
# and epoll instances; an exec, not into the node's directory.
_ALWAYS = nrs(lambda row: row.start in (START_ANY, START_EXEC))
_EXECS = nrs(lambda row: row.start == START_EXEC)
# (getpid: a copy is answered the kept start's pid, and that pid is the copy's wherever
# the program names it; to every other process it is a pid no process has: Zygote.start)
# ... and on a descriptor: one of its own sockets while it is bound to nothing (or a
# real one: bind of an AF_UNIX or netlink socket runs natively), or an epoll instance
_ON_OWN_FD = nrs(lambda row: row.start in (START_OWN, START_FLAGS))
_FLAGS = nrs(lambda row: row.start == START_FLAGS)
_ON_REAL_FD = nrs(lambda row: row.start == START_REAL)
_EPOLLS = nrs(lambda row: row.start == START_EPOLL)
_OPENS = {row.nr: row.paths[0][1] for row in ROWS if row.start == START_PATH}
_CLONES = nrs(lambda row: row.start == START_THREAD)

# A node whose start could not be kept this often is launched from then on
REFUSALS = 3
# How many zygotes are kept at a time (each is a program held, with its memory)
KEPT = 16


def starts_up(t) -> bool:
    """Whether thread t's held call may be part of a start kept as a zygote."""
    nr, args, proc = t.notif.nr, t.notif.args, t.proc
    if nr in _EXECS and _into_directory(proc, proc.read_cstr(args[0])):
        return False
    if nr in _ALWAYS:
        return True
    if nr in _CLONES:
        got = clone_flags(proc, nr, args)
        return got is not None and bool(got[0] & CLONE_THREAD)
    if nr in _OPENS:       # a limit, the random stream, the machine: not /dev/shm, and
        at = _OPENS[nr]    # no new or truncated file (the disk model's)
        path = proc.read_cstr(args[at])
        return (path is not None and b"/dev/shm" not in path and not _into_directory(proc, path)
                and not args[at + 1] & (os.O_CREAT | os.O_TRUNC))
    if nr in _ON_REAL_FD:
        return fd_arg(args[0]) < VFD_BASE
    if nr in _EPOLLS:
        return fd_arg(args[0]) in proc.epolls and _own(proc, fd_arg(args[2]))
    if nr in _FLAGS and args[1] & 0xFFFFFFFF in (F_GETFD, F_GETFL):
        return True        # a reading of a descriptor's flags (Go's os.NewFile of fd 3)
    if nr in _ON_OWN_FD:
        return _own(proc, fd_arg(args[0]))
    return False


def _into_directory(proc, path: bytes | None) -> bool:
    """Whether a path may lead into the node's directory, which a start does not read
    (while it runs such opens come here: Node.launch, _native.watch_start): relative,
    under it (HOME is it), or through a process's cwd."""
    if path is None or not path.startswith(b"/"):
        return True
    return os.fsencode(proc.node.cwd) in path or b"/cwd" in path


def zygote_stop(t) -> bool:
    """Tasks.pausing while a zygote's start runs: stop at the first call outside it."""
    return not starts_up(t)


def _own(proc, fd: int) -> bool:
    """A virtual descriptor the start may use: an epoll instance, or a socket neither
    bound nor listening nor connected (the network knows nothing of it)."""
    if fd in proc.epolls:
        return True
    sock = proc.fds.get(fd)
    return (sock is not None and getattr(sock, "local", 1) is None and sock.conn is None
            and not sock.listening and not sock.connecting)


class Zygote:
    """A node's start kept (`lease`, its processes held where the start ended), with
    cmc's record of the incarnation there (`saved`, the node and its world by
    reference) and the thread that was to go on (`last`)."""

    def __init__(self, node, last: int | None, plan):
        tasks = node.tasks
        self.lease = Lease(node)
        self.lease.plan = plan
        self.lease.users = 1              # never the last user: never run as it is
        tasks.unwatch()
        self.last = last
        # the ids its program read (getpid, getppid), which each copy is answered
        self.pid = tasks.pid
        self.ppid = int(procfs.status(tasks.pid).get("PPid", 0) or 0)
        self.elapsed_ns = node.elapsed_ns
        fields = {k: getattr(node, k) for k in _INCARNATION}
        parts = _world_parts(node)
        data, refs = save_record(fields, parts)
        # the world's parts by their place in _world_parts: the world it starts in has
        # its own (the world it was made in is not kept alive by it)
        self.slots = {key: i for key, obj in refs.items()
                      for i, part in enumerate(parts) if obj is part}
        self.saved = (data, {key: obj for key, obj in refs.items() if key not in self.slots})

    def start(self, node) -> None:
        """node's new incarnation from a fork of the zygote, in node's directory."""
        data, refs = self.saved
        ours = _world_parts(node)
        refs = dict(refs)
        refs.update((key, ours[i]) for key, i in self.slots.items())
        fields = load_record((data, refs))
        for k, v in fields.items():
            setattr(node, k, v)
        node.elapsed_ns = self.elapsed_ns
        # an IPC namespace of its own, as a launch has (its start made no SysV object)
        ipc = CLONE_NEWIPC if _native.private_ipc() == 1 else 0
        # its held call, made again, may be an open cmc would let through unseen
        _native.watch_start(node.cwd)
        try:
            self.lease.fork_into(node, node.cwd, waited=False, unshare=ipc)
        finally:
            _native.watch_start(None)
        # its program knows the copy by the kept start's pid (calls/host.py answers
        # and translates it), as a launch's knows the launch by its own
        node.tasks.root_known, node.tasks.parent_known = self.pid, self.ppid
        # its stdout and stderr: this incarnation's files, as a launch's
        out = node.setting.output_path(node)
        held = next(iter(node.tasks.threads.values())).notif.id
        for fd, stream in ((1, ".stdout"), (2, ".stderr")):
            src = os.open(out + stream, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                          0o644)
            try:
                _native.place_fd(node.tasks.listener, held, src, fd, False)
            finally:
                os.close(src)

    def end(self) -> None:
        lease, self.lease = self.lease, None
        if lease is not None and lease.pids:
            lease.template = True
            lease.users = 0
            lease.retire()


# what a node's incarnation is (Node._reset_incarnation) and the world parts it refers to
_INCARNATION = ("volatile", "volatile_emitted", "bufs", "tasks", "next_ino", "spin",
                "random_offset", "exec_count")


def _world_parts(node) -> list:
    setting = node.setting
    return [node, setting, setting.spec, setting.net, node.disk]


class Zygotes:
    """The zygotes of a run's worlds (kept with its Roots, which every copy of a
    world shares): key -> Zygote, or None for a key whose start cannot be kept, the
    most recently used last; at most KEPT at a time."""

    @classmethod
    def of(cls, setting) -> "Zygotes | None":
        """The run's zygotes, made at its first launch; None when the run does not copy
        worlds (no Roots: --no-fast)."""
        roots = setting.roots
        if roots is None:
            return None
        if roots.zygotes is None:
            roots.zygotes = cls()
        return roots.zygotes

    def __init__(self):
        self.kept: OrderedDict[tuple, Zygote | None] = OrderedDict()
        self.declined: Counter[str] = Counter()    # why a start was not kept
        self.refused: Counter[int] = Counter()     # node index -> starts not kept

    def key(self, node) -> tuple | None:
        """What a start depends on, or None for a node whose start is not kept."""
        setting = node.setting
        if (setting.virtual or setting.shift or setting.recording or node.stdio
                or node.own_pids):
            return None
        if self.refused[node.index] >= REFUSALS:
            return None
        return (node.index, node.incarnation, node.elapsed_ns, directory_shape(node.cwd))

    def find(self, key: tuple | None) -> Zygote | None:
        if key is None or self.kept.get(key) is None:
            return None
        self.kept.move_to_end(key)
        return self.kept[key]

    def wanted(self, key: tuple | None) -> bool:
        """Whether the launch of key, which has no zygote, should stop to keep one."""
        return key is not None and key not in self.kept

    def make(self, node, key: tuple, last) -> Zygote | None:
        """The node, stopped at the end of its start, kept as the zygote of `key`; None
        (remembered) where it cannot be. The node's processes are the zygote's then."""
        tasks = node.tasks
        why = None
        if directory_shape(node.cwd) != key[3]:
            why = "its start changed its directory"     # a mkdir, say: natively, unseen
        elif len(tasks.procs) != 1 or tasks.reapable or tasks.groups or tasks.clones \
                or tasks.forking is not None or tasks.pgid != tasks.pid:
            why = "its start made a process"
        elif any(t.notif is None for t in tasks.threads.values()):
            why = "a thread of its start is not held"
        elif any(p.wipes for p in tasks.procs.values()):
            why = "its start has memory a fork would wipe (madvise MADV_WIPEONFORK)"
        plan = None
        if why is None:
            try:
                plan = (fd_plan(node), directory_names(node))
            except NotForkable as e:
                why = str(e)
        if why is not None:
            self.kept[key] = None
            self.declined[why] += 1
            self.refused[key[0]] += 1
            return None
        live = [k for k, z in self.kept.items() if z is not None]
        if len(live) >= KEPT:
            self.kept.pop(live[0]).end()        # the least recently used
        z = Zygote(node, last, plan)
        self.kept[key] = z
        return z

    def holds(self, pid: int) -> bool:
        """Whether pid is a process or thread of a kept start: no program's, for the
        nodes (a launch's would name a process that has ended)."""
        return any(z is not None and z.lease is not None
                   and (pid in z.lease.pids or pid in z.lease.held)
                   for z in self.kept.values())

    def drop(self, key: tuple, why: str) -> None:
        """The zygote of key could not be forked: ended, and key launched from now on."""
        z, self.kept[key] = self.kept.get(key), None
        self.declined[why] += 1
        if z is not None:
            z.end()

    def close(self) -> None:
        for z in self.kept.values():
            if z is not None:
                z.end()
        self.kept.clear()


_BY_IDENTITY.update((Zygotes, Zygote))
