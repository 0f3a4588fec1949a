"""poll, select and epoll over virtual sockets, and over real descriptors mixed in.

Readiness of a virtual socket is decided by cmc (that is where the interleavings
live). A real descriptor (a pipe, a file, an AF_UNIX socket) in the same set is
answered truthfully: cmc takes a copy of it with pidfd_getfd and asks the real
kernel without waiting. A call with a finite timeout is always cmc's, since its
timeout is logical time (a FIRE); a set of real descriptors only, waited for
without a timeout, runs natively.

epoll: the epoll instance is a real one, created by cmc and placed in the node
with SECCOMP_IOCTL_NOTIF_ADDFD, so cmc knows every epoll fd number of a node.
Real descriptors are registered in it natively; virtual sockets (epoll_ctl with
an fd >= 500) are registered with cmc only. epoll_wait merges the two: virtual
registrations first, in registration order, then whatever the real instance
reports without waiting. EPOLLET reports a virtual socket again only when its
input side changed since the last report; EPOLLONESHOT disarms it until the
next EPOLL_CTL_MOD.
"""
from __future__ import annotations

import errno
import os
import select
import struct

from ..linux import _native
from ..linux.abi import POLLERR, POLLHUP, POLLIN, POLLNVAL, POLLOUT, POLLPRI, VFD_BASE
from .answer import ANSWERED, CONTINUE, Block, Err, Ret
from .handler import fd_arg, read_timespec
from .sockets import get_sock, readiness, ready_token
from ..linux.syscalls import NR

POLLFD = struct.Struct("<ihh")
EPOLL_EVENT = struct.Struct("<IQ")          # packed on x86_64
EPOLL_CTL_ADD, EPOLL_CTL_DEL, EPOLL_CTL_MOD = 1, 2, 3
EPOLLONESHOT, EPOLLET = 1 << 30, 1 << 31
EPOLL_CLOEXEC = 0o2000000


def real_revents(proc, fd: int, events: int) -> int:
    """What the real kernel says about one of the node's real descriptors, now."""
    try:
        copy = _native.getfd(proc.pid, fd, proc.pidfd)
    except OSError:
        return POLLNVAL
    try:
        p = select.poll()
        p.register(copy, events)
        got = p.poll(0)
        return got[0][1] if got else 0
    finally:
        os.close(copy)


# -- poll, ppoll ---------------------------------------------------------------------
def _poll(proc, fds_addr: int, nfds: int, timeout_ns: int | None, what: str):
    if nfds > 4096:
        return Err(errno.EINVAL)
    raw = proc.read(fds_addr, POLLFD.size * nfds) if nfds else b""
    if raw is None or len(raw) != POLLFD.size * nfds:
        return Err(errno.EFAULT)
    entries = [POLLFD.unpack_from(raw, POLLFD.size * i) for i in range(nfds)]
    if timeout_ns is None and not any(fd >= VFD_BASE or fd in proc.fds for fd, _, _ in entries):
        return CONTINUE          # real descriptors only, no timeout: the real kernel waits

    def scan():
        out = bytearray(raw)
        count = 0
        for i, (fd, events, _) in enumerate(entries):
            rev = 0
            if fd >= VFD_BASE or fd in proc.fds:
                sock = get_sock(proc, fd)
                rev = POLLNVAL if sock is None else readiness(sock) & (events | POLLERR | POLLHUP)
            elif fd >= 0:
                rev = real_revents(proc, fd, events & 0xFFFF)
            struct.pack_into("<h", out, POLLFD.size * i + 6, rev)
            count += bool(rev)
        return count, out

    def attempt():
        count, out = scan()
        if count == 0:
            return None
        return Ret(count) if proc.write(fds_addr, bytes(out)) else Err(errno.EFAULT)

    def fired():
        _, out = scan()
        proc.write(fds_addr, bytes(out))
        return Ret(0)
    return Block(attempt, timeout_ns, fired, what)


def sys_poll(call):
    proc, args = call.proc, call.args
    ms = fd_arg(args[2])
    return _poll(proc, args[0], args[1], None if ms < 0 else ms * 10**6, "poll")


def sys_ppoll(call):
    proc, args = call.proc, call.args
    timeout = read_timespec(proc, args[2]) if args[2] else None
    if args[2] and timeout is None:
        return Err(errno.EINVAL)
    return _poll(proc, args[0], args[1], timeout, "ppoll")


# -- select, pselect6 ----------------------------------------------------------------
def _select(proc, nfds: int, rset: int, wset: int, xset: int, timeout_ns, write_timeout, what):
    if nfds < 0 or nfds > 1024:
        return Err(errno.EINVAL)
    nbytes = (nfds + 63) // 64 * 8
    sets = []
    for addr in (rset, wset, xset):
        if not addr:
            sets.append(None)
            continue
        raw = proc.read(addr, nbytes)
        if raw is None or len(raw) != nbytes:
            return Err(errno.EFAULT)
        sets.append(int.from_bytes(raw, "little"))
    wanted = [fd for fd in range(nfds) if any(s is not None and s >> fd & 1 for s in sets)]
    if timeout_ns is None and not any(fd >= VFD_BASE or fd in proc.fds for fd in wanted):
        return CONTINUE          # real descriptors only, no timeout: the real kernel waits
    masks = (POLLIN | POLLHUP | POLLERR, POLLOUT | POLLERR, POLLPRI)

    def scan():
        result = [0 if s is not None else None for s in sets]
        count = 0
        for fd in wanted:
            if fd >= VFD_BASE or fd in proc.fds:
                sock = get_sock(proc, fd)
                if sock is None:
                    return None, Err(errno.EBADF)
                rev = readiness(sock)
            else:
                rev = real_revents(proc, fd, POLLIN | POLLOUT | POLLPRI)
                if rev & POLLNVAL:
                    return None, Err(errno.EBADF)
            for i, s in enumerate(sets):
                if s is not None and s >> fd & 1 and rev & masks[i]:
                    result[i] |= 1 << fd
                    count += 1
        return count, result

    def write_sets(result):
        for addr, value in zip((rset, wset, xset), result):
            if addr and value is not None:
                proc.write(addr, value.to_bytes(nbytes, "little"))

    def attempt():
        count, result = scan()
        if count is None:
            return result
        if count == 0:
            return None
        write_sets(result)
        return Ret(count)

    def fired():
        write_sets([0 if s is not None else None for s in sets])
        write_timeout()
        return Ret(0)
    return Block(attempt, timeout_ns, fired, what)


def sys_select(call):
    proc, args = call.proc, call.args
    timeout = None
    if args[4]:
        raw = proc.read(args[4], 16)
        if raw is None or len(raw) != 16:
            return Err(errno.EFAULT)
        sec, usec = struct.unpack("<qq", raw)
        if sec < 0 or not 0 <= usec < 10**6:
            return Err(errno.EINVAL)
        timeout = sec * 10**9 + usec * 1000

    def zero_timeout():      # Linux leaves the time not slept in *timeout
        if args[4]:
            proc.write(args[4], bytes(16))
    return _select(proc, fd_arg(args[0]), args[1], args[2], args[3], timeout, zero_timeout,
                   "select")


def sys_pselect6(call):
    proc, args = call.proc, call.args
    timeout = read_timespec(proc, args[4]) if args[4] else None
    if args[4] and timeout is None:
        return Err(errno.EINVAL)
    def zero_timeout():      # the syscall leaves the time not slept in *timeout
        if args[4]:
            proc.write(args[4], bytes(16))
    return _select(proc, fd_arg(args[0]), args[1], args[2], args[3], timeout, zero_timeout,
                   "pselect6")


# -- epoll -----------------------------------------------------------------------------
class Registration:
    """An epoll entry: the socket it watches (it stays while the socket is open in
    any process, as Linux keeps an entry while its open file lives), what for, and
    the user's data."""
    def __init__(self, sock, events: int, data: int):
        self.sock = sock
        self.events = events
        self.data = data
        self.armed = True
        self.reported = None      # ready_token at the last EPOLLET report


def sys_epoll_create(call):
    proc, args = call.proc, call.args
    flags = args[0] if call.nr == NR["epoll_create1"] else 0
    if call.nr == NR["epoll_create"] and fd_arg(args[0]) <= 0:
        return Err(errno.EINVAL)
    if flags & ~EPOLL_CLOEXEC:
        return Err(errno.EINVAL)
    ep = select.epoll()
    try:
        fd = _native.addfd(call.listener, call.id, ep.fileno(),
                           cloexec=bool(flags & EPOLL_CLOEXEC))
    except OSError as e:
        return Err(e.errno)
    finally:
        ep.close()
    proc.epolls[fd] = {}
    return ANSWERED


def sys_epoll_ctl(call):
    proc, args = call.proc, call.args
    epfd, op, fd = fd_arg(args[0]), fd_arg(args[1]), fd_arg(args[2])
    regs = proc.epolls.get(epfd)
    sock = get_sock(proc, fd)
    if regs is None:
        return Err(errno.EBADF if epfd >= VFD_BASE else errno.EINVAL)
    if sock is None:
        return Err(errno.EBADF)
    if op in (EPOLL_CTL_ADD, EPOLL_CTL_MOD):
        raw = proc.read(args[3], EPOLL_EVENT.size)
        if raw is None or len(raw) != EPOLL_EVENT.size:
            return Err(errno.EFAULT)
        events, data = EPOLL_EVENT.unpack(raw)
    mine = fd in regs and regs[fd].sock is sock      # an entry is (number, socket)
    if op == EPOLL_CTL_ADD:
        if mine:
            return Err(errno.EEXIST)
        regs[fd] = Registration(sock, events, data)
    elif op == EPOLL_CTL_MOD:
        if not mine:
            return Err(errno.ENOENT)
        regs[fd] = Registration(sock, events, data)
    elif op == EPOLL_CTL_DEL:
        if not mine:
            return Err(errno.ENOENT)
        del regs[fd]
    else:
        return Err(errno.EINVAL)
    return Ret(0)


def _epoll_wait(proc, epfd: int, events_addr: int, maxevents: int, timeout_ns, what: str):
    regs = proc.epolls.get(epfd)
    if not regs and (timeout_ns is None or epfd not in proc.epolls):
        return CONTINUE          # nothing virtual in it, no timeout: the real epoll waits
    regs = regs or {}
    if maxevents <= 0:
        return Err(errno.EINVAL)

    def scan():
        out = []
        for fd, reg in list(regs.items()):
            sock = reg.sock
            if not reg.armed:
                continue
            rev = readiness(sock) & (reg.events | POLLERR | POLLHUP) & 0xFFFF
            if not rev:
                continue
            if reg.events & EPOLLET:
                token = ready_token(sock)
                if token == reg.reported:
                    continue
                reg.reported = token
            if reg.events & EPOLLONESHOT:
                reg.armed = False
            out.append((rev, reg.data))
            if len(out) == maxevents:
                return out
        try:
            copy = _native.getfd(proc.pid, epfd, proc.pidfd)
        except OSError:
            return out
        try:
            out += _native.epoll_ready(copy, maxevents - len(out))
        finally:
            os.close(copy)
        return out

    def attempt():
        ready = scan()
        if not ready:
            return None
        data = b"".join(EPOLL_EVENT.pack(ev, d) for ev, d in ready)
        return Ret(len(ready)) if proc.write(events_addr, data) else Err(errno.EFAULT)
    return Block(attempt, timeout_ns, lambda: Ret(0), what)


def sys_epoll_wait(call):
    proc, args = call.proc, call.args
    ms = fd_arg(args[3])
    return _epoll_wait(proc, fd_arg(args[0]), args[1], fd_arg(args[2]),
                       None if ms < 0 else ms * 10**6, "epoll_wait")


def sys_epoll_pwait2(call):
    proc, args = call.proc, call.args
    timeout = read_timespec(proc, args[3]) if args[3] else None
    if args[3] and timeout is None:
        return Err(errno.EINVAL)
    return _epoll_wait(proc, fd_arg(args[0]), args[1], fd_arg(args[2]), timeout, "epoll_pwait2")
