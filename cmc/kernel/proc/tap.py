"""A seccomp listener as cmc shares it between a node's process and its copies
(proc/fork.py)."""
from __future__ import annotations

import os
import select
import time

from ..linux import _native


class Tap:
    """A seccomp listener. A node's copies made by --fast (cmc/kernel/proc/fork.py) share
    the listener of the process they were forked from, so it is closed when its
    last process is gone, and a notification is taken for the process it came
    from (`pids`: every process on it; `stash`: notifications taken early)."""

    def __init__(self, fd: int, pid: int):
        self.fd = fd
        self.pids = {pid}
        self.stash: dict[int, object] = {}

    def release(self, pid: int) -> None:
        self.pids.discard(pid)
        self.stash.pop(pid, None)
        if not self.pids and self.fd >= 0:
            fd, self.fd = self.fd, -1      # forgotten first: never closed twice
            os.close(fd)

    def recv_for(self, pid: int, timeout_s: float):
        """The next notification of process pid, within timeout_s, else None."""
        if pid in self.stash:
            return self.stash.pop(pid)
        deadline = time.monotonic() + timeout_s
        p = select.poll()
        p.register(self.fd, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not p.poll(int(left * 1000) + 1):
                return None
            try:
                n = _native.recv(self.fd)
            except OSError:
                return None
            if n is None:
                continue
            if n.pid == pid:
                return n
            self.stash[n.pid] = n
