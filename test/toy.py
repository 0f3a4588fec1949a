"""Toy systems for the engine (cmc/engine) to search, in pure Python: no process,
no kernel. Each is a state machine with a handful of states whose counts are known
exactly (test_engine_toy.py says how), in the manner of Stateright's own checker tests.

A `Toy` is a Model (`fresh`, and `close_all` for the workers of --workers); its worlds
are `ToySystem`s, the System protocol of cmc/engine/model.py: actions, apply,
fingerprint, view, parts, fork, close. A toy counts its launches and the systems left
open, and refuses to be used once closed, so a test also sees what the engine does
with the systems it opens.

A state is any hashable value; `moves(state)` lists the enabled actions in a fixed
order as (name, ActionKind, next state). An action's key is (name,), its label the
name. A `PartsToy`'s worlds also say what each step touched (traits and changed), for
--por's sleep sets.
"""
from __future__ import annotations

from cmc.engine.model import Action, ActionKind

DELIVER, DROP, FIRE = ActionKind.DELIVER, ActionKind.DROP, ActionKind.FIRE


class Toy:
    def __init__(self, initial, moves, show):
        self.initial = initial
        self.moves = moves          # state -> [(name, kind, next state)]
        self.show = show            # state -> the view (a dict) the properties read
        self.launches = 0
        self.open: set[ToySystem] = set()

    def fresh(self, shift: int = 0) -> "ToySystem":
        self.launches += 1
        return ToySystem(self, self.initial)

    def close_all(self) -> None:
        for system in list(self.open):
            system.close()


class ToySystem:
    def __init__(self, toy: Toy, state, is_copy: bool = False):
        self.toy, self.state, self.is_copy = toy, state, is_copy
        self.closed = False
        toy.open.add(self)

    def _moves(self):
        assert not self.closed, "a closed system was used"
        return self.toy.moves(self.state)

    def actions(self) -> list[Action]:
        return [Action((name,), kind, name) for name, kind, _ in self._moves()]

    def apply(self, key: tuple) -> Action:
        for name, kind, after in self._moves():
            if (name,) == key:
                self.state = after
                return Action(key, kind, name)
        raise KeyError(f"{key} is not enabled in {self.state!r}")

    def fingerprint(self) -> bytes:
        assert not self.closed, "a closed system was used"
        return repr(self.state).encode()

    def view(self) -> dict:
        assert not self.closed, "a closed system was used"
        return self.toy.show(self.state)

    def parts(self) -> list[tuple[str, dict]]:
        return [("toy", self.view())]

    def fork(self) -> "ToySystem":
        assert not self.closed, "a closed system was copied"
        return ToySystem(self.toy, self.state, is_copy=True)

    def close(self) -> None:
        self.closed = True
        self.toy.open.discard(self)


# -- the toys -----------------------------------------------------------------------------

def counter(n: int) -> Toy:
    """x counts up from 0 and wraps at n: one action, `inc`, in every state."""
    return Toy(0, lambda x: [("inc", DELIVER, (x + 1) % n)], lambda x: {"x": x})


def lost_update(processes: int = 2) -> Toy:
    """Each process reads the shared register x into its local t (`read i`), then writes
    t + 1 back (`write i`), and is done. A state is (pcs, ts, x), pc 0 before the read,
    1 before the write, 2 done; t is None before the read. Two reads before either
    write lose an update."""
    def moves(state):
        pcs, ts, x = state
        out = []
        for i, pc in enumerate(pcs):
            if pc == 0:
                out.append((f"read {i}", DELIVER,
                            (_set(pcs, i, 1), _set(ts, i, x), x)))
            elif pc == 1:
                out.append((f"write {i}", DELIVER, (_set(pcs, i, 2), ts, ts[i] + 1)))
        return out
    start = ((0,) * processes, (None,) * processes, 0)
    return Toy(start, moves, lambda s: {"pc": list(s[0]), "t": list(s[1]), "x": s[2]})


def philosophers(n: int = 2) -> Toy:
    """n philosophers round a table, fork i between philosopher i (its left) and
    philosopher i+1 (its right). A philosopher thinks (0), takes the left fork (1),
    takes the right one and eats (2), then puts both back (0). The state is the tuple
    of the philosophers' phases; when each holds a left fork, no action is enabled."""
    def held(phases, fork):
        left_of, right_of = fork, (fork - 1) % n     # whose left and whose right it is
        return phases[left_of] >= 1 or phases[right_of] == 2

    def moves(phases):
        out = []
        for i, phase in enumerate(phases):
            if phase == 0 and not held(phases, i):
                out.append((f"take left {i}", DELIVER, _set(phases, i, 1)))
            elif phase == 1 and not held(phases, (i + 1) % n):
                out.append((f"take right {i}", DELIVER, _set(phases, i, 2)))
            elif phase == 2:
                out.append((f"put down {i}", DELIVER, _set(phases, i, 0)))
        return out
    return Toy((0,) * n, moves, lambda p: {"phase": list(p)})


def retry(resend: bool = True) -> Toy:
    """A request in flight, that the network may drop (once) or deliver (the answer
    comes back at once: acked). A timeout (FIRE) is enabled in every state: with
    `resend` it sends the request again when none is in flight and it is not acked;
    otherwise (and without resend, always) it changes nothing. The state is (in flight,
    acked, drops left); the drop comes first among the actions, so that a schedule that
    took faults would take it."""
    def moves(state):
        inflight, acked, drops = state
        out = []
        if inflight:
            if drops:
                out.append(("drop", DROP, (False, False, drops - 1)))
            out.append(("deliver", DELIVER, (False, True, drops)))
        resent = resend and not inflight and not acked
        out.append(("timeout", FIRE, (True, acked, drops) if resent else state))
        return out
    return Toy((True, False, 1), moves,
               lambda s: {"inflight": s[0], "acked": s[1], "drops": s[2]})


class PartsToy(Toy):
    """A toy whose worlds say what each step touched (System.traits and changed): a
    state is a tuple of program counters, one per process; `step i` moves process i
    on and touches its own part, and `shared` too when given. `lie`: the steps claim
    to touch nothing, whatever they do."""

    def __init__(self, n: int, k: int, shared: bool = False, lie: bool = False,
                 writes_x: bool = False):
        self.n, self.k, self.shared, self.lie, self.writes_x = n, k, shared, lie, writes_x

        def moves(state):
            pcs, x = state
            return [(f"step {i}", DELIVER, (pcs[:i] + (pc + 1,) + pcs[i + 1:],
                                            x * 2 + i if writes_x else x))
                    for i, pc in enumerate(pcs) if pc < k]
        super().__init__(((0,) * n, 0), moves, lambda s: {"pcs": list(s[0]), "x": s[1]})

    def fresh(self, shift: int = 0):
        self.launches += 1
        return PartsSystem(self, self.initial)


class PartsSystem(ToySystem):
    """A world of PartsToy: what a step touched, as --por reads it (cmc/engine/por.py)."""

    def apply(self, key):
        self.last = key
        return super().apply(key)

    def fork(self):
        assert not self.closed
        return PartsSystem(self.toy, self.state, is_copy=True)

    def traits(self) -> dict:
        pcs, x = self.state
        return {**{f"p{i}": pc for i, pc in enumerate(pcs)}, "x": x}

    def changed(self, before: dict) -> frozenset:
        if self.toy.lie:
            return frozenset()         # touches nothing: commutes with anything
        after = self.traits()
        out = {k for k in after if before.get(k) != after[k]}
        out.add(f"p{self.last[0].split()[1]}")
        if self.toy.shared:
            out.add("shared")
        if self.toy.writes_x:
            out.add("x")               # read, even when its value stays
        return frozenset(out)


def graph(edges: dict, initial="s") -> Toy:
    """An explicit graph: {state: [(action name, next state), ...]}, every action a
    DELIVER; a state missing from `edges` has no action enabled."""
    return Toy(initial, lambda s: [(name, DELIVER, t) for name, t in edges.get(s, [])],
               lambda s: {"at": s})


def _set(values: tuple, i: int, value) -> tuple:
    return values[:i] + (value,) + values[i + 1:]
