"""A cluster of real node processes, seen by the engine as a model (the seam).

The engine knows a system only through: `launch()` (State 1), `actions()` (the
enabled environment actions, in a fixed order), `apply(key)`, `fingerprint()`
and `view()`. This module turns those into process launches, deliveries,
resets, timeouts and kills, and computes what a world is (docs/target-contract.md,
"Worlds and actions"; docs/design.md, "The world and its fingerprint").
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Callable

import xxhash

from ..errors import EngineError
from ..interrupts import interrupts_held
from .calls import shm
from .calls.dispatch import dispatch
from .calls.quiet import shows
from .calls.sockets import close_vfd
from .proc.fork import drop_root, fork_world, hold_root
from .proc.node import Node
from .world import clock, peers, traits
from .world.actions import (Action, ClientStart, Crash, DatagramAction, Fire, MessageAction,
                            ResetChannel, describe_key)
from .world.clients import Client
from .world.content import compact
from .world.net import CONNECT, DATA, Connection, Msg, Network, Owner, Told, fmt_addr


def digest(data: bytes) -> bytes:
    """The 128-bit hash of a text that a world's fingerprint is (xxh3-128)."""
    return xxhash.xxh3_128_digest(data)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class ClientSpec:
    name: str
    host: str
    port: int
    requests: tuple[bytes, ...]
    after_ns: int | None = None     # time virtual: it starts when the clock reaches this


@dataclass(frozen=True)
class ClusterSpec:
    nodes: tuple[NodeSpec, ...]
    clients: tuple[ClientSpec, ...]
    budgets: dict           # crash/drop/dup: int; fire: int | None (unlimited)
    reply_record: Callable  # (client, node, index, req, raw) -> dict
    params: dict = field(default_factory=dict)
    network: str = "fifo"
    disk: str = "fsync"     # the page cache of the nodes' files (disk.py)
    channel_cap: int = 64
    watchdog_s: float = 10.0
    time: str = "async"     # or virtual: one clock for the cluster (docs/model-file.md)
    latency_ns: int = 0     # time virtual: how long after it was sent a message may arrive
    horizon_ns: int = 60 * 10**9   # time virtual: the clock never passes it
    trace_ticks: bool = False      # the adapter's: views list the FIREs folded (--trace-ticks)
    cpus: int = 2           # the machine every node sees (calls/machine.py)
    memory: int = 4 << 30
    private_pids: bool = False  # machine pids private: a PID namespace per launch
    history: bool = False   # keep the clients' operations (docs/model-file.md, "Histories")
    maelstrom: object = None   # maelstrom.MaelstromSpec: nodes speaking Maelstrom's protocol
    # `peers` lines: node index -> the indexes of the nodes it may connect or send to
    # (a node without a line may reach any); checked at every step (Cluster.check_peer)
    peers: dict = field(default_factory=dict)


class Cluster:
    dispatch = staticmethod(dispatch)     # how its nodes' calls are answered

    def __init__(self, spec: ClusterSpec, workroot: str):
        self.spec = spec
        self.workroot = workroot
        self.outdir = os.path.join(workroot, "out")
        for d in (self.outdir, os.path.join(workroot, "nodes")):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        self.net = Network(spec.channel_cap, bag=spec.network == "bag")
        self.virtual = spec.time == "virtual"
        self.watchdog_s = spec.watchdog_s
        self.nodes: list[Node] = []
        for i, ns in enumerate(spec.nodes):
            cwd = os.path.join(workroot, "nodes", f"{i}-{ns.name}")
            os.makedirs(cwd)
            self.nodes.append(Node(self, i, ns.name, list(ns.argv), cwd))
        self.clients = [Client(i, c) for i, c in enumerate(spec.clients)]
        self.budgets = dict(spec.budgets)
        self.replies: list[dict] = []
        # With spec.history: every request a client put in flight (clients.py).
        self.history: list[dict] = []
        self.events = 0
        self.step = 0
        self.step_label = "launch"
        self.recording = False         # keep a call log and per-step output (replay)
        self.shift = 0                 # launch nodes with CMC_DET_PAD (node.det_pad)
        self.calls: list[tuple[str, str]] = []
        self._out_offsets: dict[str, int] = {}
        self.own_root: str | None = None     # a directory of this world (copying)

    def drain(self) -> dict:
        """What happened since the last drain: each node's emulated calls, and
        the stdout/stderr lines it printed (for showing a behavior step by step);
        with a page cache, what a CRASH in the step threw away ("lost") and the
        writes not yet durable ("unsynced")."""
        out = {n.name: {"calls": [], "stdout": "", "stderr": ""} for n in self.nodes}
        for name, line in self.calls:
            out[name]["calls"].append(line)
        self.calls = []
        for n in self.nodes:
            for inc in range(n.incarnation + 1):
                base = os.path.join(self.outdir, f"{n.index}-{n.name}.{inc}")
                for stream in ("stdout", "stderr"):
                    path = f"{base}.{stream}"
                    start = self._out_offsets.get(path, 0)
                    try:
                        with open(path, "rb") as f:
                            f.seek(start)
                            data = f.read()
                    except OSError:
                        continue
                    self._out_offsets[path] = start + len(data)
                    out[n.name][stream] += data.decode("utf-8", errors="replace")
            if n.disk.thrown:               # what a CRASH in this step threw away
                out[n.name]["lost"], n.disk.thrown = n.disk.thrown, []
            if n.disk.pending:              # what a CRASH now would throw away
                out[n.name]["unsynced"] = n.disk.unsynced()
        return out

    # -- helpers the kernel uses ----------------------------------------------------
    def where(self, node: Node) -> str:
        return f"node {node.name} (step {self.step}, {self.step_label}): "

    def output_path(self, node: Node) -> str:
        return os.path.join(self.outdir, f"{node.index}-{node.name}.{node.incarnation}")

    def stderr_tail(self, node: Node) -> str:
        try:
            with open(self.output_path(node) + ".stderr", "rb") as f:
                tail = f.read()[-400:].decode(errors="replace").strip()
        except OSError:
            return ""
        return f"; its stderr ends with:\n{tail}" if tail else ""

    def ephemeral_port(self, node: Node) -> int | None:
        """The port a node's socket gets when it names none (Network.ephemeral_port)."""
        return self.net.ephemeral_port(node.index)

    def name_of(self, owner: Owner) -> str:
        return self.nodes[owner.node].name if owner.client is None else owner.client

    def client_named(self, name: str) -> Client:
        return next(c for c in self.clients if c.name == name)

    def send(self, conn: Connection, side: int, msg: Msg) -> None:
        """A node sends on its end of conn. Bytes to a ghost client are consumed
        at once (no DELIVER, no DROP: docs/model-file.md, the `client` statement)."""
        receiver = conn.end(1 - side)
        if self.spec.peers and receiver is not None:
            sender = conn.end(side).owner.node
            if sender is not None and receiver.owner.node is not None:
                self.check_peer(sender, receiver.owner.node, "sends to",
                                conn.dst if side == 0 else conn.a.addr)
        if receiver is not None and receiver.owner.client is not None:
            client = self.client_named(receiver.owner.client)
            if msg.kind == DATA:
                client.receive(self, conn, msg.data)
            else:
                client.finished = True
                receiver.closed = True
                self.net.collect()
            return
        full = len(conn.chan[side]) >= self.net.channel_cap     # name the ends in the error
        self.net.send(conn, side, msg, " -> ".join(self._chan_names(conn, side)) if full else "")

    def check_peer(self, sender: int, receiver: int, what: str, addr) -> None:
        """A `peers` line: node `sender` reaches node `receiver` (world/peers.py)."""
        peers.check(self.spec.peers, [n.name for n in self.nodes], sender, receiver,
                    self.where(self.nodes[sender]) + what, addr)

    def process_exited(self, proc) -> None:
        """A process of a node ended by itself: the kernel closes its descriptors (a
        socket shared with another process lives on in that one)."""
        for fd in sorted(proc.fds):
            close_vfd(proc, fd)

    def node_exited(self, node: Node) -> None:
        """Every process of a node ended by itself (its descriptors are closed)."""
        self.net.collect()

    # -- the engine's protocol -------------------------------------------------------
    def launch(self) -> None:
        self.step, self.step_label = 0, "launch"
        for node in self.nodes:
            node.launch()
        for client in self.clients:
            if client.spec.after_ns is None:
                self._start(client)
        self.settle()
        self.compact()

    def _start(self, client: Client) -> None:
        """A ghost client connects and puts its first request in flight."""
        dst = (client.spec.host, client.spec.port)
        client.conn = self.net.connect(Owner(client=client.name), client.addr, dst)
        client.send_next(self)

    def own(self, root: str, roots) -> None:
        """This world, launched in `root`, is one of many side by side (copying): the
        root goes when the world and every node directory in it are gone; `roots`
        (fork.Roots) makes the roots of node directories copied later."""
        self.own_root = root
        self.roots = roots
        hold_root(root)
        for node in self.nodes:
            node.root = root
            hold_root(root)

    def close(self) -> None:
        """Kill and reap the nodes (those lent to other worlds stay with them) and
        remove what is this world's alone of its directories: whole, an interrupt
        waits until it is done (cmc/interrupts.py)."""
        with interrupts_held():
            ends, leases = [], []
            for node in self.nodes:
                lease = node.lease
                if node.give_back():
                    ends.append(node)
                    if lease is not None:
                        leases.append(lease)
            for node in ends:               # all at once: their ends overlap
                node.tasks.send_kill()
            for node in ends:
                node.tasks.reap(later=True)
            try:
                if sys.exc_info()[0] is None:      # not while another error is on its way
                    for lease in leases:
                        lease.check()       # left as lent: else a copy reached it
            finally:
                for node in self.nodes:
                    drop_root(node.root)
                    node.root = None
                drop_root(self.own_root)
                self.own_root = None

    def fork(self, root: str, saved: list | None = None) -> "Cluster":
        """A copy of this (quiescent) world, without a replay: see fork.py (`saved`:
        fork_world's)."""
        return fork_world(self, root, saved)

    def settle(self) -> None:
        """Run every node whose blocked call can now complete, in node order,
        until none can (docs/target-contract.md, "Worlds and actions")."""
        progress = True
        while progress:
            progress = False
            for node in self.nodes:
                if node.tasks.try_wake():
                    progress = True

    def _dst_name(self, conn: Connection) -> str:
        if conn.b is not None:
            return self.name_of(conn.b.owner)
        found = self.net.listener_for(conn.dst)
        return self.nodes[found[0]].name if found else fmt_addr(conn.dst)

    def _chan_names(self, conn: Connection, side: int) -> tuple[str, str]:
        a, b = self.name_of(conn.a.owner), self._dst_name(conn)
        return (a, b) if side == 0 else (b, a)

    def _dgram_names(self, d) -> tuple[str, str]:
        found = self.net.udp_for(d.dst)
        return self.nodes[d.src_node].name, self.nodes[found[0]].name if found else fmt_addr(d.dst)

    def actions(self) -> list[Action]:
        """The enabled actions of the environment, in a fixed order: deliveries,
        drops, duplicates (within their budgets), timeouts, crashes."""
        out: list[Action] = []
        conns = self.net.keyed()
        bag = self.net.bag

        def each_message(kind, conn_key, conn, only_data=False):
            for side in (0, 1):
                src, dst = self._chan_names(conn, side)
                for i, m in self.net.messages(conn, side):
                    if not only_data or m.kind == DATA:
                        out.append(MessageAction(kind, conn_key, side, i, src, dst, m.kind,
                                                 m.data if m.kind == DATA else None))

        def each_dgram(kind):
            for group, d in dgrams:
                out.append(DatagramAction(kind, group, *self._dgram_names(d), d.data))
        for key, conn in conns:
            each_message("DELIVER", key, conn)
        dgrams = self.net.dgram_groups()
        each_dgram("DELIVER")
        if self.budgets.get("drop", 0) > 0:
            for key, conn in conns:
                if not conn.in_flight():
                    continue
                if bag and conn.established:
                    each_message("DROP", key, conn)
                else:
                    out.append(ResetChannel(key, *self._chan_names(conn, 0)))
            each_dgram("DROP")
        if bag and self.budgets.get("dup", 0) > 0:
            for key, conn in conns:
                if conn.established:
                    each_message("DUP", key, conn, only_data=True)
            each_dgram("DUP")
        fire = self.budgets.get("fire")
        if self.virtual:
            if fire is None or fire > 0:
                out += clock.next_fire(self)
        elif fire is None or fire > 0:
            for node in self.nodes:
                timed = [t for t in node.tasks.blocked() if t.block.timeout_ns] if node.alive else []
                for t in timed:          # one FIRE per blocked thread
                    out.append(Fire(node.index, node.name, t.block.what, t.block.timeout_ns, t.tag,
                                    **node.tasks.fire_names(t, len(timed) > 1)))
        if self.budgets.get("crash", 0) > 0:
            for node in self.nodes:
                if not node.alive:
                    continue
                k = len(node.disk.pending) if node.disk.partial else 0
                if not k:
                    out.append(Crash(node.index, node.name))
                else:                           # fsync partial: j of the k reached disk
                    out += [Crash(node.index, node.name, j, k) for j in range(k + 1)]
        return out

    def apply(self, key: tuple) -> Action:
        """Apply one enabled action; returns it."""
        action = next((a for a in self.actions() if a.key == key), None)
        if action is None:
            raise EngineError(f"nondeterminism: replaying the same actions, the action taken at "
                              f"step {self.step + 1} ({describe_key(key)}) is not enabled "
                              "any more; the program under check (or cmc) is not "
                              "deterministic")
        self.step += 1
        self.step_label = f"<{action.label}>"
        net = self.net
        net.reads = set()
        match action:
            case MessageAction(kind="DELIVER"):
                conn = net.connection(action.conn)
                self._tell(net.deliver(conn, action.side, action.index))
                if self.spec.peers and action.msg == CONNECT and conn.b is not None \
                        and conn.a.owner.node is not None:
                    self.check_peer(conn.a.owner.node, conn.b.owner.node, "connected to",
                                    conn.dst)
            case MessageAction(kind="DROP"):
                self.budgets["drop"] -= 1
                net.drop(net.connection(action.conn), action.side, action.index)
            case ResetChannel():
                self.budgets["drop"] -= 1
                self._tell(net.drop(net.connection(action.conn)))
            case MessageAction(kind="DUP"):
                self.budgets["dup"] -= 1
                net.dup(net.connection(action.conn), action.side, action.index)
            case DatagramAction(kind="DELIVER"):
                d = net.datagram(action.group)
                if self.spec.peers:
                    found = net.udp_for(d.dst)
                    if found is not None:
                        self.check_peer(d.src_node, found[0], "sent a datagram to", d.dst)
                self._tell(net.deliver_dgram(d))
            case DatagramAction(kind="DROP"):
                self.budgets["drop"] -= 1
                net.drop_dgram(net.datagram(action.group))
            case DatagramAction(kind="DUP"):
                self.budgets["dup"] -= 1
                net.dup_dgram(net.datagram(action.group))
            case Fire():
                self._fire(action)
            case ClientStart():
                net.clock = max(net.clock, action.at)
                self._start(self.client_named(action.client))
            case Crash():
                self.budgets["crash"] -= 1
                self._crash(self.nodes[action.node], *(() if action.reached is None
                                                       else (action.reached,)))
        net.collect()
        self.settle()
        net.collect()
        self.compact()
        return action

    # -- time virtual: one clock (world/clock.py) -----------------------------------------
    def foldable(self) -> Fire | None:
        """Time virtual: the FIRE that may be folded into the step just taken (nothing in
        flight, and the one FIRE due is a node's), else None."""
        if not self.virtual or self.net.in_flight_sent():
            return None
        fire = self.budgets.get("fire")
        due = clock.next_fire(self) if fire is None or fire > 0 else []
        return due[0] if due and isinstance(due[0], Fire) else None

    def fold(self, action: Fire) -> bool:
        """Take FIRE `action` as part of the step before, its node stopping at its first
        visible call (calls/quiet.py): True when it ran to the end without one (it
        changed nothing another node or a property sees: folded); False when it
        stopped, and this world is spoilt (the caller throws it away)."""
        node = self.nodes[action.node]
        node.tasks.pausing = shows
        try:
            self._fire(action)
        finally:
            node.tasks.pausing = None
        if node.tasks.paused is not None:
            return False
        self.net.collect()
        self.settle()
        self.net.collect()
        return True

    def _fire(self, action: Fire) -> None:
        if self.budgets.get("fire") is not None:
            self.budgets["fire"] -= 1
        if self.virtual:
            if action.late:
                self.budgets["delay"] -= action.late
            self.net.clock = max(self.net.clock, action.at)
        node, index = self.nodes[action.node], action.thread_index
        node.history.append(("FIRE", action.timeout_ns) if not index else
                            ("FIRE", index, action.timeout_ns))
        node.tasks.fire(index)

    def _tell(self, told: list[Told]) -> None:
        """Hand on what the network told the owners of endpoints: a node's input
        history; a ghost client's connection reset ends it (it never reconnects)."""
        for owner, what, end in told:
            if owner.client is None:
                self.nodes[owner.node].history.append(what)
            elif what[0] == "RESET":
                self.client_named(owner.client).finished = True
                end.closed = True

    def compact(self) -> None:
        """The zeros of the nodes' large files become holes (content.compact): a
        world kept costs what its nodes wrote, not what they preallocated. With a
        page cache, only a directory cmc saw change since (its disk's generation)."""
        for node in self.nodes:
            disk = node.disk
            if node.lease is None and not (disk.on and disk.compacted == disk.generation):
                compact(node.cwd)
                disk.compacted = disk.generation

    def _crash(self, node: Node, *reached: int) -> None:
        """CRASH node; under fsync partial `reached` is how many of its unsynced
        writes reached disk (none given: none did)."""
        node.own(keep_process=False)       # its directory, if lent to other worlds too
        node.kill()
        node.disk.crash(node.cwd, *reached)
        shm.forget(node)                   # shared memory does not survive the machine
        self._tell(self.net.crash(node.index))
        node.crashes += 1
        node.incarnation += 1
        node.history.append(("CRASH",) + reached)
        node.launch()

    # -- what a world is ------------------------------------------------------------
    def node_value(self, node: Node):
        """node[i]: volatile if this incarnation emitted on fd 3, else durable."""
        if node.volatile_emitted:
            return node.volatile
        return node.durable

    def fingerprint(self) -> bytes:
        return digest(repr(self._world()).encode())

    NODE_FIELDS = ("name", "alive", "incarnation", "state or input history", "durable state",
                   "blocked call (what, timeout ns)",
                   "files (their durable contents and unsynced writes, a digest)")

    def parts(self) -> list[tuple[str, dict]]:
        """The world in named parts with named fields, for telling a person which
        part of two worlds differs (the engine's `difference` reports the first field
        that does): first what a trace shows of it (its view; the part named ""),
        then everything the fingerprint covers."""
        view = self.view()
        shown = {}
        for part in ("node", "durable", "alive", "crashes"):
            for name, value in zip(view["node_names"], view[part]):
                shown[f"{part}[{name}]"] = value
        shown.update(replies=view["replies"], network=view["network"])
        nodes, conns, dgrams, udp, listeners, clients, budgets, replies = self._world()
        out = [("", shown)]
        out += [(f"node {n[0]}", dict(zip(self.NODE_FIELDS[1:], n[1:]))) for n in nodes]
        out += [(f"connection {c[0]}", dict(zip(("established", "refused", "channel out",
                                                  "channel back", "one end", "other end"),
                                                 c[1:]))) for c in conns]
        out += [("datagrams in flight", {"datagrams": dgrams}),
                ("UDP sockets", {"queues": udp}), ("listeners", {"listeners": listeners})]
        out += [(f"client {c[0]}", {"next request": c[1], "finished": c[2], "partial line": c[3]})
                for c in clients]
        out += [("budgets", dict(budgets)), ("replies", {"replies": replies})]
        return out

    def _world(self) -> tuple:
        def canon(v):
            return json.dumps(v, sort_keys=True, separators=(",", ":"))

        def ep_state(ep):
            if ep is None:
                return None
            return (self.name_of(ep.owner), bytes(ep.rbuf), ep.eof, ep.reset, ep.reset_reported,
                    ep.shut_wr, ep.closed, ep.accepted)
        nodes = []
        for n in self.nodes:
            blocked = n.tasks.blocked_calls()
            own = (canon(n.volatile) if n.volatile_emitted else "-") if n.ever_wrote_state \
                else tuple(n.history)
            disk = n.disk.digest(n.cwd) if n.ever_wrote_state and n.disk.on else None
            nodes.append((n.name, n.alive, n.incarnation, own, canon(n.durable), blocked, disk))
        def chan(msgs):
            if self.virtual:                # and each one's time left to its bound
                left = self.spec.latency_ns - self.net.clock
                items = [(m.kind, m.data, m.sent + left) for m in msgs]
            else:
                items = [(m.kind, m.data) for m in msgs]
            return tuple(sorted(items) if self.spec.network == "bag" else items)
        conns = []
        for key, c in self.net.keyed():
            conns.append((key, c.established, c.refused, chan(c.chan[0]), chan(c.chan[1]),
                          ep_state(c.a), ep_state(c.b)))
        dgrams = tuple(sorted(d.group() + ((d.sent + self.spec.latency_ns - self.net.clock,)
                                           if self.virtual else ()) for d in self.net.dgrams))
        udp = tuple(sorted((fmt_addr(a), o, tuple((fmt_addr(src), data) for src, data in s.rqueue))
                           for a, (o, s) in self.net.udp.items()))
        # A listener's backlog in its order: accept() takes the oldest first, so two
        # worlds that differ only in the order connections arrived are two worlds
        # (--check-merges found it in demo/durlog).
        listeners = sorted((fmt_addr(s.local), o, s.listening, tuple(c.key() for c in s.backlog))
                           for o, s in self.net.tcp)
        clients = [(c.name, c.next_req, c.finished, bytes(c.linebuf))
                   + ((c.spec.after_ns - self.net.clock,) if c.waiting else ())
                   for c in self.clients]
        budgets = sorted(self.budgets.items(), key=lambda kv: kv[0])
        return (tuple(nodes), tuple(conns), dgrams, udp, tuple(listeners), tuple(clients),
                tuple(budgets), canon(self.replies))

    def network_view(self) -> list[dict]:
        out = []
        for _, conn in self.net.keyed():
            for side in (0, 1):
                src, dst = self._chan_names(conn, side)
                for m in conn.chan[side]:
                    out.append({"src": src, "dst": dst, "kind": m.kind,
                                "data": m.data.decode("utf-8", errors="replace")})
        for _, d in self.net.dgram_groups():
            src, dst = self._dgram_names(d)
            for same in (x for x in self.net.dgrams if x.group() == d.group()):
                out.append({"src": src, "dst": dst, "kind": "DGRAM",
                            "data": same.data.decode("utf-8", errors="replace")})
        return out

    def view(self) -> dict:
        return {
            "node": [self.node_value(n) for n in self.nodes],
            "volatile": [n.volatile if n.volatile_emitted else None for n in self.nodes],
            "durable": [n.durable for n in self.nodes],
            "alive": [n.alive for n in self.nodes],
            "crashes": [n.crashes for n in self.nodes],
            "replies": [dict(r) for r in self.replies],
            "network": self.network_view(),
            "params": dict(self.spec.params),
            "node_names": [n.name for n in self.nodes],
            **({"history": [dict(op) for op in self.history]} if self.spec.history else {}),
            **({"clock_ns": self.net.clock} if self.virtual else {}),
        }

    # -- partial-order reduction (docs/design.md, "Partial-order reduction") ---------
    def traits(self) -> dict:
        """The world in the parts --por tells apart (world/traits.py)."""
        return traits.parts(self._world(), self.net.clock)

    def changed(self, before: dict, action: Action, reads: frozenset[str]) -> frozenset[str]:
        """What the step just taken (`action`) from world parts `before` read or changed
        (world/traits.py): the node it delivered to, fired or crashed, and `reads`,
        Network.reads as the step left it, count as read."""
        name = getattr(action, "dst", None) or getattr(action, "name", None)
        acted = {f"node {name!r}"} if any(n.name == name for n in self.nodes) else set()
        if self.virtual:
            # time virtual: after every step the fold looks at the whole network and
            # every node's deadline (foldable): each step reads the clock's part
            acted.add("")
        return traits.changed(before, self.traits(), acted | reads)
