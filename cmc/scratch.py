"""Scratch directories: where the nodes of a run work, and how the next run cleans
up after one that was killed.

A run works in one new directory, `cmc-XXXXXXXX`: in the directory --scratch names;
else under $TMPDIR when it is set; else in /dev/shm when it has room (a memory file
system makes a fresh directory per replay or copy cheap; a container's small default
/dev/shm is not used), else in the system's temporary directory (docs/cmc.md,
"Memory", says what each costs). A
run that ends in any way Python sees (exit, exception, Ctrl-C, SIGTERM) removes it.
One killed with SIGKILL cannot, so ownership is recorded where the kernel keeps it:
the owner holds an exclusive flock on the directory for as long as it lives, taken
before the directory is marked as cmc's (the file OWNER inside). The lock is on the
open file, which is close-on-exec: the node programs never hold it; a process cmc
forks (a worker) closes its copy at once, so the lock is free
the moment the process that made the directory is gone, even while a worker killed
with it is still dying. At start, every run removes each
marked scratch directory whose lock it can take: its owner is gone. A directory
without the mark is never touched (it is not cmc's, or its owner is about to lock it).

Making and removing a scratch directory, and killing the nodes before it goes, are
not cut in half by a second Ctrl-C or SIGTERM: `interrupts_held` keeps those signals
pending until the block ends (cmc/interrupts.py) (a user who presses Ctrl-C twice, or a supervisor that
sends SIGTERM again, still gets a clean end). Every scratch directory made is on a
list until removed, and `remove_all` is the last net: the CLI calls it however the
run ended.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile

from .interrupts import interrupts_held

PREFIX = "cmc-"
OWNER = "OWNER"
SHM = "/dev/shm"
SHM_ROOM = 1 << 30      # bytes free in /dev/shm for cmc to work there
_live: list["Scratch"] = []       # made and not yet removed, oldest first


def remove_all() -> None:
    """Remove every scratch directory this process made and has not removed."""
    with interrupts_held():
        for scratch in list(_live):
            scratch.remove()


def _where() -> str | None:
    if "TMPDIR" not in os.environ and os.access(SHM, os.W_OK | os.X_OK):
        try:
            st = os.statvfs(SHM)
            if st.f_bavail * st.f_frsize >= SHM_ROOM:
                return SHM
        except OSError:
            pass
    return None


def remove_stale(also: str | None = None) -> list[str]:
    """Remove the scratch directories of runs that are gone (in /dev/shm, in the
    temporary directory and in `also`); returns their paths."""
    removed = []
    for root in dict.fromkeys((SHM, tempfile.gettempdir()) + ((also,) if also else ())):
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


def _forget_in_child() -> None:
    """In a process forked from cmc: the scratch directories are the parent's."""
    for scratch in _live:
        if scratch._fd >= 0:
            os.close(scratch._fd)
            scratch._fd = -1
    _live.clear()


os.register_at_fork(after_in_child=_forget_in_child)


class Scratch:
    """A new scratch directory, owned (locked) by this process until `remove`."""

    def __init__(self, path: str | None = None, parent: str | None = None):
        """A new directory, in `parent` (--scratch) or where _where says; `path` makes
        it at that path (which must not exist): a Ray actor on another machine works
        at the head's path (rayworkers.py)."""
        self._fd = -1
        with interrupts_held():
            remove_stale(parent)
            if path is None:
                self.path = tempfile.mkdtemp(prefix=PREFIX, dir=parent or _where())
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.mkdir(path, 0o700)
                self.path = path
            _live.append(self)
            self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            with open(os.path.join(self.path, OWNER), "w") as f:
                f.write(f"{os.getpid()}\n")

    def remove(self) -> None:
        with interrupts_held():
            if self in _live:
                shutil.rmtree(self.path, ignore_errors=True)
                _live.remove(self)
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
