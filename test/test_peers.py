"""`peers NODE: A, B` lines (docs/model-file.md, "`peers`"): the nodes a node may connect
or send to, checked at every step. The lines and their errors (pure Python), then the
check through the real CLI on the demos: twopc with its true topology declared gives the
same verdict and counts as without; raft with a peer left out is exit 3, naming the node,
the address and the node that listens there."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from langutil import assert_at, failure, load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREE = 'node a = "/x"\nnode b = "/x"\nnode c = "/x"\n'


def test_peers_lines(tmp_path):
    m = load(tmp_path, THREE + "peers a: b, c\npeers c: a\n")
    assert m.peers == (("a", ("b", "c")), ("c", ("a",)))
    assert load(tmp_path, THREE).peers == ()


@pytest.mark.parametrize("text, line, col, message", [
    ("peers d: a\n", 4, 7, "peers d: no node is named d"),
    ("peers a: b, x\n", 4, 13, "peers a: no node is named x (a peer is a node of the model)"),
    ("peers a: bb\n", 4, 10, "peers a: no node is named bb (did you mean b?) (a peer is a node "
                             "of the model)"),
    ("peers a: a\n", 4, 10, "peers a: a node need not list itself (it may always reach itself)"),
    ("peers a: b, b\n", 4, 13, "peers a: b is listed twice"),
    ("peers a: b\npeers a: c\n", 5, 7, "a second peers line for node a (the first is at line 4)"),
])
def test_peers_errors(tmp_path, text, line, col, message):
    assert_at(failure(tmp_path, THREE + text), line, col, message)


def run(model_text: str, tmp_path, name: str) -> tuple[subprocess.CompletedProcess, dict]:
    path = os.path.join(ROOT, "models", f".{name}-{os.getpid()}.model")
    report = tmp_path / "r.json"
    with open(path, "w") as f:
        f.write(model_text)
    try:
        r = subprocess.run([sys.executable, "-m", "cmc", "--model-file", path, "--no-build",
                            "--json", str(report)], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.remove(path)
    return r, json.loads(report.read_text())


def demo(name: str) -> str:
    with open(os.path.join(ROOT, "models", f"{name}.model")) as f:
        return f.read()


def test_twopc_with_its_topology_declared(tmp_path):
    plain, without = run(demo("twopc"), tmp_path, "twopc-plain")
    declared, with_peers = run(demo("twopc") + "\npeers coord: p1, p2\npeers p1: coord\n"
                               "peers p2: coord\n", tmp_path, "twopc-peers")
    assert plain.returncode == declared.returncode == 0, declared.stdout + declared.stderr
    assert with_peers["counts"] == without["counts"]
    assert with_peers["depth"] == without["depth"]


def test_raft_reaching_a_node_not_declared(tmp_path):
    r, report = run(demo("raft") + "\npeers n0: n1\n", tmp_path, "raft-peers")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Error: node n0 (step " in r.stdout
    assert ("127.0.0.1:7402, where node n2 listens, which is not among its peers (the "
            "model's line: peers n0: n1)") in r.stdout
    assert report["error"]["kind"] == "target"


UDP = """param bin = "../test/progs/build/udp_peer"
node r = "{bin} listen 7190"
node x = "{bin} listen 7191"
node s = "{bin} send 7190"
invariant fine: true
"""


def test_datagrams_to_a_declared_peer(tmp_path):
    r, report = run(UDP + "peers s: r\n", tmp_path, "udp-peers")
    assert r.returncode == 0, r.stdout + r.stderr
    plain, without = run(UDP, tmp_path, "udp-plain")
    assert report["counts"] == without["counts"] and report["counts"]["distinct"] > 2


def test_a_datagram_to_a_node_not_declared(tmp_path):
    r, report = run(UDP + "peers s: x\n", tmp_path, "udp-peers-bad")
    assert r.returncode == 3, r.stdout + r.stderr
    assert ("sends a datagram to 127.0.0.1:7190, where node r listens, which is not among "
            "its peers (the model's line: peers s: x)") in r.stdout
    assert report["error"]["kind"] == "target"
