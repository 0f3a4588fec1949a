"""A cluster of real node processes, seen by the engine as a model (the seam).

The engine knows a system only through: `launch()` (State 1), `actions()` (the
enabled environment actions, in a fixed order), `apply(key)`, `fingerprint()`
and `view()`. This module turns those into process launches, deliveries,
resets, timeouts and kills; what a world is, its fingerprint and views, is
world/view.py (docs/target-contract.md, "Worlds and actions").

The cluster makes, once, the world's network (of the kind it is given: Maelstrom's for
a world of Maelstrom nodes, kernel/maelstrom.py), its setting (world/setting.py: what
every node is handed of the world) and the ledger of what its clients saw; nodes and
handlers reach the world only through those.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Callable

from ..errors import EngineError
from ..interrupts import interrupts_held
from .calls import shm
from .calls.quiet import shows
from .proc.fork import drop_root, fork_world, hold_root
from .proc.node import Node
from .world import clock, traits, view
from .world.actions import (Action, ClientStart, Crash, DatagramAction, Fire, MessageAction,
                            ResetChannel, describe_key)
from .world.clients import Client, Ledger
from .world.content import compact
from .world.net import CONNECT, DATA, Network, Owner, Told
from .world.setting import Setting
from .world.view import digest

__all__ = ["ClientSpec", "Cluster", "ClusterSpec", "NodeSpec", "digest"]


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
    faults_ns: int | None = None   # time virtual: no fault once the clock is here (None: never)
    trace_ticks: bool = False      # the adapter's: views list the FIREs folded (--trace-ticks)
    cpus: int = 2           # the machine every node sees (calls/machine.py)
    memory: int = 4 << 30
    disk_bytes: int = 16 << 30   # the size of the file system of the nodes' directories
    private_pids: bool = False  # machine pids private: a PID namespace per launch
    # machine pids unset (auto): a node whose start makes a process group of its own is
    # given a PID namespace per launch as root (adapter.ClusterModel.fresh); own_pids,
    # the indexes of those nodes
    auto_pids: bool = False
    own_pids: frozenset = frozenset()
    history: bool = False   # keep the clients' operations (docs/model-file.md, "Histories")
    maelstrom: object = None   # maelstrom.MaelstromSpec: nodes speaking Maelstrom's protocol
    # `peers` lines: node index -> the indexes of the nodes it may connect or send to
    # (a node without a line may reach any); checked at every step (Setting.check_peer)
    peers: dict = field(default_factory=dict)


def _of_setting(name: str) -> property:
    """A field of the world's setting, read and set through the cluster."""
    return property(lambda self: getattr(self.setting, name),
                    lambda self, value: setattr(self.setting, name, value))


class Cluster:
    def __init__(self, spec: ClusterSpec, workroot: str, network: type = Network):
        self.spec = spec
        self.workroot = workroot
        outdir = os.path.join(workroot, "out")
        for d in (outdir, os.path.join(workroot, "nodes")):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        self.net = network(spec.channel_cap, bag=spec.network == "bag")
        self.setting = Setting(spec, self.net, outdir)
        self.nodes: list[Node] = self.setting.nodes
        for i, ns in enumerate(spec.nodes):
            cwd = os.path.join(workroot, "nodes", f"{i}-{ns.name}")
            os.makedirs(cwd)
            self.nodes.append(Node(self.setting, i, ns.name, list(ns.argv), cwd))
        self.clients = [Client(i, c) for i, c in enumerate(spec.clients)]
        self.ledger = Ledger(spec, self.setting)
        self.net.attach(self.setting, self.ledger, self.clients)
        self.budgets = dict(spec.budgets)
        self._out_offsets: dict[str, int] = {}

    # The setting's figures, as the adapter reads and sets them.
    virtual = property(lambda self: self.setting.virtual)
    step = property(lambda self: self.setting.step)

    recording = _of_setting("recording")
    shift = _of_setting("shift")

    def drain(self) -> dict:
        """What happened since the last drain: each node's emulated calls, and
        the stdout/stderr lines it printed (for showing a behavior step by step);
        with a page cache, what a CRASH in the step threw away ("lost") and the
        writes not yet durable ("unsynced")."""
        out = {n.name: {"calls": [], "stdout": "", "stderr": ""} for n in self.nodes}
        setting = self.setting
        for name, line in setting.calls:
            out[name]["calls"].append(line)
        setting.calls = []
        for n in self.nodes:
            for inc in range(n.incarnation + 1):
                base = os.path.join(setting.outdir, f"{n.index}-{n.name}.{inc}")
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

    def client_named(self, name: str) -> Client:
        return next(c for c in self.clients if c.name == name)

    # -- the engine's protocol -------------------------------------------------------
    def launch(self) -> None:
        self.setting.step, self.setting.step_label = 0, "launch"
        for node in self.nodes:
            node.launch()
        for client in self.clients:
            if client.spec.after_ns is None:
                self._start(client)
        self.net.launched()
        self.settle()
        self.compact()

    def _start(self, client: Client) -> None:
        """A ghost client connects and puts its first request in flight."""
        dst = (client.spec.host, client.spec.port)
        client.conn = self.net.connect(Owner(client=client.name), client.addr, dst)
        client.send_next(self.ledger, self.net)

    def own(self, root: str, roots) -> None:
        """This world, launched in `root`, is one of many side by side (copying): the
        root goes when the world and every node directory in it are gone; `roots`
        (fork.Roots) makes the roots of node directories copied later."""
        self.setting.own_root = root
        self.setting.roots = roots
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
                drop_root(self.setting.own_root)
                self.setting.own_root = None

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

    FAULTS = ("crash", "drop", "dup", "delay")

    def spendable(self) -> dict:
        """The budgets an action may spend now: all that is left, but under `time virtual
        faults T` no fault once the clock has reached T (the faults have healed, as
        Maelstrom's nemesis heals at the end of its time limit)."""
        until = self.spec.faults_ns      # (clock.healed, inline: this is every step's)
        if until is None or self.net.clock < until:
            return self.budgets
        return {kind: 0 if kind in self.FAULTS else left for kind, left in self.budgets.items()}

    def actions(self) -> list[Action]:
        """The enabled actions of the environment, in a fixed order: deliveries,
        drops, duplicates (within their budgets), timeouts, crashes; a network of
        another kind puts its own among them (Network.actions)."""
        budgets = self.spendable()
        out: list[Action] = self.net.own_actions(budgets)
        conns = self.net.keyed()
        bag = self.net.bag

        def each_message(kind, conn_key, conn, only_data=False):
            for side in (0, 1):
                src, dst = self.net.chan_names(conn, side)
                for i, m in self.net.messages(conn, side):
                    if not only_data or m.kind == DATA:
                        out.append(MessageAction(kind, conn_key, side, i, src, dst, m.kind,
                                                 m.data if m.kind == DATA else None))

        def each_dgram(kind):
            for group, d in dgrams:
                out.append(DatagramAction(kind, group, *self.net.dgram_names(d), d.data))
        for key, conn in conns:
            each_message("DELIVER", key, conn)
        dgrams = self.net.dgram_groups()
        each_dgram("DELIVER")
        if budgets.get("drop", 0) > 0:
            for key, conn in conns:
                if not conn.in_flight():
                    continue
                if bag and conn.established:
                    each_message("DROP", key, conn)
                else:
                    out.append(ResetChannel(key, *self.net.chan_names(conn, 0)))
            each_dgram("DROP")
        if bag and budgets.get("dup", 0) > 0:
            for key, conn in conns:
                if conn.established:
                    each_message("DUP", key, conn, only_data=True)
            each_dgram("DUP")
        fire = budgets.get("fire")
        if self.virtual:
            if fire is None or fire > 0:
                out += clock.next_fire(self, budgets)
        elif fire is None or fire > 0:
            for node in self.nodes:
                timed = [t for t in node.tasks.blocked() if t.block.timeout_ns] if node.alive else []
                for t in timed:          # one FIRE per blocked thread
                    out.append(Fire(node.index, node.name, t.block.what, t.block.timeout_ns, t.tag,
                                    **node.tasks.fire_names(t, len(timed) > 1)))
        if budgets.get("crash", 0) > 0:
            for node in self.nodes:
                if not node.alive:
                    continue
                k = len(node.disk.pending) if node.disk.partial else 0
                if not k:
                    out.append(Crash(node.index, node.name))
                else:                           # fsync partial: j of the k reached disk
                    out += [Crash(node.index, node.name, j, k) for j in range(k + 1)]
        if self.net.starts:                     # its clients' starts (time virtual)
            out = self.net.with_starts(out, budgets)
        return out

    def apply(self, key: tuple) -> Action:
        """Apply one enabled action; returns it."""
        action = next((a for a in self.actions() if a.key == key), None)
        if action is None:
            raise EngineError(f"nondeterminism: replaying the same actions, the action taken at "
                              f"step {self.step + 1} ({describe_key(key)}) is not enabled "
                              "any more; the program under check (or cmc) is not "
                              "deterministic")
        self.setting.step += 1
        self.setting.step_label = f"<{action.label}>"
        self.net.reads = set()
        if not self.net.take(action, self.budgets):
            self._take(action)
        self.net.collect()
        self.settle()
        self.net.collect()
        self.compact()
        return action

    def _take(self, action: Action) -> None:
        """What an action of the environment does to the world (before the nodes it
        woke run: `settle`)."""
        net = self.net
        match action:
            case MessageAction(kind="DELIVER"):
                conn = net.connection(action.conn)
                self._tell(net.deliver(conn, action.side, action.index))
                if self.spec.peers and action.msg == CONNECT and conn.b is not None \
                        and conn.a.owner.node is not None:
                    net.check_peer(conn.a.owner.node, conn.b.owner.node, "connected to",
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
                        net.check_peer(d.src_node, found[0], "sent a datagram to", d.dst)
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

    # -- time virtual: one clock (world/clock.py) -----------------------------------------
    def foldable(self) -> Fire | None:
        """Time virtual: the FIRE that may be folded into the step just taken (nothing in
        flight, and the one FIRE due is a node's), else None."""
        if not self.virtual or self.net.in_flight_sent():
            return None
        budgets = self.spendable()
        fire = budgets.get("fire")
        due = clock.next_fire(self, budgets) if fire is None or fire > 0 else []
        return self.net.foldable(due[0] if due and isinstance(due[0], Fire) else None,
                                 budgets)

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

    # -- what a world is (world/view.py) ------------------------------------------
    def fingerprint(self) -> bytes:
        return view.fingerprint(self)

    def parts(self) -> list[tuple[str, dict]]:
        return view.parts(self)

    def view(self) -> dict:
        return view.view(self)

    # -- partial-order reduction (docs/design.md, "Partial-order reduction") ---------
    def traits(self) -> dict:
        """The world in the parts --por tells apart (world/traits.py)."""
        return self.net.traits(traits.parts(view.world(self), self.net.clock))

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
