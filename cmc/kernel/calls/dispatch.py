"""The dispatch table: which handler answers which notified system call. Each call's
row (linux/syscalls.py) names its handler, "module.sys_function" of the modules below,
imported here explicitly."""
from __future__ import annotations

from . import (fds, figures, files, host, limits, machine, memory, opens, shm, sockopts, stream,
               threads, time, tsc, waits, writes)
from .answer import CONTINUE
from .handler import Call, fd_arg, unsupported
from ..linux.syscalls import ALWAYS, FD, ROWS, STATE

# the modules that hold handlers, by the name a row gives them
MODULES = {m.__name__.rpartition(".")[2]: m for m in (
    time, writes, opens, limits, threads, stream, fds, files, sockopts, waits, shm, tsc, machine,
    host, memory, figures)}


def handler_of(row):
    """The function a row names as its handler ("module.sys_function")."""
    module, _, name = row.handler.partition(".")
    return getattr(MODULES[module], name)


HANDLERS = {row.nr: handler_of(row) for row in ROWS if row.handler is not None}


# A node whose stdin and stdout are cmc's (a Maelstrom node) has every call below
# notified when its descriptor argument is 0 or 1 (filter.py, `stdio`); in a process
# where that descriptor is a real one (a shell's child that made fd 1 a pipe), the call
# runs natively. (Calls notified always, or always with a page cache, are their
# handlers' to tell apart.) The descriptor looked at is the call's first.
STDIO_ARG = {row.nr: row.fds[:1] for row in ROWS
             if row.notified in (FD, STATE) and row.disk != ALWAYS}


def _real_stdio(proc, notif) -> bool:
    """Whether the call was notified only for a descriptor 0 or 1 that is a real one in
    this process (none of its descriptor arguments is cmc's, nor 3 and up: a state fd, a
    file the page cache sees, a virtual socket)."""
    fds = [fd_arg(notif.args[i]) for i in STDIO_ARG[notif.nr]]
    return all(fd < 2 and fd not in proc.fds for fd in fds) and any(fd >= 0 for fd in fds)

# the clock reads, and the argument each one's buffer is
CLOCK_READS = {row.nr: row.clock for row in ROWS if row.clock is not None}


def dispatch(proc, notif):
    """Answer notification `notif` with its handler; `proc` is the Process that
    made the call (proc/tasks.py); the handler reaches the node through it."""
    node = proc.node
    if node.setting.virtual:                # a thread polling the clock sees it move
        buf = CLOCK_READS.get(notif.nr)
        node.polls(notif.pid, buf is not None, notif.args[buf] if buf is not None else 0)
    if node.stdio and notif.nr in STDIO_ARG and _real_stdio(proc, notif):
        return CONTINUE
    handler = HANDLERS.get(notif.nr)
    if handler is None:
        return unsupported(proc, notif.nr, notif.args)
    return handler(Call(proc, notif))
