#!/usr/bin/env python3
"""Maelstrom's lin-kv workload: a key-value store with read, write and compare-and-set
that must be linearizable. The first node of node_ids leads: it keeps the store and
answers every request; any other node forwards a request to it and its answer back.
The leader copies each change to the other nodes (so that one could take over; none
does here).

--bug: a follower answers reads from its own copy, which lags the leader's: a read
made after a write was acknowledged may not see it."""
import json
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
node = Node()
data = {}               # key, as JSON text -> value


def leader():
    return node.node_ids[0]


def apply(body):
    """The answer of this node's store to a request, changing it as the request says."""
    key = json.dumps(body["key"])
    kind = body["type"]
    if kind == "read":
        if key not in data:
            return {"type": "error", "code": 20, "text": "no such key"}
        return {"type": "read_ok", "value": data[key]}
    if kind == "write":
        data[key] = body["value"]
        return {"type": "write_ok"}
    if key not in data:
        return {"type": "error", "code": 20, "text": "no such key"}
    if data[key] != body["from"]:
        return {"type": "error", "code": 22, "text": f"the value is {data[key]}"}
    data[key] = body["to"]
    return {"type": "cas_ok"}


def serve(msg):
    body = msg["body"]
    if node.node_id == leader():
        answer = apply(body)
        if answer["type"] in ("write_ok", "cas_ok"):
            key = json.dumps(body["key"])
            for peer in node.node_ids[1:]:
                node.send(peer, {"type": "copy", "key": key, "value": data[key]})
        node.reply(msg, answer)
    elif BUG and body["type"] == "read":
        node.reply(msg, apply(body))
    else:
        request = {k: v for k, v in body.items() if k != "msg_id"}

        def answered(reply):
            node.reply(msg, {k: v for k, v in reply["body"].items()
                             if k not in ("msg_id", "in_reply_to")})
        node.rpc(leader(), request, answered)


for kind in ("read", "write", "cas"):
    node.on(kind)(serve)


@node.on("copy")
def copy(msg):
    data[msg["body"]["key"]] = msg["body"]["value"]


node.run()
