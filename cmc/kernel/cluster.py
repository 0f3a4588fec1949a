"""A cluster of real node processes, seen by the engine as a model (the seam).

The engine knows a system only through: `launch()` (State 1), `actions()` (the
enabled environment actions, in a fixed order), `apply(key)`, `fingerprint()`
and `view()`. This module turns those into process launches, deliveries,
resets, timeouts and kills, and computes what SPEC §3 puts in a world.
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
from .calls import dgram
from .proc.fork import drop_root, fork_world, hold_root
from .world.net import (CONNECT, DATA, FIN, RST, Connection, Datagram, Endpoint, Msg,
                        Network, fmt_addr)
from .world.actions import Action, describe_key, message_action
from .world.clients import Client
from .world.content import compact
from .calls import shm
from .calls.dispatch import dispatch
from .proc.node import Node
from .calls.sockets import close_vfd


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
    history: bool = False   # keep the clients' operations (SPEC §9.4), in the view


class Cluster:
    dispatch = staticmethod(dispatch)     # how its nodes' calls are answered

    def __init__(self, spec: ClusterSpec, workroot: str):
        self.spec = spec
        self.workroot = workroot
        self.outdir = os.path.join(workroot, "out")
        for d in (self.outdir, os.path.join(workroot, "nodes")):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        self.net = Network(spec.channel_cap)
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
        self._ports = [40000 + 1000 * i for i in range(len(self.nodes))]
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

    def ephemeral_port(self, node: Node) -> int:
        self._ports[node.index] += 1
        return self._ports[node.index]

    def name_of(self, owner) -> str:
        return self.nodes[owner].name if isinstance(owner, int) else str(owner)

    def client_named(self, name: str) -> Client:
        return next(c for c in self.clients if c.name == name)

    def send(self, conn: Connection, side: int, msg: Msg) -> None:
        """A node sends on its end of conn. Bytes to a ghost client are consumed
        at once (SPEC §8: no DELIVER, no DROP)."""
        receiver = conn.end(1 - side)
        if receiver is not None and isinstance(receiver.owner, str):
            client = self.client_named(receiver.owner)
            if msg.kind == DATA:
                client.receive(self, conn, msg.data)
            else:
                client.finished = True
                receiver.closed = True
                self.net.collect()
            return
        full = len(conn.chan[side]) >= self.net.channel_cap     # name the ends in the error
        self.net.send(conn, side, msg, " -> ".join(self._chan_names(conn, side)) if full else "")

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
            dst = (client.spec.host, client.spec.port)
            client.conn = self.net.connect(client.name, client.addr, dst)
            client.send_next(self)
        self.settle()
        self.compact()

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
                node.tasks.reap()
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
        until none can (SPEC §8)."""
        progress = True
        while progress:
            progress = False
            for node in self.nodes:
                if node.tasks.try_wake():
                    progress = True

    def _conns_in_order(self) -> list[tuple[tuple, Connection]]:
        conns = sorted(self.net.conns, key=lambda c: (c.key(), c.serial))
        out, seen = [], {}
        for c in conns:
            k = c.key()
            seen[k] = seen.get(k, -1) + 1
            out.append((k + (seen[k],), c))
        return out

    def _dst_name(self, conn: Connection) -> str:
        if conn.b is not None:
            return self.name_of(conn.b.owner)
        found = self.net.listener_for(conn.dst)
        return self.name_of(found[0]) if found else fmt_addr(conn.dst)

    def _chan_names(self, conn: Connection, side: int) -> tuple[str, str]:
        a, b = self.name_of(conn.a.owner), self._dst_name(conn)
        return (a, b) if side == 0 else (b, a)

    def _messages(self, conn: Connection, side: int) -> list[tuple[int, Msg]]:
        """The messages of a channel that the environment may act on: the head in
        a FIFO network (or before the connection is established); in a bag, one
        of each distinct message."""
        chan = conn.chan[side]
        if not chan:
            return []
        if self.spec.network != "bag" or not conn.established:
            return [(0, chan[0])]
        seen, out = set(), []
        for i, m in enumerate(chan):
            if (m.kind, m.data) not in seen:
                seen.add((m.kind, m.data))
                out.append((i, m))
        return out

    def _dgram_groups(self) -> list[tuple[tuple, object]]:
        groups = {}
        for d in self.net.dgrams:
            groups.setdefault(d.group(), d)
        return sorted(groups.items(), key=lambda kv: kv[0])

    def _dgram_names(self, d) -> tuple[str, str]:
        found = self.net.udp_for(d.dst)
        return self.name_of(d.src_owner), self.name_of(found[0]) if found else fmt_addr(d.dst)

    def actions(self) -> list[Action]:
        out = []
        conns = self._conns_in_order()
        bag = self.spec.network == "bag"
        for key, conn in conns:
            for side in (0, 1):
                src, dst = self._chan_names(conn, side)
                for i, m in self._messages(conn, side):
                    out.append(message_action("DELIVER", ("DELIVER", key, side, i), src, dst, m))
        dgrams = self._dgram_groups()
        for group, d in dgrams:
            src, dst = self._dgram_names(d)
            out.append(Action(("DELIVER_DGRAM", group), "DELIVER", src, dst, DATA, d.data))
        if self.budgets.get("drop", 0) > 0:
            for key, conn in conns:
                if not conn.in_flight():
                    continue
                if bag and conn.established:
                    for side in (0, 1):
                        src, dst = self._chan_names(conn, side)
                        for i, m in self._messages(conn, side):
                            out.append(message_action("DROP", ("DROP", key, side, i), src, dst, m))
                else:
                    src, dst = self._chan_names(conn, 0)
                    out.append(Action(("DROP", key), "DROP", src, dst))
            for group, d in dgrams:
                src, dst = self._dgram_names(d)
                out.append(Action(("DROP_DGRAM", group), "DROP", src, dst, DATA, d.data))
        if bag and self.budgets.get("dup", 0) > 0:
            for key, conn in conns:
                if not conn.established:
                    continue
                for side in (0, 1):
                    src, dst = self._chan_names(conn, side)
                    for i, m in self._messages(conn, side):
                        if m.kind == DATA:
                            out.append(message_action("DUP", ("DUP", key, side, i), src, dst, m))
            for group, d in dgrams:
                src, dst = self._dgram_names(d)
                out.append(Action(("DUP_DGRAM", group), "DUP", src, dst, DATA, d.data))
        fire = self.budgets.get("fire")
        if fire is None or fire > 0:
            for node in self.nodes:
                timed = [t for t in node.tasks.blocked() if t.block.timeout_ns] if node.alive else []
                for t in timed:          # one FIRE per blocked thread (SPEC §9.1)
                    key = ("FIRE", node.index) + ((t.index,) if t.index else ())
                    out.append(Action(key, "FIRE", node=node.name, call=t.block.what,
                                      timeout_ns=t.block.timeout_ns,
                                      **node.tasks.fire_names(t, len(timed) > 1)))
        if self.budgets.get("crash", 0) > 0:
            for node in self.nodes:
                if not node.alive:
                    continue
                k = len(node.disk.pending) if node.disk.partial else 0
                if not k:
                    out.append(Action(("CRASH", node.index), "CRASH", node=node.name))
                else:                           # fsync partial: j of the k reached disk
                    out += [Action(("CRASH", node.index, j), "CRASH", node=node.name,
                                   reached=j, unsynced=k) for j in range(k + 1)]
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
        kind = key[0]
        if kind == "DELIVER":
            self._deliver(self._conn_by_key(key[1]), key[2], key[3])
        elif kind == "DROP":
            self.budgets["drop"] -= 1
            conn = self._conn_by_key(key[1])
            if len(key) == 4:                 # bag: that one message is lost
                del conn.chan[key[2]][key[3]]
            else:
                self._reset(conn)
        elif kind == "DUP":
            self.budgets["dup"] -= 1
            chan = self._conn_by_key(key[1]).chan[key[2]]
            chan.append(Msg(chan[key[3]].kind, chan[key[3]].data))
        elif kind in ("DELIVER_DGRAM", "DROP_DGRAM", "DUP_DGRAM"):
            d = next(d for d in self.net.dgrams if d.group() == key[1])
            if kind == "DUP_DGRAM":
                self.budgets["dup"] -= 1
                self.net.dgrams.append(Datagram(d.src_owner, d.src, d.dst, d.data))
            else:
                self.net.dgrams.remove(d)
                if kind == "DROP_DGRAM":
                    self.budgets["drop"] -= 1
                else:
                    dgram.arrive(self, d)
        elif kind == "FIRE":
            if self.budgets.get("fire") is not None:
                self.budgets["fire"] -= 1
            node = self.nodes[key[1]]
            index = key[2] if len(key) > 2 else 0
            block = next(t.block for t in node.tasks.blocked() if t.index == index)
            node.history.append(("FIRE", block.timeout_ns) if not index else
                                ("FIRE", index, block.timeout_ns))
            node.tasks.fire(index)
        elif kind == "CRASH":
            self.budgets["crash"] -= 1
            self._crash(self.nodes[key[1]], *key[2:])
        self.net.collect()
        self.settle()
        self.net.collect()
        self.compact()
        return action

    def compact(self) -> None:
        """The zeros of the nodes' large files become holes (content.compact): a
        world kept costs what its nodes wrote, not what they preallocated. With a
        page cache, only a directory cmc saw change since (its disk's generation)."""
        for node in self.nodes:
            disk = node.disk
            if node.lease is None and not (disk.on and disk.compacted == disk.generation):
                compact(node.cwd)
                disk.compacted = disk.generation

    def _conn_by_key(self, key: tuple) -> Connection:
        for k, c in self._conns_in_order():
            if k == key:
                return c
        raise EngineError(f"nondeterminism: replaying the same actions, the connection of "
                          f"{describe_key(('DELIVER', key))} does not exist any more")

    def _deliver(self, conn: Connection, side: int, index: int = 0) -> None:
        msg = conn.chan[side][index]
        del conn.chan[side][index]
        if msg.kind == CONNECT:
            found = self.net.listener_for(conn.dst)
            if found is None:
                self._reset(conn)       # refused: nothing listens there now
                return
            owner, lsock = found
            conn.b = Endpoint(owner, conn.dst)
            conn.established = True
            lsock.backlog.append(conn)
            lsock.arrivals += 1
            self.nodes[owner].history.append(("ACCEPTABLE", conn.key()))
            return
        receiver = conn.end(1 - side)
        receiver.arrivals += 1
        if isinstance(receiver.owner, int):
            self.nodes[receiver.owner].history.append((msg.kind, conn.key(), msg.data))
        if msg.kind == DATA:
            if receiver.closed:
                self._reset(conn)       # data to a closed socket: the peer gets RST
            else:
                receiver.rbuf += msg.data
        elif msg.kind == FIN:
            receiver.eof = True
        elif msg.kind == RST:
            self._reset(conn)

    def _reset(self, conn: Connection) -> None:
        for owner in self.net.reset(conn):
            if isinstance(owner, str):
                client = self.client_named(owner)
                client.finished = True
                conn.a.closed = True
            else:
                self.nodes[owner].history.append(("RESET", conn.key()))

    def _crash(self, node: Node, *reached: int) -> None:
        """CRASH node; under fsync partial `reached` is how many of its unsynced
        writes reached disk (none given: none did)."""
        node.own(keep_process=False)       # its directory, if lent to other worlds too
        node.kill()
        node.disk.crash(node.cwd, *reached)
        shm.forget(node)                   # shared memory does not survive the machine
        for conn in list(self.net.conns):
            mine = [ep for ep in (conn.a, conn.b) if ep is not None and ep.owner == node.index]
            if mine:
                for ep in mine:
                    ep.closed = True
                self._reset(conn)
        self.net.tcp = [(o, s) for o, s in self.net.tcp if o != node.index]
        for addr, (owner, _) in list(self.net.udp.items()):
            if owner == node.index:
                del self.net.udp[addr]
        self.net.collect()
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
            items = [(m.kind, m.data) for m in msgs]
            return tuple(sorted(items) if self.spec.network == "bag" else items)
        conns = []
        for key, c in self._conns_in_order():
            conns.append((key, c.established, c.refused, chan(c.chan[0]), chan(c.chan[1]),
                          ep_state(c.a), ep_state(c.b)))
        dgrams = tuple(sorted(d.group() for d in self.net.dgrams))
        udp = tuple(sorted((fmt_addr(a), o, tuple((fmt_addr(src), data) for src, data in s.rqueue))
                           for a, (o, s) in self.net.udp.items()))
        # A listener's backlog in its order: accept() takes the oldest first, so two
        # worlds that differ only in the order connections arrived are two worlds
        # (--check-merges found it in demo/durlog).
        listeners = sorted((fmt_addr(s.local), o, s.listening, tuple(c.key() for c in s.backlog))
                           for o, s in self.net.tcp)
        clients = [(c.name, c.next_req, c.finished, bytes(c.linebuf)) for c in self.clients]
        budgets = sorted(self.budgets.items(), key=lambda kv: kv[0])
        return (tuple(nodes), tuple(conns), dgrams, udp, tuple(listeners), tuple(clients),
                tuple(budgets), canon(self.replies))

    def network_view(self) -> list[dict]:
        out = []
        for _, conn in self._conns_in_order():
            for side in (0, 1):
                src, dst = self._chan_names(conn, side)
                for m in conn.chan[side]:
                    out.append({"src": src, "dst": dst, "kind": m.kind,
                                "data": m.data.decode("utf-8", errors="replace")})
        for _, d in self._dgram_groups():
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
        }
