"""setsockopt and getsockopt on virtual sockets."""
from __future__ import annotations

import errno
import socket
import struct

from ..linux.abi import (IPPROTO_IPV6, IPPROTO_TCP, IPV6_V6ONLY, SOCK_STREAM, SOL_SOCKET,
                         SO_ACCEPTCONN, SO_BROADCAST, SO_DOMAIN, SO_ERROR, SO_KEEPALIVE,
                         SO_LINGER, SO_OOBINLINE, SO_PROTOCOL, SO_RCVBUF, SO_RCVTIMEO,
                         SO_REUSEADDR, SO_REUSEPORT, SO_SNDBUF, SO_SNDTIMEO, SO_TYPE,
                         TCP_NODELAY)
from .answer import Err, Ret
from ..world.net import Sock
from .sockets import with_sock

BOOLEAN_OPTIONS = {(SOL_SOCKET, SO_REUSEADDR), (SOL_SOCKET, SO_BROADCAST),
                   (SOL_SOCKET, SO_KEEPALIVE), (SOL_SOCKET, SO_OOBINLINE),
                   (SOL_SOCKET, SO_REUSEPORT), (IPPROTO_TCP, TCP_NODELAY),
                   (IPPROTO_IPV6, IPV6_V6ONLY)}

DEFAULT_BUF = {SO_SNDBUF: 16384, SO_RCVBUF: 131072}     # Linux's loopback defaults

INT = struct.Struct("<i")


@with_sock
def sys_setsockopt(call, sock):
    proc, args = call.proc, call.args
    level, opt, ptr, optlen = args[1] & 0xFFFFFFFF, args[2] & 0xFFFFFFFF, args[3], args[4]
    raw = proc.read(ptr, min(optlen, 64)) if ptr else b""
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


@with_sock
def sys_getsockopt(call, sock):
    proc, args = call.proc, call.args
    level, opt, ptr, lenptr = args[1] & 0xFFFFFFFF, args[2] & 0xFFFFFFFF, args[3], args[4]
    raw = proc.read(lenptr, 4)
    if raw is None or len(raw) != 4:
        return Err(errno.EFAULT)
    room = INT.unpack(raw)[0]
    if room < 0:
        return Err(errno.EINVAL)
    data = _option_value(sock, level, opt)
    if not proc.write(ptr, data[:room]):
        return Err(errno.EFAULT)
    proc.write(lenptr, struct.pack("<I", min(room, len(data))))
    return Ret(0)
