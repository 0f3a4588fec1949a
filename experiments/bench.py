#!/usr/bin/env python3
"""Where the time goes: cmc against the floors it cannot go below, side by side.

For each model (default: every models/*.model, and experiments/etcd/copy.model where
etcd is installed), in one run on this machine:
  (a) launch floor: fork+exec of each node binary, natively, until it writes its first
      state line on fd 3, then SIGKILL (experiments/floors.c); summed over the nodes;
  (b) notification floor: one seccomp user-notification round trip answered by C;
  (c) cmc: breadth-first check of the model, four ways: replay and --fast, each with
      1 and 2 workers (the same counts, asserted). States generated per second for
      each; wall time per generated state over the launch floor; for the 1-worker
      replay run also per emulated call (notification) over the notification floor.
      A node that writes no state line on fd 3 (prefork, etcd) has no launch floor by
      this measure: its floor columns say nan.
The floors and every cmc search run pinned to one CPU each, as cmc runs by default
(--no-pin measures them unpinned). --rounds R runs each model's searches R times,
the ways in turn within a round, and keeps each way's fastest. For --fast with one
worker it also prints the wall time per distinct state, its ratio to the --base
model's (default durlog, when measured in the same run), and why worlds were replayed
rather than copied (the JSON report's `replayed`). With --por, also a --fast run of one
worker with --por (the same distinct count, depth and verdict, asserted), and a table of
the generated states and the wall time per distinct state over the launch floor, with
and without it. Method and results:
docs/performance.md.

    python3 experiments/bench.py [--no-pin] [--no-workers] [--no-build] [--rounds R]
                                 [--max-memory SIZE] [--base NAME] [--por] [MODEL ...]
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

from cmc.adapter import ClusterModel, engine_properties    # noqa: E402
from cmc.check import Run, make_search, searched, spec_for  # noqa: E402
from cmc.machines import pin_cpu                     # noqa: E402
from cmc.cli import parse_args                               # noqa: E402
from cmc.engine.model import NullReporter           # noqa: E402
from cmc.kernel.proc.scheduler import COUNTERS             # noqa: E402
from cmc.lang import load_model                      # noqa: E402
from cmc.resources import Bound                      # noqa: E402
from cmc.scratch import Scratch                      # noqa: E402


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


def run_cmc(path: str, workers: int = 1, fast: bool = False, pin: bool = True,
            max_memory: str | None = None, por: bool = False) -> dict:
    """One search, made exactly as the command line makes it (pinning included; with
    `max_memory`, under cmc's memory bound, as `--max-memory` puts it)."""
    argv = ["--model-file", path, "--workers", str(workers)] + (["--fast"] if fast else ["--no-fast"]) \
        + ([] if pin else ["--no-pin"]) + (["--max-memory", max_memory] if max_memory else []) \
        + (["--por"] if por else [])
    args = parse_args(argv)
    model = load_model(path, {})
    scratch = Scratch()                 # where cmc itself would work
    system = ClusterModel(spec_for(model, args), scratch.path, many=fast)
    bound = Bound(args.max_memory, scratch.path) if max_memory else None
    before = dict(COUNTERS)
    affinity = os.sched_getaffinity(0)
    t0 = time.perf_counter()
    try:
        if bound is not None:
            bound.start()
        search = make_search(args, Run(), system, engine_properties(model), NullReporter(), 100)
        if pin and workers == 1:
            pin_cpu()               # as cmc's check() does
        outcome = searched(search, bound) if bound is not None else search.run()
    finally:
        if bound is not None:
            bound.stop()
        system.close_all()
        scratch.remove()
        os.sched_setaffinity(0, affinity)
    wall = time.perf_counter() - t0
    st = outcome.stats
    return {"verdict": outcome.verdict, "generated": st.generated, "distinct": st.distinct,
            "depth": st.depth, "wall": wall, "copies": st.copies, "replayed": dict(st.replayed),
            "launches": COUNTERS["launches"] - before["launches"],
            "zygote starts": COUNTERS["zygote starts"] - before["zygote starts"],
            "notifications": COUNTERS["notifications"] - before["notifications"]}


def default_models() -> list[str]:
    models = sorted(str(p) for p in (ROOT / "models").glob("*.model"))
    if shutil.which("etcd"):            # Debian's etcd-server: one member, copied or not
        models.append(str(ROOT / "experiments" / "etcd" / "copy.model"))
    return models


def label(path: str) -> str:
    """models/NAME.model is NAME; any other model is DIR/NAME (etcd/copy)."""
    p = pathlib.Path(path)
    return p.stem if p.parent.name == "models" else f"{p.parent.name}/{p.stem}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--launch-samples", type=int, default=100)
    ap.add_argument("--no-workers", action="store_true", help="skip the 2-worker runs")
    ap.add_argument("--no-pin", action="store_true", help="run everything unpinned")
    ap.add_argument("--no-build", action="store_true",
                    help="the demos are built: do not run make first")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run each search R times, the ways in turn; keep each way's fastest")
    ap.add_argument("--max-memory", metavar="SIZE",
                    help="each search under cmc's memory bound (as cmc --max-memory SIZE)")
    ap.add_argument("--por", action="store_true",
                    help="also run --fast with one worker and --por, and compare the wall "
                         "time per distinct state with and without it, over the launch floor")
    ap.add_argument("--base", default="durlog",
                    help="the model whose copied time per distinct state the others are "
                         "compared to (default durlog)")
    args = ap.parse_args()
    models = args.models or default_models()
    if not args.no_build:
        subprocess.run(["make", "-s", "-C", str(ROOT / "demo")], check=True)
    pin = not args.no_pin
    tmp = tempfile.mkdtemp(prefix="cmc-floors-")
    affinity = os.sched_getaffinity(0)
    try:
        floors = floors_binary(tmp)
        if pin:                     # the floors on one CPU, as cmc runs
            os.sched_setaffinity(0, {min(affinity)})
        notify_us = float(subprocess.run([floors, "notify", "20000"], stdout=subprocess.PIPE,
                                         text=True, check=True).stdout)
        print(f"notification floor: {notify_us:.1f} us per round trip (C supervisor)"
              f"{', pinned to one CPU' if pin else ''}")
        print("st/s: states generated per second; x/floor: wall time per generated state over "
              "one native launch of the cluster")
        width = max(8, *(len(label(m)) for m in models))
        header = (f"{'model':<{width}} {'gen':>5} {'dist':>5} {'depth':>5} {'floor ms':>8} | "
                  f"{'replay w1':>9} {'w2':>7} {'fast w1':>8} {'w2':>7} | "
                  f"{'fast/rep':>8} {'rep/floor':>9} {'fast/floor':>10} | "
                  f"{'calls/st':>8} {'call/notif':>10} {'copied':>6}")
        print(header)
        per_world = {}                  # --fast w1: ms per distinct state, by label
        calls = {}                      # --fast w1: notifications per generated state
        why = {}                        # --fast w1: successors replayed, by reason
        starts = {}                     # (--fast w1 launches, its zygote starts, replay's)
        reduced = {}                    # --por: (floor ms, full run, --por run), by label
        for path in models:
            model = load_model(path, {})
            floor = launch_floor_us(floors, model, args.launch_samples) / 1000
            os.sched_setaffinity(0, affinity)
            runs = {}
            porrun = None
            for _ in range(args.rounds):
                if args.por:                  # the reduced search, in turn with the others
                    one = run_cmc(path, 1, True, pin, args.max_memory, por=True)
                    if porrun is not None:
                        assert (one["generated"], one["distinct"]) == \
                            (porrun["generated"], porrun["distinct"]), (path, one, porrun)
                    if porrun is None or one["wall"] < porrun["wall"]:
                        porrun = one
                for fast in (False, True):
                    for workers in ((1,) if args.no_workers else (1, 2)):
                        one = run_cmc(path, workers, fast, pin, args.max_memory)
                        best = runs.get((fast, workers))
                        r = best or one
                        assert (one["verdict"], one["generated"], one["distinct"],
                                one["depth"]) == (r["verdict"], r["generated"], r["distinct"],
                                                  r["depth"]), (path, one, r)
                        if best is None or one["wall"] < best["wall"]:
                            runs[fast, workers] = one
            r = runs[False, 1]
            for other in runs.values():
                assert (other["verdict"], other["generated"], other["distinct"],
                        other["depth"]) == (r["verdict"], r["generated"], r["distinct"],
                                            r["depth"]), (path, other, r)
            rate = {k: v["generated"] / v["wall"] for k, v in runs.items()}
            nan = float("nan")
            per_state = {k: v["wall"] / v["generated"] * 1000 for k, v in runs.items()}
            per_call = r["wall"] / max(r["notifications"], 1) * 1e6
            name = label(path)
            per_world[name] = runs[True, 1]["wall"] / r["distinct"] * 1000
            why[name] = runs[True, 1]["replayed"]
            starts[name] = (runs[True, 1]["launches"], runs[True, 1]["zygote starts"],
                            r["launches"])
            if porrun is not None:
                assert (porrun["verdict"], porrun["distinct"], porrun["depth"]) == \
                    (r["verdict"], r["distinct"], r["depth"]), (path, porrun, r)
                reduced[name] = (floor, runs[True, 1], porrun)
            calls[name] = runs[True, 1]["notifications"] / r["generated"]
            print(f"{name:<{width}} {r['generated']:>5} {r['distinct']:>5} "
                  f"{r['depth']:>5} {floor:>8.2f} | "
                  f"{rate[False, 1]:>9.1f} {rate.get((False, 2), nan):>7.1f} "
                  f"{rate[True, 1]:>8.1f} {rate.get((True, 2), nan):>7.1f} | "
                  f"{rate[True, 1] / rate[False, 1]:>8.2f} "
                  f"{per_state[False, 1] / floor:>9.2f} {per_state[True, 1] / floor:>10.2f} | "
                  f"{r['notifications'] / r['generated']:>8.1f} {per_call / notify_us:>10.1f} "
                  f"{runs[True, 1]['copies'] / r['generated']:>6.0%}")
            sys.stdout.flush()
        print(f"\n--fast, one worker: ms/dist wall time per distinct state, over {args.base}'s "
              f"(nan: not measured); calls/st notifications per generated state; launch "
              f"and zyg: nodes launched and started from a zygote, rep: launched by the "
              f"replaying search; replayed: successors replayed rather than copied, by reason")
        print(f"{'model':<{width}} {'ms/dist':>8} {'over':>6} {'calls/st':>8} {'launch':>6} "
              f"{'zyg':>5} {'rep':>6}  replayed")
        nan = float("nan")
        for name, ms in per_world.items():
            print(f"{name:<{width}} {ms:>8.2f} {ms / per_world.get(args.base, nan):>6.2f} "
                  f"{calls[name]:>8.1f} {starts[name][0]:>6} {starts[name][1]:>5} "
                  f"{starts[name][2]:>6}  "
                  f"{', '.join(f'{k}: {v}' for k, v in why[name].items()) or '-'}")
        if reduced:
            print("\n--fast, one worker, without and with --por: generated states, and wall "
                  "time per distinct state over one native launch of the cluster")
            print(f"{'model':<{width}} {'dist':>5} {'gen':>6} {'gen por':>7} {'fewer':>6} | "
                  f"{'dist/floor':>10} {'por':>6} {'speed':>6}")
            for name, (floor, full, red) in reduced.items():
                a = full["wall"] / full["distinct"] * 1000 / floor
                b = red["wall"] / red["distinct"] * 1000 / floor
                print(f"{name:<{width}} {full['distinct']:>5} {full['generated']:>6} "
                      f"{red['generated']:>7} {full['generated'] / red['generated']:>6.2f} | "
                      f"{a:>10.2f} {b:>6.2f} {full['wall'] / red['wall']:>6.2f}")
    finally:
        os.sched_setaffinity(0, affinity)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
