"""Ghost clients (docs/model-file.md, the `client` statement): peers with no process. Each connects to its address at
launch, sends its requests one at a time, each when the previous one's reply line came,
and never reconnects: a reset (a DROP, its node's CRASH) or a FIN ends it.

With a history kept (`ClusterSpec.history`; docs/model-file.md, "Histories"), every request a client puts in
flight is an entry of the world's `Ledger.history`: the event numbers of its invoke and of its
complete (the reply line that answers it) in one sequence, the states at which they
happened, and the reply's index. The history is not in the fingerprint: it follows
from what is (every first request is invoked at launch, each later one when its
client's previous reply came, so the replies in their order and each client's next
request and finished flag fix it).
"""
from __future__ import annotations

from .net import DATA, Connection, Msg


class Ledger:
    """What the clients of a world saw: the replies (records made by the spec's
    `reply_record`), the history of operations when one is kept, and the event
    counter that orders its invokes and completes. `setting` gives the step."""

    def __init__(self, spec, setting):
        self.reply_record = spec.reply_record
        self.keep_history = spec.history
        self.setting = setting
        self.replies: list[dict] = []
        self.history: list[dict] = []
        self.events = 0

    def invoke(self, entry: dict) -> int:
        """A request goes into flight: its history entry, invoked now; its index."""
        self.events += 1
        entry.update(invoke=self.events, invoked=self.setting.step + 1, complete=None,
                     completed=None, reply=None)
        self.history.append(entry)
        return len(self.history) - 1

    def reply(self, record: dict, op: int | None) -> None:
        """A reply came: its record kept; the history entry `op` it answers completes."""
        self.replies.append(record)
        if op is not None:
            self.events += 1
            self.history[op].update(complete=self.events, completed=self.setting.step + 1,
                                    reply=len(self.replies) - 1)


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

    def receive(self, ledger: Ledger, net, conn: Connection, data: bytes) -> None:
        """Bytes a node sent it: each whole line is a reply (a record in `replies`),
        and the next request goes out."""
        self.linebuf += data
        while True:
            nl = self.linebuf.find(b"\n")
            if nl < 0:
                return
            line = bytes(self.linebuf[:nl])
            del self.linebuf[:nl + 1]
            self._reply(ledger, net, conn, line)

    def ended(self, ledger: Ledger, net, conn: Connection, fin: bool) -> None:
        """The node closed the connection (`fin`; else reset it): the client is
        finished; after a FIN, what the node sent after its last newline is a reply line
        too (ZooKeeper's `imok`), as a reader's last line at the end of a file."""
        self.finished = True
        if fin and self.linebuf:
            line = bytes(self.linebuf)
            self.linebuf.clear()
            self._reply(ledger, net, conn, line)

    def _reply(self, ledger: Ledger, net, conn: Connection, line: bytes) -> None:
        raw = line.rstrip(b"\r").decode("utf-8", errors="replace")
        record = ledger.reply_record(self.name, conn.b.owner.node, len(ledger.replies),
                                     self.last_req, raw)
        op, self.open_op = self.open_op, None
        ledger.reply(record, op)
        self.send_next(ledger, net)

    @property
    def waiting(self) -> bool:
        """Whether it waits for the clock to start (`client NAME after T`)."""
        return self.conn is None and self.spec.after_ns is not None and not self.finished

    def send_next(self, ledger: Ledger, net) -> None:
        if self.finished or self.next_req >= len(self.spec.requests):
            return
        req = self.spec.requests[self.next_req]
        self.next_req += 1
        self.last_req = req.decode("utf-8", errors="replace").rstrip("\r\n")
        if ledger.keep_history:
            self.open_op = ledger.invoke({"client": self.name, "index": self.next_req - 1,
                                          "req": self.last_req})
        net.put(self.conn, 0, Msg(DATA, req))
