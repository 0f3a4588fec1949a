#!/usr/bin/env python3
"""counter_node.py [--tick SECONDS] INDEX PORT... : one node of a pysyncobj cluster
holding a replicated counter (issue 32, acceptance 5; test/test_pysyncobj.py,
test/models/pysyncobj*.model).

The nodes' Raft ports are PORT... on 127.0.0.1, this node's the INDEX-th. The Raft log
is pysyncobj's file journal, `journal.PORT` in the node's working directory
(SyncObjConf(journalFile=...)), which pysyncobj writes through a shared writable mmap
(pysyncobj.journal.ResizableFile).

Clients connect to 127.0.0.1:(PORT + 1000) and send lines: `INC` asks the cluster to
add one to the counter; the answer, once the command is committed and applied, is
`OK <value>`, or `ERR <reason>` (pysyncobj's FAIL_REASON). A request that comes before
this node knows a leader waits for one (pysyncobj's commandsWaitLeader).

pysyncobj is driven from this one thread (autoTick=False, doTick(SECONDS) in a loop,
0.05 s by default): its poll with that timeout is a FIRE for cmc, and each FIRE moves
the node's clock by SECONDS. With `--tick 0` the node waits for events only
(doTick(-1): a poll without a timeout): its clock never moves, so it never stands for
election and only answers its peers. Nothing here knows of cmc.
"""
import socket
import sys

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.poller import POLL_EVENT_TYPE


class Counter(SyncObj):
    def __init__(self, me, others, conf):
        super().__init__(me, others, conf)
        self.value = 0

    @replicated
    def inc(self):
        self.value += 1
        return self.value


class Clients:
    """The line protocol on the client port, served through pysyncobj's poller."""

    def __init__(self, counter, port):
        self.counter = counter
        self.poller = counter._poller
        self.srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", port))
        self.srv.listen(16)
        self.srv.setblocking(False)
        self.conns = {}         # fd -> [socket, input buffer]
        self.poller.subscribe(self.srv.fileno(), self.on_accept, POLL_EVENT_TYPE.READ)

    def on_accept(self, fd, event):
        try:
            conn, _ = self.srv.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self.conns[conn.fileno()] = [conn, b""]
        self.poller.subscribe(conn.fileno(), self.on_data,
                              POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)

    def on_data(self, fd, event):
        conn, buf = self.conns[fd]
        try:
            data = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.poller.unsubscribe(fd)
            del self.conns[fd]
            conn.close()
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            self.request(fd, line.strip())
        self.conns[fd][1] = buf

    def request(self, fd, req):
        if req == b"INC":
            # queued by pysyncobj until a leader is known (commandsWaitLeader)
            self.counter.inc(callback=lambda res, err: self.answer(
                fd, f"OK {res}" if err == FAIL_REASON.SUCCESS else f"ERR {err}"))
        else:
            self.answer(fd, "ERR unknown request")

    def answer(self, fd, text):
        if fd in self.conns:
            try:
                self.conns[fd][0].sendall(text.encode() + b"\n")
            except OSError:
                pass


def main():
    args = sys.argv[1:]
    tick = 0.05
    if args[:1] == ["--tick"]:
        tick, args = float(args[1]), args[2:]
    index = int(args[0])
    ports = [int(p) for p in args[1:]]
    me = f"127.0.0.1:{ports[index]}"
    others = [f"127.0.0.1:{p}" for i, p in enumerate(ports) if i != index]
    # appendEntriesUseBatch=False: a leader sends a command to the followers at once,
    # not at its next heartbeat (one FIRE fewer between a request and its commit)
    conf = SyncObjConf(journalFile=f"journal.{ports[index]}", autoTick=False,
                       appendEntriesUseBatch=False,
                       dynamicMembershipChange=False, tcp_keepalive=None,
                       logCompactionMinEntries=1 << 30, logCompactionMinTime=1 << 30)
    counter = Counter(me, others, conf)
    Clients(counter, ports[index] + 1000)     # served by the poller from now on
    while True:
        counter.doTick(tick if tick > 0 else -1)


if __name__ == "__main__":
    main()
