"""UDP: datagrams are separate messages in flight, delivered in any order (a bag),
each one DELIVERed or DROPped by the environment (docs/target-contract.md, "Worlds
and actions"). A datagram to an
address where no socket is bound is lost when delivered, as on Linux."""
from __future__ import annotations

import errno
import socket

from ..linux import sockaddr
from ..linux.abi import MSG_DONTWAIT, MSG_PEEK, MSG_TRUNC, SO_RCVTIMEO
from .answer import Block, Err, Ret
from ..world.net import Datagram, Sock, sock_timeout


def default_local(proc, sock: Sock, toward: str | None = None):
    """The socket's address, bound to an ephemeral port first if it has none; None when
    every port of the node's range is in use (the caller's EAGAIN, as Linux's autobind)."""
    if sock.local is None:
        v6 = sock.family == socket.AF_INET6 and (toward is None or ":" in toward)
        port = proc.node.net.ephemeral_port(proc.node.index)
        if port is None:
            return None
        sock.local = ("::1" if v6 else "127.0.0.1", port)
        proc.node.net.udp[sock.local] = (proc.node.index, sock)
    return sock.local


def bind(proc, sock: Sock, addr) -> object:
    net = proc.node.net
    if net.udp_in_use(addr):
        return Err(errno.EADDRINUSE)
    sock.local = addr
    net.udp[addr] = (proc.node.index, sock)
    return Ret(0)


def connect(proc, sock: Sock, raw_addr: int, length: int) -> object:
    head = proc.read(raw_addr, 2) if raw_addr and length >= 2 else None
    if head == b"\0\0":                      # AF_UNSPEC: dissolve the association
        sock.peer = None
        return Ret(0)
    parsed = sockaddr.read(proc, raw_addr, length)
    if parsed is None:
        return Err(errno.EINVAL)
    if default_local(proc, sock, parsed[1][0]) is None:
        return Err(errno.EAGAIN)
    sock.peer = parsed[1]
    return Ret(0)


def send(proc, sock: Sock, data: bytes, dst) -> object:
    if sock.error:
        err, sock.error = sock.error, 0
        return Err(err)
    if dst is None:
        dst = sock.peer
    if dst is None:
        return Err(errno.EDESTADDRREQ)
    if len(data) > 65507:
        return Err(errno.EMSGSIZE)
    src = default_local(proc, sock, dst[0])
    if src is None:
        return Err(errno.EAGAIN)
    net = proc.node.net
    if net.restricted(proc.node.index):     # a `peers` line
        found = net.udp_for(dst)
        if found is not None:
            net.check_peer(proc.node.index, found[0], "sends a datagram to", dst)
    net.send_datagram(Datagram(proc.node.index, src, dst, data))
    return Ret(len(data), data)


def recv(proc, sock: Sock, length: int, flags: int, deliver, write_src, what: str) -> Block:
    def attempt():
        if sock.error:                        # an ICMP error for a connected socket
            err, sock.error = sock.error, 0
            return Err(err)
        if sock.rqueue:
            src, data = sock.rqueue[0] if flags & MSG_PEEK else sock.rqueue.popleft()
            cut = len(data) > length
            bad = deliver(data[:length], cut) or write_src(src)
            if bad is not None:
                return bad
            return Ret(len(data) if flags & MSG_TRUNC else min(len(data), length), data[:length])
        if sock.nonblock or flags & MSG_DONTWAIT:
            return Err(errno.EAGAIN)
        return None
    return Block(attempt, sock_timeout(sock, SO_RCVTIMEO), lambda: Err(errno.EAGAIN), what)


def release(proc, sock: Sock) -> None:
    net = proc.node.net
    if sock.local is not None and net.udp.get(sock.local, (None, None))[1] is sock:
        del net.udp[sock.local]
