#!/usr/bin/env python3
"""Maelstrom's pn-counter workload: `add` of a delta, positive or negative, and `read`
of the total, on every node, with no service behind them.

The counter is a state-based CRDT. A node keeps, for every node, two sums of that
node's deltas: the positive ones (p) and the negated negative ones (n). Both only grow,
and only their own node adds to them, so two copies merge by taking the larger of each
entry, in whatever order copies arrive and however often. The total is the sum of p
less the sum of n. A node answers an add at once and sends its whole state to every
other node; it sends it again every half second, so a state the network lost is made
good by the next one (no acknowledgements: merging a state twice changes nothing).

--bug: one sum per node, of all its deltas, merged by the larger of each entry as a
g-counter's are: a sum that a negative delta made smaller loses to the older, larger
copy of it another node holds (and a negative sum to the 0 a node starts from)."""
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
node = Node()
p = {}                  # node -> the sum of its positive deltas
n = {}                  # node -> minus the sum of its negative deltas
sums = {}               # (--bug) node -> the sum of all its deltas


def peers():
    return [other for other in node.node_ids if other != node.node_id]


def state():
    if BUG:
        return {"sums": sums}
    return {"p": p, "n": n}


def gossip():
    for peer in peers():
        node.send(peer, {"type": "replicate", **state()})


def total():
    if BUG:
        return sum(sums.values())
    return sum(p.values()) - sum(n.values())


def merge_into(mine, theirs):
    for who, count in theirs.items():
        mine[who] = max(mine.get(who, 0), count)


@node.on("add")
def add(msg):
    delta = msg["body"]["delta"]
    me = node.node_id
    if BUG:
        sums[me] = sums.get(me, 0) + delta
    elif delta >= 0:
        p[me] = p.get(me, 0) + delta
    else:
        n[me] = n.get(me, 0) - delta
    node.reply(msg, {"type": "add_ok"})
    gossip()


@node.on("replicate")
def replicate(msg):
    body = msg["body"]
    if BUG:
        merge_into(sums, body["sums"])
    else:
        merge_into(p, body["p"])
        merge_into(n, body["n"])


@node.on("read")
def read(msg):
    node.reply(msg, {"type": "read_ok", "value": total()})


node.every(0.5, gossip)
node.run()
