"""The dispatch table: which handler answers which notified system call. It is built
from the handlers' `handles` marks in the modules below, imported here explicitly."""
from __future__ import annotations

from . import (fds, files, host, limits, machine, opens, shm, sockopts, stream, threads, time,
               tsc, waits, writes)
from .handler import Call, unsupported
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


CLOCK_READS = frozenset((NR["clock_gettime"], NR["gettimeofday"], NR["time"]))


def dispatch(proc, notif):
    """Answer notification `notif` with its handler; `proc` is the Process that
    made the call (proc/tasks.py); the handler reaches the node through it."""
    node = proc.node
    if node.cluster.virtual:                # a thread polling the clock sees it move
        node.polls(notif.pid, notif.nr in CLOCK_READS)
    handler = HANDLERS.get(notif.nr)
    if handler is None:
        return unsupported(proc, notif.nr, notif.args)
    return handler(Call(proc, notif))
