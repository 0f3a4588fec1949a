"""write and writev: to fd 3 or 193 they are a state line (node.py keeps them); to a
virtual socket, a send; below the virtual descriptors, a file the disk model sees
(files.py) or, without a page cache, the kernel's own write."""
from __future__ import annotations

import errno

from ..linux.abi import DURABLE_FD, IOV_MAX, STATE_FD, VFD_BASE
from .answer import Err, Ret
from .files import disk_write
from .handler import fd_arg, handles, read_iovecs
from .stream import sock_send, sock_send_bytes


@handles("write", "pwrite64")
def sys_write(call):
    node, args = call.node, call.args
    fd = fd_arg(args[0])
    if fd in (STATE_FD, DURABLE_FD):
        data = node.read(args[1], args[2])
        if data is None:
            return Err(errno.EFAULT)
        node.take_state_bytes(fd, data)
        node.moved = data
        return Ret(len(data))
    if fd < VFD_BASE:               # a page cache sees writes from fd 3 up (filter.py)
        return disk_write(call, fd, lambda: node.read(args[1], args[2]))
    return sock_send(node, fd, args[1], args[2], 0, "write")


@handles("writev", "pwritev", "pwritev2")
def sys_writev(call):
    node, args = call.node, call.args
    fd = fd_arg(args[0])
    if fd < VFD_BASE and fd not in (STATE_FD, DURABLE_FD):
        return disk_write(call, fd, lambda: read_iovecs(node, args[1], args[2]))
    if args[2] > IOV_MAX:
        return Err(errno.EINVAL)
    data = read_iovecs(node, args[1], args[2])
    if data is None:
        return Err(errno.EFAULT)
    if fd in (STATE_FD, DURABLE_FD):
        node.take_state_bytes(fd, data)
        node.moved = data
        return Ret(len(data))
    return sock_send_bytes(node, fd, data, 0, "writev")
