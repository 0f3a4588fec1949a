"""The emulated network: connections made of two FIFO channels, and virtual sockets.

Every AF_INET/AF_INET6 socket of every node is a `Sock` in cmc's memory; no packet
ever reaches the host. A stream connection is two channels, one per direction;
each send() is one message. The first message on the connector's channel is
CONNECT; delivering it queues the connection on whatever listens on the address
then (or refuses it). FIN (close/shutdown) and RST (close with unread data) are
messages of their own, after the data sent before them (SPEC §3, §8).

The environment acts only on channels (DELIVER, DROP); nodes act only on their
sockets. A ghost client is an endpoint owned by no node: bytes sent to it are
consumed at once and split into reply lines by the cluster.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ...errors import EngineError
from ..linux.abi import SOL_SOCKET

CONNECT, DATA, FIN, RST = "CONNECT", "DATA", "FIN", "RST"


@dataclass
class Msg:
    kind: str
    data: bytes = b""

    def describe(self) -> str:
        if self.kind == DATA:
            return quote(self.data)
        return self.kind


def quote(data: bytes) -> str:
    """Bytes as a double-quoted string with C escapes, the way traces show them."""
    out = []
    for b in data:
        c = chr(b)
        if c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c in "\"\\":
            out.append("\\" + c)
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append(f"\\x{b:02x}")
    return '"' + "".join(out) + '"'


Addr = tuple  # (ip: str, port: int)


def fmt_addr(addr: Addr) -> str:
    ip, port = addr
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


@dataclass(eq=False)
class Endpoint:
    """One side of a connection, as its owner sees it."""

    owner: object            # node index (int) or client name (str)
    addr: Addr
    rbuf: bytearray = field(default_factory=bytearray)
    eof: bool = False        # a FIN was delivered
    reset: bool = False      # the connection was reset
    reset_reported: bool = False
    shut_wr: bool = False    # this side sent its FIN
    closed: bool = False     # the owner closed its descriptor (or is gone)
    accepted: bool = False   # acceptor side: taken off the backlog by accept()
    arrivals: int = 0        # messages delivered to this side (for EPOLLET)


@dataclass(eq=False)
class Connection:
    serial: int              # creation order: only breaks ties between equal keys
    a: Endpoint              # connector
    dst: Addr                # the address connected to
    b: Endpoint | None = None  # acceptor side, once CONNECT is delivered
    chan: tuple = field(default_factory=lambda: (deque(), deque()))   # a->b, b->a
    established: bool = False
    refused: bool = False

    def key(self) -> tuple:
        return (str(self.a.owner), fmt_addr(self.a.addr), fmt_addr(self.dst))

    def end(self, side: int) -> Endpoint | None:
        return self.a if side == 0 else self.b

    def in_flight(self) -> int:
        return len(self.chan[0]) + len(self.chan[1])


@dataclass(eq=False)
class Sock:
    """A virtual socket: what a descriptor >= 500 of a node refers to."""

    family: int
    stype: int
    nonblock: bool = False
    local: Addr | None = None
    listening: bool = False
    backlog: deque = field(default_factory=deque)    # of Connection
    conn: Connection | None = None
    side: int = 0
    connecting: bool = False
    error: int = 0                                    # SO_ERROR
    options: dict = field(default_factory=dict)
    refs: int = 1
    ino: int = 0             # st_ino, distinct per socket
    v6only: bool = False
    shut_rd: bool = False
    linger_reset: bool = False   # SO_LINGER {1, 0}: close sends RST
    arrivals: int = 0        # connections or datagrams that arrived (for EPOLLET)
    rqueue: deque = field(default_factory=deque)     # UDP: (src addr, bytes)
    peer: Addr | None = None                          # UDP: connected peer

    def flag(self, name: str) -> bool:
        opt = {"reuseaddr": (1, 2), "reuseport": (1, 15)}[name]
        return bool(self.options.get(opt))

    @property
    def ep(self) -> Endpoint | None:
        return self.conn.end(self.side) if self.conn else None


@dataclass(eq=False)
class Datagram:
    src_owner: object
    src: Addr
    dst: Addr
    data: bytes

    def group(self) -> tuple:
        return (str(self.src_owner), fmt_addr(self.src), fmt_addr(self.dst),
                self.data.decode("latin-1"))


class Network:
    """Every connection in the world, and who listens where."""

    def __init__(self, channel_cap: int):
        self.conns: list[Connection] = []
        self.tcp: list[tuple[int, Sock]] = []           # bound TCP sockets, bind order
        self.dgrams: list[Datagram] = []                 # UDP datagrams in flight
        self.udp: dict[Addr, tuple[int, Sock]] = {}     # bound UDP sockets
        self.channel_cap = channel_cap
        self._serial = 0

    # -- lookups -------------------------------------------------------------
    def listener_for(self, addr: Addr):
        """Who accepts a connection to addr now: an exact address first, then a
        wildcard (0.0.0.0 or ::, SPEC §8: every address; an IPV6_V6ONLY socket
        only IPv6 ones); among equals, the first bound (SO_REUSEPORT)."""
        ip, port = addr
        listening = [(o, s) for o, s in self.tcp if s.listening and s.local[1] == port]
        for o, s in listening:
            if s.local[0] == ip:
                return o, s
        for o, s in listening:
            if s.local[0] in ("0.0.0.0", "::") and not (s.v6only and ":" not in ip):
                return o, s
        return None

    def tcp_conflict(self, sock: Sock, addr: Addr, listening: bool) -> bool:
        """Would binding (or listening on) addr clash with another TCP socket?
        As on Linux: not when both sockets set SO_REUSEPORT, nor at bind time when
        both set SO_REUSEADDR and the other one is not listening."""
        for _, other in self.tcp:
            if other is sock or other.local[1] != addr[1]:
                continue
            ips = {other.local[0], addr[0]}
            if len(ips) == 2 and not ips & {"0.0.0.0", "::"}:
                continue
            if sock.flag("reuseport") and other.flag("reuseport"):
                continue
            if not listening and not other.listening and sock.flag("reuseaddr") \
                    and other.flag("reuseaddr"):
                continue
            if listening and not other.listening:
                continue
            return True
        return False

    def forget(self, sock: Sock) -> None:
        self.tcp = [(o, s) for o, s in self.tcp if s is not sock]

    def udp_in_use(self, addr: Addr) -> bool:
        return addr in self.udp

    def udp_for(self, addr: Addr):
        ip, port = addr
        for cand in ((ip, port), ("0.0.0.0", port), ("::", port)):
            if cand in self.udp:
                return self.udp[cand]
        return None

    def send_datagram(self, dgram: Datagram) -> None:
        same = sum(1 for d in self.dgrams if d.src == dgram.src and d.dst == dgram.dst)
        if same >= self.channel_cap:
            raise EngineError(f"channel cap exceeded: more than {self.channel_cap} datagrams "
                              f"in flight from {fmt_addr(dgram.src)} to {fmt_addr(dgram.dst)} "
                              "(raise it with --channel-cap)")
        self.dgrams.append(dgram)

    # -- node side -----------------------------------------------------------
    def connect(self, owner: object, local: Addr, dst: Addr) -> Connection:
        self._serial += 1
        conn = Connection(self._serial, Endpoint(owner, local), dst)
        conn.chan[0].append(Msg(CONNECT))
        self.conns.append(conn)
        return conn

    def send(self, conn: Connection, side: int, msg: Msg, names: str = "") -> None:
        chan = conn.chan[side]
        if len(chan) >= self.channel_cap:
            raise EngineError(f"channel cap exceeded: more than {self.channel_cap} messages "
                              f"in flight on {names or conn.key()} (raise it with --channel-cap)")
        chan.append(msg)

    # -- environment side ----------------------------------------------------
    def reset(self, conn: Connection) -> list[object]:
        """Reset a connection: in-flight data lost, both ends get ECONNRESET.
        Returns the owners whose endpoints were told."""
        conn.chan[0].clear()
        conn.chan[1].clear()
        told = []
        if not conn.established:
            conn.refused = True
        for ep in (conn.a, conn.b):
            if ep is not None and not ep.closed:
                ep.reset = True
                told.append(ep.owner)
        return told

    def collect(self) -> None:
        """Forget connections that nobody can observe any more."""
        def gone(ep):
            return ep is None or ep.closed
        self.conns = [c for c in self.conns
                      if not (gone(c.a) and gone(c.b) and c.in_flight() == 0)]


def sock_timeout(sock: Sock, opt: int) -> int | None:
    """SO_RCVTIMEO or SO_SNDTIMEO of a socket in ns, None when not set (no timeout)."""
    t = sock.options.get((SOL_SOCKET, opt))
    return t if t else None
