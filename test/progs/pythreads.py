#!/usr/bin/env python3
"""pythreads: a threaded Python counter service, for cmc to check.

The CPython interpreter is the binary under check; the script is what a small
service written with the standard library looks like: a socketserver.ThreadingTCPServer
(a thread per connection, serve_forever polling every 0.5 s for a shutdown request)
and a heartbeat thread that beats every PERIOD seconds (threading.Event.wait with a
timeout), BEATS times, then ends.

    python3 pythreads.py PORT [--beats BEATS] [--period PERIOD]

Each line a client sends is a request and gets one line back:
    INC    the counter goes up by one; answer "COUNT n", n its new value
    BEATS  answer "BEATS b", the heartbeats so far

State on fd 3 (one JSON line after every change, under the lock that guards it):
    {"count": n, "beats": b}
"""
from __future__ import annotations

import json
import os
import socketserver
import sys
import threading

lock = threading.Lock()
state = {"count": 0, "beats": 0}


def emit() -> None:
    """With the lock held."""
    os.write(3, (json.dumps(state, sort_keys=True) + "\n").encode())


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for raw in self.rfile:
            request = raw.decode().strip()
            with lock:
                if request == "INC":
                    state["count"] += 1
                    emit()
                    answer = f"COUNT {state['count']}"
                elif request == "BEATS":
                    answer = f"BEATS {state['beats']}"
                else:
                    answer = "ERROR"
            self.wfile.write(f"{answer}\n".encode())


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def heartbeat(stop: threading.Event, beats: int, period: float) -> None:
    for _ in range(beats):
        if stop.wait(period):
            return
        with lock:
            state["beats"] += 1
            emit()


def main() -> None:
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: pythreads.py PORT [--beats BEATS] [--period PERIOD]")
    port = int(args[0])
    beats = int(args[args.index("--beats") + 1]) if "--beats" in args else 2
    period = float(args[args.index("--period") + 1]) if "--period" in args else 1.0
    with lock:
        emit()
    stop = threading.Event()
    beat = threading.Thread(target=heartbeat, args=(stop, beats, period), name="heartbeat")
    beat.start()
    with Server(("127.0.0.1", port), Handler) as server:
        try:
            server.serve_forever()
        finally:
            stop.set()
            beat.join()


if __name__ == "__main__":
    main()
