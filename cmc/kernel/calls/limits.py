"""The descriptor limit a node is shown (getrlimit, setrlimit, prlimit64, its
/proc/*/limits file) and close_range over the virtual descriptors below it."""
from __future__ import annotations

import errno
import re
import resource
import struct

from ..linux import procfs
from ..linux.abi import RLIMIT_NOFILE, VFD_BASE
from .answer import CONTINUE, Err, Ret
from .sockets import close_vfd

# -- the descriptor limit ---------------------------------------------------------------
# The real RLIMIT_NOFILE of a node is VFD_BASE, so that the kernel never hands out a
# real descriptor among the virtual ones. The program is shown an emulated limit
# instead (node.nofile, the kernel's own defaults at first: see node.NOFILE_START),
# above every virtual descriptor cmc hands it, by getrlimit, prlimit64, sysconf
# (which asks prlimit64) and /proc/self/limits: a program that sizes a table by its
# limit and indexes it by descriptor is never corrupted.


def set_nofile(proc, soft: int, hard: int):
    """setrlimit(RLIMIT_NOFILE) as Linux does it for a process without
    CAP_SYS_RESOURCE; None when done, else the Err. A real limit lowered below
    VFD_BASE is applied to the process too (its real descriptors must obey it)."""
    if soft > hard:
        return Err(errno.EINVAL)
    if hard > proc.nofile[1]:
        return Err(errno.EPERM)
    proc.nofile = (soft, hard)
    if proc.pid:
        try:
            resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (min(soft, VFD_BASE), VFD_BASE))
        except OSError:
            pass
    return None


def _pack_rlimit(limit: tuple[int, int]) -> bytes:
    return struct.pack("<QQ", *limit)


def _read_rlimit(proc, addr: int) -> tuple[int, int] | None:
    raw = proc.read(addr, 16)
    return struct.unpack("<QQ", raw) if raw and len(raw) == 16 else None


def sys_getrlimit(call):
    proc, args = call.proc, call.args
    if args[0] != RLIMIT_NOFILE:
        return CONTINUE
    return Ret(0) if proc.write(args[1], _pack_rlimit(proc.nofile)) else Err(errno.EFAULT)


def sys_setrlimit(call):
    proc, args = call.proc, call.args
    if args[0] != RLIMIT_NOFILE:
        return CONTINUE
    new = _read_rlimit(proc, args[1])
    if new is None:
        return Err(errno.EFAULT)
    return set_nofile(proc, *new) or Ret(0)


def sys_prlimit64(call):
    proc, args = call.proc, call.args
    pid = args[0] & 0xFFFFFFFF
    mine = pid in (0, call.pid) or proc.node.tasks.host_pid(pid) == proc.pid
    if args[1] != RLIMIT_NOFILE or not mine:
        return CONTINUE
    new = None
    if args[2]:
        new = _read_rlimit(proc, args[2])
        if new is None:
            return Err(errno.EFAULT)
    if args[3] and not proc.write(args[3], _pack_rlimit(proc.nofile)):
        return Err(errno.EFAULT)
    return (set_nofile(proc, *new) if new else None) or Ret(0)



_NOFILE_LINE = re.compile(rb"^Max open files .*$", re.M)


def limits_text(proc) -> bytes | None:
    """The node's /proc/PID/limits as the program is shown it: its emulated
    descriptor limit on the "Max open files" line; None when it cannot be read."""
    text = procfs.limits(proc.pid)
    if text is None:
        return None
    soft, hard = proc.nofile
    line = b"%-25s %-20d %-20d %-10s " % (b"Max open files", soft, hard, b"files")
    return _NOFILE_LINE.sub(line, text)


def sys_close_range(call):
    proc, args = call.proc, call.args
    first, last = args[0] & 0xFFFFFFFF, args[1] & 0xFFFFFFFF
    for fd in sorted(proc.fds):
        if first <= fd <= last:
            if args[2] & 4:   # CLOSE_RANGE_CLOEXEC
                proc.cloexec.add(fd)
            else:
                close_vfd(proc, fd)
    return CONTINUE
