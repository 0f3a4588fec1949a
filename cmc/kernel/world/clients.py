"""Ghost clients (docs/model-file.md, the `client` statement): peers with no process. Each connects to its address at
launch, sends its requests one at a time, each when the previous one's reply line came,
and never reconnects: a reset (a DROP, its node's CRASH) or a FIN ends it.

With a history kept (`ClusterSpec.history`; docs/model-file.md, "Histories"), every request a client puts in
flight is an entry of `Cluster.history`: the event numbers of its invoke and of its
complete (the reply line that answers it) in one sequence, the states at which they
happened, and the reply's index. The history is not in the fingerprint: it follows
from what is (every first request is invoked at launch, each later one when its
client's previous reply came, so the replies in their order and each client's next
request and finished flag fix it).
"""
from __future__ import annotations

from .net import DATA, Connection, Msg


class Client:
    """A ghost client: a peer with no process."""

    def __init__(self, index: int, spec):
        self.spec = spec
        self.name = spec.name
        ip = "::1" if ":" in spec.host else "127.0.0.1"
        self.addr = (ip, 60000 + index)
        self.conn: Connection | None = None
        self.next_req = 0
        self.last_req = ""
        self.finished = False
        self.linebuf = bytearray()
        self.open_op: int | None = None    # its request in flight, as a history entry

    def receive(self, cluster, conn: Connection, data: bytes) -> None:
        """Bytes a node sent it: each whole line is a reply (a record in `replies`),
        and the next request goes out."""
        self.linebuf += data
        while True:
            nl = self.linebuf.find(b"\n")
            if nl < 0:
                return
            raw = bytes(self.linebuf[:nl]).rstrip(b"\r").decode("utf-8", errors="replace")
            del self.linebuf[:nl + 1]
            record = cluster.spec.reply_record(self.name, conn.b.owner.node, len(cluster.replies),
                                               self.last_req, raw)
            cluster.replies.append(record)
            if self.open_op is not None:
                op, self.open_op = cluster.history[self.open_op], None
                cluster.events += 1
                op.update(complete=cluster.events, completed=cluster.step + 1,
                          reply=len(cluster.replies) - 1)
            self.send_next(cluster)

    @property
    def waiting(self) -> bool:
        """Whether it waits for the clock to start (`client NAME after T`)."""
        return self.conn is None and self.spec.after_ns is not None and not self.finished

    def send_next(self, cluster) -> None:
        if self.finished or self.next_req >= len(self.spec.requests):
            return
        req = self.spec.requests[self.next_req]
        self.next_req += 1
        self.last_req = req.decode("utf-8", errors="replace").rstrip("\r\n")
        if cluster.spec.history:
            cluster.events += 1
            self.open_op = len(cluster.history)
            cluster.history.append({"client": self.name, "index": self.next_req - 1,
                                    "req": self.last_req, "invoke": cluster.events,
                                    "invoked": cluster.step + 1, "complete": None,
                                    "completed": None, "reply": None})
        cluster.net.send(self.conn, 0, Msg(DATA, req))
