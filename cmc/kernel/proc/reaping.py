"""Reaping what a node's processes leave: the processes of a node that come to cmc, its
subreaper, as orphans once their parents are gone (`reap_orphans`), and the first
processes of copied process trees, whose parents are their originals, which never wait
for them (`STRAYS`, `end_status`; proc/fork.py)."""
from __future__ import annotations

import os
import time

from ..linux import _native, procfs


# Roots of copied trees that ended while their parents (the originals, which never
# wait for them) lived: cmc reaps each once it has come to cmc, its subreaper.
STRAYS: set[int] = set()


def end_status(pid: int, wait: bool = False) -> int | None:
    """The wait status of process pid, which ended (`wait`: is ending): reaped when it
    is cmc's child; else read from its zombie (the root of a copied tree, whose parent
    is its original) and kept in STRAYS to reap later. None when it cannot be told."""
    try:
        got, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
        if got == pid:
            return status
    except ChildProcessError:
        pass
    deadline = time.monotonic() + 10
    while True:
        status = procfs.exit_code(pid)
        if status is not None or not procfs.listed(pid) or not wait \
                or time.monotonic() > deadline:
            break
        time.sleep(0.0005)
    if procfs.listed(pid):
        STRAYS.add(pid)
    if len(STRAYS) >= _sweep[0]:
        reap_strays()
    return status


_sweep = [64]     # look through STRAYS when it has grown this large (twice what it kept)


def reap_killed(pid: int, alone: bool) -> None:
    """Reap pid, killed: when it is the only process of its node and cmc's child
    (`alone`), by the C helper's thread, on another CPU, while cmc goes on (its end
    is not cmc's time: docs/performance.md); else here (end_status)."""
    if alone:
        try:
            return _native.bury(pid)
        except OSError:
            pass
    end_status(pid, wait=True)


def reap_strays() -> None:
    """Reap the strays that have come to cmc: a sweep when they have doubled since the
    last, so that their number costs no more than their ends (most wait for their
    originals, which live while their worlds do)."""
    for pid in list(STRAYS):
        if _reaped(pid):
            STRAYS.discard(pid)
    _sweep[0] = max(64, 2 * len(STRAYS))


def _reaped(pid: int) -> bool:
    """Reap pid if it is a child of cmc that ended (an orphan of a node, which came
    to cmc as its subreaper); True when it is gone for good."""
    try:
        got, _ = os.waitpid(pid, os.WNOHANG)
        return got == pid
    except ChildProcessError:
        return not procfs.listed(pid)


def reap_orphans(pids: list[int], timeout_s: float) -> None:
    """After a node's group was killed: reap those of its processes that come to
    cmc as orphans (each does once its parent is gone), within timeout_s."""
    deadline = time.monotonic() + timeout_s
    left = list(pids)
    while left:
        left = [pid for pid in left if not _reaped(pid)]
        if not left or time.monotonic() > deadline:
            return
        time.sleep(0.001)
