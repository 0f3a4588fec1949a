#!/usr/bin/env python3
"""Maelstrom's kafka workload (Gossip Glomers' challenge 5): append-only logs by key,
`send` of a message (its offset back), `poll` of the messages from an offset on,
`commit_offsets` and `list_committed_offsets`.

The first node of node_ids leads: it keeps every key's log (a message's offset is its
place in it) and the committed offsets, and answers every request. Any other node
forwards a client's request to it and relays its answer back to the client; a lost
forward or answer leaves that client unanswered, and no acknowledged send is lost, as
the leader has it before it answers.

--bug: every node keeps logs of its own and answers from them: offsets come from each
node's own counter, so two nodes give one offset of a key to two messages, and a poll
at one node does not see what was sent at another."""
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
node = Node()
logs = {}               # key -> its messages, by offset
committed = {}          # key -> its committed offset


def leader():
    return node.node_ids[0]


def apply(body):
    """This node's answer to a request, changing its logs as the request says."""
    kind = body["type"]
    if kind == "send":
        log = logs.setdefault(body["key"], [])
        log.append(body["msg"])
        return {"type": "send_ok", "offset": len(log) - 1}
    if kind == "poll":
        msgs = {}
        for key, start in sorted(body["offsets"].items()):
            log = logs.get(key, [])
            if start < len(log):
                msgs[key] = [[o, log[o]] for o in range(start, len(log))]
        return {"type": "poll_ok", "msgs": msgs}
    if kind == "commit_offsets":
        committed.update(body["offsets"])
        return {"type": "commit_offsets_ok"}
    return {"type": "list_committed_offsets_ok",
            "offsets": {k: committed[k] for k in body["keys"] if k in committed}}


def serve(msg):
    body = msg["body"]
    if BUG or node.node_id == leader():
        node.reply(msg, apply(body))
        return
    request = {k: v for k, v in body.items() if k != "msg_id"}

    def answered(reply):
        node.reply(msg, {k: v for k, v in reply["body"].items()
                         if k not in ("msg_id", "in_reply_to")})
    node.rpc(leader(), request, answered)


for kind in ("send", "poll", "commit_offsets", "list_committed_offsets"):
    node.on(kind)(serve)

node.run()
