#!/usr/bin/env python3
"""Maelstrom's g-set workload: a grow-only set, `add` of an element and `read` of them
all, on every node.

A node adds an element it is given to its set at once and answers add_ok; then it
tells every other node. For each peer it remembers which elements that peer has
acknowledged: when its set has more, it sends the peer those it lacks, and once a
second sends them again until an acknowledgement covers them. An acknowledgement
covers what its request carried, nothing more.

--bug: an acknowledgement is taken to cover the whole set as it is when the
acknowledgement comes. An element added while an earlier gossip was on its way is
marked as known to the peer although the gossip that carried it may have been lost,
and it is never sent again."""
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
node = Node()
elements = set()
acked = {}              # peer -> the elements it has acknowledged


def peers():
    return [p for p in node.node_ids if p != node.node_id]


def push(peer):
    """Send `peer` the elements it has not acknowledged, if any."""
    missing = elements - acked.setdefault(peer, set())
    if not missing:
        return
    sent = sorted(missing)

    def covered(_reply):
        if BUG:
            acked[peer] |= elements
        else:
            acked[peer] |= set(sent)
    node.rpc(peer, {"type": "merge", "elements": sent}, covered)


def learn(new):
    fresh = set(new) - elements
    if not fresh:
        return
    elements.update(fresh)
    for peer in peers():
        push(peer)


@node.on("add")
def add(msg):
    learn([msg["body"]["element"]])
    node.reply(msg, {"type": "add_ok"})


@node.on("merge")
def merge(msg):
    # the sender has these: no need to send them back to it
    acked.setdefault(msg["src"], set()).update(msg["body"]["elements"])
    learn(msg["body"]["elements"])
    node.reply(msg, {"type": "merge_ok"})


@node.on("read")
def read(msg):
    node.reply(msg, {"type": "read_ok", "value": sorted(elements)})


def resend():
    for peer in peers():
        push(peer)


node.every(1.0, resend)
node.run()
