"""The seam: a model file's cluster of real processes, as a Model for the engine.

Every `fresh()` launches every node again in fresh working directories (SPEC §2:
a fresh, empty working directory per replay). The adapter keeps every system it
opened, so that whatever happens, `close_all` leaves no process behind.

With `recording` on (only when a behavior is shown, by `cmc --replay`), each
system keeps a log of its nodes' emulated calls and output, taken step by step
with `drain()`.
"""
from __future__ import annotations

import os

from .engine.model import CopyFailed
from .kernel.cluster import Cluster, ClusterSpec
from .kernel.fork import ForkFailed, NotForkable


class _Tracked:
    def __init__(self, cluster: Cluster, owner: "ClusterModel", is_copy: bool = False):
        self._c = cluster
        self._owner = owner
        self.is_copy = is_copy

    def actions(self):
        return self._c.actions()

    def apply(self, key):
        return self._c.apply(key)

    def fingerprint(self):
        return self._c.fingerprint()

    def view(self):
        return self._c.view()

    def parts(self):
        return self._c.parts()

    def drain(self) -> dict:
        """Each node's emulated calls and stdout/stderr since the last drain:
        {node name: {"calls": [str], "stdout": str, "stderr": str}}."""
        return self._c.drain()

    def fork(self) -> "_Tracked | None":
        """A copy of this world (--fast), or None when it cannot be copied faithfully
        (the engine replays it then)."""
        try:
            twin = _Tracked(self._c.fork(self._owner.new_root()), self._owner, is_copy=True)
        except NotForkable:
            return None
        except ForkFailed as e:
            self.close()
            raise CopyFailed(str(e)) from None
        self._owner.open.add(twin)
        return twin

    def close(self):
        self._c.close()
        self._owner.open.discard(self)


class ClusterModel:
    """Each world works in a directory of its own under workroot, named `tag` and a
    number, ten characters in all. With `many` (--fast), worlds live side by side,
    each in a new directory; otherwise one at a time, all in the same one.

    Every name has the same length whatever the mode, the worker (its tag) or the
    count: a node's working directory is in its environment (HOME) and so on its
    stack, and a path of another length would move the addresses it prints (in an
    error message, say) between replay, --fast and --workers."""

    NAME = 10

    def __init__(self, spec: ClusterSpec, workroot: str, recording: bool = False,
                 many: bool = False, tag: str = "w"):
        self.spec = spec
        self.workroot = workroot
        self.recording = recording
        self.many = many
        self.tag = tag
        self.open: set[_Tracked] = set()
        self._roots = 0

    def new_root(self) -> str:
        """A new directory for one world."""
        self._roots += 1
        return self._root(self._roots)

    def _root(self, n: int) -> str:
        return os.path.join(self.workroot, f"{self.tag}{n:0{self.NAME - len(self.tag)}d}")

    def fresh(self, shift: int = 0) -> _Tracked:
        if self.many:
            root = self.new_root()
            cluster = Cluster(self.spec, root)
            cluster.own_root = root
        else:
            self.close_all()   # one cluster at a time shares the working directories
            cluster = Cluster(self.spec, self._root(0))
        cluster.recording = self.recording
        cluster.shift = shift
        tracked = _Tracked(cluster, self)
        self.open.add(tracked)
        cluster.launch()
        return tracked

    def close_all(self) -> None:
        for t in list(self.open):
            t.close()
