"""A ZooKeeper client in a few lines of its wire protocol (jute over TCP, each frame
behind its length), for test/models/zookeeper_crash.model:

    zkc.py HOST:PORT PATH DATA DELAY

opens a session, creates PATH holding DATA and, when the server says it is done, writes
{"acked": true} on fd 3; closes the connection, waits DELAY seconds, opens a new
session, reads PATH and writes {"acked": ..., "read": DATA} ("missing" when the server
says there is no such node). A refused connection is tried again every 200 ms; a
connection the server breaks ends what it was for."""
import json
import os
import socket
import struct
import sys
import time

OP_CREATE, OP_GET_DATA = 1, 4
WORLD_ALL = struct.pack(">i", 1) + struct.pack(">i", 31)     # one ACL: all perms, world


def string(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def exactly(s, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        out += chunk
    return out


def reply(s) -> bytes:
    return exactly(s, struct.unpack(">i", exactly(s, 4))[0])


def session(host: str, port: int):
    while True:
        try:
            s = socket.create_connection((host, port))
            break
        except ConnectionRefusedError:
            time.sleep(0.2)
    # ConnectRequest: protocol 0, last zxid 0, timeout 30 s, session 0, password, r/w
    s.sendall(frame(struct.pack(">iqiq", 0, 0, 30000, 0) + string(b"\0" * 16) + b"\0"))
    reply(s)
    return s


def request(s, xid: int, op: int, body: bytes) -> tuple[int, bytes]:
    """The error code of the answer to one request, and what follows it."""
    s.sendall(frame(struct.pack(">ii", xid, op) + body))
    r = reply(s)
    _, _, err = struct.unpack_from(">iqi", r)
    return err, r[16:]


def main():
    addr, path, data, delay = sys.argv[1:5]
    host, port = addr.rsplit(":", 1)
    state = {"acked": False}
    report = lambda: os.write(3, (json.dumps(state, sort_keys=True) + "\n").encode())  # noqa
    try:
        s = session(host, int(port))
        err, _ = request(s, 1, OP_CREATE, string(path.encode()) + string(data.encode())
                         + WORLD_ALL + string(b"world") + string(b"anyone")
                         + struct.pack(">i", 0))
        if err == 0:
            state["acked"] = True
            report()
        s.close()
    except OSError:
        pass
    time.sleep(float(delay))
    try:
        s = session(host, int(port))
        err, rest = request(s, 1, OP_GET_DATA, string(path.encode()) + b"\0")
        if err == 0:
            n = struct.unpack_from(">i", rest)[0]
            state["read"] = rest[4:4 + n].decode()
        else:
            state["read"] = "missing"
        report()
    except OSError:
        pass
    while True:                        # done: stays, asking for nothing
        time.sleep(3600)


main()
