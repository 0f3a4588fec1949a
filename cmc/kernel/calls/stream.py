"""Emulated calls on virtual sockets that make and use connections: socket, bind,
listen, accept, connect, the send and receive families and shutdown, with Linux's
errno rules (UDP's halves are in dgram.py).

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

from . import dgram, shm
from ..linux import procfs, sockaddr
from ..linux.abi import (VFD_BASE, MSG_DONTWAIT, MSG_NOSIGNAL, MSG_PEEK, MSG_TRUNC,
                         MSG_WAITALL, MSG_WAITFORONE, SOCK_CLOEXEC, SOCK_DGRAM, SOCK_NONBLOCK, SOCK_STREAM,
                         SO_RCVTIMEO)
from .answer import CONTINUE, Block, Err, Ret
from .handler import fd_arg, read_iovecs, unsupported
from ..world.net import DATA, FIN, Msg, Owner, Sock, sock_timeout
from .sockets import NATIVE_FAMILIES, connect_outcome, get_sock, lowest_free, new_fd, with_sock
from ..linux.syscalls import NAME, NR

MSGHDR = struct.Struct("<QI4xQQQQi4x")   # name, namelen, iov, iovlen, control, controllen, flags
MMSGHDR = MSGHDR.size + 8                # struct mmsghdr: a msghdr, msg_len, padding
UIO_MAXIOV = 1024


def sys_socket(call):
    proc, args = call.proc, call.args
    family, stype, proto = args[0] & 0xFFFFFFFF, args[1] & 0xFFFFFFFF, args[2] & 0xFFFFFFFF
    if family in NATIVE_FAMILIES:
        return CONTINUE      # local to the node: AF_UNIX, netlink
    if family not in (socket.AF_INET, socket.AF_INET6):
        return unsupported(proc, call.nr, args,
                           "asks for a socket family cmc does not emulate (only AF_INET and "
                           "AF_INET6 are virtual; AF_UNIX and AF_NETLINK run natively), and "
                           "nothing may reach the host's network")
    base = stype & 0xF
    if stype & ~(0xF | SOCK_NONBLOCK | SOCK_CLOEXEC):
        return Err(errno.EINVAL)
    if base not in (SOCK_STREAM, SOCK_DGRAM):
        return unsupported(proc, call.nr, args,
                           "asks for a socket type cmc does not emulate (TCP streams and UDP "
                           "datagrams are)")
    if (base == SOCK_STREAM and proto not in (0, 6)) or (base == SOCK_DGRAM and proto not in (0, 17)):
        return Err(errno.EPROTONOSUPPORT)
    proc.node.next_ino += 1
    sock = Sock(family, base, nonblock=bool(stype & SOCK_NONBLOCK), ino=proc.node.next_ino)
    return new_fd(proc, sock, cloexec=bool(stype & SOCK_CLOEXEC))


def sys_bind(call):
    """Every bind comes here (filter.py): a real socket's is shm.py's (an AF_UNIX name
    outside the node's directory is refused), a virtual socket's below."""
    if 0 <= fd_arg(call.args[0]) < VFD_BASE:
        return shm.unix_bind(call)
    return _bind_virtual(call)


@with_sock
def _bind_virtual(call, sock):
    proc, args = call.proc, call.args
    parsed = read_addr(proc, sock, args[1], args[2])
    if isinstance(parsed, Err):
        return parsed
    if sock.local is not None:
        return Err(errno.EINVAL)
    ip, port = parsed
    net = call.net
    if port == 0:
        port = net.ephemeral_port(proc.node.index)
        if port is None:                 # every port of the node's range in use
            return Err(errno.EADDRINUSE)
    addr = (ip, port)
    if sock.stype == SOCK_DGRAM:
        return dgram.bind(proc, sock, addr)
    if net.tcp_conflict(sock, addr, listening=False):
        return Err(errno.EADDRINUSE)
    sock.local = addr
    net.tcp.append((proc.node.index, sock))
    return Ret(0)


def read_addr(proc, sock: Sock, ptr: int, length: int):
    """The address a bind/connect/sendto names, checked against the socket's family
    as Linux does; an Err when it does not fit."""
    raw = proc.read(ptr, min(length, 128)) if ptr and length >= 2 else None
    if raw is None:
        return Err(errno.EFAULT if ptr else errno.EINVAL)
    family = struct.unpack_from("<H", raw)[0]
    if sock.family == socket.AF_INET and family != socket.AF_INET:
        return Err(errno.EAFNOSUPPORT)
    if sock.family == socket.AF_INET6 and (family != socket.AF_INET6 or length < 24):
        return Err(errno.EINVAL)
    parsed = sockaddr.parse(raw)
    return Err(errno.EINVAL) if parsed is None else parsed[1]


@with_sock
def sys_listen(call, sock):
    proc = call.proc
    if sock.stype == SOCK_DGRAM:
        return Err(errno.EOPNOTSUPP)
    if sock.conn is not None:
        return Err(errno.EINVAL)
    net = call.net
    if sock.local is None:
        port = net.ephemeral_port(proc.node.index)
        if port is None:
            return Err(errno.EADDRINUSE)
        sock.local = ("0.0.0.0" if sock.family == socket.AF_INET else "::", port)
        net.tcp.append((proc.node.index, sock))
    if not sock.listening:
        if net.tcp_conflict(sock, sock.local, listening=True):
            return Err(errno.EADDRINUSE)
        sock.listening = True
    return Ret(0)


@with_sock
def sys_getsockname(call, sock):
    proc, args = call.proc, call.args
    local = sock.local or ("0.0.0.0" if sock.family == socket.AF_INET else "::", 0)
    return Ret(0) if sockaddr.write(proc, args[1], args[2], sock.family, local) else Err(errno.EFAULT)


@with_sock
def sys_getpeername(call, sock):
    proc, args = call.proc, call.args
    if sock.stype == SOCK_DGRAM:
        if sock.peer is None:
            return Err(errno.ENOTCONN)
        ok = sockaddr.write(proc, args[1], args[2], sock.family, sock.peer)
        return Ret(0) if ok else Err(errno.EFAULT)
    if sock.conn is None or not sock.conn.established:
        return Err(errno.ENOTCONN)
    peer = sock.conn.a.addr if sock.side == 1 else sock.conn.dst
    return Ret(0) if sockaddr.write(proc, args[1], args[2], sock.family, peer) else Err(errno.EFAULT)


@with_sock
def sys_accept(call, sock):
    proc, args = call.proc, call.args
    if sock.stype == SOCK_DGRAM:
        return Err(errno.EOPNOTSUPP)
    flags = args[3] & 0xFFFFFFFF if call.nr == NR["accept4"] else 0
    if not sock.listening or flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC):
        return Err(errno.EINVAL)

    def attempt():
        if sock.backlog and lowest_free(proc) is None:
            return Err(errno.EMFILE)        # the connection stays queued, as on Linux
        while sock.backlog:
            conn = sock.backlog.popleft()
            if conn.b is None or conn.b.closed:
                continue
            conn.b.accepted = True
            proc.node.next_ino += 1
            new = Sock(sock.family, SOCK_STREAM, nonblock=bool(flags & SOCK_NONBLOCK),
                       local=conn.dst, conn=conn, side=1, ino=proc.node.next_ino)
            if not sockaddr.write(proc, args[1], args[2], sock.family, conn.a.addr):
                return Err(errno.EFAULT)
            return new_fd(proc, new, cloexec=bool(flags & SOCK_CLOEXEC))
        return Err(errno.EAGAIN) if sock.nonblock else None
    return Block(attempt, sock_timeout(sock, SO_RCVTIMEO), lambda: Err(errno.EAGAIN), "accept")


@with_sock
def sys_connect(call, sock):
    proc, args = call.proc, call.args
    if sock.stype == SOCK_DGRAM:
        return dgram.connect(proc, sock, args[1], args[2])
    if sock.conn is not None:
        if sock.connecting:           # a non-blocking connect asked again (Linux)
            outcome = connect_outcome(sock, report=True)
            return Err(errno.EALREADY) if outcome is None else outcome
        return Err(errno.EISCONN)
    parsed = read_addr(proc, sock, args[1], args[2])
    if isinstance(parsed, Err):
        return parsed
    if sock.listening:
        return Err(errno.EINVAL)
    dst = parsed
    if dst[0] in ("0.0.0.0", "::"):
        dst = ("127.0.0.1" if dst[0] == "0.0.0.0" else "::1", dst[1])
    net = call.net
    if sock.local is None:
        port = net.ephemeral_port(proc.node.index)
        if port is None:
            return Err(errno.EADDRNOTAVAIL)
        sock.local = ("127.0.0.1" if ":" not in dst[0] else "::1", port)
        net.tcp.append((proc.node.index, sock))
    if net.restricted(proc.node.index):     # a `peers` line: checked now if someone
        found = net.listener_for(dst)       # listens there already, else when the
        if found is not None:               # CONNECT arrives
            net.check_peer(proc.node.index, found[0], "connects to", dst)
    sock.conn = net.connect(Owner(node=proc.node.index), sock.local, dst)
    sock.side = 0
    sock.connecting = True
    if sock.nonblock:
        return Err(errno.EINPROGRESS)

    def attempt():
        return connect_outcome(sock, report=True)
    return Block(attempt, None, None, "connect")


def _pipe_error(proc, flags: int):
    if not flags & MSG_NOSIGNAL and not _sigpipe_ignored(proc):
        try:
            os.kill(proc.pid, signal.SIGPIPE)
        except ProcessLookupError:
            pass
    return Err(errno.EPIPE)


def _sigpipe_ignored(proc) -> bool:
    """Whether the process ignores SIGPIPE (a disposition, shared by its threads)."""
    return bool(procfs.signal_mask(proc.pid, "SigIgn") & (1 << (signal.SIGPIPE - 1)))


def sock_send(proc, fd: int, buf: int, length: int, flags: int, what: str, dst=None):
    data = proc.read(buf, length)
    if data is None:
        return Err(errno.EFAULT)
    return sock_send_bytes(proc, fd, data, flags, what, dst)


def sock_send_bytes(proc, fd: int, data: bytes, flags: int, what: str, dst=None):
    sock = get_sock(proc, fd)
    if sock is None:
        return Err(errno.EBADF)
    if sock.stype == SOCK_DGRAM:
        return dgram.send(proc, sock, data, dst)
    if sock.conn is None:
        return Err(errno.ENOTCONN)
    if sock.connecting:
        outcome = connect_outcome(sock, report=False)
        if outcome is None:
            if sock.nonblock or flags & MSG_DONTWAIT:
                return Err(errno.EAGAIN)
            return Block(lambda: _send_when_connected(proc, sock, data, flags), None, None, what)
        if isinstance(outcome, Err):
            return Err(errno.ECONNREFUSED)
    return _send_now(proc, sock, data, flags)


def _send_when_connected(proc, sock, data, flags):
    outcome = connect_outcome(sock, report=False)
    if outcome is None:
        return None
    if isinstance(outcome, Err):
        return outcome
    return _send_now(proc, sock, data, flags)


def _send_now(proc, sock: Sock, data: bytes, flags: int):
    ep = sock.ep
    if ep.reset:
        if not ep.reset_reported:
            ep.reset_reported = True
            return Err(errno.ECONNRESET)
        return _pipe_error(proc, flags)
    if ep.shut_wr:
        return _pipe_error(proc, flags)
    if not data:
        return Ret(0)
    proc.node.net.send(sock.conn, sock.side, Msg(DATA, data))
    return Ret(len(data), data)


def sys_sendto(call):
    proc, args = call.proc, call.args
    dst = None
    sock = get_sock(proc, fd_arg(args[0]))
    if args[4] and sock is not None and sock.stype == SOCK_DGRAM:   # a stream ignores it
        dst = read_addr(proc, sock, args[4], args[5])
        if isinstance(dst, Err):
            return dst
    return sock_send(proc, fd_arg(args[0]), args[1], args[2], args[3], "sendto", dst)


def sys_sendmsg(call):
    return _sendmsg_at(call.proc, fd_arg(call.args[0]), call.args[1], call.args[2], "sendmsg")


def _sendmsg_at(proc, fd: int, hdr: int, flags: int, what: str):
    """sendmsg of the msghdr at `hdr`."""
    raw = proc.read(hdr, MSGHDR.size)
    if raw is None or len(raw) != MSGHDR.size:
        return Err(errno.EFAULT)
    name, namelen, iov, iovlen, _, _, _ = MSGHDR.unpack(raw)
    if iovlen > UIO_MAXIOV:
        return Err(errno.EINVAL)
    data = read_iovecs(proc, iov, iovlen)
    if data is None:
        return Err(errno.EFAULT)
    dst = None
    sock = get_sock(proc, fd)
    if name and sock is not None and sock.stype == SOCK_DGRAM:
        dst = read_addr(proc, sock, name, namelen)
        if isinstance(dst, Err):
            return dst
    return sock_send_bytes(proc, fd, data, flags, what, dst)


def sys_sendmmsg(call):
    """sendmmsg: each message of the vector sent as sendmsg sends it, its `msg_len` set;
    the count sent, or the first message's error (an error after the first ends the
    batch: the count so far, as Linux). A first message that must wait (a connection
    still being made) is waited for, and the batch is that message."""
    proc, args = call.proc, call.args
    fd, vec, vlen, flags = fd_arg(args[0]), args[1], min(args[2] & 0xFFFFFFFF, UIO_MAXIOV), args[3]

    def sent(i: int, result) -> bool:
        return proc.write(vec + MMSGHDR * i + MSGHDR.size, struct.pack("<I", result.val))
    count = 0
    for i in range(vlen):
        result = _sendmsg_at(proc, fd, vec + MMSGHDR * i, flags, "sendmmsg")
        if isinstance(result, Block) and i == 0:
            first = result

            def attempt():
                done = first.attempt()
                if done is None or isinstance(done, Err):
                    return done
                return Ret(1) if sent(0, done) else Err(errno.EFAULT)
            return Block(attempt, first.timeout_ns, first.on_fire, "sendmmsg")
        if not isinstance(result, Ret):           # an error, or a later one must wait
            return result if count == 0 and isinstance(result, Err) else Ret(count)
        if not sent(i, result):
            return Err(errno.EFAULT) if count == 0 else Ret(count)
        count += 1
    return Ret(count)


def sock_recv(proc, fd: int, length: int, flags: int, deliver, what: str,
              write_src=lambda src: None):
    """deliver(bytes) writes the bytes where the call wants them and returns
    an error result or None; write_src(addr) likewise for the sender's address."""
    sock = get_sock(proc, fd)
    if sock is None:
        return Err(errno.EBADF)
    if sock.stype == SOCK_DGRAM:
        return dgram.recv(proc, sock, length, flags, deliver, write_src, what)
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
            if not flags & MSG_PEEK:
                del ep.rbuf[:length]
            bad = deliver(data)
            return bad if bad is not None else Ret(len(data), data)
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


def _to_buffer(proc, buf: int):
    return lambda data, truncated=False: None if proc.write(buf, data) else Err(errno.EFAULT)


def _to_iovecs(proc, iov: int, count: int):
    def deliver(data: bytes, truncated: bool = False):
        raw = proc.read(iov, 16 * count)
        if raw is None:
            return Err(errno.EFAULT)
        pos = 0
        for i in range(count):
            base, length = struct.unpack_from("<QQ", raw, 16 * i)
            chunk = data[pos:pos + length]
            if chunk and not proc.write(base, chunk):
                return Err(errno.EFAULT)
            pos += len(chunk)
            if pos >= len(data):
                break
        return None
    return deliver


def _iov_total(proc, iov: int, count: int) -> int | None:
    raw = proc.read(iov, 16 * count) if count <= 1024 else None
    if raw is None:
        return None
    return sum(struct.unpack_from("<QQ", raw, 16 * i)[1] for i in range(count))


def sys_read(call):
    proc, args = call.proc, call.args
    return sock_recv(proc, fd_arg(args[0]), args[2], 0, _to_buffer(proc, args[1]), "read")


def sys_readv(call):
    proc, args = call.proc, call.args
    if args[2] > 1024:
        return Err(errno.EINVAL)
    total = _iov_total(proc, args[1], args[2])
    if total is None:
        return Err(errno.EFAULT)
    return sock_recv(proc, fd_arg(args[0]), total, 0, _to_iovecs(proc, args[1], args[2]), "readv")


def sys_receive_from(call):
    proc, args = call.proc, call.args
    fd = fd_arg(args[0])
    sock = get_sock(proc, fd)
    to_buf = _to_buffer(proc, args[1])

    def write_src(src):
        if args[4] and not sockaddr.write(proc, args[4], args[5], sock.family, src):
            return Err(errno.EFAULT)
        return None

    def deliver(data, truncated=False):
        bad = to_buf(data)
        if bad is None and sock.stype == SOCK_STREAM:
            bad = write_src(sock.conn.a.addr if sock.side == 1 else sock.conn.dst)
        return bad
    return sock_recv(proc, fd, args[2], args[3], deliver, NAME[call.nr], write_src)


def sys_recvmsg(call):
    return _recvmsg_at(call.proc, fd_arg(call.args[0]), call.args[1], call.args[2], "recvmsg")


def _recvmsg_at(proc, fd: int, hdr: int, flags: int, what: str):
    """recvmsg into the msghdr at `hdr`."""
    raw = proc.read(hdr, MSGHDR.size)
    if raw is None or len(raw) != MSGHDR.size:
        return Err(errno.EFAULT)
    name, _, iov, iovlen, _, _, _ = MSGHDR.unpack(raw)
    total = _iov_total(proc, iov, iovlen)
    if total is None:
        return Err(errno.EFAULT)
    to_iov = _to_iovecs(proc, iov, iovlen)
    sock = get_sock(proc, fd)

    def write_src(src):
        if name:
            data = sockaddr.pack(sock.family, src)
            proc.write(name, data)
            proc.write(hdr + 8, struct.pack("<I", len(data)))
        return None

    def deliver(data, truncated=False):
        bad = to_iov(data)
        # no address (streams), no control data; MSG_TRUNC for a cut datagram
        if sock.stype == SOCK_STREAM:
            proc.write(hdr + 8, struct.pack("<I", 0))
        proc.write(hdr + 40, struct.pack("<Q", 0))
        proc.write(hdr + 48, struct.pack("<i", MSG_TRUNC if truncated else 0))
        return bad
    return sock_recv(proc, fd, total, flags, deliver, what, write_src)


def sys_recvmmsg(call):
    """recvmmsg: the first message waited for as recvmsg waits (its `timeout` argument
    is not, as on Linux, which looks at it only after a message arrived); then, into
    the vector's next entries, what has arrived already, as with MSG_WAITFORONE (a
    blocking call without it, on Linux, would go on waiting for the whole vector).
    Each entry's `msg_len` is set; the count, or the first message's error."""
    proc, args = call.proc, call.args
    fd, vec, vlen = fd_arg(args[0]), args[1], min(args[2] & 0xFFFFFFFF, UIO_MAXIOV)
    flags = args[3] & ~MSG_WAITFORONE
    if vlen == 0:
        return Ret(0)

    def got(i: int, result) -> bool:
        return proc.write(vec + MMSGHDR * i + MSGHDR.size, struct.pack("<I", result.val))

    def rest(first):
        if isinstance(first, Err):
            return first
        if not got(0, first):
            return Err(errno.EFAULT)
        count = 1
        while count < vlen:
            block = _recvmsg_at(proc, fd, vec + MMSGHDR * count, flags | MSG_DONTWAIT,
                                "recvmmsg")
            result = block.attempt() if isinstance(block, Block) else block
            if not isinstance(result, Ret) or not got(count, result):
                break
            count += 1
        return Ret(count)
    first = _recvmsg_at(proc, fd, vec, flags, "recvmmsg")
    if not isinstance(first, Block):
        return rest(first)

    def attempt():
        done = first.attempt()
        return None if done is None else rest(done)
    on_fire = first.on_fire
    return Block(attempt, first.timeout_ns, on_fire and (lambda: rest(on_fire())), "recvmmsg")


@with_sock
def sys_shutdown(call, sock):
    args = call.args
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
        call.net.send(sock.conn, sock.side, Msg(FIN))
    return Ret(0)
