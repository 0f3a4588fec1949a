"""What the engine needs from a system, and what it reports back.

The engine sees a system only through `Model.fresh()` (a new instance at its
initial world) and the `System` protocol below. It never prints: it calls a
`Reporter`. It imports nothing else of cmc (test/test_layers.py checks this).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol


class System(Protocol):
    def actions(self) -> list: ...            # objects with .key (tuple) and .label (str)
    def apply(self, key: tuple) -> str: ...   # returns the action's label
    def fingerprint(self) -> bytes: ...
    def view(self) -> dict: ...
    def close(self) -> None: ...


class Model(Protocol):
    def fresh(self) -> System: ...            # launched: the initial world


@dataclass(frozen=True)
class Property:
    kind: str               # invariant | witness | quiescent | action | eventually
    name: str
    check: Callable         # (view, next_view | None) -> bool


@dataclass
class Step:
    """One state of a behavior: the action that led to it (None: initial) and the world."""
    label: str | None
    view: dict
    key: tuple | None = None


@dataclass
class Stats:
    generated: int = 0
    distinct: int = 0
    queue: int = 0
    depth: int = 0


@dataclass
class Outcome:
    verdict: str                      # "ok" | "violated"
    stats: Stats
    prop: Property | None = None
    trace: list[Step] = field(default_factory=list)


class Reporter(Protocol):
    def initial(self, stats: Stats) -> None: ...
    def progress(self, stats: Stats) -> None: ...


class NullReporter:
    def initial(self, stats: Stats) -> None:
        pass

    def progress(self, stats: Stats) -> None:
        pass
