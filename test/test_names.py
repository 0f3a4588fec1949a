"""The resolver cmc answers for (cmc/kernel/world/names.py), in process: DNS queries as
glibc's resolver sends them, and what comes back."""
from __future__ import annotations

import struct

from cmc.kernel.world import names

NODES = ["zk1", "zk2"]


def query(name: str, qtype: int = names.A, ident: int = 0x1234, flags: int = 0x0100) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".") if p)
    return struct.pack(">HHHHHH", ident, flags, 1, 0, 0, 0) + labels + b"\0" + \
        struct.pack(">HH", qtype, names.IN)


def parse(reply: bytes) -> tuple[int, int, int, int, bytes]:
    ident, flags, qd, an, _, _ = struct.unpack_from(">HHHHHH", reply)
    return ident, flags & 0xF, qd, an, reply


def test_a_nodes_name_is_the_one_virtual_host():
    for name in ("zk1", "ZK2", "localhost", "zk1."):
        ident, rcode, qd, an, reply = parse(names.answer(query(name), NODES))
        assert (ident, rcode, qd, an) == (0x1234, names.NOERROR, 1, 1)
        assert reply.endswith(bytes([127, 0, 0, 1]))
        assert reply[2] & 0x80 and reply[2] & 0x04 and reply[2] & 0x01   # QR, AA, RD
        assert reply[12:12 + len(query(name)) - 12] == query(name)[12:]  # the question


def test_no_aaaa_and_nxdomain_for_the_rest():
    assert parse(names.answer(query("zk1", names.AAAA), NODES))[1:4] == (names.NOERROR, 1, 0)
    assert parse(names.answer(query("nosuch.example"), NODES))[1:4] == (names.NXDOMAIN, 1, 0)
    assert parse(names.answer(query("zk1.example"), NODES))[1:4] == (names.NXDOMAIN, 1, 0)


def test_what_is_no_query_gets_no_answer_or_an_error():
    assert names.answer(b"\x00" * 5, NODES) is None                       # no header
    assert names.answer(query("zk1", flags=0x8100), NODES) is None        # a response
    assert parse(names.answer(query("zk1")[:-3], NODES))[1] == names.FORMERR
    assert parse(names.answer(query("zk1", flags=0x2900), NODES))[1] == names.NOTIMP


def test_the_files_a_resolver_reads():
    assert names.hosts(NODES).decode().splitlines() == [
        "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
        "127.0.0.1\tzk1", "127.0.0.1\tzk2"]
    assert names.RESOLV_CONF.startswith(b"nameserver 127.0.0.53\n")
    assert b"hosts: files dns\n" in names.NSSWITCH
