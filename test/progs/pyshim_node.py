#!/usr/bin/env python3
"""pyshim_node: a one-node counter in Python, started through a forking shim.

    pyshim_node.py PORT

The script starts with #!/usr/bin/env python3 and the model starts it by its path
(test/models/pyshim.model). The test puts test/progs/shim first on PATH, so env runs
the shim test/progs/shim/python3, a shell script that runs the real interpreter as a
child instead of exec'ing it: the node is a process tree (docs/target-contract.md,
"Process trees"), a shell blocked in wait4 and this interpreter under it.

It listens on 127.0.0.1:PORT (the standard socket and selectors modules, non-blocking
sockets, as test/progs/pynode.py) and answers each line "INC" with "OK n", n the
count so far over all clients; anything else is "ERR". Its state on fd 3, one JSON
line at start and after every change:

    {"n": N, "shim": B}

B says whether the parent process runs the shim (its command line names a file
.../shim/python3), read once at start from /proc: the model checks it, so that a run
that did not go through the shim cannot pass unnoticed.
"""
from __future__ import annotations

import json
import os
import selectors
import socket
import sys


def emit(state: dict) -> None:
    os.write(3, (json.dumps(state, sort_keys=True) + "\n").encode())


def started_by_shim() -> bool:
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return any(arg.endswith(b"/shim/python3") for arg in argv)


def main() -> None:
    port = int(sys.argv[1])
    shim = started_by_shim()
    n = 0
    emit({"n": n, "shim": shim})

    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", port))
    lst.listen(8)
    lst.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lst, selectors.EVENT_READ, None)
    bufs: dict[socket.socket, bytes] = {}
    while True:
        for key, _ in sel.select():
            if key.data is None:
                conn, _ = lst.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, "conn")
                bufs[conn] = b""
                continue
            conn = key.fileobj
            try:
                data = conn.recv(4096)
            except BlockingIOError:
                continue
            except ConnectionError:
                data = b""
            if not data:                        # EOF or reset: forget the client
                sel.unregister(conn)
                del bufs[conn]
                conn.close()
                continue
            *lines, bufs[conn] = (bufs[conn] + data).split(b"\n")
            out = b""
            for line in lines:
                if line.strip() == b"INC":
                    n += 1
                    emit({"n": n, "shim": shim})
                    out += f"OK {n}\n".encode()
                else:
                    out += b"ERR unknown request\n"
            try:
                conn.sendall(out)               # a line or two: never blocks here
            except (BlockingIOError, ConnectionError):
                pass


if __name__ == "__main__":
    main()
