"""The seam: the one place that translates between the rooms.

- `cluster_spec`: the language's model -> the kernel's ClusterSpec (what to launch,
  the budgets, how a reply line becomes a record).
- `engine_properties`: the language's properties -> the engine's Property checks; an
  evaluation error becomes a PropertyEvaluationError that carries the world(s).
- `ClusterModel`: a model file's cluster of real processes, as a Model for the engine.

Every `fresh()` launches every node again in fresh working directories (a fresh,
empty working directory per replay: docs/target-contract.md, "The process"). The
adapter keeps every system it opened, so that whatever happens, `close_all` leaves no
process behind.

With `recording` on (only when a behavior is shown, by `cmc --replay`), each
system keeps a log of its nodes' emulated calls and output, taken step by step
with `drain()`.
"""
from __future__ import annotations

import os
from dataclasses import replace

from .engine.model import Action, ActionKind, CopyFailed, Property, PropertyKind
from .errors import ModelError
from .kernel.cluster import ClientSpec, Cluster, ClusterSpec, NodeSpec, digest
from .kernel.maelstrom import MaelstromClient, MaelstromSpec, make_cluster
from .kernel.proc.fork import ForkFailed, NotForkable, Roots
from .lang import (EvaluationError, StateChecks, history_rows, history_violations,
                   reply_record, txn_anomalies, txn_rows)


def cluster_spec(model, channel_cap: int, watchdog_s: float,
                 trace_ticks: bool = False) -> ClusterSpec:
    """What the kernel launches for `model`, with the run's channel cap and watchdog
    (and, for the adapter, whether a world's view lists the FIREs folded into the
    step that reached it: --trace-ticks)."""
    def record(client, node, index, req, raw):
        return reply_record(model.reply, client, node, index, req, raw)
    return ClusterSpec(
        nodes=tuple(NodeSpec(n.name, tuple(n.argv)) for n in model.nodes),
        clients=tuple(ClientSpec(c.name, c.host, c.port, tuple(c.requests), c.after_ns)
                      for c in model.clients),
        budgets=dict(model.budgets),
        reply_record=record,
        params=dict(model.params),
        network=model.network,
        disk=model.disk,
        channel_cap=channel_cap,
        watchdog_s=watchdog_s,
        history=any(PropertyKind(p.kind) in (PropertyKind.LINEARIZABLE,
                                             PropertyKind.TRANSACTIONAL)
                    for p in model.properties),
        time=model.time.mode,
        latency_ns=model.time.latency_ns,
        horizon_ns=model.time.horizon_ns,
        faults_ns=model.time.faults_ns,
        cpus=model.machine.cpus,
        memory=model.machine.memory,
        disk_bytes=model.machine.disk,
        private_pids=model.machine.pids == "private",
        auto_pids=model.machine.pids == "auto",
        peers={model.node_names.index(node): frozenset(model.node_names.index(p) for p in peers)
               for node, peers in model.peers},
        trace_ticks=trace_ticks,
        maelstrom=None if model.maelstrom is None else MaelstromSpec(
            model.maelstrom.nodes, tuple(MaelstromClient(c.name, c.node, c.bodies, c.after_ns)
                                         for c in model.maelstrom.clients),
            model.maelstrom.services),
    )


class PropertyEvaluationError(ModelError):
    """A property could not be evaluated in a world the search reached (docs/errors.md,
    "Properties that cannot be evaluated (exit 2)"): a type error the file's static
    checks cannot see, such as a field a node's state does not have. Raised while the
    engine checks the property; a model error (exit 2). It carries the language's
    located error and the world it was evaluated in (`view`; for an action property also
    the world after, `next_view`), which the command line prints after the message. The
    user fixes the property (or the program's state)."""

    def __init__(self, err: ModelError, view: dict, next_view: dict | None):
        super().__init__(err.message, err.file, err.line, err.col, err.source_line)
        self.view = view
        self.next_view = next_view


def engine_properties(model) -> list[Property]:
    """The model's properties as the engine checks them, on the kernel's world views;
    a linearizable property on the history in them, which a report shows (`detail`).
    A state property is evaluated once per value of what it reads (StateChecks)."""
    checks = StateChecks(digest)

    def checker(p):
        def check(view, next_view):
            try:
                return checks.check(p, view, next_view)
            except EvaluationError as err:
                raise PropertyEvaluationError(err, view, next_view) from None
        return check
    def linearizable(view, next_view):
        return not history_violations(model, view)

    def history(view):
        return history_rows(model, view)
    def transactional(p):
        return Property(PropertyKind.TRANSACTIONAL, p.name,
                        lambda view, next_view: not txn_anomalies(p.level, view),
                        lambda view: txn_rows(p.level, view))
    kinds = [PropertyKind(p.kind) for p in model.properties]     # the model file's words
    return [Property(kind, p.name, linearizable, history) if kind is PropertyKind.LINEARIZABLE
            else transactional(p) if kind is PropertyKind.TRANSACTIONAL
            else Property(kind, p.name, checker(p)) for kind, p in zip(kinds, model.properties)]


def engine_action(a) -> Action:
    """The kernel's action as the engine sees it: key, kind and label, and for the
    reporters the fields it was rendered from."""
    return Action(a.key, ActionKind[a.kind], a.label, a.fields())


class _Tracked:
    def __init__(self, cluster: Cluster, owner: "ClusterModel", is_copy: bool = False,
                 path: tuple = (), shift: int = 0):
        self._c = cluster
        self._owner = owner
        self.is_copy = is_copy
        self._saved: list = []          # the record as the copies load it (fork_world)
        self.path = path                # the keys applied since launch (to rebuild it)
        self.shift = shift
        self.ticks: list[str] = []      # the FIREs folded into the last step (labels)
        self.not_copied = ""            # why the last fork() gave None
        self._taken = None              # the kernel's action last applied (--por)

    def actions(self) -> list[Action]:
        return [engine_action(a) for a in self._c.actions()]

    def apply(self, key) -> Action:
        self._saved.clear()
        self.ticks = []
        try:
            taken = self._c.apply(key)
        except (NotForkable, ForkFailed) as e:
            # A node this step runs is lent to other worlds and could not be forked
            # (fork.Lease.take): the step is taken again on a replay.
            raise CopyFailed(str(e)) from None
        action = engine_action(taken)
        self.path += (key,)
        self.fold()
        self._taken = (taken, frozenset(self._c.net.reads))
        return action

    def fold(self) -> None:
        """Time virtual: while nothing is in flight, the FIREs due that change nothing
        another node or a property sees are taken as part of the step just taken
        (docs/design.md, "One clock for the cluster"). A FIRE is known to be invisible
        only once it ran, so the fold runs them on this world with a copy of it kept
        from before the first (where one can be made); a FIRE that meets a visible call
        spoils the world, which is then the copy again with the invisible FIREs taken
        once more (they do the same: the program is deterministic), or, without a
        copy, made again from launch (the same path, this world now known: the
        owner's `visible_next`). A timer leading back to a world of this fold is a loop
        of idle ticks: the fold ends there."""
        seen: set[bytes] = set()
        kept: _Tracked | None = None      # this world before the first FIRE, copied
        folded: list = []                 # the FIREs taken since
        copying = True
        try:
            while (fire := self._c.foldable()) is not None:
                fp = self._c.fingerprint()
                if fp in self._owner.visible_next or fp in seen:
                    break
                seen.add(fp)
                if len(seen) == 1 and copying:   # before the fold's first FIRE
                    kept = self.fork()    # CopyFailed: this world was spoilt, and closed
                try:
                    invisible = self._c.fold(fire)
                except (NotForkable, ForkFailed) as e:
                    # The copy kept lends this world's nodes, and the one the FIRE runs
                    # cannot be forked (a socket of its own, say): this world is the
                    # copy again (it ran nothing), and the fold goes on without one.
                    if kept is None or not self._again(kept, folded):
                        raise CopyFailed(str(e)) from None
                    kept, copying = None, False
                    seen.discard(fp)
                    continue
                self._saved.clear()
                if invisible:
                    folded.append(fire.key)
                    self.ticks.append(fire.label)
                    continue
                self._owner.visible_next.add(fp)
                if kept is None or not self._again(kept, folded):
                    self._rebuild()                   # the try spoilt this world
                kept = None
                break
        finally:
            if kept is not None:
                kept.close()
        if seen:
            self._c.compact()          # what the folded FIREs wrote (docs/design.md)

    def _again(self, kept: "_Tracked", folded: list) -> bool:
        """This world was spoilt by a visible FIRE: it becomes `kept`, the copy made
        before the fold, with the FIREs folded so far taken again. False when they do
        not fold the same way (the caller makes the world again from launch)."""
        self._c, kept._c = kept._c, self._c
        kept.close()                                  # the spoilt world
        for key in folded:
            fire = self._c.foldable()
            try:
                if fire is None or fire.key != key or not self._c.fold(fire):
                    return False
            except (NotForkable, ForkFailed):
                return False
        return True

    def _rebuild(self) -> None:
        """This world was spoilt by a FIRE that turned out visible: launch it again and
        take its path, which now stops before that FIRE."""
        self._c.close()
        self._owner.open.discard(self)
        again = self._owner.fresh(self.shift)
        for key in self.path:
            again.apply(key)
        self._c, self.ticks = again._c, again.ticks
        self._owner.open.discard(again)
        self._owner.open.add(self)

    def fingerprint(self):
        return self._c.fingerprint()

    def view(self):
        view = self._c.view()
        if self._c.spec.trace_ticks and self._c.virtual:
            view["ticks"] = list(self.ticks)
        return view

    def parts(self):
        return self._c.parts()

    def traits(self) -> dict:
        return self._c.traits()

    def changed(self, before: dict) -> frozenset[str]:
        return self._c.changed(before, *self._taken)

    def drain(self) -> dict:
        """Each node's emulated calls and stdout/stderr since the last drain:
        {node name: {"calls": [str], "stdout": str, "stderr": str}}."""
        self._saved.clear()
        return self._c.drain()

    def fork(self) -> "_Tracked | None":
        """A copy of this world (--fast), or None when it cannot be copied faithfully
        (the engine replays it then)."""
        try:
            twin = _Tracked(self._c.fork(self._owner.new_root(), self._saved), self._owner,
                            is_copy=True, path=self.path, shift=self.shift)
        except NotForkable as e:
            self.not_copied = str(e)
            return None
        except ForkFailed as e:
            self.close()
            raise CopyFailed(str(e)) from None
        self._owner.open.add(twin)
        return twin

    def close(self):
        self._saved.clear()
        self._c.close()
        self._owner.open.discard(self)


def _made_groups(cluster: Cluster, spec: ClusterSpec) -> frozenset:
    """The nodes of a cluster just launched, with the host's pids where the model left
    `machine pids` unset, whose start made a process group of its own while the process
    cmc launched lives on; nothing where cmc may not make a PID namespace (it is not
    root). A daemon, whose launched process has ended, stays as it is: in a namespace
    of its own it would end with its first process."""
    if not spec.auto_pids or os.geteuid() != 0:
        return frozenset()
    return frozenset(node.index for node in cluster.nodes
                     if not node.own_pids and node.tasks.alive and node.tasks.groups
                     and node.tasks.pid in node.tasks.procs)


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
        # time virtual: the worlds (fingerprints) whose next FIRE was found visible, so
        # that a world made again from launch stops before it (_Tracked.fold)
        self.visible_next: set[bytes] = set()
        self._roots = 0
        self.roots = Roots(self.new_root)

    def new_root(self) -> str:
        """A new directory for one world."""
        self._roots += 1
        return self._root(self._roots)

    def _root(self, n: int) -> str:
        return os.path.join(self.workroot, f"{self.tag}{n:0{self.NAME - len(self.tag)}d}")

    def fresh(self, shift: int = 0) -> _Tracked:
        tracked = self._fresh(shift)
        made = _made_groups(tracked._c, self.spec)
        if not made:
            return tracked
        # Their start made a process group of its own, whose id is a pid: with the
        # host's pids it differs on every launch. The cluster is launched again with
        # those nodes each in a PID namespace of its own, from now on: the spec says
        # so, and a recorder of the same run is made with it (docs/model-file.md).
        tracked.close()
        self.spec = replace(self.spec, own_pids=self.spec.own_pids | made)
        return self._fresh(shift)

    def _fresh(self, shift: int) -> _Tracked:
        if self.many:
            root = self.new_root()
            cluster = make_cluster(self.spec, root)
            cluster.own(root, self.roots)
        else:
            self.close_all()   # one cluster at a time shares the working directories
            cluster = make_cluster(self.spec, self._root(0))
        cluster.recording = self.recording
        cluster.shift = shift
        tracked = _Tracked(cluster, self, shift=shift)
        self.open.add(tracked)
        cluster.launch()
        tracked.fold()
        return tracked

    def close_all(self) -> None:
        for t in list(self.open):
            t.close()
        self.roots.close()
