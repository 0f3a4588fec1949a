#!/usr/bin/env python3
"""Where the time goes: cmc against the floors it cannot go below, side by side.

For each model (default: every models/*.model), in one run on this machine:
  (a) launch floor: fork+exec of each node binary, natively, until it writes its first
      state line on fd 3, then SIGKILL (experiments/floors.c); summed over the nodes;
  (b) notification floor: one seccomp user-notification round trip answered by C;
  (c) cmc: breadth-first check of the model; wall time per generated state and per
      emulated call (notification), launches per generated state.
It prints the ratios (c)/(a) and (c)/(b). Method and results: docs/performance.md.

    python3 experiments/bench.py [--no-workers] [MODEL ...]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cmc.adapter import ClusterModel               # noqa: E402
from cmc.cli import cluster_spec, engine_properties, parse_args  # noqa: E402
from cmc.engine.bfs import BreadthFirst             # noqa: E402
from cmc.engine.model import NullReporter           # noqa: E402
from cmc.engine.parallel import ParallelBreadthFirst  # noqa: E402
from cmc.kernel.node import COUNTERS                 # noqa: E402
from cmc.lang import load_model                      # noqa: E402


def floors_binary(tmp: str) -> str:
    out = os.path.join(tmp, "floors")
    subprocess.run(["cc", "-O2", "-o", out, str(ROOT / "experiments" / "floors.c")], check=True)
    return out


def launch_floor_us(floors: str, model, n: int) -> float:
    total = 0.0
    for node in model.nodes:
        cwd = tempfile.mkdtemp(prefix="cmc-floor-")     # the node may create files
        try:
            r = subprocess.run([floors, "launch", str(n), *node.argv], cwd=cwd,
                               stdout=subprocess.PIPE, text=True, check=True, timeout=300)
        finally:
            shutil.rmtree(cwd, ignore_errors=True)
        total += float(r.stdout)
    return total


def run_cmc(path: str, workers: int = 1) -> dict:
    args = parse_args(["--model-file", path])
    model = load_model(path, {})
    workroot = tempfile.mkdtemp(prefix="cmc-bench-")
    spec = cluster_spec(model, args)
    system = ClusterModel(spec, workroot)
    before = dict(COUNTERS)
    t0 = time.perf_counter()
    try:
        if workers == 1:
            search = BreadthFirst(system, engine_properties(model), NullReporter())
        else:
            search = ParallelBreadthFirst(
                system, engine_properties(model), NullReporter(), workers=workers,
                worker_model=lambda i: ClusterModel(spec, os.path.join(workroot, f"w{i}")))
        outcome = search.run()
    finally:
        system.close_all()
        shutil.rmtree(workroot, ignore_errors=True)
    wall = time.perf_counter() - t0
    st = outcome.stats
    return {"verdict": outcome.verdict, "generated": st.generated, "distinct": st.distinct,
            "depth": st.depth, "wall": wall,
            "launches": COUNTERS["launches"] - before["launches"],
            "notifications": COUNTERS["notifications"] - before["notifications"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--launch-samples", type=int, default=100)
    ap.add_argument("--no-workers", action="store_true", help="skip the 2-worker runs")
    args = ap.parse_args()
    models = args.models or sorted(str(p) for p in (ROOT / "models").glob("*.model"))
    subprocess.run(["make", "-s", "-C", str(ROOT / "demo")], check=True)
    tmp = tempfile.mkdtemp(prefix="cmc-floors-")
    try:
        floors = floors_binary(tmp)
        notify_us = float(subprocess.run([floors, "notify", "20000"], stdout=subprocess.PIPE,
                                         text=True, check=True).stdout)
        print(f"notification floor: {notify_us:.1f} us per round trip (C supervisor)")
        print("(counters and calls are from the 1-worker run; --fast is not implemented)")
        header = (f"{'model':<10} {'gen':>6} {'dist':>5} {'depth':>5} {'st/s w1':>8} "
                  f"{'st/s w2':>8} {'w2/w1':>6} {'ms/state':>8} {'calls/st':>8} "
                  f"{'us/call':>7} {'floor ms':>8} {'st/floor':>8} {'call/notif':>10}")
        print(header)
        for path in models:
            model = load_model(path, {})
            floor = launch_floor_us(floors, model, args.launch_samples) / 1000
            r = run_cmc(path, workers=1)
            r2 = run_cmc(path, workers=2) if not args.no_workers else None
            assert r2 is None or (r2["generated"], r2["distinct"]) == (r["generated"], r["distinct"])
            rate1 = r["generated"] / r["wall"]
            rate2 = r2["generated"] / r2["wall"] if r2 else float("nan")
            per_state = r["wall"] / r["generated"] * 1000
            per_call = r["wall"] / max(r["notifications"], 1) * 1e6
            print(f"{pathlib.Path(path).stem:<10} {r['generated']:>6} {r['distinct']:>5} "
                  f"{r['depth']:>5} {rate1:>8.1f} {rate2:>8.1f} {rate2 / rate1:>6.2f} "
                  f"{per_state:>8.2f} {r['notifications'] / r['generated']:>8.1f} "
                  f"{per_call:>7.1f} {floor:>8.2f} {per_state / floor:>8.1f} "
                  f"{per_call / notify_us:>10.1f}")
            sys.stdout.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
