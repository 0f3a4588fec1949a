"""The emulated network: connections made of two FIFO channels, and virtual sockets.

Every AF_INET/AF_INET6 socket of every node is a `Sock` in cmc's memory; no packet
ever reaches the host. A stream connection is two channels, one per direction;
each send() is one message. The first message on the connector's channel is
CONNECT; delivering it queues the connection on whatever listens on the address
then (or refuses it). FIN (close/shutdown) and RST (close with unread data) are
messages of their own, after the data sent before them (docs/target-contract.md,
"The network: virtual sockets").

The environment acts only on channels (DELIVER, DROP, DUP); nodes act only on their
sockets, and send through `Network.send`. A ghost client is an endpoint owned by no
node: bytes sent to it are consumed at once and split into reply lines (clients.py).
The cluster makes the world's network at construction and tells it who is at the ends
(`attach`: the world's setting, its clients and their ledger); a world some of whose
nodes speak Maelstrom's protocol has Maelstrom's network (kernel/maelstrom.py), which
adds its letters, clients and services through the hooks at the end of `Network`.

The network also holds the rules of what the environment may do to it and what
that does (`keyed`, `messages`, `deliver`, `drop`, `dup`, the datagram ones, and
`crash`): each returns who was told what (`Told`), which the cluster hands on --
to a node's input history, or, for a reset, to the ghost client it ends.
"""
from __future__ import annotations

import errno
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ...errors import EngineError
from ..linux.abi import SOL_SOCKET
from . import names

CONNECT, DATA, FIN, RST = "CONNECT", "DATA", "FIN", "RST"


@dataclass
class Msg:
    kind: str
    data: bytes = b""
    sent: int = field(default=0, compare=False)     # the clock when it was sent (time virtual)

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


@dataclass(frozen=True)
class Owner:
    """Who holds one end of a connection: a node (its index) or a ghost client (its
    name); written as the one or the other in a connection's key."""
    node: int | None = None
    client: str | None = None

    def __str__(self) -> str:
        return self.client if self.client is not None else str(self.node)


def fmt_addr(addr: Addr) -> str:
    ip, port = addr
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


@dataclass(eq=False)
class Endpoint:
    """One side of a connection, as its owner sees it."""

    owner: Owner
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
    src_node: int
    src: Addr
    dst: Addr
    data: bytes
    sent: int = 0            # the clock when it was sent (time virtual)

    def group(self) -> tuple:
        return (str(self.src_node), fmt_addr(self.src), fmt_addr(self.dst),
                self.data.decode("latin-1"))


class Told(NamedTuple):
    """What an action of the environment told an owner: an entry of a node's input
    history (docs/target-contract.md, "Worlds and actions"), or, to a client, that its
    connection (its end: `end`) was reset."""
    owner: Owner
    what: tuple
    end: Endpoint | None = None


class Network:
    """Every connection in the world, and who listens where; in a bag (`bag`), a
    channel's messages may be taken in any order."""

    def __init__(self, channel_cap: int, bag: bool = False):
        self.bag = bag
        self.clock = 0                # time virtual: the cluster's clock, ns since launch
        self.conns: list[Connection] = []
        self.tcp: list[tuple[int, Sock]] = []           # bound TCP sockets, bind order
        self.dgrams: list[Datagram] = []                 # UDP datagrams in flight
        self.udp: dict[Addr, tuple[int, Sock]] = {}     # bound UDP sockets
        self.channel_cap = channel_cap
        self._serial = 0
        # --por: tables a step looked up without necessarily changing them (cleared by
        # Cluster.apply; Cluster.changed)
        self.reads: set[str] = set()
        self.setting = None           # who is at the ends (`attach`)
        self.ledger = None
        self.clients: dict = {}

    def attach(self, setting, ledger, clients) -> None:
        """The world this is the network of: its setting (nodes, spec, where), the
        ghost clients by name, and the ledger their replies go to."""
        self.setting = setting
        self.ledger = ledger
        self.clients = {c.name: c for c in clients}

    # -- names of the ends -----------------------------------------------------
    def name_of(self, owner: Owner) -> str:
        return self.setting.nodes[owner.node].name if owner.client is None else owner.client

    def _dst_name(self, conn: Connection) -> str:
        if conn.b is not None:
            return self.name_of(conn.b.owner)
        found = self.listener_for(conn.dst)
        return self.setting.nodes[found[0]].name if found else fmt_addr(conn.dst)

    def chan_names(self, conn: Connection, side: int) -> tuple[str, str]:
        """The sender and receiver of side `side` of conn, by name."""
        a, b = self.name_of(conn.a.owner), self._dst_name(conn)
        return (a, b) if side == 0 else (b, a)

    def dgram_names(self, d) -> tuple[str, str]:
        found = self.udp_for(d.dst)
        nodes = self.setting.nodes
        return nodes[d.src_node].name, nodes[found[0]].name if found else fmt_addr(d.dst)

    def restricted(self, node: int) -> bool:
        """Whether node `node` has a `peers` line (it may reach only those it names)."""
        return node in self.setting.spec.peers

    def check_peer(self, sender: int, receiver: int, what: str, addr) -> None:
        """A `peers` line: node `sender` reaches node `receiver` (Setting.check_peer)."""
        self.setting.check_peer(sender, receiver, what, addr)

    # -- lookups -------------------------------------------------------------
    PORTS = 999     # ephemeral ports of a node: 40001 + 1000 * index, and the 998 above

    def ephemeral_port(self, index: int) -> int | None:
        """The port a socket of node `index` gets when it names none (connect, listen,
        bind to port 0, a first UDP send): the lowest of the node's range that nothing
        uses now, no socket bound to it and no connection the network still knows
        (established, in flight, half-closed, not yet collected) with an end there; None
        when all are. That is a function of the world (its listeners, UDP sockets and
        connections are in the fingerprint), not of how many ports the path gave out
        before: with a counter, two paths that met in one world after different numbers
        of connects gave the next connect different ports (--check-merges found it;
        docs/design.md, "Ports"). A port still in a connection the peers know is never
        given again."""
        low = 40001 + 1000 * index
        used = {s.local[1] for _, s in self.tcp} | {addr[1] for addr in self.udp}
        for c in self.conns:
            used.add(c.a.addr[1])
            if c.b is not None:
                used.add(c.b.addr[1])
        return next((p for p in range(low, low + self.PORTS) if p not in used), None)

    def listener_for(self, addr: Addr):
        """Who accepts a connection to addr now: an exact address first, then a
        wildcard (0.0.0.0 or ::, every address: docs/target-contract.md, "The network:
        virtual sockets"; an IPV6_V6ONLY socket
        only IPv6 ones); among equals, the first bound (SO_REUSEPORT)."""
        ip, port = addr
        self.reads.add(f"listeners :{port}")
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
        self.reads.add(f"listeners :{addr[1]}")
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
        self.reads.add(f"UDP :{addr[1]}")
        return addr in self.udp

    def udp_for(self, addr: Addr):
        ip, port = addr
        self.reads.add(f"UDP :{port}")
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
        found = self.udp_for(dgram.dst)
        if found is None and dgram.dst == names.RESOLVER:
            # a DNS query to the resolver a node's /etc/resolv.conf names: answered at
            # once, the answer in the asker's socket as it returns (names.py)
            reply = names.answer(dgram.data, [n.name for n in self.setting.nodes])
            if reply is not None:
                self._arrive(Datagram(dgram.src_node, dgram.dst, dgram.src, reply))
            return
        dgram.sent = self.clock
        self.dgrams.append(dgram)
        if found is not None and found[0] == dgram.src_node:
            self.deliver_dgram(dgram)          # to itself: not the network's

    # -- node side -----------------------------------------------------------
    def connect(self, owner: Owner, local: Addr, dst: Addr) -> Connection:
        self._serial += 1
        conn = Connection(self._serial, Endpoint(owner, local), dst)
        conn.chan[0].append(Msg(CONNECT, sent=self.clock))
        self.conns.append(conn)
        if owner.node is not None:
            found = self.listener_for(dst)
            if found is not None and found[0] == owner.node:
                self.deliver(conn, 0)          # to itself: not the network's
        return conn

    def inside(self, conn: Connection) -> bool:
        """Whether both ends of conn are one node's: its bytes are handed over at
        once, in order, never lost, never an action (docs/target-contract.md, "A
        node's connections to itself")."""
        return conn.b is not None and conn.a.owner.node is not None \
            and conn.a.owner.node == conn.b.owner.node

    def send(self, conn: Connection, side: int, msg: Msg) -> None:
        """A node sends on its end of conn. Bytes to a ghost client are consumed at once
        (no DELIVER, no DROP: docs/model-file.md, the `client` statement)."""
        receiver = conn.end(1 - side)
        if receiver is not None and self.setting.spec.peers:     # `peers` lines to check
            sender = conn.end(side).owner.node
            if sender is not None and receiver.owner.node is not None:
                self.check_peer(sender, receiver.owner.node, "sends to",
                                conn.dst if side == 0 else conn.a.addr)
        if receiver is not None and receiver.owner.client is not None:
            client = self.clients[receiver.owner.client]
            if msg.kind == DATA:
                client.receive(self.ledger, self, conn, msg.data)
            else:
                client.ended(self.ledger, self, conn, msg.kind == FIN)
                receiver.closed = True
                self.collect()
            return
        full = len(conn.chan[side]) >= self.channel_cap     # name the ends in the error
        self.put(conn, side, msg, " -> ".join(self.chan_names(conn, side)) if full else "")
        while self.inside(conn) and conn.chan[side]:
            self.deliver(conn, side)           # to itself: not the network's

    def put(self, conn: Connection, side: int, msg: Msg, names: str = "") -> None:
        """Msg into side `side`'s channel of conn, stamped with the clock."""
        chan = conn.chan[side]
        if len(chan) >= self.channel_cap:
            raise EngineError(f"channel cap exceeded: more than {self.channel_cap} messages "
                              f"in flight on {names or conn.key()} (raise it with --channel-cap)")
        msg.sent = self.clock
        chan.append(msg)

    # -- environment side ----------------------------------------------------
    def keyed(self) -> list[tuple[tuple, Connection]]:
        """The connections in a fixed order, each with its key in this world: its
        ends' owner and addresses, and which of the connections alike it is."""
        conns = sorted(self.conns, key=lambda c: (c.key(), c.serial))
        out, seen = [], {}
        for c in conns:
            k = c.key()
            seen[k] = seen.get(k, -1) + 1
            out.append((k + (seen[k],), c))
        return out

    def connection(self, key: tuple) -> Connection:
        """The connection `key` names (an action replayed must find it)."""
        for k, c in self.keyed():
            if k == key:
                return c
        owner, src, dst = key[:3]
        raise EngineError(f"nondeterminism: replaying the same actions, the connection of "
                          f"DELIVER {owner}@{src} -> {dst} does not exist any more")

    def messages(self, conn: Connection, side: int) -> list[tuple[int, Msg]]:
        """The messages of a channel that the environment may act on, with their
        places: the head in a FIFO network (or before the connection is
        established); in a bag, one of each distinct message."""
        chan = conn.chan[side]
        if not chan:
            return []
        if not self.bag or not conn.established:
            return [(0, chan[0])]
        seen, out = set(), []
        for i, m in enumerate(chan):
            if (m.kind, m.data) not in seen:
                seen.add((m.kind, m.data))
                out.append((i, m))
        return out

    def deliver(self, conn: Connection, side: int, index: int = 0) -> list[Told]:
        """Deliver the message at `index` of a channel. CONNECT queues the connection
        on whoever listens at its address now (or refuses it); DATA goes to the
        receiver's buffer (a closed receiver answers with a reset), FIN ends its
        stream, RST resets the connection."""
        msg = conn.chan[side][index]
        del conn.chan[side][index]
        if msg.kind == CONNECT:
            found = self.listener_for(conn.dst)
            if found is None:
                return self.reset(conn)          # refused: nothing listens there now
            owner, lsock = found
            conn.b = Endpoint(Owner(node=owner), conn.dst)
            conn.established = True
            lsock.backlog.append(conn)
            lsock.arrivals += 1
            return [Told(conn.b.owner, ("ACCEPTABLE", conn.key()))]
        receiver = conn.end(1 - side)
        receiver.arrivals += 1
        told = [Told(receiver.owner, (msg.kind, conn.key(), msg.data))] \
            if receiver.owner.node is not None else []
        if msg.kind == DATA:
            if receiver.closed:
                told += self.reset(conn)         # data to a closed socket: the peer gets RST
            else:
                receiver.rbuf += msg.data
        elif msg.kind == FIN:
            receiver.eof = True
        elif msg.kind == RST:
            told += self.reset(conn)
        return told

    def drop(self, conn: Connection, side: int | None = None, index: int = 0) -> list[Told]:
        """Lose one message of a channel (in a bag: `side`, `index`), or, in a FIFO
        network, the channel: the connection is reset."""
        if side is None:
            return self.reset(conn)
        del conn.chan[side][index]
        return []

    def dup(self, conn: Connection, side: int, index: int) -> None:
        """A copy of a message joins the end of its channel (a bag only)."""
        chan = conn.chan[side]
        chan.append(Msg(chan[index].kind, chan[index].data, chan[index].sent))

    def reset(self, conn: Connection) -> list[Told]:
        """Reset a connection: in-flight data lost, both ends get ECONNRESET."""
        conn.chan[0].clear()
        conn.chan[1].clear()
        told = []
        if not conn.established:
            conn.refused = True
        for ep in (conn.a, conn.b):
            if ep is not None and not ep.closed:
                ep.reset = True
                told.append(Told(ep.owner, ("RESET", conn.key()), ep))
        return told

    # -- datagrams, by the environment ---------------------------------------
    def dgram_groups(self) -> list[tuple[tuple, Datagram]]:
        """One datagram of each group in flight, in the groups' order."""
        groups = {}
        for d in self.dgrams:
            groups.setdefault(d.group(), d)
        return sorted(groups.items(), key=lambda kv: kv[0])

    def datagram(self, group: tuple) -> Datagram:
        return next(d for d in self.dgrams if d.group() == group)

    def deliver_dgram(self, d: Datagram) -> list[Told]:
        """A datagram arrives: to the socket bound at its address (a connected one
        takes only its peer's); nobody bound there: it is lost, and a connected
        sender hears of it (ICMP: ECONNREFUSED), as on Linux."""
        self.dgrams.remove(d)
        return self._arrive(d)

    def _arrive(self, d: Datagram) -> list[Told]:
        found = self.udp_for(d.dst)
        if found is None:
            sender = self.udp.get(d.src)
            if sender is not None and sender[1].peer == d.dst:
                sender[1].error = errno.ECONNREFUSED
            return []
        owner, sock = found
        if sock.peer is not None and sock.peer != d.src:
            return []                            # a connected socket filters other sources
        sock.rqueue.append((d.src, d.data))
        sock.arrivals += 1
        return [Told(Owner(node=owner), ("DGRAM", d.group()))]

    def drop_dgram(self, d: Datagram) -> None:
        self.dgrams.remove(d)

    def dup_dgram(self, d: Datagram) -> None:
        self.dgrams.append(Datagram(d.src_node, d.src, d.dst, d.data, d.sent))

    def in_flight_sent(self) -> list[int]:
        """When each message and datagram in flight was sent (time virtual)."""
        return [m.sent for c in self.conns for chan in c.chan for m in chan] + \
            [d.sent for d in self.dgrams]

    def crash(self, node: int) -> list[Told]:
        """Node `node` is gone: its ends of connections close (each connection is
        reset), its listeners and UDP sockets with them."""
        told = []
        for conn in list(self.conns):
            mine = [ep for ep in (conn.a, conn.b) if ep is not None and ep.owner.node == node]
            if mine:
                for ep in mine:
                    ep.closed = True
                told += self.reset(conn)
        self.tcp = [(o, s) for o, s in self.tcp if o != node]
        for addr, (owner, _) in list(self.udp.items()):
            if owner == node:
                del self.udp[addr]
        self.collect()
        return told

    def collect(self) -> None:
        """Forget connections that nobody can observe any more."""
        def gone(ep):
            return ep is None or ep.closed
        self.conns = [c for c in self.conns
                      if not (gone(c.a) and gone(c.b) and c.in_flight() == 0)]


    # -- what a network of another kind adds (kernel/maelstrom.py) -------------------
    def launched(self) -> None:
        """The world's nodes and ghost clients are launched."""

    def own_actions(self, budgets: dict) -> list:
        """Actions on what this network holds beside connections and datagrams, first
        among the world's."""
        return []

    starts = False          # whether it has clients of its own that start at a time

    def with_starts(self, actions: list, budgets: dict) -> list:
        """The world's enabled actions with a start of one of its clients among them."""
        return actions

    def take(self, action, budgets: dict) -> bool:
        """Take `action` if it is one of this network's own; whether it was."""
        return False

    def foldable(self, fire, budgets: dict):
        """The FIRE the world would fold into the step just taken, or None."""
        return fire

    def world(self):
        """What the fingerprint covers beyond connections and datagrams (None: nothing)."""
        return None

    def parts(self) -> list[tuple[str, dict]]:
        return []

    def traits(self, out: dict) -> dict:
        return out

    def view(self) -> list[dict]:
        return []


def sock_timeout(sock: Sock, opt: int) -> int | None:
    """SO_RCVTIMEO or SO_SNDTIMEO of a socket in ns, None when not set (no timeout)."""
    t = sock.options.get((SOL_SOCKET, opt))
    return t if t else None
