"""struct sockaddr_in / sockaddr_in6 <-> (ip, port), in the target's memory."""
from __future__ import annotations

import ipaddress
import socket
import struct

AF_INET, AF_INET6 = socket.AF_INET, socket.AF_INET6


def parse(raw: bytes) -> tuple[int, tuple[str, int]] | None:
    """Returns (family, (ip, port)); IPv4-mapped IPv6 addresses become IPv4."""
    if raw is None or len(raw) < 2:
        return None
    family = struct.unpack_from("<H", raw)[0]
    if family == AF_INET and len(raw) >= 8:
        port = struct.unpack_from(">H", raw, 2)[0]
        return family, (socket.inet_ntop(AF_INET, raw[4:8]), port)
    if family == AF_INET6 and len(raw) >= 24:
        port = struct.unpack_from(">H", raw, 2)[0]
        ip = ipaddress.IPv6Address(raw[8:24])
        if ip.ipv4_mapped is not None:
            return family, (str(ip.ipv4_mapped), port)
        return family, (str(ip), port)
    return None


def pack(family: int, addr: tuple[str, int]) -> bytes:
    ip, port = addr
    if family == AF_INET:
        if ":" in ip:
            ip = "0.0.0.0"
        return struct.pack("<H", AF_INET) + struct.pack(">H", port) + socket.inet_pton(AF_INET, ip) + bytes(8)
    if ":" not in ip:
        ip = "::ffff:" + ip
    return (struct.pack("<H", AF_INET6) + struct.pack(">H", port) + bytes(4)
            + socket.inet_pton(AF_INET6, ip) + bytes(4))


def read(proc, addr: int, length: int):
    if not addr or length < 2:
        return None
    return parse(proc.read(addr, min(length, 128)))


def write(proc, addr_ptr: int, len_ptr: int, family: int, addr) -> bool:
    """Write an address where the program asked for one (accept, getsockname...):
    *len_ptr is the room on input and the true length on output."""
    if not addr_ptr:
        return True
    raw_len = proc.read(len_ptr, 4)
    if raw_len is None or len(raw_len) != 4:
        return False
    room = struct.unpack("<I", raw_len)[0]
    data = pack(family, addr)
    if room and not proc.write(addr_ptr, data[:room]):
        return False
    return proc.write(len_ptr, struct.pack("<I", len(data)))
