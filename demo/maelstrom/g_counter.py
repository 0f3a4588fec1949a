#!/usr/bin/env python3
"""Maelstrom's g-counter workload over the seq-kv service: adds of a delta, reads of the
total. The total is one key of seq-kv; an add reads it and compare-and-sets it to the
sum, again from a fresh read when another node's add came between.

A read first writes a key of its own: seq-kv may answer a read from its past, and
after a write of this node the past it may answer from has every add acknowledged.

--bug: the add writes the sum it computed instead of compare-and-setting it: two adds
at once both read the old total, and the second write overwrites the first.

--stale-read: a read asks seq-kv straight away, and may be answered from before
another node's add."""
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
STALE = "--stale-read" in sys.argv[1:]
KEY = "counter"
node = Node()


def value_of(reply):
    """The total in a read's answer (a key nobody wrote yet counts 0)."""
    body = reply["body"]
    return body["value"] if body["type"] == "read_ok" else 0


@node.on("add")
def add(msg):
    delta = msg["body"]["delta"]

    def attempt():
        node.rpc("seq-kv", {"type": "read", "key": KEY}, lambda reply: got(value_of(reply)))

    def got(total):
        if BUG:
            node.rpc("seq-kv", {"type": "write", "key": KEY, "value": total + delta}, added)
            return
        node.rpc("seq-kv", {"type": "cas", "key": KEY, "from": total, "to": total + delta,
                            "create_if_not_exists": True}, settled)

    def settled(reply):
        if reply["body"]["type"] == "cas_ok":
            added(reply)
        else:
            attempt()                   # another add came between: read again

    def added(_reply):
        node.reply(msg, {"type": "add_ok"})

    attempt()


syncs = 0


@node.on("read")
def read(msg):
    # seq-kv may answer a read from its past: a write of this node's own first brings
    # what the node sees up to now, so the read after it has every add acknowledged
    global syncs
    syncs += 1

    def fresh(_reply):
        node.rpc("seq-kv", {"type": "read", "key": KEY},
                 lambda reply: node.reply(msg, {"type": "read_ok", "value": value_of(reply)}))
    if STALE:
        fresh(None)
        return
    node.rpc("seq-kv", {"type": "write", "key": f"sync-{node.node_id}", "value": syncs}, fresh)


node.run()
