#!/usr/bin/env python3
"""Maelstrom's broadcast workload: every value a client broadcasts reaches every node.

A node keeps the values it has seen; a new one it gossips to every other node, and
until a node acknowledges it, sends it again every second.

--bug: the gossip is sent once and never again: a lost message loses the value for
that node (a broadcast that does not retry after a DROP).
--every S: resend every S seconds instead (a correct node, slow to mend a loss)."""
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
EVERY = float(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 1.0
node = Node()
values = set()
unacked = {}        # (peer, value) -> True while the peer has not acknowledged it


def gossip(peer, value):
    def acked(_reply):
        unacked.pop((peer, value), None)
    node.rpc(peer, {"type": "gossip", "message": value}, acked)


def learn(value):
    if value in values:
        return
    values.add(value)
    for peer in node.node_ids:
        if peer != node.node_id:
            unacked[(peer, value)] = True
            gossip(peer, value)


@node.on("topology")
def topology(msg):
    node.reply(msg, {"type": "topology_ok"})


@node.on("broadcast")
def broadcast(msg):
    learn(msg["body"]["message"])
    node.reply(msg, {"type": "broadcast_ok"})


@node.on("gossip")
def gossip_in(msg):
    learn(msg["body"]["message"])
    node.reply(msg, {"type": "gossip_ok"})


@node.on("read")
def read(msg):
    node.reply(msg, {"type": "read_ok", "messages": sorted(values)})


def resend():
    if BUG:
        return
    for peer, value in sorted(unacked):
        gossip(peer, value)


node.every(EVERY, resend)
node.run()
