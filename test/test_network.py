"""The world's network on its own, in process (as Stateright tests its Network apart from
any checker): what a node's send does to the world, with the world's setting, ghost
clients and ledger the cluster attaches at construction (world/net.py `attach`), and no
process running. And the one way at run time: nothing below the cluster reaches the
cluster object (the setting and the network it is handed are all it sees)."""
from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

import pytest

from cmc.errors import EngineError, TargetError
from cmc.kernel.cluster import ClientSpec, Cluster, ClusterSpec, NodeSpec
from cmc.kernel.world.clients import Client, Ledger
from cmc.kernel.world.net import DATA, FIN, Endpoint, Msg, Network, Owner
from cmc.kernel.world.setting import Setting

ROOT = pathlib.Path(__file__).resolve().parent.parent
BELOW_CLUSTER = ("linux", "world", "calls", "proc")


@dataclass
class Named:
    """What the network reads of a node: its name (for messages) and index."""
    name: str
    index: int


def reply_record(client, node, index, req, raw):
    return {"client": client, "node": node, "index": index, "req": req, "raw": raw}


def world(peers=None, requests=(b"get\n", b"put\n"), cap=64, history=True):
    spec = ClusterSpec(nodes=(NodeSpec("a", ("true",)), NodeSpec("b", ("true",)),
                              NodeSpec("c", ("true",))),
                       clients=(ClientSpec("k", "127.0.0.1", 7000, requests),),
                       budgets={}, reply_record=reply_record, peers=peers or {},
                       channel_cap=cap, history=history)
    net = Network(spec.channel_cap)
    setting = Setting(spec, net, "/nonexistent")
    setting.nodes += [Named(n.name, i) for i, n in enumerate(spec.nodes)]
    clients = [Client(i, c) for i, c in enumerate(spec.clients)]
    ledger = Ledger(spec, setting)
    net.attach(setting, ledger, clients)
    return net, setting, ledger, clients[0]


def accepted(net, client, node=0):
    """The client's connection to node `node`, its CONNECT delivered and accepted."""
    client.conn = net.connect(Owner(client=client.name), client.addr, ("127.0.0.1", 7000))
    conn = client.conn
    conn.chan[0].clear()
    conn.b = Endpoint(Owner(node=node), ("127.0.0.1", 7000))
    conn.established = True
    return conn


def test_bytes_to_a_ghost_client_are_taken_at_once_and_its_next_request_goes_out():
    net, setting, ledger, client = world()
    conn = accepted(net, client)
    client.send_next(ledger, net)
    assert [m.data for m in conn.chan[0]] == [b"get\n"]
    setting.step = 4
    net.send(conn, 1, Msg(DATA, b"val"))          # half a line: kept, no reply yet
    assert ledger.replies == [] and not conn.chan[1]
    net.send(conn, 1, Msg(DATA, b"ue 1\n"))
    assert ledger.replies == [{"client": "k", "node": 0, "index": 0, "req": "get",
                               "raw": "value 1"}]
    assert not conn.chan[1]                        # never in flight: no DELIVER, no DROP
    assert [m.data for m in conn.chan[0]] == [b"get\n", b"put\n"]
    assert [(op["req"], op["invoke"], op["invoked"], op["complete"], op["completed"])
            for op in ledger.history] == [("get", 1, 1, 2, 5), ("put", 3, 5, None, None)]


def test_a_fin_to_a_ghost_client_ends_it():
    net, _, ledger, client = world()
    conn = accepted(net, client)
    net.send(conn, 1, Msg(FIN))
    assert client.finished and conn.a.closed and ledger.replies == []


def test_a_full_channel_is_named_by_its_ends():
    net, _, _, client = world(cap=2)
    conn = accepted(net, client, node=1)
    for _ in range(2):
        net.send(conn, 1, Msg(DATA, b"x"))       # a partial line: the client keeps it
    a = net.connect(Owner(node=0), ("127.0.0.1", 40001), ("127.0.0.1", 9))
    net.send(a, 0, Msg(DATA, b"1"))              # CONNECT and one byte: the cap
    with pytest.raises(EngineError, match=r"more than 2 messages in flight on a -> "
                                          r"127\.0\.0\.1:9 \(raise it"):
        net.send(a, 0, Msg(DATA, b"2"))


def test_a_peers_line_is_checked_on_every_send_between_nodes():
    net, setting, _, _ = world(peers={0: frozenset({1})})
    setting.step, setting.step_label = 3, "<DELIVER>"
    ok = net.connect(Owner(node=0), ("127.0.0.1", 40001), ("127.0.0.1", 7001))
    ok.b, ok.established = Endpoint(Owner(node=1), ("127.0.0.1", 7001)), True
    net.send(ok, 0, Msg(DATA, b"hi"))
    back = net.connect(Owner(node=2), ("127.0.0.1", 42001), ("127.0.0.1", 7000))
    back.b, back.established = Endpoint(Owner(node=0), ("127.0.0.1", 7000)), True
    with pytest.raises(TargetError, match=r"^node a \(step 3, <DELIVER>\): sends to "
                                          r"127\.0\.0\.1:42001, where node c listens, "
                                          r"which is not among its peers \(the model's "
                                          r"line: peers a: b\)$"):
        net.send(back, 1, Msg(DATA, b"to c"))     # a answers c: not among a's peers
    assert [(m.kind, m.data) for m in ok.chan[0]] == [("CONNECT", b""), (DATA, b"hi")]
    assert not back.chan[1]


def test_nothing_below_the_cluster_reaches_the_cluster():
    """No module of the kernel's lower rooms reads a `.cluster` attribute: a node and its
    handlers are handed the world's setting and network (world/setting.py)."""
    found = []
    for room in BELOW_CLUSTER:
        for path in sorted((ROOT / "cmc" / "kernel" / room).rglob("*.py")):
            for n in ast.walk(ast.parse(path.read_text())):
                if isinstance(n, ast.Attribute) and n.attr == "cluster":
                    found.append(f"{path.relative_to(ROOT)}:{n.lineno}")
    assert found == []


def test_the_world_is_not_subclassed_and_sends_through_its_network():
    """A world of another kind has a network of another kind, chosen at construction."""
    for name in ("dispatch", "ephemeral_port", "send", "check_peer", "where"):
        assert not hasattr(Cluster, name), name
    subclasses = []
    for path in sorted((ROOT / "cmc").rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.ClassDef) and any(getattr(b, "id", None) == "Cluster"
                                                   for b in n.bases):
                subclasses.append(f"{path.relative_to(ROOT)}:{n.name}")
    assert subclasses == []
