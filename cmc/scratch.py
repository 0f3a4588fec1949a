"""Scratch directories: where the nodes of a run work, and how the next run cleans
up after one that was killed.

A run works in one new directory, `cmc-XXXXXXXX`, in /dev/shm when it has room (a
memory file system makes a fresh directory per replay or copy cheap; a container's
small default /dev/shm is not used), else under $TMPDIR or the system's default. A
run that ends in any way Python sees (exit, exception, Ctrl-C, SIGTERM) removes it.
One killed with SIGKILL cannot, so ownership is recorded where the kernel keeps it:
the owner holds an exclusive flock on the directory for as long as it lives, taken
before the directory is marked as cmc's (the file OWNER inside). The lock is on the
open file, which is close-on-exec: the node programs never hold it; cmc's worker
processes share it and die with their parent. At start, every run removes each
marked scratch directory whose lock it can take: its owner is gone. A directory
without the mark is never touched (it is not cmc's, or its owner is about to lock it).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile

PREFIX = "cmc-"
OWNER = "OWNER"
SHM = "/dev/shm"
SHM_ROOM = 1 << 30      # bytes free in /dev/shm for cmc to work there


def _where() -> str | None:
    if "TMPDIR" not in os.environ and os.access(SHM, os.W_OK | os.X_OK):
        try:
            st = os.statvfs(SHM)
            if st.f_bavail * st.f_frsize >= SHM_ROOM:
                return SHM
        except OSError:
            pass
    return None


def remove_stale() -> list[str]:
    """Remove the scratch directories of runs that are gone (in /dev/shm and in the
    temporary directory); returns their paths."""
    removed = []
    for root in dict.fromkeys((SHM, tempfile.gettempdir())):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in sorted(names):
            path = os.path.join(root, name)
            if not name.startswith(PREFIX) or not os.path.exists(os.path.join(path, OWNER)):
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)            # held: its run is alive
                continue
            shutil.rmtree(path, ignore_errors=True)
            os.close(fd)
            removed.append(path)
    return removed


class Scratch:
    """A new scratch directory, owned (locked) by this process until `remove`."""

    def __init__(self):
        remove_stale()
        self.path = tempfile.mkdtemp(prefix=PREFIX, dir=_where())
        self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        with open(os.path.join(self.path, OWNER), "w") as f:
            f.write(f"{os.getpid()}\n")

    def remove(self) -> None:
        if self._fd >= 0:
            shutil.rmtree(self.path, ignore_errors=True)
            os.close(self._fd)
            self._fd = -1
