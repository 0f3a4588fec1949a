"""The bound on what a run takes of its machine (--max-memory; docs/cmc.md).

A run may take, all together, at most `--max-memory` bytes: the memory of cmc's
process tree (cmc, its worker processes, every node process of every world, counted
by proportional set size, so pages a forked copy shares with its original are
counted once) plus its scratch space (the blocks its files take: a hole costs
nothing). The default is half of the memory available when cmc starts.

A process of its own samples both (`python -m cmc.resources`, started by the top cmc
process and dying with it; a thread would wait for the busy main thread's GIL): every
0.2 s, or more often where the bound is small (so often that a process filling memory
at 4 GB/s cannot pass the 10% headroom between two samples, every 2 ms at most), and
sooner when the room left would last less than four samples at the rate the sum grows;
but, while the room left would last longer than two waits at that rate, never sooner
than four times what the last sample took, so that the watcher takes at most a fifth
of a CPU from the run (a tree of hundreds of processes takes tens of milliseconds to
sample). The resident sizes of the processes are summed first, and
their proportional set sizes read only when that sum, an upper bound, is near the bound.
Before the sum passes the bound it stops the run: it stops (SIGSTOP) every node
process first, so a node that fills memory or a file inside one step grows no further,
then writes what grew into a pipe and sends cmc SIGUSR2, whose handler raises
`MemoryBoundReached` (an engine limit: exit 3) wherever the main thread is; the usual
ending then kills every node and removes the scratch directory. Should cmc not end
within a few seconds (stuck in a call that does not return), the watcher kills the
tree's processes itself.
The watcher runs at a real-time priority where cmc may set one, so that a machine whose
CPUs are busy does not delay a sample (`_first_to_run`).
The message names what grew: the largest files by node and name, and the nodes'
processes by memory.

The run stops at 90% of the bound, so that the growth between two samples does not
carry it past, or before, when at the rate the sum grows the room left would be gone
before the next sample is taken.

The watcher also writes each sample's sum where cmc (and its worker processes) can read
it: `Bound.room_for_more` tells a breadth-first search whether it may keep more live
worlds to copy from than its usual number (docs/design.md, "How many worlds are kept").
"""
from __future__ import annotations

import collections
import ctypes
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time

from .errors import EngineError

STOP_SIGNAL = signal.SIGUSR2
HEADROOM = 0.9
ROOMY = 0.4            # room for more kept worlds: under this share of the bound taken,
ROOMY_TASKS = 0.5      # of the machine's pid limit in threads, of cmc's descriptor limit
ROOMY_EVERY_S = 0.1    # the answer, looked at again after this long
PERIOD_S = 0.2
MIN_PERIOD_S = 0.002
FASTEST = 4 << 30      # bytes a second: about the fastest a process fills memory here
BUSY = 4               # the watcher waits at least this many times what a sample took
# The rate the sum grows: the fastest seen between two samples of the same kind in the
# last RATE_WINDOW_S (a proportional sum is below the resident one of the same moment,
# so between the two the rate would be that difference), so that a node filling memory
# at a GB/s that was not given a CPU for a sample or two is not taken to have stopped.
RATE_WINDOW_S = 0.25
PAGE = os.sysconf("SC_PAGE_SIZE")
GRACE_S = 5.0
PR_SET_PDEATHSIG = 1
_NODE_DIR = re.compile(r"/nodes/\d+-([^/]+)(?:/(.*))?$")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
          "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}


class MemoryBoundReached(EngineError):
    """The run would take more than --max-memory of the machine."""


def parse_size(text: str) -> int:
    """'200M', '1.5G', '65536' (bytes), '512KiB' -> bytes; ValueError otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (e.g. 512M, 2G)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value <= 0:
        raise ValueError(f"not a size: {text!r} (must be more than 0)")
    return value


def available_memory() -> int:
    """MemAvailable of /proc/meminfo, in bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def default_bound() -> int:
    return available_memory() // 2


def size_text(n: float) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


# -- what the run takes ----------------------------------------------------------------
def tree_pids(root: int) -> list[int]:
    """root and every process below it (through each thread's children)."""
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
            except OSError:
                pass
    return out


def pss(pid: int) -> int:
    """A process's proportional set size in bytes (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 32768


def _die_with(parent: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)


def _owner(pid: int) -> str:
    """'node NAME' for a node's process (by its working directory), else what the
    process is called."""
    try:
        m = _NODE_DIR.search(os.readlink(f"/proc/{pid}/cwd"))
        if m:
            return f"node {m.group(1)}"
        with open(f"/proc/{pid}/comm") as f:
            return f"cmc's process {f.read().strip()}"
    except OSError:
        return "a process gone since"


def scratch_files(root: str) -> dict[tuple[str, str], list[int]]:
    """(node, name in its directory) -> the bytes each copy of it takes; the rest of
    the scratch directory under (None, path)."""
    out: dict[tuple, list[int]] = {}
    seen: set = set()
    for folder, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            m = _NODE_DIR.search(path)
            key = (m.group(1), m.group(2)) if m and m.group(2) else (None, path[len(root) + 1:])
            out.setdefault(key, []).append(st.st_blocks * 512)
    return out


def rss(pid: int) -> int:
    """A process's resident set size in bytes (0 if it is gone): at least its
    proportional set size, and far cheaper to read (no walk of its mappings)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


class Usage:
    """One sample: memory by process and scratch bytes by file. The processes' resident
    sizes are summed first; only where that sum and the scratch bytes pass `under` is
    each process's proportional set size read (pages a copy shares with its original
    counted once), so that a run far from its bound costs the watcher little."""

    def __init__(self, top: int, scratch: str | None, under: float = 0.0):
        pids = tree_pids(top)
        self.top = top
        self.files = scratch_files(scratch) if scratch else {}
        self.scratch = sum(sum(v) for v in self.files.values())
        self.memory = {pid: rss(pid) for pid in pids}
        self.total = sum(self.memory.values()) + self.scratch
        self.proportional = self.total >= under
        if self.proportional:
            self.memory = {pid: pss(pid) for pid in pids}
            self.total = sum(self.memory.values()) + self.scratch

    def what_grew(self, n: int = 4) -> list[str]:
        lines = []
        by_node: dict[str, list[int]] = {}
        for pid, size in self.memory.items():
            if pid != self.top:
                by_node.setdefault(_owner(pid), []).append(size)
        lines.append(f"cmc itself: {size_text(self.memory.get(self.top, 0))} of memory")
        for who, sizes in sorted(by_node.items(), key=lambda kv: -sum(kv[1]))[:n]:
            lines.append(f"{who}: {size_text(sum(sizes))} of memory in {len(sizes)} "
                         f"process{'es' if len(sizes) != 1 else ''}")
        files = sorted(self.files.items(), key=lambda kv: -sum(kv[1]))
        for (node, name), sizes in files[:n]:
            if sum(sizes) < self.total // 100:
                continue
            where = f"node {node}: file {name}" if node else f"scratch file {name}"
            copies = f" in {len(sizes)} worlds" if len(sizes) > 1 else ""
            lines.append(f"{where}: {size_text(sum(sizes))}{copies} "
                         f"(largest {size_text(max(sizes))})")
        return lines


def _next_wait(base: float, room: float, rate: float, took: float) -> float | None:
    """How long the watcher sleeps before its next sample, with `room` bytes left under
    the headroom, the sum growing at `rate` bytes a second and the last sample having
    taken `took` seconds; None: stop the run now."""
    if room <= 0:
        return None
    wait = base if rate <= 0 else min(base, room / (4 * rate))
    # a tree of hundreds of processes takes tens of milliseconds to sample: the watcher
    # takes at most a fifth of a CPU, but for the last of the room, which the growth
    # seen would eat in less than twice the wait
    wait = max(wait, BUSY * took)
    if rate > 0:
        wait = min(wait, room / (2 * rate))
    wait = max(wait, MIN_PERIOD_S)
    # at the rate seen, the room would be gone before the next sample has been taken (a
    # node filling memory at gigabytes a second): stop now
    if rate > 0 and rate * (wait + 2 * took) >= room:
        return None
    return wait


# -- the bound ---------------------------------------------------------------------------
class Bound:
    """Samples the run's usage in a process of its own and stops the run before it
    passes `limit` bytes (None: the default bound; see the module's text)."""

    def __init__(self, limit: int | None, scratch: str | None):
        self.limit = limit or default_bound()
        self.scratch = scratch
        self._proc: subprocess.Popen | None = None
        self._read = -1
        self._old_handler = None
        self._sample = -1         # a memfd: the watcher's last sum, 8 bytes
        self._roomy = (0.0, False)

    def start(self) -> "Bound":
        if threading.current_thread() is not threading.main_thread():
            return self                  # a run called in a thread: no signal to send
        read, write = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(read, False)     # read by the signal's handler, never waited on
        self._sample = os.memfd_create("cmc-usage", os.MFD_CLOEXEC)
        os.pwrite(self._sample, bytes(8), 0)
        self._old_handler = signal.signal(STOP_SIGNAL, self._raise)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "cmc.resources", str(os.getpid()), str(self.limit),
                 self.scratch or "", str(self._sample)], stdin=subprocess.DEVNULL,
                stdout=write, pass_fds=(self._sample,))
        finally:
            os.close(write)
        self._read = read
        return self

    def room_for_more(self) -> bool:
        """Whether the run can take more of the machine for the worlds it keeps: under
        ROOMY of the bound at the watcher's last sample, the machine's threads under
        ROOMY_TASKS of its pid limit and this process's descriptors under ROOMY_TASKS of
        its limit. Looked at every ROOMY_EVERY_S at most; False without a watcher."""
        if self._sample < 0:
            return False
        now = time.monotonic()
        if now - self._roomy[0] < ROOMY_EVERY_S:
            return self._roomy[1]
        try:
            used = int.from_bytes(os.pread(self._sample, 8, 0), "little")
            with open("/proc/loadavg") as f:
                threads = int(f.read().split()[3].split("/")[1])
            fds = len(os.listdir("/proc/self/fd"))
        except (OSError, ValueError, IndexError):
            used, threads, fds = self.limit, 0, 0
        roomy = (used < ROOMY * self.limit and threads < ROOMY_TASKS * _pid_max()
                 and fds < ROOMY_TASKS * resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        self._roomy = (now, roomy)
        return roomy

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None
            os.close(self._read)
            self._read = -1
            os.close(self._sample)
            self._sample = -1
            signal.signal(STOP_SIGNAL, self._old_handler or signal.SIG_DFL)

    def _raise(self, signum, frame):
        if self._read < 0:
            return
        try:
            message = os.read(self._read, 1 << 16).decode(errors="replace")
        except BlockingIOError:
            return
        if message:
            raise MemoryBoundReached(message)

    def _watch(self, top: int, out: int, sample: int = -1) -> None:
        # the longest wait that the fastest growth cannot turn into more than the
        # headroom (and 0.2 s at most); sooner as the room left shrinks at the rate seen
        base = max(MIN_PERIOD_S, min(PERIOD_S, (1 - HEADROOM) * self.limit / FASTEST))
        wait, last = 0.0, None           # the sample before: (when, sum, proportional)
        rates: collections.deque = collections.deque()     # (when, bytes a second)
        under = HEADROOM * self.limit    # resident sizes summed below it, else proportional
        while True:
            time.sleep(wait)
            began = time.monotonic()
            usage = Usage(top, self.scratch, under=under)
            if sample >= 0:
                os.pwrite(sample, usage.total.to_bytes(8, "little"), 0)
            room = HEADROOM * self.limit - usage.total
            if last is not None and last[2] == usage.proportional:
                rates.append((began, (usage.total - last[1]) / max(began - last[0], 1e-3)))
            while rates and rates[0][0] < began - RATE_WINDOW_S:
                rates.popleft()
            rate = max((r for _, r in rates), default=0.0)
            wait = _next_wait(base, room, rate, time.monotonic() - began)
            if wait is not None:
                last = (began, usage.total, usage.proportional)
                continue
            if not usage.proportional:
                # a sum of resident sizes counts a page shared by a hundred copies of a
                # node a hundred times, and grows by a whole process at each fork: only
                # proportional sizes, from now on, may stop the run
                under, wait = 0.0, 0.0
                continue
            for pid in usage.memory:     # first: the nodes grow no more while cmc ends
                if _owner(pid).startswith("node "):
                    try:
                        os.kill(pid, signal.SIGSTOP)
                    except OSError:
                        pass
            os.write(out, self._message(usage).encode()[:60000])
            os.kill(top, STOP_SIGNAL)
            time.sleep(GRACE_S)
            for pid in usage.memory:     # cmc did not end: its processes are killed
                if pid not in (top, os.getpid()):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            return

    def _message(self, usage: Usage) -> str:
        memory = usage.total - usage.scratch
        text = (f"the run would take more than --max-memory {size_text(self.limit)} of this "
                f"machine: cmc and its nodes take {size_text(memory)} of memory, its scratch "
                f"space {size_text(usage.scratch)}")
        text += (f" (in {self.scratch})" if self.scratch else "") + ". What grew:\n"
        text += "\n".join(f"  {line}" for line in usage.what_grew())
        text += ("\nRaise the bound with --max-memory SIZE (this machine had "
                 f"{size_text(available_memory())} available now), lower the model's "
                 "budgets, or put the scratch space on a disk with --scratch DIR "
                 "(docs/cmc.md, \"Memory\").")
        return text


def main(argv: list[str]) -> None:
    """The watcher: `python -m cmc.resources CMC_PID LIMIT SCRATCH SAMPLE_FD`, started
    by Bound with its stdout the pipe to cmc. It dies with cmc."""
    top, limit, scratch = int(argv[0]), int(argv[1]), argv[2] or None
    sample = int(argv[3]) if len(argv) > 3 else -1
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)     # Ctrl-C is cmc's; cmc ends this one
    _die_with(top)
    _first_to_run()
    Bound(limit, scratch)._watch(top, 1, sample)


def _first_to_run() -> None:
    """Let the watcher run the moment it wakes, ahead of the nodes and of whatever else
    keeps the machine's CPUs busy: a node filling memory at gigabytes a second while the
    watcher waits for a CPU would pass the bound (a real-time priority, where cmc may
    set one: the watcher sleeps far more than it runs, and Linux keeps a share of every
    second for the rest; else a higher nice priority, else none)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        return
    except (OSError, AttributeError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except OSError:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
