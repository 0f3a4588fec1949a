"""Maelstrom's protocol: nodes that speak JSON lines on stdin and stdout, and the network,
clients and services around them (docs/maelstrom.md; docs/design.md, "Maelstrom nodes").

A Maelstrom node reads one message per line on stdin and writes one per line on stdout,
each `{"src", "dest", "body"}`. cmc is both ends of those two descriptors: the node runs
under a filter that notifies every call on fds 0 and 1 (linux/filter.py, `stdio`), and
before the program runs, fds 0 and 1 of its first process are one virtual stream socket
(`open_stdio`) whose other end is this module. So a read of stdin blocks as a `recv` on a
socket does, poll/select/epoll see it, `--fast` copies the node like any other, and the
node needs nothing of cmc.

- What the node writes on stdout is split into lines; each must be a message whose
  `src` is the node. One to a node or a service is a *letter*: it is in flight until the
  environment delivers it (DELIVER: written to the receiver's stdin, or answered by the
  service) or loses it (DROP, within `budget drop`). The network is a bag, as Maelstrom's
  is: any letter in flight may be delivered next; letters alike (sender, receiver, line)
  are one action.
- One to a client is its reply: taken at once (no DELIVER, no DROP, as the `client`
  statement's replies), matched by `in_reply_to` to the client's request in flight, a
  record in `replies`; the client's next request goes into flight then.
- Each launch of a node (the first, and each relaunch after a CRASH) begins with `init`
  (`node_id`, `node_ids`) already on its stdin, from `c0`, as Maelstrom begins a test;
  its `init_ok` is taken like a client's reply and kept nowhere.
- A client's request is a letter from the client to its node: delivered in any order
  with the others, never dropped (Maelstrom's faults are between servers).
- Services (`lin-kv`, `seq-kv`, `lin-tso`) are one copy each, answered when a request
  is delivered to them, the answer a letter back: both ways may be dropped.

The letters, the services' data, the clients and any partial stdout line are part of
the world's fingerprint; what a node was given on stdin is in its input history.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass

from ..errors import TargetError
from .cluster import Cluster
from .world import clock
from .world.actions import ClientStart
from .world.net import DATA, Connection, Endpoint, Network, Owner, Sock
from .world.services import Services, compact_json

INIT_SENDER = "c0"          # who sends init (a client name no model may take)
STDOUT_LINE_MAX = 1 << 20   # a letter is kept in every world it is in flight in


@dataclass(frozen=True)
class MaelstromClient:
    name: str
    node: str                       # the node it sends to
    bodies: tuple[str, ...]         # each request's body, a JSON object as text
    after_ns: int | None = None     # time virtual: it starts when the clock is there


@dataclass(frozen=True)
class MaelstromSpec:
    nodes: tuple[str, ...]          # the nodes that speak the protocol (node_ids)
    clients: tuple[MaelstromClient, ...] = ()
    services: tuple[str, ...] = ()



@dataclass(eq=False)
class Letter:
    """A message in flight: `line` as its sender wrote it (no line ending)."""
    src: str
    dest: str
    line: str
    sent: int = 0                   # the clock when it was sent (time virtual)

    def group(self) -> tuple:
        return (self.src, self.dest, self.line)


@dataclass(frozen=True)
class LetterAction:
    """DELIVER, DROP or DUP of one letter of a group (letters alike are one action); a
    request delivered to a service that may answer it in more than one way (seq-kv's
    past, lww-kv's replicas) is one action per answer, `at` naming it and `note`
    saying what it is (world/services.py, `choices`)."""
    kind: str
    src: str
    dst: str
    line: str
    at: int | None = None
    note: str = ""

    @property
    def key(self) -> tuple:
        return (f"{self.kind}_MSG", self.src, self.dst, self.line) + \
            ((self.at,) if self.at is not None else ())

    @property
    def label(self) -> str:
        note = f" ({self.note})" if self.at is not None else ""
        return f"{self.kind} {self.src} -> {self.dst} {_body_text(self.line)}{note}"

    def fields(self) -> dict:
        out = {"kind": self.kind, "src": self.src, "dst": self.dst, "data": self.line,
               "msg": "MSG"}
        if self.at is not None:
            out["choice"] = self.note
        return out


def _body_text(line: str) -> str:
    try:
        return compact_json(json.loads(line)["body"])
    except (ValueError, KeyError, TypeError):
        return line


class ClientState:
    def __init__(self, spec: MaelstromClient):
        self.spec = spec
        self.next_req = 0
        self.msg_id = 0
        self.pending: int | None = None     # msg_id of its request in flight
        self.req = None                     # that request's body, as given
        self.open_op: int | None = None     # its request as an entry of the history
        self.started = spec.after_ns is None

    def state(self) -> tuple:
        return (self.spec.name, self.next_req, self.msg_id, self.pending, self.started)


class MaelstromNetwork(Network):
    """The network of a world some of whose nodes speak Maelstrom's protocol
    (`spec.maelstrom`): the connections and datagrams of any world, and beside them the
    letters in flight, the Maelstrom clients and the services, with the actions on
    them (the hooks of Network, which the cluster calls). The clock rules
    (world/clock.py) see the letters through `in_flight_sent`."""

    def __init__(self, channel_cap: int, bag: bool = False):
        super().__init__(channel_cap, bag)
        self.letters: list[Letter] = []

    def attach(self, setting, ledger, clients) -> None:
        super().attach(setting, ledger, clients)
        self.ms = setting.spec.maelstrom
        self.speakers = {n.name: n for n in setting.nodes if n.name in self.ms.nodes}
        for node in self.speakers.values():
            node.stdio = True
        self.stdio: dict[str, Sock] = {}              # node name -> its fds 0 and 1
        self.outbuf: dict[str, bytearray] = {}        # a partial stdout line
        self.mclients = [ClientState(c) for c in self.ms.clients]
        self.services = Services(self.ms.services)

    def in_flight_sent(self) -> list[int]:
        return super().in_flight_sent() + [m.sent for m in self.letters]

    # -- stdin and stdout ---------------------------------------------------------
    def open_stdio(self, node) -> None:
        """Before node's program runs (proc/node.py): its fds 0 and 1 are one virtual
        stream whose other end is cmc, with init already on it."""
        node.next_ino += 1
        sock = Sock(socket.AF_UNIX, socket.SOCK_STREAM, ino=node.next_ino, refs=2)
        end = ("stdio", node.index)
        conn = Connection(0, Endpoint(Owner(node=node.index), end), end,
                          Endpoint(Owner(client=INIT_SENDER), end), established=True)
        sock.conn, sock.side = conn, 0
        proc = node.tasks.main
        proc.fds[0] = proc.fds[1] = sock
        self.stdio[node.name] = sock
        self.outbuf[node.name] = bytearray()
        init = {"type": "init", "msg_id": node.incarnation + 1, "node_id": node.name,
                "node_ids": list(self.ms.nodes)}
        conn.a.rbuf += (compact_json({"src": INIT_SENDER, "dest": node.name, "body": init})
                        + "\n").encode()

    def send(self, conn, side, msg) -> None:
        if conn.dst[0] != "stdio":
            return super().send(conn, side, msg)
        if msg.kind != DATA:             # stdout closed: nothing more comes from it
            return
        node = self.setting.nodes[conn.dst[1]]
        buf = self.outbuf[node.name]
        buf += msg.data
        while (nl := buf.find(b"\n")) >= 0:
            line = bytes(buf[:nl]).rstrip(b"\r")
            del buf[:nl + 1]
            if line.strip():
                self._written(node, line)
        if len(buf) > STDOUT_LINE_MAX:
            raise TargetError(self.setting.where(node) + f"wrote more than {STDOUT_LINE_MAX} "
                              f"bytes on stdout without a line end (it starts "
                              f"{bytes(buf[:80])!r})")

    def _written(self, node, raw: bytes) -> None:
        """A whole line the node wrote on stdout: a message, or a target error."""
        where = self.setting.where(node)
        try:
            line = raw.decode("utf-8")
            msg = json.loads(line)
        except (UnicodeDecodeError, ValueError):
            msg = None
        if not (isinstance(msg, dict) and isinstance(msg.get("src"), str)
                and isinstance(msg.get("dest"), str) and isinstance(msg.get("body"), dict)):
            raise TargetError(where + "wrote a line on stdout that is not a "
                              "Maelstrom message (a JSON object with src, dest and body; "
                              f"log to stderr instead): {raw[:200]!r}")
        if msg["src"] != node.name:
            raise TargetError(where + f"sent a message whose src is "
                              f"{msg['src']!r}, not its node_id {node.name!r}: {raw[:200]!r}")
        dest, body = msg["dest"], msg["body"]
        if dest in self.speakers or dest in self.ms.services:
            self.letters.append(Letter(node.name, dest, line, self.clock))
            return
        if dest == INIT_SENDER:
            return                      # init_ok
        client = next((c for c in self.mclients if c.spec.name == dest), None)
        if client is None:
            known = ", ".join([*self.speakers, *self.ms.services,
                               *(c.spec.name for c in self.mclients)])
            raise TargetError(where + f"sent a message to {dest!r}, which is no "
                              f"node, client or service of the model ({known}): "
                              f"{raw[:200]!r}")
        if client.pending is None or body.get("in_reply_to") != client.pending:
            return                      # not an answer to its request in flight
        op, client.open_op = client.open_op, None
        self.ledger.reply({"client": dest, "node": node.index,
                           "index": len(self.ledger.replies), "req": client.req,
                           "body": body}, op)
        client.pending = None
        self._send_next(client)

    def _send_next(self, client: ClientState) -> None:
        spec = client.spec
        if client.next_req >= len(spec.bodies):
            return
        body = json.loads(spec.bodies[client.next_req])
        client.next_req += 1
        client.msg_id += 1
        client.req, client.pending = dict(body), client.msg_id
        if self.ledger.keep_history:    # an operation of the history (lang/history.py)
            client.open_op = self.ledger.invoke(
                {"client": spec.name, "index": client.next_req - 1,
                 "req": spec.bodies[client.next_req - 1], "body": dict(body)})
        body["msg_id"] = client.msg_id
        line = compact_json({"src": spec.name, "dest": spec.node, "body": body})
        self.letters.append(Letter(spec.name, spec.node, line, self.clock))

    # -- the hooks the cluster calls ------------------------------------------------
    def launched(self) -> None:
        for client in self.mclients:
            if client.started:
                self._send_next(client)

    def own_actions(self, budgets: dict) -> list[LetterAction]:
        groups: dict[tuple, Letter] = {}
        for m in self.letters:
            groups.setdefault(m.group(), m)
        order = sorted(groups)
        out = []
        for g in order:
            out.append(LetterAction("DELIVER", *g))
            if g[1] in self.ms.services:    # seq-kv's past, lww-kv's replicas
                body = json.loads(g[2])["body"]
                out += [LetterAction("DELIVER", *g, at, note)
                        for at, note in self.services.choices(g[1], g[0], body)]
        clients = {c.spec.name for c in self.mclients}
        faulty = [g for g in order if g[0] not in clients]
        if budgets.get("drop", 0) > 0:
            out += [LetterAction("DROP", *g) for g in faulty]
        if budgets.get("dup", 0) > 0:
            out += [LetterAction("DUP", *g) for g in faulty]
        return out

    def _start_due(self, budgets: dict) -> ClientStart | None:
        """Time virtual: the first Maelstrom client waiting to start, when the clock
        may reach it (not past the horizon, nor past a letter's latency bound unless
        the delay budget pays)."""
        waiting = [(c.spec.after_ns, i, c) for i, c in enumerate(self.mclients)
                   if not c.started]
        fire = budgets.get("fire")
        if not waiting or not self.setting.virtual or fire is not None and fire <= 0:
            return None
        at, _, client = min(waiting, key=lambda w: w[:2])
        spec = self.setting.spec
        if at > spec.horizon_ns:
            return None
        late = clock.count_late(self.in_flight_sent(), self.clock, spec, at)
        if late > budgets.get("delay", 0):
            return None
        return ClientStart(client.spec.name, max(at, self.clock))

    starts = True

    def with_starts(self, out: list, budgets: dict) -> list:
        start = self._start_due(budgets)
        if start is not None:
            fires = [a for a in out if a.kind == "FIRE"]
            if not fires or fires[0].at is None or start.at < fires[0].at:
                out = [a for a in out if a.kind != "FIRE"] + [start]
        return out

    def foldable(self, fire, budgets: dict):
        start = self._start_due(budgets)
        if fire is not None and start is not None and start.at < fire.at:
            return None                 # the client starts first: not a FIRE to fold
        return fire

    def take(self, action, budgets: dict) -> bool:
        if isinstance(action, ClientStart):
            client = next((c for c in self.mclients if c.spec.name == action.client), None)
            if client is None:
                return False            # a ghost client's start: the cluster's
            if budgets.get("fire") is not None:
                budgets["fire"] -= 1
            self.clock = max(self.clock, action.at)
            client.started = True
            self._send_next(client)
            return True
        if not isinstance(action, LetterAction):
            return False
        letter = next(m for m in self.letters if m.group() == action.key[1:4])
        if action.kind == "DELIVER":
            self.letters.remove(letter)
            self._deliver(letter, action.at)
        elif action.kind == "DROP":
            budgets["drop"] -= 1
            self.letters.remove(letter)
        else:
            budgets["dup"] -= 1
            self.letters.append(Letter(letter.src, letter.dest, letter.line, letter.sent))
        return True

    def _deliver(self, letter: Letter, at: int | None = None) -> None:
        if letter.dest in self.ms.services:
            # what the service holds is read, changed or not (--por: Cluster.changed)
            self.reads.add(f"service {letter.dest!r}")
            self._serve(letter, at)
            return
        node = self.speakers[letter.dest]
        node.history.append(("MSG", letter.line))
        if not node.alive:
            return                      # it ended by itself: the letter is lost
        ep = self.stdio[node.name].conn.a
        ep.rbuf += (letter.line + "\n").encode()
        ep.arrivals += 1

    # -- services ---------------------------------------------------------------------
    def _serve(self, letter: Letter, at: int | None = None) -> None:
        """A service answers a request delivered to it (world/services.py); its answer
        is a letter back."""
        body = json.loads(letter.line)["body"]
        reply = self.services.answer(letter.dest, letter.src, body, at)
        if "msg_id" in body:
            reply["in_reply_to"] = body["msg_id"]
        line = compact_json({"src": letter.dest, "dest": letter.src, "body": reply})
        if letter.src in self.speakers:
            self.letters.append(Letter(letter.dest, letter.src, line, self.clock))

    # -- what a world is --------------------------------------------------------------
    def world(self) -> tuple:
        left = self.setting.spec.latency_ns - self.clock
        virtual = self.setting.virtual
        letters = tuple(sorted(m.group() + ((m.sent + left,) if virtual else ())
                               for m in self.letters))
        clients = tuple(c.state() + ((c.spec.after_ns - self.clock,)
                                     if not c.started else ()) for c in self.mclients)
        stdio = tuple((name, bytes(self.outbuf[name]), bytes(sock.conn.a.rbuf))
                      for name, sock in sorted(self.stdio.items()))
        return letters, clients, stdio, tuple(sorted(self.services.state().items()))

    def parts(self) -> list[tuple[str, dict]]:
        letters, clients, stdio, services = self.world()
        return [("maelstrom", {"letters in flight": letters, "clients": clients,
                               "stdout and stdin": stdio, "services": services})]

    def traits(self, out: dict) -> dict:
        """--por's parts of the world (Cluster.traits), and the letters between each two
        ends, each Maelstrom client, each service."""
        letters, clients, stdio, services = self.world()
        for g in letters:
            out.setdefault(f"letters {g[:2]!r}", []).append(g)
        out.update((f"client {c[0]!r}", c) for c in clients)
        out.update((f"service {s!r}", d) for s, d in services)
        return out

    def view(self) -> list[dict]:
        return [{"src": m.src, "dst": m.dest, "kind": "MSG", "data": m.line,
                 "body": json.loads(m.line)["body"]}
                for m in sorted(self.letters, key=Letter.group)]


def make_cluster(spec, workroot: str) -> Cluster:
    """The cluster of `spec`, its network Maelstrom's when some of its nodes speak
    Maelstrom's protocol."""
    return Cluster(spec, workroot, Network if spec.maelstrom is None else MaelstromNetwork)
