"""The dispatch table: which handler answers which notified system call. It is built
from the handlers' `handles` marks in the modules below, imported here explicitly."""
from __future__ import annotations

from . import (fds, files, host, limits, machine, opens, shm, sockopts, stream, threads, time,
               tsc, waits, writes)
from .answer import CONTINUE
from .handler import Call, fd_arg, unsupported
from ..linux.filter import (ALWAYS, DISK_ALWAYS, DISK_WRITES, DUPS, FD_ARG0, FD_ARG01, FD_ARG2,
                            WRITES)
from ..linux.syscalls_x86_64 import NR


def _table(*modules) -> dict[int, object]:
    table: dict[int, object] = {}
    for module in modules:
        for fn in vars(module).values():
            names = getattr(fn, "handles", ())
            if not isinstance(names, tuple):
                continue        # a module imported there (its own `handles`, the mark)
            for name in names:
                if table.get(NR[name], fn) is not fn:
                    raise AssertionError(f"two handlers for {name}")
                table[NR[name]] = fn
    return table


HANDLERS = _table(time, writes, opens, limits, threads, stream, fds, files, sockopts, waits, shm,
                  tsc, machine, host)


# A node whose stdin and stdout are cmc's (a Maelstrom node) has every call below
# notified when its descriptor argument is 0 or 1 (filter.py, `stdio`); in a process
# where that descriptor is a real one (a shell's child that made fd 1 a pipe), the call
# runs natively. (Calls notified always are their handlers' to tell apart.)
_NOTIFIED = set(ALWAYS) | set(DISK_ALWAYS)
STDIO_ARG = {NR[n]: (0,) for n in FD_ARG0 + WRITES + DUPS + DISK_WRITES
             if n in NR and n not in _NOTIFIED}
STDIO_ARG.update({NR[n]: (0, 1) for n in FD_ARG01 if n in NR and n not in _NOTIFIED})
STDIO_ARG.update({NR[n]: (2,) for n in FD_ARG2 if n in NR and n not in _NOTIFIED})


def _real_stdio(proc, notif) -> bool:
    """Whether the call was notified only for a descriptor 0 or 1 that is a real one in
    this process (none of its descriptor arguments is cmc's, nor 3 and up: a state fd, a
    file the page cache sees, a virtual socket)."""
    fds = [fd_arg(notif.args[i]) for i in STDIO_ARG[notif.nr]]
    return all(fd < 2 and fd not in proc.fds for fd in fds) and any(fd >= 0 for fd in fds)

CLOCK_READS = frozenset((NR["clock_gettime"], NR["gettimeofday"], NR["time"]))
CLOCK_GETTIME = NR["clock_gettime"]     # its buffer is its second argument, the others' first


def dispatch(proc, notif):
    """Answer notification `notif` with its handler; `proc` is the Process that
    made the call (proc/tasks.py); the handler reaches the node through it."""
    node = proc.node
    if node.cluster.virtual:                # a thread polling the clock sees it move
        reads = notif.nr in CLOCK_READS
        node.polls(notif.pid, reads, notif.args[notif.nr == CLOCK_GETTIME] if reads else 0)
    if node.stdio and notif.nr in STDIO_ARG and _real_stdio(proc, notif):
        return CONTINUE
    handler = HANDLERS.get(notif.nr)
    if handler is None:
        return unsupported(proc, notif.nr, notif.args)
    return handler(Call(proc, notif))
