"""write and writev: to fd 3 or 193 they are a state line (proc/node.py keeps them); to a
virtual socket, a send; below the virtual descriptors, a file the disk model sees
(files.py) or, without a page cache, the kernel's own write."""
from __future__ import annotations

import errno

from ..linux.abi import DURABLE_FD, IOV_MAX, STATE_FD, VFD_BASE
from .answer import Err, Ret
from .files import disk_write
from .handler import fd_arg, read_iovecs
from .stream import sock_send, sock_send_bytes


def sys_write(call):
    proc, args = call.proc, call.args
    fd = fd_arg(args[0])
    if fd in (STATE_FD, DURABLE_FD):
        data = proc.read(args[1], args[2])
        if data is None:
            return Err(errno.EFAULT)
        proc.node.take_state_bytes(fd, data)
        return Ret(len(data), data)
    if fd < VFD_BASE and fd not in proc.fds:    # a page cache sees writes from fd 3 up
        return disk_write(call, fd, lambda: proc.read(args[1], args[2]))
    return sock_send(proc, fd, args[1], args[2], 0, "write")


def sys_writev(call):
    proc, args = call.proc, call.args
    fd = fd_arg(args[0])
    if fd < VFD_BASE and fd not in (STATE_FD, DURABLE_FD) and fd not in proc.fds:
        return disk_write(call, fd, lambda: read_iovecs(proc, args[1], args[2]))
    if args[2] > IOV_MAX:
        return Err(errno.EINVAL)
    data = read_iovecs(proc, args[1], args[2])
    if data is None:
        return Err(errno.EFAULT)
    if fd in (STATE_FD, DURABLE_FD):
        proc.node.take_state_bytes(fd, data)
        return Ret(len(data), data)
    return sock_send_bytes(proc, fd, data, 0, "writev")
