#!/usr/bin/env python3
"""Maelstrom's echo workload: answer each echo with the same payload.

--bug: the payload goes back as text (a number 7 comes back "7"), a mistake of a node
that builds its reply by formatting strings."""
import sys

from msgloop import Node

BUG = "--bug" in sys.argv[1:]
node = Node()


@node.on("echo")
def echo(msg):
    payload = msg["body"]["echo"]
    node.reply(msg, {"type": "echo_ok", "echo": str(payload) if BUG else payload})


node.run()
