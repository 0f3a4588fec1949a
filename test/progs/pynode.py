#!/usr/bin/env python3
"""pynode: a primary/backup counter written in Python, for cmc to check.

The CPython interpreter is the binary under check; this script uses only the
standard socket and selectors modules, with non-blocking sockets, the way an
asyncio-less Python service would.

    python3 pynode.py primary PRIMARY_ADDR BACKUP_ADDR [--bug]
    python3 pynode.py backup  PRIMARY_ADDR BACKUP_ADDR

The primary listens for clients on PRIMARY_ADDR. Each line "INC" increments the
counter; the primary sends "INC n" to the backup and answers the client "OK n" only
once the backup acknowledged "ACK n" (with --bug it answers at once: an
acknowledgement the backup may not have). The backup listens on BACKUP_ADDR,
applies "INC n" lines and acknowledges them.

State on fd 3 (one JSON line after every change), canonical: it says who waits for
what (by the client's port), so that two worlds merge only when the node would go on
alike:
    primary: {"n": N, "acked": A, "up": B, "waiting": {"N": PORT, ...}}
    backup:  {"n": N}
"""
from __future__ import annotations

import json
import os
import selectors
import socket
import sys


def emit(state: dict) -> None:
    os.write(3, (json.dumps(state, sort_keys=True) + "\n").encode())


def parse(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def listener(addr: tuple[str, int]) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr)
    s.listen(8)
    s.setblocking(False)
    return s


class Lines:
    """A connection's input, split into lines however the bytes arrive."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""
        self.out = b""

    def read(self) -> list[str] | None:
        """The complete lines read so far; None at EOF or on a reset."""
        try:
            data = self.sock.recv(4096)
        except BlockingIOError:
            return []
        except ConnectionError:
            return None
        if not data:
            return None
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        return [line.decode().strip() for line in lines]

    def send(self, text: str) -> None:
        self.out += text.encode()
        self.flush()

    def flush(self) -> None:
        try:
            while self.out:
                n = self.sock.send(self.out)
                self.out = self.out[n:]
        except BlockingIOError:
            pass
        except ConnectionError:
            self.out = b""


def backup(addr: tuple[str, int]) -> None:
    sel = selectors.DefaultSelector()
    lst = listener(addr)
    sel.register(lst, selectors.EVENT_READ, None)
    n = 0
    emit({"n": n})
    while True:
        for key, _ in sel.select():
            if key.data is None:
                conn, _ = lst.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, Lines(conn))
                continue
            peer: Lines = key.data
            lines = peer.read()
            if lines is None:
                sel.unregister(peer.sock)
                peer.sock.close()
                continue
            for line in lines:
                verb, value = line.split()
                if verb == "INC":
                    n = max(n, int(value))
                    emit({"n": n})
                    peer.send(f"ACK {value}\n")


def primary(addr: tuple[str, int], backup_addr: tuple[str, int], bug: bool) -> None:
    sel = selectors.DefaultSelector()
    lst = listener(addr)
    sel.register(lst, selectors.EVENT_READ, None)
    to_backup = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    to_backup.setblocking(False)
    err = to_backup.connect_ex(backup_addr)
    assert err in (0, 115), err                     # 0 or EINPROGRESS
    link = Lines(to_backup)
    sel.register(to_backup, selectors.EVENT_READ | selectors.EVENT_WRITE, link)
    connected = False
    n = acked = 0
    waiting: dict[int, Lines] = {}                  # n -> the client to answer

    def state() -> None:
        emit({"n": n, "acked": acked, "up": connected,
              "waiting": {str(k): c.sock.getpeername()[1] for k, c in waiting.items()}})
    state()
    while True:
        for key, events in sel.select():
            if key.data is None:
                conn, _ = lst.accept()
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, Lines(conn))
                continue
            peer: Lines = key.data
            if peer is link:
                if not connected and events & selectors.EVENT_WRITE:
                    err = to_backup.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        sys.exit(f"pynode: cannot reach the backup: {os.strerror(err)}")
                    connected = True
                    sel.modify(to_backup, selectors.EVENT_READ, link)
                    link.flush()
                    state()
                if not events & selectors.EVENT_READ:
                    continue
                lines = link.read()
                if lines is None:
                    sys.exit("pynode: the backup went away")
                for line in lines:
                    verb, value = line.split()
                    if verb == "ACK":
                        acked = max(acked, int(value))
                        client = waiting.pop(int(value), None)
                        if client is not None and not bug:
                            client.send(f"OK {value}\n")
                        state()
                continue
            lines = peer.read()
            if lines is None:
                sel.unregister(peer.sock)
                peer.sock.close()
                continue
            for line in lines:
                if line == "INC":
                    n += 1
                    waiting[n] = peer
                    if connected:
                        link.send(f"INC {n}\n")
                    else:
                        link.out += f"INC {n}\n".encode()
                    if bug:
                        peer.send(f"OK {n}\n")
                    state()


def main() -> None:
    role, p_addr, b_addr = sys.argv[1], parse(sys.argv[2]), parse(sys.argv[3])
    if role == "backup":
        backup(b_addr)
    else:
        primary(p_addr, b_addr, "--bug" in sys.argv[4:])


if __name__ == "__main__":
    main()
