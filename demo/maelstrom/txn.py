#!/usr/bin/env python3
"""Maelstrom's transactional workloads, txn-rw-register and txn-list-append (Gossip
Glomers challenge 6): a txn is a list of micro-ops, ["r", k, null] reads key k,
["w", k, v] sets it, ["append", k, v] adds v to the end of its list; keys and values
are integers. The answer is the txn with each read's null replaced by what it read.

The first node of node_ids leads: it executes every txn, one at a time, on its store,
so the txns are strict-serializable. Any other node forwards a client's txn to the
leader and relays its answer (a lost forward leaves the client unanswered: allowed).
After each txn that wrote, the leader sends the other nodes the values it left on the
keys it wrote (fire and forget); they keep them in a cache no correct node reads.

--bug: a follower answers a read-only txn (only "r" ops) itself, from its cache. The
cache may lack a write the leader has acknowledged, because the leader's update was
lost or is still on its way: a read that started after the write was acknowledged
does not see it (stale, a strict-serializability violation)."""
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
node = Node()
store = {}              # key -> its register's value, or its list


def leader():
    return node.node_ids[0]


def read(key):
    value = store.get(key)
    return list(value) if isinstance(value, list) else value


def execute(txn):
    """Run txn on the store; the answer's txn, and the keys it wrote in first-write order."""
    done, written = [], []
    for kind, key, value in txn:
        if kind == "r":
            value = read(key)
        elif kind == "w":
            store[key] = value
        else:
            store[key] = store.get(key, []) + [value]
        if kind != "r" and key not in written:
            written.append(key)
        done.append([kind, key, value])
    return done, written


def lead(msg):
    done, written = execute(msg["body"]["txn"])
    if written:
        writes = [[key, read(key)] for key in written]
        for peer in node.node_ids[1:]:
            node.send(peer, {"type": "update", "writes": writes})
    node.reply(msg, {"type": "txn_ok", "txn": done})


def forward(msg):
    def answered(reply):
        node.reply(msg, {k: v for k, v in reply["body"].items()
                         if k not in ("msg_id", "in_reply_to")})
    node.rpc(leader(), {"type": "txn", "txn": msg["body"]["txn"]}, answered)


@node.on("txn")
def txn(msg):
    ops = msg["body"]["txn"]
    if node.node_id == leader():
        lead(msg)
    elif BUG and all(kind == "r" for kind, _, _ in ops):
        node.reply(msg, {"type": "txn_ok", "txn": execute(ops)[0]})
    else:
        forward(msg)


@node.on("update")
def update(msg):
    for key, value in msg["body"]["writes"]:
        store[key] = value


node.run()
