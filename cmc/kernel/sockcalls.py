"""Emulated calls on virtual sockets (descriptors >= 500), with Linux's errno rules.

The data path and readiness are decided here, because that is where the
interleavings live: a call that cannot complete returns a Block whose `attempt`
is retried whenever the environment acts.
"""
from __future__ import annotations

import errno
import os
import signal
import socket
import struct

from ..errors import TargetError
from . import dgram, sockaddr
from .calls import fd_arg, handles, read_iovecs, unsupported
from .filter import VFD_BASE
from .net import DATA, FIN, RST, Msg, Sock
from .node import CONTINUE, Block, Err, Ret
from .syscalls_x86_64 import NR

# Families that stay inside the node and run natively.
NATIVE_FAMILIES = (socket.AF_UNIX, socket.AF_NETLINK)

SOCK_STREAM, SOCK_DGRAM = 1, 2
SOCK_NONBLOCK, SOCK_CLOEXEC = 0o4000, 0o2000000
O_NONBLOCK = 0o4000
MSG_PEEK, MSG_TRUNC, MSG_DONTWAIT, MSG_WAITALL, MSG_NOSIGNAL = 0x2, 0x20, 0x40, 0x100, 0x4000
POLLIN, POLLPRI, POLLOUT, POLLERR, POLLHUP, POLLNVAL, POLLRDHUP = 1, 2, 4, 8, 0x10, 0x20, 0x2000
POLLRDNORM, POLLWRNORM = 0x40, 0x100
SOL_SOCKET, IPPROTO_TCP = 1, 6
SO_TYPE, SO_ERROR, SO_RCVTIMEO, SO_SNDTIMEO = 3, 4, 20, 21
F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC = 0, 1, 2, 3, 4, 1030
FIONBIO, FIONREAD = 0x5421, 0x541B
S_IFSOCK = 0o140000


def get_sock(node, fd: int) -> Sock | None:
    return node.fds.get(fd)


def lowest_free(node, lowest: int = VFD_BASE) -> int | None:
    """The lowest free virtual descriptor >= lowest, or None when it would not be
    below the node's (emulated) RLIMIT_NOFILE (calls.py): Linux's EMFILE."""
    fd = max(lowest, VFD_BASE)
    while fd in node.fds:
        fd += 1
    soft = node.nofile[0]
    if fd < soft:
        return fd
    if soft <= VFD_BASE:
        raise TargetError(node.cluster.where(node) +
                          f"lowered its RLIMIT_NOFILE to {soft}, below cmc's virtual "
                          f"descriptors (numbered from {VFD_BASE}): it cannot be given a socket")
    return None


def new_fd(node, sock: Sock, lowest: int = VFD_BASE, cloexec: bool = False,
           dup: bool = False) -> Ret | Err:
    """A new virtual descriptor for sock (with dup, one more reference to it), or EMFILE."""
    fd = lowest_free(node, lowest)
    if fd is None:
        return Err(errno.EMFILE)
    if dup:
        sock.refs += 1
    node.fds[fd] = sock
    if cloexec:
        node.cloexec.add(fd)
    return Ret(fd)


def with_sock(fn):
    """Decorator: resolve args[0] to a virtual socket, EBADF when it is none."""
    def wrapper(node, args):
        sock = get_sock(node, fd_arg(args[0]))
        if sock is None:
            return Err(errno.EBADF)
        return fn(node, sock, args)
    wrapper.__name__ = fn.__name__
    return wrapper


# -- creation, naming ------------------------------------------------------------
@handles("socket")
def sys_socket(node, args):
    family, stype, proto = args[0] & 0xFFFFFFFF, args[1] & 0xFFFFFFFF, args[2] & 0xFFFFFFFF
    if family in NATIVE_FAMILIES:
        return CONTINUE      # local to the node: AF_UNIX, netlink
    if family not in (socket.AF_INET, socket.AF_INET6):
        return unsupported(node, node.current.nr, args,
                           "asks for a socket family cmc does not emulate (only AF_INET and "
                           "AF_INET6 are virtual; AF_UNIX and AF_NETLINK run natively), and "
                           "nothing may reach the host's network")
    base = stype & 0xF
    if stype & ~(0xF | SOCK_NONBLOCK | SOCK_CLOEXEC):
        return Err(errno.EINVAL)
    if base not in (SOCK_STREAM, SOCK_DGRAM):
        return unsupported(node, node.current.nr, args,
                           "asks for a socket type cmc does not emulate (TCP streams and UDP "
                           "datagrams are)")
    if (base == SOCK_STREAM and proto not in (0, 6)) or (base == SOCK_DGRAM and proto not in (0, 17)):
        return Err(errno.EPROTONOSUPPORT)
    node.next_ino += 1
    sock = Sock(family, base, nonblock=bool(stype & SOCK_NONBLOCK), ino=node.next_ino)
    return new_fd(node, sock, cloexec=bool(stype & SOCK_CLOEXEC))


@handles("bind")
@with_sock
def sys_bind(node, sock, args):
    parsed = read_addr(node, sock, args[1], args[2])
    if isinstance(parsed, Err):
        return parsed
    if sock.local is not None:
        return Err(errno.EINVAL)
    ip, port = parsed
    if port == 0:
        port = node.cluster.ephemeral_port(node)
    addr = (ip, port)
    if sock.stype == SOCK_DGRAM:
        return dgram.bind(node, sock, addr)
    net = node.cluster.net
    if net.tcp_conflict(sock, addr, listening=False):
        return Err(errno.EADDRINUSE)
    sock.local = addr
    net.tcp.append((node.index, sock))
    return Ret(0)


def read_addr(node, sock: Sock, ptr: int, length: int):
    """The address a bind/connect/sendto names, checked against the socket's family
    as Linux does; an Err when it does not fit."""
    raw = node.read(ptr, min(length, 128)) if ptr and length >= 2 else None
    if raw is None:
        return Err(errno.EFAULT if ptr else errno.EINVAL)
    family = struct.unpack_from("<H", raw)[0]
    if sock.family == socket.AF_INET and family != socket.AF_INET:
        return Err(errno.EAFNOSUPPORT)
    if sock.family == socket.AF_INET6 and (family != socket.AF_INET6 or length < 24):
        return Err(errno.EINVAL)
    parsed = sockaddr.parse(raw)
    return Err(errno.EINVAL) if parsed is None else parsed[1]


@handles("listen")
@with_sock
def sys_listen(node, sock, args):
    if sock.stype == SOCK_DGRAM:
        return Err(errno.EOPNOTSUPP)
    if sock.conn is not None:
        return Err(errno.EINVAL)
    net = node.cluster.net
    if sock.local is None:
        sock.local = ("0.0.0.0" if sock.family == socket.AF_INET else "::",
                      node.cluster.ephemeral_port(node))
        net.tcp.append((node.index, sock))
    if not sock.listening:
        if net.tcp_conflict(sock, sock.local, listening=True):
            return Err(errno.EADDRINUSE)
        sock.listening = True
    return Ret(0)


@handles("getsockname")
@with_sock
def sys_getsockname(node, sock, args):
    local = sock.local or ("0.0.0.0" if sock.family == socket.AF_INET else "::", 0)
    return Ret(0) if sockaddr.write(node, args[1], args[2], sock.family, local) else Err(errno.EFAULT)


@handles("getpeername")
@with_sock
def sys_getpeername(node, sock, args):
    if sock.stype == SOCK_DGRAM:
        if sock.peer is None:
            return Err(errno.ENOTCONN)
        ok = sockaddr.write(node, args[1], args[2], sock.family, sock.peer)
        return Ret(0) if ok else Err(errno.EFAULT)
    if sock.conn is None or not sock.conn.established:
        return Err(errno.ENOTCONN)
    peer = sock.conn.a.addr if sock.side == 1 else sock.conn.dst
    return Ret(0) if sockaddr.write(node, args[1], args[2], sock.family, peer) else Err(errno.EFAULT)


# -- accept, connect ---------------------------------------------------------------
@handles("accept", "accept4")
@with_sock
def sys_accept(node, sock, args):
    if sock.stype == SOCK_DGRAM:
        return Err(errno.EOPNOTSUPP)
    flags = args[3] & 0xFFFFFFFF if node.current.nr == NR["accept4"] else 0
    if not sock.listening or flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC):
        return Err(errno.EINVAL)

    def attempt():
        if sock.backlog and lowest_free(node) is None:
            return Err(errno.EMFILE)        # the connection stays queued, as on Linux
        while sock.backlog:
            conn = sock.backlog.popleft()
            if conn.b is None or conn.b.closed:
                continue
            conn.b.accepted = True
            node.next_ino += 1
            new = Sock(sock.family, SOCK_STREAM, nonblock=bool(flags & SOCK_NONBLOCK),
                       local=conn.dst, conn=conn, side=1, ino=node.next_ino)
            if not sockaddr.write(node, args[1], args[2], sock.family, conn.a.addr):
                return Err(errno.EFAULT)
            return new_fd(node, new, cloexec=bool(flags & SOCK_CLOEXEC))
        return Err(errno.EAGAIN) if sock.nonblock else None
    return Block(attempt, sock_timeout(sock, SO_RCVTIMEO), lambda: Err(errno.EAGAIN), "accept")


@handles("connect")
@with_sock
def sys_connect(node, sock, args):
    if sock.stype == SOCK_DGRAM:
        return dgram.connect(node, sock, args[1], args[2])
    if sock.conn is not None:
        if sock.connecting:           # a non-blocking connect asked again (Linux)
            outcome = connect_outcome(sock, report=True)
            return Err(errno.EALREADY) if outcome is None else outcome
        return Err(errno.EISCONN)
    parsed = read_addr(node, sock, args[1], args[2])
    if isinstance(parsed, Err):
        return parsed
    if sock.listening:
        return Err(errno.EINVAL)
    dst = parsed
    if dst[0] in ("0.0.0.0", "::"):
        dst = ("127.0.0.1" if dst[0] == "0.0.0.0" else "::1", dst[1])
    if sock.local is None:
        sock.local = ("127.0.0.1" if ":" not in dst[0] else "::1", node.cluster.ephemeral_port(node))
        node.cluster.net.tcp.append((node.index, sock))
    sock.conn = node.cluster.net.connect(node.index, sock.local, dst)
    sock.side = 0
    sock.connecting = True
    if sock.nonblock:
        return Err(errno.EINPROGRESS)

    def attempt():
        return connect_outcome(sock, report=True)
    return Block(attempt, None, None, "connect")


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


# -- sending ---------------------------------------------------------------------------
def _pipe_error(node, flags: int):
    if not flags & MSG_NOSIGNAL and not _sigpipe_ignored(node):
        try:
            os.kill(node.pid, signal.SIGPIPE)
        except ProcessLookupError:
            pass
    return Err(errno.EPIPE)


def _sigpipe_ignored(node) -> bool:
    try:
        with open(f"/proc/{node.current.pid}/status") as f:
            for line in f:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGPIPE - 1)))
    except OSError:
        pass
    return False


def sock_send(node, fd: int, buf: int, length: int, flags: int, what: str, dst=None):
    data = node.read(buf, length)
    if data is None:
        return Err(errno.EFAULT)
    return sock_send_bytes(node, fd, data, flags, what, dst)


def sock_send_bytes(node, fd: int, data: bytes, flags: int, what: str, dst=None):
    sock = get_sock(node, fd)
    if sock is None:
        return Err(errno.EBADF)
    if sock.stype == SOCK_DGRAM:
        return dgram.send(node, sock, data, dst)
    if sock.conn is None:
        return Err(errno.ENOTCONN)
    if sock.connecting:
        outcome = connect_outcome(sock, report=False)
        if outcome is None:
            if sock.nonblock or flags & MSG_DONTWAIT:
                return Err(errno.EAGAIN)
            return Block(lambda: _send_when_connected(node, sock, data, flags), None, None, what)
        if isinstance(outcome, Err):
            return Err(errno.ECONNREFUSED)
    return _send_now(node, sock, data, flags)


def _send_when_connected(node, sock, data, flags):
    outcome = connect_outcome(sock, report=False)
    if outcome is None:
        return None
    if isinstance(outcome, Err):
        return outcome
    return _send_now(node, sock, data, flags)


def _send_now(node, sock: Sock, data: bytes, flags: int):
    ep = sock.ep
    if ep.reset:
        if not ep.reset_reported:
            ep.reset_reported = True
            return Err(errno.ECONNRESET)
        return _pipe_error(node, flags)
    if ep.shut_wr:
        return _pipe_error(node, flags)
    if not data:
        return Ret(0)
    node.moved = data
    node.cluster.send(sock.conn, sock.side, Msg(DATA, data))
    return Ret(len(data))


@handles("sendto")
def sys_sendto(node, args):
    dst = None
    sock = get_sock(node, fd_arg(args[0]))
    if args[4] and sock is not None and sock.stype == SOCK_DGRAM:   # a stream ignores it
        dst = read_addr(node, sock, args[4], args[5])
        if isinstance(dst, Err):
            return dst
    return sock_send(node, fd_arg(args[0]), args[1], args[2], args[3], "sendto", dst)


MSGHDR = struct.Struct("<QI4xQQQQi4x")   # name, namelen, iov, iovlen, control, controllen, flags


@handles("sendmsg")
def sys_sendmsg(node, args):
    raw = node.read(args[1], MSGHDR.size)
    if raw is None or len(raw) != MSGHDR.size:
        return Err(errno.EFAULT)
    name, namelen, iov, iovlen, _, _, _ = MSGHDR.unpack(raw)
    if iovlen > 1024:
        return Err(errno.EINVAL)
    data = read_iovecs(node, iov, iovlen)
    if data is None:
        return Err(errno.EFAULT)
    dst = None
    sock = get_sock(node, fd_arg(args[0]))
    if name and sock is not None and sock.stype == SOCK_DGRAM:
        dst = read_addr(node, sock, name, namelen)
        if isinstance(dst, Err):
            return dst
    return sock_send_bytes(node, fd_arg(args[0]), data, args[2], "sendmsg", dst)


# -- receiving ---------------------------------------------------------------------------
def sock_timeout(sock: Sock, opt: int) -> int | None:
    t = sock.options.get((SOL_SOCKET, opt))
    return t if t else None


def sock_recv(node, fd: int, length: int, flags: int, deliver, what: str,
              write_src=lambda src: None):
    """deliver(bytes) writes the bytes where the call wants them and returns
    an error result or None; write_src(addr) likewise for the sender's address."""
    sock = get_sock(node, fd)
    if sock is None:
        return Err(errno.EBADF)
    if sock.stype == SOCK_DGRAM:
        return dgram.recv(node, sock, length, flags, deliver, write_src)
    if sock.conn is None:
        return Err(errno.ENOTCONN)

    def attempt():
        if sock.connecting:
            outcome = connect_outcome(sock, report=False)
            if outcome is None:
                return Err(errno.EAGAIN) if sock.nonblock or flags & MSG_DONTWAIT else None
            if isinstance(outcome, Err):
                return Err(errno.ECONNREFUSED)
        ep = sock.ep
        want = length if flags & MSG_WAITALL else 1
        if ep.rbuf and (len(ep.rbuf) >= min(want, length) or ep.eof or ep.reset) or \
                (length == 0 and (ep.rbuf or ep.eof)):
            data = bytes(ep.rbuf[:length])
            node.moved = data
            if not flags & MSG_PEEK:
                del ep.rbuf[:length]
            bad = deliver(data)
            return bad if bad is not None else Ret(len(data))
        if ep.reset:
            if not ep.reset_reported:
                ep.reset_reported = True
                return Err(errno.ECONNRESET)
            return Ret(0)
        if ep.eof or sock.shut_rd:
            return Ret(0)
        if sock.nonblock or flags & MSG_DONTWAIT:
            return Err(errno.EAGAIN)
        return None
    return Block(attempt, sock_timeout(sock, SO_RCVTIMEO), lambda: Err(errno.EAGAIN), what)


def _to_buffer(node, buf: int):
    return lambda data, truncated=False: None if node.write(buf, data) else Err(errno.EFAULT)


def _to_iovecs(node, iov: int, count: int):
    def deliver(data: bytes, truncated: bool = False):
        raw = node.read(iov, 16 * count)
        if raw is None:
            return Err(errno.EFAULT)
        pos = 0
        for i in range(count):
            base, length = struct.unpack_from("<QQ", raw, 16 * i)
            chunk = data[pos:pos + length]
            if chunk and not node.write(base, chunk):
                return Err(errno.EFAULT)
            pos += len(chunk)
            if pos >= len(data):
                break
        return None
    return deliver


def _iov_total(node, iov: int, count: int) -> int | None:
    raw = node.read(iov, 16 * count) if count <= 1024 else None
    if raw is None:
        return None
    return sum(struct.unpack_from("<QQ", raw, 16 * i)[1] for i in range(count))


@handles("read")
def sys_read(node, args):
    return sock_recv(node, fd_arg(args[0]), args[2], 0, _to_buffer(node, args[1]), "read")


@handles("readv")
def sys_readv(node, args):
    if args[2] > 1024:
        return Err(errno.EINVAL)
    total = _iov_total(node, args[1], args[2])
    if total is None:
        return Err(errno.EFAULT)
    return sock_recv(node, fd_arg(args[0]), total, 0, _to_iovecs(node, args[1], args[2]), "readv")


@handles("recvfrom")
def sys_recvfrom(node, args):
    fd = fd_arg(args[0])
    sock = get_sock(node, fd)
    to_buf = _to_buffer(node, args[1])

    def write_src(src):
        if args[4] and not sockaddr.write(node, args[4], args[5], sock.family, src):
            return Err(errno.EFAULT)
        return None

    def deliver(data, truncated=False):
        bad = to_buf(data)
        if bad is None and sock.stype == SOCK_STREAM:
            bad = write_src(sock.conn.a.addr if sock.side == 1 else sock.conn.dst)
        return bad
    return sock_recv(node, fd, args[2], args[3], deliver, "recvfrom", write_src)


@handles("recvmsg")
def sys_recvmsg(node, args):
    raw = node.read(args[1], MSGHDR.size)
    if raw is None or len(raw) != MSGHDR.size:
        return Err(errno.EFAULT)
    name, _, iov, iovlen, _, _, _ = MSGHDR.unpack(raw)
    total = _iov_total(node, iov, iovlen)
    if total is None:
        return Err(errno.EFAULT)
    to_iov = _to_iovecs(node, iov, iovlen)
    sock = get_sock(node, fd_arg(args[0]))

    def write_src(src):
        if name:
            data = sockaddr.pack(sock.family, src)
            node.write(name, data)
            node.write(args[1] + 8, struct.pack("<I", len(data)))
        return None

    def deliver(data, truncated=False):
        bad = to_iov(data)
        # no address (streams), no control data; MSG_TRUNC for a cut datagram
        if sock.stype == SOCK_STREAM:
            node.write(args[1] + 8, struct.pack("<I", 0))
        node.write(args[1] + 40, struct.pack("<Q", 0))
        node.write(args[1] + 48, struct.pack("<i", MSG_TRUNC if truncated else 0))
        return bad
    return sock_recv(node, fd_arg(args[0]), total, args[2], deliver, "recvmsg", write_src)


# -- closing ---------------------------------------------------------------------------
def release(node, sock: Sock) -> None:
    """The last descriptor of a socket is gone."""
    cluster = node.cluster
    if sock.stype == SOCK_DGRAM:
        dgram.release(node, sock)
        return
    cluster.net.forget(sock)
    if sock.listening:
        for conn in sock.backlog:
            if conn.b is not None and not conn.b.accepted:
                conn.b.closed = True
                cluster.net.reset(conn)
        sock.backlog.clear()
        sock.listening = False
    elif sock.conn is not None:
        ep = sock.ep
        if not ep.reset and not (sock.conn.refused):
            if ep.rbuf or sock.linger_reset:
                cluster.send(sock.conn, sock.side, Msg(RST))
            elif not ep.shut_wr:
                cluster.send(sock.conn, sock.side, Msg(FIN))
        ep.shut_wr = True
        ep.closed = True
    cluster.net.collect()


def close_vfd(node, fd: int) -> bool:
    sock = node.fds.pop(fd, None)
    node.cloexec.discard(fd)
    if sock is None:
        return False
    from .waitcalls import forget_socket
    forget_socket(node, fd)
    sock.refs -= 1
    if sock.refs == 0:
        release(node, sock)
    return True


@handles("close")
def sys_close(node, args):
    return Ret(0) if close_vfd(node, fd_arg(args[0])) else Err(errno.EBADF)


@handles("shutdown")
@with_sock
def sys_shutdown(node, sock, args):
    how = args[1] & 0xFFFFFFFF
    if how not in (0, 1, 2):
        return Err(errno.EINVAL)
    if sock.conn is None or not sock.conn.established:
        return Err(errno.ENOTCONN)
    if how in (0, 2):
        sock.shut_rd = True
    ep = sock.ep
    if how in (1, 2) and not ep.shut_wr and not ep.reset:
        ep.shut_wr = True
        node.cluster.send(sock.conn, sock.side, Msg(FIN))
    return Ret(0)


# -- options, flags, descriptors ------------------------------------------------------
# Socket options. Booleans read back as 0/1 and buffer sizes are doubled, as Linux
# does; options cmc does not know are kept and read back as set (4-byte ints).
SO_REUSEADDR, SO_BROADCAST, SO_SNDBUF, SO_RCVBUF, SO_KEEPALIVE = 2, 6, 7, 8, 9
SO_OOBINLINE, SO_LINGER, SO_REUSEPORT, SO_ACCEPTCONN = 10, 13, 15, 30
SO_PROTOCOL, SO_DOMAIN = 38, 39
IPPROTO_IPV6, IPV6_V6ONLY = 41, 26
TCP_NODELAY, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT = 1, 4, 5, 6
BOOLEAN_OPTIONS = {(SOL_SOCKET, SO_REUSEADDR), (SOL_SOCKET, SO_BROADCAST),
                   (SOL_SOCKET, SO_KEEPALIVE), (SOL_SOCKET, SO_OOBINLINE),
                   (SOL_SOCKET, SO_REUSEPORT), (IPPROTO_TCP, TCP_NODELAY),
                   (IPPROTO_IPV6, IPV6_V6ONLY)}
DEFAULT_BUF = {SO_SNDBUF: 16384, SO_RCVBUF: 131072}     # Linux's loopback defaults
INT = struct.Struct("<i")


@handles("setsockopt")
@with_sock
def sys_setsockopt(node, sock, args):
    level, opt, ptr, optlen = args[1] & 0xFFFFFFFF, args[2] & 0xFFFFFFFF, args[3], args[4]
    raw = node.read(ptr, min(optlen, 64)) if ptr else b""
    if raw is None:
        return Err(errno.EFAULT)
    key = (level, opt)
    if key in ((SOL_SOCKET, SO_RCVTIMEO), (SOL_SOCKET, SO_SNDTIMEO)):
        if len(raw) < 16:
            return Err(errno.EINVAL)
        sec, usec = struct.unpack_from("<qq", raw)
        if not 0 <= usec < 10**6:
            return Err(errno.EDOM)
        sock.options[key] = max(sec, 0) * 10**9 + usec * 1000
        return Ret(0)
    if key == (SOL_SOCKET, SO_LINGER):
        if len(raw) < 8:
            return Err(errno.EINVAL)
        onoff, secs = struct.unpack_from("<ii", raw)
        sock.options[key] = raw[:8]
        sock.linger_reset = bool(onoff) and secs == 0
        return Ret(0)
    if len(raw) < 4:
        return Err(errno.EINVAL)
    value = INT.unpack_from(raw)[0]
    if key in BOOLEAN_OPTIONS:
        sock.options[key] = int(value != 0)
        if key == (IPPROTO_IPV6, IPV6_V6ONLY):
            if sock.family != socket.AF_INET6:
                return Err(errno.ENOPROTOOPT)
            sock.v6only = value != 0
    elif level == SOL_SOCKET and opt in DEFAULT_BUF:
        sock.options[key] = max(value, 0) * 2
    else:
        sock.options[key] = value
    return Ret(0)


def _option_value(sock: Sock, level: int, opt: int) -> bytes:
    key = (level, opt)
    if level == SOL_SOCKET:
        if opt == SO_ERROR:
            value = 0
            if sock.error:                      # e.g. ECONNREFUSED on connected UDP
                value, sock.error = sock.error, 0
            elif sock.conn is not None and sock.conn.refused and not sock.conn.a.reset_reported:
                value = errno.ECONNREFUSED
                sock.conn.a.reset_reported = True
            elif sock.ep is not None and sock.ep.reset and not sock.ep.reset_reported:
                value = errno.ECONNRESET
                sock.ep.reset_reported = True   # reading SO_ERROR clears it
            return INT.pack(value)
        if opt == SO_TYPE:
            return INT.pack(sock.stype)
        if opt == SO_DOMAIN:
            return INT.pack(sock.family)
        if opt == SO_PROTOCOL:
            return INT.pack(6 if sock.stype == SOCK_STREAM else 17)
        if opt == SO_ACCEPTCONN:
            return INT.pack(int(sock.listening))
        if opt in (SO_RCVTIMEO, SO_SNDTIMEO):
            ns = sock.options.get(key, 0)
            return struct.pack("<qq", ns // 10**9, ns % 10**9 // 1000)
        if opt == SO_LINGER:
            return sock.options.get(key, bytes(8))
        if opt in DEFAULT_BUF:
            return INT.pack(sock.options.get(key, DEFAULT_BUF[opt]))
    if key == (IPPROTO_IPV6, IPV6_V6ONLY):
        return INT.pack(int(sock.v6only))
    return INT.pack(sock.options.get(key, 0))


@handles("getsockopt")
@with_sock
def sys_getsockopt(node, sock, args):
    level, opt, ptr, lenptr = args[1] & 0xFFFFFFFF, args[2] & 0xFFFFFFFF, args[3], args[4]
    raw = node.read(lenptr, 4)
    if raw is None or len(raw) != 4:
        return Err(errno.EFAULT)
    room = INT.unpack(raw)[0]
    if room < 0:
        return Err(errno.EINVAL)
    data = _option_value(sock, level, opt)
    if not node.write(ptr, data[:room]):
        return Err(errno.EFAULT)
    node.write(lenptr, struct.pack("<I", min(room, len(data))))
    return Ret(0)


def _state_fd_copy(node, args):
    """fcntl/dup on fd 3 or 193: a copy would let state writes escape cmc."""
    from .filter import DURABLE_FD, STATE_FD
    fd = fd_arg(args[0])
    if fd not in (STATE_FD, DURABLE_FD):
        return None
    if node.current.nr == NR["fcntl"] and (args[1] & 0xFFFFFFFF) not in (F_DUPFD, F_DUPFD_CLOEXEC):
        return CONTINUE          # F_GETFL, F_SETFD...: native
    return unsupported(node, node.current.nr, args,
                       f"copies fd {fd}, where the node's {'durable ' if fd == 193 else ''}state "
                       "is written; cmc takes state only as writes to fd 3 and 193 themselves")


def refuse_state_copies(fn):
    def wrapper(node, args):
        verdict = _state_fd_copy(node, args)
        return verdict if verdict is not None else fn(node, args)
    wrapper.__name__ = fn.__name__
    return wrapper


@handles("fcntl")
@refuse_state_copies
@with_sock
def sys_fcntl(node, sock, args):
    fd, cmd, arg = fd_arg(args[0]), args[1] & 0xFFFFFFFF, args[2]
    if cmd == F_GETFL:
        return Ret(os.O_RDWR | (O_NONBLOCK if sock.nonblock else 0))
    if cmd == F_SETFL:
        sock.nonblock = bool(arg & O_NONBLOCK)
        return Ret(0)
    if cmd == F_GETFD:
        return Ret(1 if fd in node.cloexec else 0)
    if cmd == F_SETFD:
        (node.cloexec.add if arg & 1 else node.cloexec.discard)(fd)
        return Ret(0)
    if cmd in (F_DUPFD, F_DUPFD_CLOEXEC):
        if arg & 0xFFFFFFFF >= node.nofile[0]:
            return Err(errno.EINVAL)
        return new_fd(node, sock, lowest=arg & 0xFFFFFFFF, cloexec=cmd == F_DUPFD_CLOEXEC,
                      dup=True)
    return unsupported(node, node.current.nr, args, "uses an fcntl command cmc does not emulate")


@handles("ioctl")
@with_sock
def sys_ioctl(node, sock, args):
    req = args[1] & 0xFFFFFFFF
    if req == FIONBIO:
        raw = node.read(args[2], 4)
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
        return Ret(0) if node.write(args[2], struct.pack("<i", n)) else Err(errno.EFAULT)
    return unsupported(node, node.current.nr, args, "uses an ioctl cmc does not emulate")


def _stat_bytes(sock: Sock) -> bytes:
    st = bytearray(144)
    struct.pack_into("<Q", st, 8, sock.ino)                # st_ino
    struct.pack_into("<I", st, 24, S_IFSOCK | 0o777)      # st_mode
    struct.pack_into("<Q", st, 16, 1)                      # st_nlink
    struct.pack_into("<q", st, 56, 4096)                   # st_blksize
    return bytes(st)


@handles("fstat")
@with_sock
def sys_fstat(node, sock, args):
    return Ret(0) if node.write(args[1], _stat_bytes(sock)) else Err(errno.EFAULT)


@handles("newfstatat")
def sys_newfstatat(node, args):
    sock = get_sock(node, fd_arg(args[0]))
    if sock is None:
        return Err(errno.EBADF)
    path = node.read_cstr(args[1])
    if path != b"":
        return Err(errno.ENOTDIR)
    return Ret(0) if node.write(args[2], _stat_bytes(sock)) else Err(errno.EFAULT)


@handles("dup")
@refuse_state_copies
@with_sock
def sys_dup(node, sock, args):
    return new_fd(node, sock, dup=True)


@handles("dup2", "dup3")
@refuse_state_copies
def sys_dup2(node, args):
    old, new = fd_arg(args[0]), fd_arg(args[1])
    sock = get_sock(node, old)
    if sock is None:
        return unsupported(node, node.current.nr, args,
                           "moves a real descriptor onto a virtual descriptor number")
    if new < VFD_BASE:
        return unsupported(node, node.current.nr, args,
                           "moves a virtual socket below descriptor 500")
    if node.current.nr == NR["dup3"] and args[2] & ~0o2000000:
        return Err(errno.EINVAL)
    if new >= node.nofile[0]:
        return Err(errno.EBADF)
    if old == new:
        return Err(errno.EINVAL) if node.current.nr == NR["dup3"] else Ret(new)
    close_vfd(node, new)
    sock.refs += 1
    node.fds[new] = sock
    if node.current.nr == NR["dup3"] and args[2] & 0o2000000:
        node.cloexec.add(new)
    return Ret(new)


@handles("lseek", "pread64", "preadv", "preadv2")
def sys_espipe(node, args):
    return Err(errno.ESPIPE) if get_sock(node, fd_arg(args[0])) else Err(errno.EBADF)


@handles("fsync", "fdatasync", "ftruncate", "fchdir", "getdents64", "flock")
def sys_einval(node, args):
    if get_sock(node, fd_arg(args[0])) is None:
        return Err(errno.EBADF)
    return Err(errno.ENOTDIR if node.current.nr in (NR["fchdir"], NR["getdents64"]) else errno.EINVAL)


# -- readiness ---------------------------------------------------------------------------
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




