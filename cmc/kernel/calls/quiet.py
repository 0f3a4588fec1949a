"""Which notified calls change nothing another node or a property can see: a FIRE whose
run makes none but these is *invisible*, and time virtual folds it into the step it
follows (docs/design.md, "One clock for the cluster").

Visible is what the folding argument needs to keep apart: a byte sent or a connection
made or ended (a message in flight), a line on fd 3 or 193, a write or a sync the disk
model sees (a CRASH would keep another file), a name made or removed, a thread or a
process made or ended, an exec. Everything cmc does not know is visible: folding too
little costs depth, folding too much would lose worlds.
"""
from __future__ import annotations

from ..linux import procfs
from ..linux.abi import DURABLE_FD, STATE_FD, VFD_BASE
from ..linux.syscalls_x86_64 import NR
from .handler import fd_arg

# Calls that never show: waits, clocks, reads, socket and descriptor bookkeeping.
QUIET = frozenset(NR[n] for n in (
    "clock_gettime", "gettimeofday", "time", "nanosleep", "clock_nanosleep", "futex",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl", "epoll_create",
    "epoll_create1", "poll", "ppoll", "select", "pselect6", "sched_yield", "getrandom",
    "rt_sigprocmask", "sigaltstack", "getrlimit", "read", "readv", "recvfrom", "recvmsg",
    "accept", "accept4", "socket", "fcntl", "ioctl", "getsockopt", "setsockopt",
    "getsockname", "getpeername", "fstat", "newfstatat", "lseek", "pread64", "preadv",
    "preadv2", "dup", "dup2", "dup3", "fchdir", "getdents64", "flock", "getpid", "getppid",
))
_WRITES = frozenset(NR[n] for n in ("write", "writev", "pwrite64", "pwritev", "pwritev2"))
_OPENS = frozenset(NR[n] for n in ("open", "openat"))
O_CREAT, O_TRUNC = 0o100, 0o1000


def visible(notif, pid: int, stdio: bool = False) -> bool:
    """Whether answering this call (of process pid) may change what another node or a
    property sees (`stdio`: the node's stdout is cmc's, a Maelstrom node's messages)."""
    nr, args = notif.nr, notif.args
    if nr in QUIET:
        return False
    if nr in _WRITES:                       # fd 3, 193, a socket, a file; not stdout/stderr,
        fd = fd_arg(args[0])                # nor a pipe or eventfd inside the process (a
        if stdio and fd == 1:               # runtime waking its poller: Go's netpollBreak)
            return True
        return fd > 2 and not _inner(pid, fd)
    if nr == NR["close"]:
        return fd_arg(args[0]) >= VFD_BASE  # a socket's FIN; a file's close shows nothing
    if nr in _OPENS:                        # a name made or a file emptied
        return bool((args[1] if nr == NR["open"] else args[2]) & (O_CREAT | O_TRUNC))
    return True


def _inner(pid: int, fd: int) -> bool:
    """Whether fd of pid is a pipe or an eventfd (what a write to it changes stays in the
    node), or /dev/null."""
    if fd >= VFD_BASE or fd in (STATE_FD, DURABLE_FD):
        return False
    try:
        target = procfs.fd_target(pid, fd)
    except OSError:
        return False
    return target.startswith("pipe:") or target in ("anon_inode:[eventfd]", "/dev/null")


def shows(t) -> bool:
    """Whether thread t's held call is visible (Tasks.pausing of a FIRE tried for
    folding: Cluster.fold)."""
    return visible(t.notif, t.proc.pid, t.proc.node.stdio)
