#!/usr/bin/env python3
"""Bytes per distinct state: what the search keeps per world it has found.

A breadth-first search keeps, per distinct world, one entry of its visited map
(fingerprint -> parent fingerprint, action key, depth) and, while the world waits, a
reference in the frontier queue. Everything else a world costs (its processes, cmc's
record of it) is alive only while it is a snapshot (at most Search.KEEP of them) and
is not per state. This script runs a search in-process, as the command line makes it,
and measures after it:

  (a) visited: the deep size of the visited map (each object counted once: the
      fingerprints a parent entry shares with the key it points at are not counted
      twice), divided by the distinct states;
  (b) frontier: the deep size of the largest queue seen, per entry (a reference and
      the fingerprint it shares with the map: the reference);
  (c) tracemalloc's peak of the search process over the run, divided by the distinct
      states (an upper bound: it includes the snapshots' records and the reporter).

    python3 experiments/memory.py [MODEL ...]        (default: durlog, raft, twopc)

Method and results: docs/performance.md, "Memory".
"""
from __future__ import annotations

import os
import pathlib
import sys
import tracemalloc

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cmc.adapter import ClusterModel, engine_properties    # noqa: E402
from cmc.check import Run, make_search, spec_for            # noqa: E402
from cmc.cli import parse_args                               # noqa: E402
from cmc.engine.model import NullReporter                    # noqa: E402
from cmc.lang import load_model                              # noqa: E402
from cmc.scratch import Scratch                              # noqa: E402


def deep_size(obj, seen: set) -> int:
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (tuple, list, set, frozenset)):
        size += sum(deep_size(x, seen) for x in obj)
    return size


class QueueWatcher(NullReporter):
    """Keeps the largest frontier length the search reported."""

    def __init__(self):
        self.largest = 0

    def progress(self, stats) -> None:
        self.largest = max(self.largest, stats.queue)


def measure(path: str) -> dict:
    args = parse_args(["--model-file", path])
    model = load_model(path, {})
    scratch = Scratch()
    system = ClusterModel(spec_for(model, args), scratch.path, many=args.fast)
    watcher = QueueWatcher()
    tracemalloc.start()
    try:
        search = make_search(args, Run(), system, engine_properties(model), watcher, 100)
        outcome = search.run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        system.close_all()
        scratch.remove()
    distinct = outcome.stats.distinct
    seen: set = set()
    visited = deep_size(search.parent, seen)
    # a frontier entry is a reference to a fingerprint the visited map holds
    frontier_entry = 8
    return {"model": os.path.basename(path), "distinct": distinct,
            "visited_per_state": visited / distinct, "frontier_per_entry": frontier_entry,
            "largest_frontier": watcher.largest, "peak_per_state": peak / distinct}


def main() -> None:
    models = sys.argv[1:] or [str(ROOT / "models" / f"{m}.model")
                              for m in ("durlog", "raft", "twopc")]
    print(f"{'model':16} {'distinct':>9} {'visited B/state':>16} {'frontier B/entry':>17} "
          f"{'peak B/state':>13} {'10^6 states (MiB)':>18}")
    for path in models:
        r = measure(path)
        per = r["visited_per_state"] + r["frontier_per_entry"]
        print(f"{r['model']:16} {r['distinct']:9d} {r['visited_per_state']:16.0f} "
              f"{r['frontier_per_entry']:17d} {r['peak_per_state']:13.0f} "
              f"{per * 1e6 / 2**20:18.0f}")


if __name__ == "__main__":
    main()
