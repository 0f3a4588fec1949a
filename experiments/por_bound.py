"""How far sleep sets can go on a model: the full breadth-first search's state graph
(every world and every transition, by fingerprint), then the sleep-set search run
again on that graph with an oracle for commuting -- two actions enabled in a world
commute there when each stays enabled after the other and both orders reach the same
world -- against what --por's observed footprints give (docs/performance.md, "Partial-
order reduction").

    python3 experiments/por_bound.py models/raft.model [more models] [-D name=value ...]

Prints, per model: the full search's transitions, the sleep-set search's with the
oracle (the most sleep sets can skip in this order of actions), and --por's. With
--pairs, also every pair of actions --por compared in a world: how many its footprints
took as commuting where the oracle says they do not (a footprint that misses something:
must be 0), and how many the oracle has commuting where the footprints do not, by the
parts both footprints hold.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cmc.engine import bfs  # noqa: E402


def graph(model: str, defines: list[str]) -> tuple[bytes, dict]:
    """The full search's graph: initial world, and world -> [(action key, world)] in
    the order the search took them."""
    initial, edges, _, _ = recorded(model, defines)
    return initial, edges


def recorded(model: str, defines: list[str]):
    """The full search's graph as `graph` gives it, with each world's view (what its
    properties read) and the search itself: (initial, edges, views, search)."""
    edges: dict[bytes, list] = {}
    views: dict[bytes, dict] = {}
    first: list = []
    merge = bfs.Full.merge_steps

    def recording(self, fp, view, depth, actions, fair_key, successors, queue):
        if not first:                   # self: the search
            first.append((next(iter(self.parent)), self))
        views.setdefault(fp, view)
        out = edges.setdefault(fp, [])

        def seen():
            for item in successors:
                out.append((item[0], item[1]))
                views.setdefault(item[1], item[2])
                yield item
        return merge(self, fp, view, depth, actions, fair_key, seen(), queue)
    bfs.Full.merge_steps = staticmethod(recording)
    try:
        quietly(["--model-file", model, "--no-pin"], defines)
    finally:
        bfs.Full.merge_steps = staticmethod(merge)
    initial, search = first[0]
    return initial, edges, views, search


def quietly(argv: list[str], defines: list[str]) -> None:
    """cmc's command line in this process (so that a test of it can look inside), its
    output dropped."""
    from cmc.cli import main
    with open(os.devnull, "w") as quiet:
        out, sys.stdout = sys.stdout, quiet
        try:
            main(argv + [a for d in defines for a in ("-D", d)])
        except SystemExit:
            pass
        finally:
            sys.stdout = out


def oracle_sleep_sets(initial: bytes, edges: dict) -> int:
    """Transitions the sleep-set search takes on this graph with the oracle."""
    succ = {fp: dict(out) for fp, out in edges.items()}

    def commute(s, a, b):
        sa, sb = succ[s].get(a), succ[s].get(b)
        if sa is None or sb is None:
            return False
        ab, ba = succ.get(sa, {}).get(b), succ.get(sb, {}).get(a)
        return ab is not None and ab == ba
    asleep = {initial: frozenset()}
    expanded, again = set(), {}
    queue = collections.deque([initial])
    taken = 0
    while queue:
        s = queue.popleft()
        first = s not in expanded
        only = None if first else again.pop(s, set())
        expanded.add(s)
        base = asleep[s]
        order = [k for k, _ in edges.get(s, [])]
        todo = [k for k in order if (k not in base if first else k in only)]
        done = []
        for k in todo:
            t = succ[s][k]
            taken += 1
            z = frozenset(x for x in [*base, *done] if x != k and commute(s, x, k))
            done.append(k)
            if t not in asleep:
                asleep[t] = z
                queue.append(t)
            else:
                missing = asleep[t] - z
                if missing:
                    asleep[t] = asleep[t] & z
                    if t in expanded:
                        if t in again:
                            again[t] |= missing
                        else:
                            again[t] = set(missing)
                            queue.append(t)
    return taken


def por(model: str, defines: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        cmd = [sys.executable, "-m", "cmc", "--model-file", model, "--por", "--json", report,
               "--no-pin"] + [a for d in defines for a in ("-D", d)]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
        with open(report) as f:
            return json.load(f)


def pairs(model: str, defines: list[str], edges: dict) -> tuple[int, collections.Counter]:
    """--por run in this process, each pair it compared checked against the oracle:
    (pairs taken as commuting that do not, the pairs missed by what the footprints share)."""
    from cmc.engine import por as por_module
    succ = {fp: dict(out) for fp, out in edges.items()}

    def commute(s, a, b):
        sa, sb = succ.get(s, {}).get(a), succ.get(s, {}).get(b)
        if sa is None or sb is None:
            return False
        ab, ba = succ.get(sa, {}).get(b), succ.get(sb, {}).get(a)
        return ab is not None and ab == ba
    wrong, missed = [0], collections.Counter()
    merge = por_module.SleepSets.merge_reduced

    def watched(self, search, fp, view, depth, actions, base, first, successors, queue,
                checked=frozenset()):
        done = []

        def each():
            for item in successors:
                key, step = item[0], self.steps[item[0]]
                for other, f in [*base.items(), *done]:
                    if other == key or other not in succ.get(fp, {}):
                        continue
                    if f.commutes(step) and not commute(fp, other, key):
                        wrong[0] += 1
                    elif commute(fp, other, key) and not f.commutes(step):
                        shared = sorted(p.split(" ")[0] for p in f.parts & step.parts)
                        missed[" ".join(sorted(set(shared))) or "clock"] += 1
                done.append((key, step))
                yield item
        return merge(self, search, fp, view, depth, actions, base, first, each(), queue,
                     checked)
    por_module.SleepSets.merge_reduced = watched
    try:
        quietly(["--model-file", model, "--por", "--no-pin"], defines)
    finally:
        por_module.SleepSets.merge_reduced = merge
    return wrong[0], missed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("-D", dest="defines", action="append", default=[])
    p.add_argument("--pairs", action="store_true",
                   help="also check each pair --por compared against the oracle")
    args = p.parse_args()
    print(f"{'model':<28} {'distinct':>8} {'full':>7} {'oracle':>7} {'--por':>7} "
          f"{'full/oracle':>11} {'full/--por':>10}")
    for model in args.models:
        initial, edges = graph(model, args.defines)
        full = sum(len(v) for v in edges.values())
        best = oracle_sleep_sets(initial, edges)
        got = por(model, args.defines)
        reduced = got["counts"]["generated"] - 1
        distinct = got["counts"]["distinct"]
        print(f"{os.path.basename(model):<28} {distinct:>8} {full:>7} {best:>7} {reduced:>7} "
              f"{full / best:>11.2f} {full / reduced:>10.2f}")
        if args.pairs:
            wrong, missed = pairs(model, args.defines, edges)
            print(f"  taken as commuting, and not: {wrong}; commuting, missed (by what both "
                  f"touched): {dict(missed.most_common())}")


if __name__ == "__main__":
    main()
