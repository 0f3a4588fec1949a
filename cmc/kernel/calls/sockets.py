"""A node's virtual sockets: the descriptor table (numbers from VFD_BASE, below the
node's emulated RLIMIT_NOFILE), what closing the last descriptor of a socket does,
and readiness as poll/select/epoll report it."""
from __future__ import annotations

import errno
import socket

from ...errors import TargetError
from . import dgram
from ..linux.abi import (POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDHUP, POLLRDNORM,
                         POLLWRNORM, SOCK_DGRAM, VFD_BASE)
from .answer import Err, Ret
from .handler import fd_arg
from ..world.net import FIN, RST, Msg, Sock

# Families that stay inside the node and run natively.
NATIVE_FAMILIES = (socket.AF_UNIX, socket.AF_NETLINK)


def get_sock(proc, fd: int) -> Sock | None:
    return proc.fds.get(fd)


def lowest_free(proc, lowest: int = VFD_BASE) -> int | None:
    """The lowest free virtual descriptor >= lowest, or None when it would not be
    below the node's (emulated) RLIMIT_NOFILE (limits.py): Linux's EMFILE."""
    fd = max(lowest, VFD_BASE)
    while fd in proc.fds:
        fd += 1
    soft = proc.nofile[0]
    if fd < soft:
        return fd
    if soft <= VFD_BASE:
        raise TargetError(proc.node.where() +
                          f"lowered its RLIMIT_NOFILE to {soft}, below cmc's virtual "
                          f"descriptors (numbered from {VFD_BASE}): it cannot be given a socket")
    return None


def new_fd(proc, sock: Sock, lowest: int = VFD_BASE, cloexec: bool = False,
           dup: bool = False) -> Ret | Err:
    """A new virtual descriptor for sock (with dup, one more reference to it), or EMFILE."""
    fd = lowest_free(proc, lowest)
    if fd is None:
        return Err(errno.EMFILE)
    if dup:
        sock.refs += 1
    proc.fds[fd] = sock
    if cloexec:
        proc.cloexec.add(fd)
    return Ret(fd)


def with_sock(fn):
    """Decorator: resolve args[0] to a virtual socket, EBADF when it is none."""
    def wrapper(call):
        sock = get_sock(call.proc, fd_arg(call.args[0]))
        if sock is None:
            return Err(errno.EBADF)
        return fn(call, sock)
    wrapper.__name__ = fn.__name__
    return wrapper


def connect_outcome(sock: Sock, report: bool):
    """The result of a connect once known (None while CONNECT is in flight)."""
    conn = sock.conn
    if conn.established:
        if report:                    # the connect call itself learns it: once
            sock.connecting = False
        return Ret(0)
    if conn.refused:
        if report:
            sock.connecting = False
            conn.a.reset_reported = True
        return Err(errno.ECONNREFUSED)
    return None


def release(proc, sock: Sock) -> None:
    """The last descriptor of a socket is gone."""
    net = proc.node.net
    if sock.stype == SOCK_DGRAM:
        dgram.release(proc, sock)
        return
    net.forget(sock)
    if sock.listening:
        for conn in sock.backlog:
            if conn.b is not None and not conn.b.accepted:
                conn.b.closed = True
                net.reset(conn)
        sock.backlog.clear()
        sock.listening = False
    elif sock.conn is not None:
        ep = sock.ep
        if not ep.reset and not (sock.conn.refused):
            if ep.rbuf or sock.linger_reset:
                net.send(sock.conn, sock.side, Msg(RST))
            elif not ep.shut_wr:
                net.send(sock.conn, sock.side, Msg(FIN))
        ep.shut_wr = True
        ep.closed = True
    net.collect()


def close_all(proc) -> None:
    """A process ended by itself: the kernel closes its descriptors (a socket shared
    with another process lives on in that one)."""
    for fd in sorted(proc.fds):
        close_vfd(proc, fd)


def close_vfd(proc, fd: int) -> bool:
    sock = proc.fds.pop(fd, None)
    proc.cloexec.discard(fd)
    if sock is None:
        return False
    sock.refs -= 1
    if sock.refs == 0:
        forget_socket(proc, sock)
        release(proc, sock)
    return True


def ready_token(sock: Sock) -> tuple:
    """Changes whenever something arrives for the socket: EPOLLET reports again only then."""
    ep = sock.ep
    if ep is None:
        return (sock.arrivals,)
    return (sock.arrivals, sock.conn.established, sock.conn.refused, ep.arrivals, ep.eof,
            ep.reset)


def readiness(sock: Sock) -> int:
    if sock.stype == SOCK_DGRAM:
        return POLLOUT | POLLWRNORM | (POLLIN | POLLRDNORM if sock.rqueue else 0) | \
            (POLLERR if sock.error else 0)
    if sock.listening:
        return POLLIN if any(c.b is not None and not c.b.closed for c in sock.backlog) else 0
    if sock.conn is None:
        return POLLOUT | POLLHUP
    if sock.connecting:
        outcome = connect_outcome(sock, report=False)
        if outcome is None:
            return 0
        if isinstance(outcome, Err):      # refused: closed both ways, as on Linux
            return POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLERR | POLLHUP | POLLRDHUP
    ep = sock.ep
    if ep.reset:
        return POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLERR | POLLHUP | POLLRDHUP
    ev = POLLOUT | POLLWRNORM          # Linux's tcp_poll: writable, also after SHUT_WR
    if ep.rbuf:
        ev |= POLLIN | POLLRDNORM
    if ep.eof or sock.shut_rd:
        ev |= POLLIN | POLLRDNORM | POLLRDHUP
    if (ep.eof or sock.shut_rd) and ep.shut_wr:
        ev |= POLLHUP
    return ev


def forget_socket(proc, sock: Sock) -> None:
    """The last descriptor of sock, in any process of the node, was closed: it leaves
    every epoll set, as on Linux, where an epoll entry lives as long as the open file
    it watches (a child's close of its copy, or a dup's, leaves the entry)."""
    seen = set()
    for each in proc.node.tasks.procs.values():
        for regs in each.epolls.values():
            if id(regs) in seen:
                continue                # an instance shared since a fork
            seen.add(id(regs))
            for fd in [fd for fd, reg in regs.items() if reg.sock is sock]:
                del regs[fd]
