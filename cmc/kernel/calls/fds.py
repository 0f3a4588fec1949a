"""Emulated calls on a virtual descriptor as a descriptor: close, dup and dup2/dup3,
fcntl, ioctl, fstat, and the file calls that fail on a socket; and the refusal to
copy fds 3 and 193 (state written to a copy would escape cmc)."""
from __future__ import annotations

import errno
import os
import struct

from ..linux.abi import (DURABLE_FD, FIONBIO, FIONREAD, F_DUPFD, F_DUPFD_CLOEXEC, F_GETFD,
                         F_GETFL, F_SETFD, F_SETFL, O_NONBLOCK, SOCK_DGRAM, STATE_FD,
                         S_IFSOCK, VFD_BASE)
from .answer import CONTINUE, Err, Ret
from .handler import fd_arg, unsupported
from ..world.net import Sock
from .sockets import close_vfd, get_sock, new_fd, with_sock
from ..linux.syscalls import NR


def sys_close(call):
    proc, args = call.proc, call.args
    return Ret(0) if close_vfd(proc, fd_arg(args[0])) else Err(errno.EBADF)


def _state_fd_copy(call):
    """fcntl/dup on fd 3 or 193: a copy would let state writes escape cmc."""
    proc, args = call.proc, call.args
    fd = fd_arg(args[0])
    if fd not in (STATE_FD, DURABLE_FD):
        return None
    if call.nr == NR["fcntl"] and (args[1] & 0xFFFFFFFF) not in (F_DUPFD, F_DUPFD_CLOEXEC):
        return CONTINUE          # F_GETFL, F_SETFD...: native
    return unsupported(proc, call.nr, args,
                       f"copies fd {fd}, where the node's {'durable ' if fd == 193 else ''}state "
                       "is written; cmc takes state only as writes to fd 3 and 193 themselves")


def refuse_state_copies(fn):
    def wrapper(call):
        verdict = _state_fd_copy(call)
        return verdict if verdict is not None else fn(call)
    wrapper.__name__ = fn.__name__
    return wrapper


@refuse_state_copies
@with_sock
def sys_fcntl(call, sock):
    proc, args = call.proc, call.args
    fd, cmd, arg = fd_arg(args[0]), args[1] & 0xFFFFFFFF, args[2]
    if cmd == F_GETFL:
        return Ret(os.O_RDWR | (O_NONBLOCK if sock.nonblock else 0))
    if cmd == F_SETFL:
        sock.nonblock = bool(arg & O_NONBLOCK)
        return Ret(0)
    if cmd == F_GETFD:
        return Ret(1 if fd in proc.cloexec else 0)
    if cmd == F_SETFD:
        (proc.cloexec.add if arg & 1 else proc.cloexec.discard)(fd)
        return Ret(0)
    if cmd in (F_DUPFD, F_DUPFD_CLOEXEC):
        if arg & 0xFFFFFFFF >= proc.nofile[0]:
            return Err(errno.EINVAL)
        return new_fd(proc, sock, lowest=arg & 0xFFFFFFFF, cloexec=cmd == F_DUPFD_CLOEXEC,
                      dup=True)
    return unsupported(proc, call.nr, args, "uses an fcntl command cmc does not emulate")


@with_sock
def sys_ioctl(call, sock):
    proc, args = call.proc, call.args
    req = args[1] & 0xFFFFFFFF
    if req == FIONBIO:
        raw = proc.read(args[2], 4)
        if raw is None or len(raw) != 4:
            return Err(errno.EFAULT)
        sock.nonblock = struct.unpack("<i", raw)[0] != 0
        return Ret(0)
    if req == FIONREAD:
        if sock.listening:
            return Err(errno.EINVAL)
        if sock.stype == SOCK_DGRAM:
            n = len(sock.rqueue[0][1]) if sock.rqueue else 0
        else:
            n = len(sock.ep.rbuf) if sock.ep is not None else 0
        return Ret(0) if proc.write(args[2], struct.pack("<i", n)) else Err(errno.EFAULT)
    if req & 0xFF00 == 0x5400:      # a terminal's (TCGETS: isatty): a socket is none
        return Err(errno.ENOTTY)
    return unsupported(proc, call.nr, args, "uses an ioctl cmc does not emulate")


def _stat_bytes(sock: Sock) -> bytes:
    st = bytearray(144)
    struct.pack_into("<Q", st, 8, sock.ino)                # st_ino
    struct.pack_into("<I", st, 24, S_IFSOCK | 0o777)      # st_mode
    struct.pack_into("<Q", st, 16, 1)                      # st_nlink
    struct.pack_into("<q", st, 56, 4096)                   # st_blksize
    return bytes(st)


@with_sock
def sys_fstat(call, sock):
    proc, args = call.proc, call.args
    return Ret(0) if proc.write(args[1], _stat_bytes(sock)) else Err(errno.EFAULT)


def sys_newfstatat(call):
    proc, args = call.proc, call.args
    sock = get_sock(proc, fd_arg(args[0]))
    if sock is None:
        return Err(errno.EBADF)
    path = proc.read_cstr(args[1])
    if path != b"":
        return Err(errno.ENOTDIR)
    return Ret(0) if proc.write(args[2], _stat_bytes(sock)) else Err(errno.EFAULT)


@refuse_state_copies
@with_sock
def sys_dup(call, sock):
    proc = call.proc
    return new_fd(proc, sock, dup=True)


@refuse_state_copies
def sys_dup2(call):
    proc, args = call.proc, call.args
    old, new = fd_arg(args[0]), fd_arg(args[1])
    sock = get_sock(proc, old)
    if sock is None and new in (0, 1) and proc.node.stdio:
        close_vfd(proc, new)        # a shell's redirection: this process's fd is real now
        return CONTINUE
    if sock is None:
        return unsupported(proc, call.nr, args,
                           "moves a real descriptor onto a virtual descriptor number")
    if new < VFD_BASE and not (new in (0, 1) and proc.node.stdio):
        return unsupported(proc, call.nr, args,
                           "moves a virtual socket below descriptor 500")
    if call.nr == NR["dup3"] and args[2] & ~0o2000000:
        return Err(errno.EINVAL)
    if new >= proc.nofile[0]:
        return Err(errno.EBADF)
    if old == new:
        return Err(errno.EINVAL) if call.nr == NR["dup3"] else Ret(new)
    close_vfd(proc, new)
    sock.refs += 1
    proc.fds[new] = sock
    if call.nr == NR["dup3"] and args[2] & 0o2000000:
        proc.cloexec.add(new)
    return Ret(new)


def sys_espipe(call):
    proc, args = call.proc, call.args
    return Err(errno.ESPIPE) if get_sock(proc, fd_arg(args[0])) else Err(errno.EBADF)


def sys_einval(call):
    proc, args = call.proc, call.args
    if get_sock(proc, fd_arg(args[0])) is None:
        return Err(errno.EBADF)
    return Err(errno.EINVAL if call.nr == NR["flock"] else errno.ENOTDIR)   # fchdir, getdents64


def sys_unsupported(call):
    """A call on a virtual socket that cmc does not emulate (sendfile, statx, tee ...)."""
    return unsupported(call.proc, call.nr, call.args)
