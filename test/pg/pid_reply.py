#!/usr/bin/env python3
"""pid_reply.py PORT: the smallest program that shows why PostgreSQL's startup answer
cannot be checked yet: it answers each line it is sent with its own process id, as
PostgreSQL's BackendKeyData message carries the id of the backend it forked. cmc runs
nodes with the host's process ids, so the bytes differ from launch to launch, and a
replay of the same actions finds a different world (test/test_postgres.py)."""
import os
import socket
import sys

srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen()
conn, _ = srv.accept()
buf = b""
while True:
    data = conn.recv(4096)
    if not data:
        break
    buf += data
    while b"\n" in buf:
        _, buf = buf.split(b"\n", 1)
        conn.sendall(b"PID %d\n" % os.getpid())
