"""A small Maelstrom node library: a message loop over stdin, a handler per message type,
replies and RPCs with callbacks, and periodic timers. Written for cmc's demos the way
Gossip Glomers solutions are written; it knows nothing of cmc (docs/maelstrom.md).

    node = Node()

    @node.on("echo")
    def echo(msg):
        node.reply(msg, {"type": "echo_ok", "echo": msg["body"]["echo"]})

    node.run()
"""
import json
import os
import select
import sys
import time


class Node:
    def __init__(self):
        self.node_id = None
        self.node_ids = []
        self.handlers = {}
        self.callbacks = {}         # msg_id of an RPC sent -> what to do with its reply
        self.timers = []            # [period s, next due, function]
        self.next_msg_id = 0
        self.on("init")(self._init)

    def on(self, kind):
        """Decorator: fn(msg) handles messages whose body type is `kind`."""
        def register(fn):
            self.handlers[kind] = fn
            return fn
        return register

    def every(self, seconds, fn):
        """Call fn() every `seconds` while the node runs."""
        self.timers.append([seconds, time.monotonic() + seconds, fn])

    def log(self, text):
        print(text, file=sys.stderr, flush=True)

    def send(self, dest, body):
        line = json.dumps({"src": self.node_id, "dest": dest, "body": body})
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def reply(self, msg, body):
        body = dict(body, in_reply_to=msg["body"]["msg_id"])
        self.send(msg["src"], body)

    def rpc(self, dest, body, callback):
        """Send a request; callback(reply) runs when its reply comes."""
        self.next_msg_id += 1
        self.callbacks[self.next_msg_id] = callback
        self.send(dest, dict(body, msg_id=self.next_msg_id))

    def _init(self, msg):
        self.node_id = msg["body"]["node_id"]
        self.node_ids = msg["body"]["node_ids"]
        self.reply(msg, {"type": "init_ok"})

    def _handle(self, msg):
        body = msg["body"]
        if "in_reply_to" in body:
            callback = self.callbacks.pop(body["in_reply_to"], None)
            if callback is not None:
                callback(msg)
            return
        handler = self.handlers.get(body["type"])
        if handler is None:
            self.reply(msg, {"type": "error", "code": 10,
                             "text": f"no handler for {body['type']}"})
            return
        handler(msg)

    def _wait(self):
        """Until stdin has bytes (True) or a timer is due (False)."""
        if not self.timers:
            return True
        due = min(t[1] for t in self.timers)
        left = due - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([0], [], [], left)
        return bool(ready)

    def _tick(self):
        now = time.monotonic()
        for timer in self.timers:
            if timer[1] <= now:
                timer[1] = now + timer[0]
                timer[2]()

    def run(self):
        pending = b""
        while True:
            if not self._wait():
                self._tick()
                continue
            data = os.read(0, 65536)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip():
                    self._handle(json.loads(line))
