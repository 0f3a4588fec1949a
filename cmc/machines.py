"""`--ray`: what every machine of the cluster must have, checked on each at start.

A Ray node runs the model's programs as the head would, so it needs cmc (the same
version), and each program and file the nodes' commands name at the same path with the
same bytes: the model names programs by absolute path (cmc/lang/load.py), and the
nodes' working directories are on their stacks, so paths cannot be rewritten per
machine without changing what the programs print (docs/distributed.md). The head
makes a `MachineCheck` from the nodes' commands; each actor runs it on its machine,
which answers its host name and what it lacks; the engine
(cmc/engine/rayworkers.py) turns that into a usage error naming the machine.
"""
from __future__ import annotations

import hashlib
import os
import platform
import socket

from . import __version__
from .scratch import Scratch


def pin_cpu(index: int | None = None) -> None:
    """Run this process, and the node processes it starts, on one CPU. cmc and a
    node take turns (a notification, its answer): on one CPU the hand-over is a
    local context switch, not a wake-up of another CPU, which costs far more
    (docs/performance.md). Worker `index` takes the index-th allowed CPU (mod
    their number); a lone search the CPU it is running on."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
        if index is not None:
            cpu = allowed[index % len(allowed)]
        else:
            with open("/proc/self/stat") as f:
                cpu = int(f.read().rsplit(")", 1)[1].split()[36])
            if cpu not in allowed:
                cpu = allowed[0]
        os.sched_setaffinity(0, {cpu})
    except (OSError, ValueError, IndexError):
        pass            # not pinned: slower, the same results


def digest(path: str) -> str:
    """The hash of a file's bytes, to tell one build from another."""
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class MachineCheck:
    """Made on the head from the nodes' commands ((name, argv) each) and the run's
    scratch directory; `run` on each machine, `close` when its actor ends."""

    def __init__(self, commands: list[tuple[str, tuple[str, ...]]], workroot: str,
                 pin: bool = True):
        self.version = __version__
        self.pin = pin
        self.workroot = workroot
        self.files: list[tuple[str, str, str]] = []     # (node, path, digest)
        seen = set()
        for name, argv in commands:
            for i, word in enumerate(argv):
                # the program, and every argument that names a file (a script, a config)
                if (i == 0 or os.path.isabs(word)) and word not in seen \
                        and os.path.isfile(word):
                    seen.add(word)
                    self.files.append((name, word, digest(word)))
        self.scratch: Scratch | None = None

    def problems(self) -> list[str]:
        """What this machine lacks to run the model as the head does."""
        out = []
        if __version__ != self.version:
            out.append(f"cmc here is version {__version__}, the head's is {self.version}")
        if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
            out.append(f"cmc needs Linux on x86_64 (this is {platform.system()} "
                       f"{platform.machine()})")
        for node, path, want in self.files:
            if not os.path.isfile(path):
                out.append(f"node {node}: {path} is missing")
            elif not os.access(path, os.R_OK):
                out.append(f"node {node}: {path} cannot be read")
            elif digest(path) != want:
                out.append(f"node {node}: {path} is not the head's (another build or "
                           "version)")
        return out

    def run(self) -> tuple[str, list[str]]:
        """On the actor's machine: its host name and its problems. A machine without
        the head's scratch directory (any but the head's) makes its own at the same
        path (the same path keeps what the nodes print the same), removed by close."""
        problems = self.problems()
        if not problems and not os.path.isdir(self.workroot):
            self.scratch = Scratch(self.workroot)
        return socket.gethostname(), problems

    def pin_here(self, rank: int) -> None:
        """Pin the actor (and the nodes it starts) to one CPU, as worker processes are:
        `rank` is its place among this run's actors on its machine (unless --no-pin)."""
        if self.pin:
            pin_cpu(rank)

    def close(self) -> None:
        if self.scratch is not None:
            self.scratch.remove()
            self.scratch = None
