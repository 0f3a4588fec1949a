"""--check-merges (docs/cmc.md, "Searches"; docs/design.md, "Checking merges"): a
soundness gate for the state a program declares.

Breadth-first search merges two paths that reach the same fingerprint: the world is
expanded once, from the first path found. That is sound only if the fingerprint
(what each node declares on fd 3, and cmc's record of the network, clients, budgets
and the disk) decides everything the world does next. A node that keeps a retry
counter, the order of its client slots or a backlog outside its declared state
reaches one fingerprint in program states that behave differently, and the search
then skips worlds that are reachable, silently.

The gate: when a successor's world was already found (by another path, or by the
same world's own step: a self-loop), that other path is kept, up to PATHS_PER_WORLD
per world; once the world has been expanded from its first path, it is reached again
along each kept path and every enabled action is taken from there too. The enabled
actions and the fingerprint after each must be those of the first path. A
difference is a finding about the program (exit 3) naming the part of the world that
differs, the two paths and the action.

What it does not see: a difference that shows only two or more steps later (each
path is expanded one step deep), and paths past the bound. Its steps are not counted
as generated states: the counts are those of the search without the gate.
"""
from __future__ import annotations

from ..errors import TargetError
from .replay import difference, replay, steps_by_copy, take_step


class MergeDiffers(TargetError):
    """Two paths to one world lead, by one action, to different worlds."""


class MergeCheck:
    PATHS_PER_WORLD = 4     # other paths compared per world, at most
    KEEP = 128              # --fast: live systems of paths waiting to be compared, at most

    def __init__(self, search):
        self.search = search
        self.successors: dict[bytes, dict] = {}   # expanded world -> {action key: world}
        self.pending: dict[bytes, list] = {}      # world -> other paths, until expanded
        self.kept: dict[bytes, int] = {}          # world -> other paths kept
        self.compared = 0                          # other paths compared
        self.worlds: set[bytes] = set()            # worlds with a path compared
        self.live = 0                              # live systems in `pending`
        # --fast: action -> the system its step left at a world found before, taken on
        # by `arrived` when the merge comes to it (worlds.InProcess)
        self.arrivals: dict = {}

    def arrived(self, fp2: bytes, fp: bytes, key: tuple, system=None) -> None:
        """The step `key` from world `fp` reached `fp2`, which was found before;
        `system`, when given, is a live system at `fp2` reached so (--fast), which
        this closes or uses."""
        if self.search.parent[fp2][:2] == (fp, key):
            if system is not None:
                system.close()
            return                      # the path that found it
        keys, fps = self.search.path(fp)
        self._another(fp2, keys + [key], fps + [fp2], system)

    def _another(self, fp: bytes, keys: list, fps: list, system=None) -> None:
        """`keys` is another path to world `fp`: compare it, now or once `fp` has
        been expanded, unless PATHS_PER_WORLD were taken for `fp` already. A path
        compared later keeps `system` alive until then, up to KEEP of them (each is
        a cluster of processes); past that it is replayed then."""
        n = self.kept.get(fp, 0)
        if n >= self.PATHS_PER_WORLD:
            if system is not None:
                system.close()
            return
        self.kept[fp] = n + 1
        if fp in self.successors:
            self.compare(fp, keys, fps, system)
            return
        if system is not None and self.live >= self.KEEP:
            system.close()
            system = None
        self.live += system is not None
        self.pending.setdefault(fp, []).append((keys, fps, system))

    def expanded(self, fp: bytes, successors: dict) -> None:
        """World `fp` was expanded from its first path: `successors` maps each enabled
        action's key to the world after it. The paths kept for it are compared now."""
        self.successors[fp] = successors
        waiting = self.pending.pop(fp, [])
        try:
            while waiting:
                keys, fps, system = waiting.pop(0)
                self.live -= system is not None
                self.compare(fp, keys, fps, system)
        finally:
            self._close(waiting)

    def drop_arrivals(self) -> None:
        """Close the systems of `arrivals` the merge did not come to (a violation)."""
        for system in self.arrivals.values():
            system.close()
        self.arrivals.clear()

    def close(self) -> None:
        """Close the live systems of paths not compared (the search is over)."""
        for waiting in self.pending.values():
            self._close(waiting)
        self.pending.clear()

    def _close(self, waiting: list) -> None:
        for _, _, system in waiting:
            if system is not None:
                system.close()
                self.live -= 1
        waiting.clear()

    def compare(self, fp: bytes, keys: list, fps: list, system=None) -> None:
        """Reach world `fp` by the other path `keys`, and require what its first path
        gave: the same enabled actions, each leading to the same world. Each world
        after a step is reached along the other path too: a difference that the
        program keeps hidden for some steps is compared there (within the bound)."""
        search = self.search
        expected = self.successors[fp]
        if system is None:
            system, _ = replay(search.model, keys, fps)
        try:
            actions = [a.key for a in system.actions()]
        except BaseException:
            system.close()
            raise
        self.compared += 1
        self.worlds.add(fp)
        if actions != list(expected):
            system.close()
            raise self._differs(fp, keys, None, actions, list(expected))
        if not actions:
            system.close()
            return
        if search.worlds.copies:
            steps = steps_by_copy(search.model, system, keys, fps, actions,
                                  lambda s, k: take_step(s, k, close=False))
        else:
            system.close()
            steps = ((k, None, take_step(replay(search.model, keys, fps)[0], k))
                     for k in actions)
        for k, after, (_, fp2, _) in steps:
            if fp2 != expected[k]:
                if after is not None:
                    after.close()
                if hasattr(steps, "close"):
                    steps.close()
                raise self._differs(fp, keys, k)
            if fp2 in search.parent and (search.max_depth is None
                                         or search.parent[fp2][2] < search.max_depth):
                self._another(fp2, keys + [k], fps + [fp2], after)
            elif after is not None:
                after.close()

    def _differs(self, fp: bytes, keys: list, key: tuple | None, actions=None,
                 expected=None) -> MergeDiffers:
        search = self.search
        first, _ = search.path(fp)
        labels = [_labels(search.model, first), _labels(search.model, keys)]
        if key is None:
            gained = sum(k not in expected for k in actions)
            lost = sum(k not in actions for k in expected)
            what = (f"the second path enables {len(actions)} actions where the first "
                    f"enables {len(expected)} ({gained} not enabled after the first, "
                    f"{lost} of the first's not enabled; or the same in another order)")
            action = None
        else:
            runs = []
            for path in (first, keys):
                system, steps = replay(search.model, path + [key], None, collect=True)
                try:
                    runs.append((steps[-1].action, system.parts()))
                finally:
                    system.close()
            (taken, parts), (_, parts2) = runs
            action = taken.label
            what = f"after <{action}> from it, {difference(parts, parts2)}"
            fields = taken.fields or {}
            node = _node_of(parts, parts2, fields)
        who = f"node {node} declares" if key is not None and node else "the nodes declare"
        lines = [f"--check-merges: two paths reach the same world, and {what} (first path, "
                 f"then second). The state {who} on fd 3 leaves out something that "
                 "decides what it does next, so the search would skip reachable worlds "
                 "(docs/target-contract.md, \"fd 3 and fd 193: the state a program "
                 "declares\").",
                 f"The first path ({len(first) + 1} states):"]
        lines += _numbered(labels[0])
        lines.append(f"The second path ({len(keys) + 1} states):")
        lines += _numbered(labels[1])
        if action is not None:
            lines.append(f"The action from both: <{action}>")
        return MergeDiffers("\n".join(lines))

    def summary(self) -> str:
        return (f"--check-merges: {self.compared} other paths to {len(self.worlds)} worlds "
                "reached more than once were expanded one step; every one led where the "
                "first path led.")


def _node_of(parts_a: list, parts_b: list, fields: dict) -> str | None:
    """The node a difference between two worlds' parts points at: the node whose
    declared state, durable state or life differs, or that sent a message one world has
    in flight and the other has not; else the node the action (`fields`) went to. Never
    a ghost client: it declares nothing (a message of its that differs is a node's doing,
    e.g. a reset that ended it)."""
    nodes = {f[5:-1] for f in parts_a[0][1] if f.startswith("node[")}
    first = next(((name, field, x[field], y.get(field))
                  for (name, x), (_, y) in zip(parts_a, parts_b)
                  for field in x if x[field] != y.get(field)), None)
    if first is not None:
        name, field, a, b = first
        if "[" in field:
            return field[field.index("[") + 1:-1]
        if name.startswith("node "):
            return name[5:]
        if field == "network":
            odd = _unmatched(a, b or []) + _unmatched(b or [], a) or \
                [m or n for m, n in zip(a + [None], (b or []) + [None]) if m != n]
            found = next((m["src"] for m in odd if m.get("src") in nodes), None)
            if found:
                return found
    return next((fields[f] for f in ("node", "dst") if fields.get(f) in nodes), None)


def _unmatched(msgs: list, others: list) -> list:
    """The messages of `msgs` that `others` does not have (as many times)."""
    left = list(others)
    out = []
    for m in msgs:
        if m in left:
            left.remove(m)
        else:
            out.append(m)
    return out


def _labels(model, keys: list) -> list[str]:
    system, steps = replay(model, keys, None, collect=True)
    system.close()
    return [s.action.label if s.action is not None else "Initial predicate" for s in steps]


def _numbered(labels: list[str]) -> list[str]:
    return [f"State {i}: <{label}>" for i, label in enumerate(labels, 1)]
