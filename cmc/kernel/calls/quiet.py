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
from ..linux.syscalls import ROW, UNLESS_MADE, UNLESS_OUTWARD, UNLESS_SOCKET, nrs
from .handler import fd_arg

# Calls that never show (their rows' `quiet`): waits, clocks, reads, socket and
# descriptor bookkeeping; and those that show only sometimes.
QUIET = nrs(lambda row: row.quiet is True)
_WRITES = nrs(lambda row: row.quiet == UNLESS_OUTWARD)
_CLOSES = nrs(lambda row: row.quiet == UNLESS_SOCKET)
_OPENS = nrs(lambda row: row.quiet == UNLESS_MADE)
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
    if nr in _CLOSES:
        return fd_arg(args[0]) >= VFD_BASE  # a socket's FIN; a file's close shows nothing
    if nr in _OPENS:                        # a name made or a file emptied
        return bool(args[ROW[nr].flags] & (O_CREAT | O_TRUNC))
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
