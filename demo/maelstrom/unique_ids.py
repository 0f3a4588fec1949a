#!/usr/bin/env python3
"""Maelstrom's unique-ids workload: answer each generate with an id no other answer
has, without talking to the other nodes.

--bug: the id is a per-node counter, without the node's id: two nodes hand out 1."""
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
node = Node()
count = 0


@node.on("generate")
def generate(msg):
    global count
    count += 1
    node.reply(msg, {"type": "generate_ok", "id": count if BUG else f"{node.node_id}-{count}"})


node.run()
