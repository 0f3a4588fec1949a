#!/usr/bin/env python3
"""A search of a million distinct states, to see what the search itself keeps.

The engine is given a model of its own protocol (cmc/engine/model.py) that costs
almost nothing per step: C counters, each from 0 to N-1, and one action per counter
that is below N-1 (add one). Its worlds are the N**C tuples; a world has a
16-byte fingerprint, as a cluster's has, and keys like a cluster's (a tuple of a
string and ints). No process runs: what grows with the states is the search's own
record (the visited map, the frontier) and whatever it keeps per world, which is
what this measures. The default, C=5 and N=16, has 16**5 = 1 048 576 distinct
worlds, 1 + 5 * 16**4 * 15 = 4 915 201 generated, depth 5 * 15 + 1 = 76.

The search is the command line's breadth-first search with copying (the default):
worlds kept as snapshots up to Search.KEEP, the rest reached by replay, as for
programs. Printed: the counts, the wall time and the peak resident set size of
the process (getrusage), and that over the distinct states.

    python3 experiments/million.py [C N]

test/test_scale.py runs it (slow) and requires the counts exactly and a peak
under 2 GiB. Method and results: docs/performance.md, "Memory".
"""
from __future__ import annotations

import pathlib
import resource
import sys
import time

import xxhash

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cmc.engine.bfs import BreadthFirst                              # noqa: E402
from cmc.engine.search import Search                                # noqa: E402
from cmc.engine.worlds import Copying                               # noqa: E402
from cmc.engine.model import Action, ActionKind, NullReporter, Property  # noqa: E402


class Counters:
    """A world of the model: the counters' values."""

    is_copy = False

    def __init__(self, values: tuple, top: int):
        self.values = values
        self.top = top

    def actions(self) -> list[Action]:
        return [Action(("DELIVER", i), ActionKind.DELIVER, f"inc {i}")
                for i, v in enumerate(self.values) if v < self.top]

    def apply(self, key: tuple) -> Action:
        i = key[1]
        v = list(self.values)
        v[i] += 1
        self.values = tuple(v)
        return Action(key, ActionKind.DELIVER, f"inc {i}")

    def fingerprint(self) -> bytes:
        return xxhash.xxh3_128_digest(bytes(self.values))

    def view(self) -> dict:
        return {"counters": list(self.values)}

    def parts(self) -> list:
        return [("", {"counters": list(self.values)})]

    def fork(self) -> "Counters":
        twin = Counters(self.values, self.top)
        twin.is_copy = True
        return twin

    def close(self) -> None:
        pass


class CountersModel:
    def __init__(self, count: int, size: int):
        self.count = count
        self.top = size - 1

    def fresh(self, shift: int = 0) -> Counters:
        return Counters((0,) * self.count, self.top)


def run(count: int, size: int) -> dict:
    # every counter stays in range: an invariant checked at every world, as a model's
    prop = Property("invariant", "in_range",
                    lambda view, _: all(0 <= v < size for v in view["counters"]))
    search = Search(CountersModel(count, size), [prop], NullReporter(), BreadthFirst(),
                    Copying())
    t0 = time.perf_counter()
    outcome = search.run()
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    st = outcome.stats
    return {"verdict": outcome.verdict, "generated": st.generated, "distinct": st.distinct,
            "depth": st.depth, "wall": wall, "peak": peak}


def main() -> None:
    count, size = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (5, 16)
    r = run(count, size)
    print(f"{r['verdict']}: {r['generated']} states generated, {r['distinct']} distinct, "
          f"depth {r['depth']}; {r['wall']:.1f} s; peak RSS {r['peak'] / 2**20:.0f} MiB, "
          f"{r['peak'] / r['distinct']:.0f} B per distinct state")


if __name__ == "__main__":
    main()
