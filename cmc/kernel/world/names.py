"""Names, as a node sees them (docs/target-contract.md, "Names"): every node's name and
`localhost` are 127.0.0.1 on the one virtual host; the files a resolver reads say so
(/etc/hosts, /etc/hostname, /etc/resolv.conf, /etc/nsswitch.conf: calls/machine.py hands
them out), and a DNS query to the resolver they name is answered at once by `answer`
(world/net.py), the same on every machine: A 127.0.0.1 for a node's name or
`localhost`, no AAAA (an answer with no record), NXDOMAIN for any other name."""
from __future__ import annotations

import struct

RESOLVER = ("127.0.0.53", 53)         # /etc/resolv.conf's nameserver, as a node sees it
HOST = "127.0.0.1"
A, AAAA, IN = 1, 28, 1
NOERROR, FORMERR, NXDOMAIN, NOTIMP = 0, 1, 3, 4
TTL = 60


def hosts(names: list[str]) -> bytes:
    return ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            + "".join(f"{HOST}\t{n}\n" for n in names)).encode()


RESOLV_CONF = f"nameserver {RESOLVER[0]}\noptions timeout:1 attempts:1\n".encode()
NSSWITCH = b"passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"


def _question(query: bytes) -> tuple[str, int, int, int] | None:
    """(name, type, class, end of the question) of a query's one question, or None."""
    labels, at = [], 12
    while True:
        if at >= len(query):
            return None
        n = query[at]
        if n == 0:
            at += 1
            break
        if n & 0xC0 or at + 1 + n > len(query):
            return None                  # a pointer in a question: not from a resolver
        labels.append(query[at + 1:at + 1 + n].decode("ascii", "replace"))
        at += 1 + n
    if at + 4 > len(query):
        return None
    qtype, qclass = struct.unpack_from(">HH", query, at)
    return ".".join(labels), qtype, qclass, at + 4


def answer(query: bytes, names: list[str]) -> bytes | None:
    """The resolver's answer to a DNS query (bytes of one UDP datagram), or None when it
    is no query at all (too short to have a header: nothing is answered)."""
    if len(query) < 12:
        return None
    ident, flags, qdcount = struct.unpack_from(">HHH", query)
    opcode, rd = (flags >> 11) & 0xF, flags & 0x0100
    if flags & 0x8000:
        return None                      # a response, not a query
    found = _question(query) if qdcount == 1 else None
    if opcode != 0:
        rcode, question, records = NOTIMP, b"", b""
    elif found is None:
        rcode, question, records = FORMERR, b"", b""
    else:
        name, qtype, qclass, end = found
        question = query[12:end]
        known = name.lower().rstrip(".") in {"localhost"} | {n.lower() for n in names}
        rcode = NOERROR if known else NXDOMAIN
        records = b""
        if known and qtype == A and qclass == IN:
            records = struct.pack(">HHHIH4B", 0xC00C, A, IN, TTL, 4,
                                  *map(int, HOST.split(".")))
    header = struct.pack(">HHHHHH", ident, 0x8000 | opcode << 11 | 0x0400 | rd | 0x0080
                         | rcode, 1 if question else 0, 1 if records else 0, 0, 0)
    return header + question + records
