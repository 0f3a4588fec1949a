"""What a node is handed, once, of the world it runs in: a small record the cluster
makes at construction and gives every node of the world (proc/node.py `Node.setting`).

Below the cluster nothing reaches the cluster itself: a handler sends through the
world's network (`call.net`, chosen at construction: a Maelstrom world's network is
Maelstrom's), reads the machine's figures from the spec, and names where an error
happened with `where`. The record is the world's, copied with it (proc/record.py), so
a copy's nodes see the copy's network and clock.
"""
from __future__ import annotations

import os

from . import peers


class Setting:
    """The world as its nodes see it: its network (and so its clock), whether time is
    virtual, the watchdog, the machine (`spec`: cpus, memory, private pids, disk mode,
    peers), the call log kept while recording, the step being taken (for messages),
    where the nodes' output goes and, when the world is one of many side by side
    (copying), its root and the run's Roots."""

    def __init__(self, spec, net, outdir: str):
        self.spec = spec
        self.net = net
        self.virtual = spec.time == "virtual"
        self.watchdog_s = spec.watchdog_s
        self.outdir = outdir
        self.nodes: list = []          # the world's nodes (clock rules, other worlds)
        self.recording = False         # keep a call log and per-step output (replay)
        self.calls: list[tuple[str, str]] = []
        self.shift = 0                 # launch nodes with CMC_DET_PAD (node.det_pad)
        self.step = 0
        self.step_label = "launch"
        self.own_root: str | None = None     # a directory of this world (copying)
        self.roots = None                    # the run's Roots (copying: proc/fork.py)

    def where(self, node) -> str:
        """The start of a message about `node`: its name and the step being taken."""
        return f"node {node.name} (step {self.step}, {self.step_label}): "

    def log_call(self, node, line: str) -> None:
        """While recording (a replay shown step by step): one call of `node`, rendered."""
        self.calls.append((node.name, line))

    def output_path(self, node) -> str:
        """Where the node's incarnation writes stdout and stderr (without the suffix)."""
        return os.path.join(self.outdir, f"{node.index}-{node.name}.{node.incarnation}")

    def stderr_tail(self, node) -> str:
        try:
            with open(self.output_path(node) + ".stderr", "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 8000))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        # a JVM's stack frames ("\tat ...", "\t... 3 more") hide the exception's line
        lines = [line for line in text.splitlines()
                 if not line.lstrip().startswith(("at ", "... "))]
        tail = "\n".join(lines)[-400:].strip()
        return f"; its stderr ends with:\n{tail}" if tail else ""

    def check_peer(self, sender: int, receiver: int, what: str, addr) -> None:
        """A `peers` line: node `sender` reaches node `receiver` (peers.py); nothing
        to check without `peers` lines."""
        if self.spec.peers:
            nodes = self.nodes
            peers.check(self.spec.peers, [n.name for n in nodes], sender, receiver,
                        self.where(nodes[sender]) + what, addr)
