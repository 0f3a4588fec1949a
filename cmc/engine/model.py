"""What the engine needs from a system, and what it reports back.

The engine sees a system only through `Model.fresh()` (a new instance at its
initial world) and the `System` protocol below. It never prints: it calls a
`Reporter`. It imports nothing else of cmc (test/test_layers.py checks this).

An enabled action is an `Action`: its key identifies it in its world (the engine
stores keys on paths and in traces, and never looks inside one), its kind is what the
quiescence rule and the fair schedule (docs/cmc.md, "Properties: when each is
checked") are stated in, and its label is what a person reads.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Protocol


class ActionKind(enum.Enum):
    DELIVER = "DELIVER"
    DROP = "DROP"
    DUP = "DUP"
    FIRE = "FIRE"
    CRASH = "CRASH"


@dataclass(frozen=True)
class Action:
    key: tuple              # opaque to the engine: what `System.apply` takes
    kind: ActionKind
    label: str
    # What a report shows of the action, as a record (the system's, opaque to the
    # engine; rendered into `label`), so that no reporter parses a label.
    fields: dict | None = field(default=None, compare=False, hash=False)

    @property
    def moves_messages(self) -> bool:
        """A delivery: a world where one is enabled is not quiescent (docs/cmc.md,
        "Properties: when each is checked")."""
        return self.kind is ActionKind.DELIVER

    @property
    def fires(self) -> bool:
        """A timeout firing."""
        return self.kind is ActionKind.FIRE

class System(Protocol):
    def actions(self) -> list[Action]: ...   # the enabled actions, in a fixed order
    def apply(self, key: tuple) -> Action: ...   # returns the action taken
    def fingerprint(self) -> bytes: ...
    def view(self) -> dict: ...
    def close(self) -> None: ...
    # Optional (copying): a copy of this world, or None when it cannot be copied
    # faithfully. Raises CopyFailed when copying broke this world (it is closed).
    # `is_copy`: this world was made by fork() (or is one stepped on since). A copy
    # may share what a step has not yet run with the world it was copied from; `apply`
    # raises CopyFailed when a step could not take its share (the engine replays it).
    def fork(self) -> "System | None": ...
    # Why the last fork() gave None (for the count of worlds replayed, by reason).
    not_copied: str
    # The world as named parts (name, {field: value}), what a trace shows first,
    # then all the fingerprint covers: how the engine says what differs between two
    # worlds without knowing their shape. The view is opaque to the engine: it
    # goes to the properties and the reporters, never read here.
    def parts(self) -> list[tuple[str, dict]]: ...


class CopyFailed(Exception):
    """Copying a world failed part way and spoilt the world copied from, or a step
    on a world that shares its processes with others could not take its own."""


class Model(Protocol):
    # Launched: the initial world. `shift` k > 0 (--det's second run): launch it in
    # an environment that differs, in the k-th of a few ways, in what a
    # deterministic program cannot see (the place of its initial stack), so that
    # one that reads memory it never wrote shows up as nondeterministic.
    def fresh(self, shift: int = 0) -> System: ...


class Checked(enum.Enum):
    """When a kind of property is checked (docs/cmc.md, "Properties: when each is
    checked")."""
    STATE = "on every world when it is first found"
    TRANSITION = "on every step, into a world already seen too"
    QUIESCENCE = "when a world is expanded and turns out to be quiescent"
    LIVENESS = "once the safety search is over, along the fair schedule from every world"


class PropertyKind(enum.Enum):
    """A kind of property (docs/model-file.md), and all cmc does by kind: when it is
    checked; whether some world must satisfy it (`reached`: a witness, violated when
    the search never reaches one) rather than every world (or step, or schedule) it is
    checked on; TLC's words for its violation; and TLC's exit status for that
    (--tlc-exit-codes; tlc2/output/EC.java: VIOLATION_SAFETY 12, VIOLATION_LIVENESS 13,
    ERROR 255: a witness has none, a quiescent property is an invariant of the quiescent
    worlds). Its value is the model file's word, which trace files and the JSON report
    carry. A linearizable or transactional property is an invariant of the clients'
    history."""
    INVARIANT = ("invariant", Checked.STATE, "Error: Invariant {} is violated.", 12)
    LINEARIZABLE = ("linearizable", Checked.STATE,
                    "Error: Linearizability property {} is violated.", 12)
    TRANSACTIONAL = ("transactional", Checked.STATE,
                     "Error: Transactional property {} is violated.", 12)
    WITNESS = ("witness", Checked.STATE, "Error: Witness {} was never reached.", 255, True)
    ACTION = ("action", Checked.TRANSITION, "Error: Action property {} is violated.", 13)
    QUIESCENT = ("quiescent", Checked.QUIESCENCE, "Error: Quiescent property {} is violated.",
                 12)
    EVENTUALLY = ("eventually", Checked.LIVENESS, "Error: Temporal property {} was violated.",
                  13)

    def __new__(cls, word: str, checked: Checked, wording: str, tlc_status: int,
                reached: bool = False):
        kind = object.__new__(cls)
        kind._value_ = word
        kind.checked = checked
        kind.wording = wording
        kind.tlc_status = tlc_status
        kind.reached = reached
        return kind

    def __str__(self) -> str:
        return self.value

    def violated(self, name: str) -> str:
        """TLC's error line for property `name` of this kind."""
        return self.wording.format(name)


@dataclass(frozen=True)
class Property:
    kind: PropertyKind      # a model file's word is taken too (PropertyKind's value)
    name: str
    check: Callable         # (view, next_view | None) -> bool
    # What a report shows of a violation after its trace, from the last world's view
    # (a linearizable property: the history); opaque to the engine.
    detail: Callable | None = field(default=None, compare=False, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "kind", PropertyKind(self.kind))


@dataclass
class Step:
    """One state of a behavior: the action that led to it (None: initial) and the world.
    `output` is what an observer of a replay collected at that step (e.g. the calls
    and output of each node), opaque to the engine."""
    action: Action | None
    view: dict
    fingerprint: bytes | None = None
    output: object = None

    @property
    def label(self) -> str | None:
        return self.action.label if self.action is not None else None

    @property
    def key(self) -> tuple | None:
        return self.action.key if self.action is not None else None


@dataclass
class Stats:
    generated: int = 0          # worlds generated, the initial one included (TLC's count)
    distinct: int = 0           # distinct fingerprints
    queue: int = 0              # worlds left on the queue (BFS) or stack (DFS)
    depth: int = 0              # the initial world has depth 1
    walks: int = 0              # simulation: walks finished
    walk_lengths: list[int] = field(default_factory=list)   # simulation: states per walk
    unexplored: int = 0         # worlds at the depth bound whose successors were not generated
    copies: int = 0             # --fast: successors taken on a copy of a world (not a replay)
    # --fast: successors taken on a replay because their world could not be copied (or
    # a copy failed), by why (System.not_copied, or what failed)
    replayed: dict[str, int] = field(default_factory=dict)
    # --fast: worlds replayed from launch to be expanded, no snapshot of them having
    # been kept (Search.KEEP; docs/design.md, "How many worlds are kept")
    relaunched: int = 0
    workers: dict | None = None  # --workers/--ray: the workers' accounts (parallel.py)
    # --por: whether the search was reduced (None: --por not asked for; False: the
    # model's properties read transitions, so none was skipped), and the transitions
    # it skipped (enabled in a world, not taken from it: por.py)
    reduced: bool | None = None
    slept: int = 0


@dataclass
class Outcome:
    """The verdict of a search. On a violation, `trace` is the behavior (empty for a
    witness that was never reached). For an `eventually` property the behavior is a
    prefix followed by the fair schedule from state `suffix_from` (1-based); `loop_to`
    is the state the fair schedule came back to (a lasso), and `why` says how the fair
    schedule ended. A simulation also says which walk and seed found it."""
    verdict: str                      # "ok" | "violated"
    stats: Stats
    prop: Property | None = None
    trace: list[Step] = field(default_factory=list)
    suffix_from: int | None = None
    loop_to: int | None = None
    why: str | None = None
    walk: int | None = None
    seed: int | None = None
    bounded: bool = False             # some world at a depth bound was not expanded
    # A breadth-first search stopped before its end (its time was up: --seconds), and
    # what it had proven then (Proven), else None.
    stopped: "Proven | None" = None
    # A walk's violation shrunk (shrink.py): the states of the walk's own behavior, and
    # the replays from launch the shrinking took; None when not shrunk.
    shrunk_from: int | None = None
    shrink_replays: int = 0
    shrink_stopped: bool = False      # its time (--seconds) was up before it was minimal
    # A walk from a breadth-first search's frontier (--seconds): the depth of the world
    # it started from; with no violation, the seed of the walks (stats.walks: how many).
    walk_from: int | None = None
    walk_seed: int | None = None
    swarm: bool = False               # found by a swarm walk (simulate.Swarm)


@dataclass(frozen=True)
class Proven:
    """How far a breadth-first search that stopped early got: every world to depth
    `complete` was found and checked, and `expanded` of the `at_next` worlds at that
    depth had their steps taken (so depth complete + 1 is that much done); `per_depth`
    counts the distinct worlds found at each depth (1 the initial one). `why` names
    what stopped it."""
    why: str
    complete: int
    expanded: int
    at_next: int
    per_depth: tuple[int, ...]

    def lines(self) -> list[str]:
        share = f" ({self.expanded / self.at_next:.0%})" if self.at_next else ""
        return [f"The search stopped ({self.why}): every world to depth {self.complete} "
                f"was checked, and {self.expanded} of the {self.at_next} worlds at depth "
                f"{self.complete}{share} were expanded toward depth {self.complete + 1}.",
                "Distinct states per depth: "
                + ", ".join(f"{d}: {n}" for d, n in enumerate(self.per_depth, 1)) + "."]

    def data(self) -> dict:
        return {"why": self.why, "complete_depth": self.complete,
                "expanded_at_complete_depth": self.expanded,
                "worlds_at_complete_depth": self.at_next, "per_depth": list(self.per_depth)}


class EngineLimit(Exception):
    """A cap was exceeded (e.g. --max-states): never a silent truncation."""


class Reporter(Protocol):
    def initial(self, stats: Stats) -> None: ...
    def progress(self, stats: Stats) -> None: ...


class NullReporter:
    def initial(self, stats: Stats) -> None:
        pass

    def progress(self, stats: Stats) -> None:
        pass


class Observer(Protocol):
    """What a search shows of the state graph as it builds it, in this process and in
    the order of a one-worker search, for coverage (cmc/coverage.py): every distinct
    world when it is found (its view and depth; None where a walk does not count
    depth), every step taken (the action, and the worlds before and after), every world
    found quiescent. Called only after the properties checked there held. The views are
    as opaque to the engine as ever: it passes them on."""
    def world(self, view: dict, depth: int | None) -> None: ...
    def step(self, action: Action, view: dict, next_view: dict) -> None: ...
    def quiescent(self, view: dict) -> None: ...


class NullObserver:
    def world(self, view: dict, depth: int | None) -> None:
        pass

    def step(self, action: Action, view: dict, next_view: dict) -> None:
        pass

    def quiescent(self, view: dict) -> None:
        pass
