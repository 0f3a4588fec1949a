#!/usr/bin/env python3
"""What Ray costs, and where the merge saturates: `--ray local --workers 2` beside
`--workers 2`, side by side in one run on this machine.

For each model, ROUNDS rounds; in each round the ways run one after another in turn
(so that a change in the machine's load falls on all of them), each through the
command line with `--json`, and the same counts are asserted. Ways:
  w2        --workers 2 (worker processes, pinned to a CPU each: the default)
  w2-nopin  --workers 2 --no-pin (unpinned, as Ray's actors are)
  ray       --ray local --workers 2 (a Ray instance started for the run, two actors)
Per way, the median over the rounds of: the whole run's wall time; the search's
(without starting the workers); the head's CPU time per generated state (the merge
and the head's side of the transport); the workers' busy time per state (time spent
in jobs, summed over workers). Ratios are of the medians: ray over w2-nopin (what
Ray's transport costs) and over w2 (what a user sees).

Where the merge saturates: N workers make N / busy states per second, and the head
spends head_cpu on each, so the head is a whole CPU at N* = busy / head_cpu workers;
past that, more workers add nothing. Printed per way.

    python3 experiments/ray_overhead.py [--rounds R] [MODEL[:crash=C] ...]

Needs Ray (pip install 'cmc[ray]'). Method and results: docs/performance.md,
"What Ray costs".
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
WAYS = {"w2": ["--workers", "2"], "w2-nopin": ["--workers", "2", "--no-pin"],
        "ray": ["--ray", "local", "--workers", "2"]}
DEFAULT = ["durlog", "raft:crash=2"]


def model_file(spec: str, folder: str) -> tuple[str, str]:
    """The model file for `name[:crash=C]` (a copy with its crash budget changed)."""
    name, _, change = spec.partition(":")
    path = ROOT / "models" / f"{name}.model"
    if not change:
        return spec, str(path)
    crash = int(change.split("=")[1])
    text = re.sub(r"^budget crash \d+", f"budget crash {crash}", path.read_text(),
                  flags=re.M)
    text = text.replace("../demo", f"{ROOT}/demo")
    out = os.path.join(folder, f"{name}-crash{crash}.model")
    with open(out, "w") as f:
        f.write(text)
    return spec, out


def one(path: str, way: list[str], folder: str) -> dict:
    report = os.path.join(folder, "r.json")
    r = subprocess.run([sys.executable, "-m", "cmc", "--model-file", path, "--json", report,
                        *way], cwd=ROOT / "models", stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"{path} {' '.join(way)}: exit {r.returncode}\n{r.stdout[-1500:]}"
                 f"{r.stderr[-1500:]}")
    data = json.load(open(report))
    w = data["workers"]
    gen = data["counts"]["generated"]
    busy = sum(m["busy_seconds"] for m in w["machines"])
    return {"counts": (gen, data["counts"]["distinct"], data["depth"]),
            "wall": data["elapsed_seconds"], "search": w["search_seconds"],
            "start": w["start_seconds"], "head_us": 1e6 * w["head_cpu_seconds"] / gen,
            "busy_ms": 1e3 * busy / gen}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=DEFAULT)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"{args.rounds} rounds, ways in turn in each; medians. wall: the whole run; "
          "search: without starting the workers (s)")
    print("head: the head's CPU per state (us); busy: the workers' time in jobs per state "
          "(ms); N*: workers at which the head is a whole CPU (busy / head)")
    head = (f"{'model':14} {'gen':>6} | {'way':8} {'wall':>6} {'search':>6} {'start':>5} "
            f"{'head':>6} {'busy':>5} {'N*':>5}")
    with tempfile.TemporaryDirectory(prefix="cmc-rayb-") as folder:
        for spec in args.models:
            name, path = model_file(spec, folder)
            runs: dict[str, list[dict]] = {w: [] for w in WAYS}
            for _ in range(args.rounds):
                for way, flags in WAYS.items():
                    runs[way].append(one(path, flags, folder))
            counts = {r["counts"] for rs in runs.values() for r in rs}
            assert len(counts) == 1, f"{name}: the ways disagree: {counts}"
            gen = counts.pop()[0]
            print(head)
            med = {way: {k: statistics.median(r[k] for r in rs)
                         for k in ("wall", "search", "start", "head_us", "busy_ms")}
                   for way, rs in runs.items()}
            for way, m in med.items():
                print(f"{name:14} {gen:>6} | {way:8} {m['wall']:6.1f} {m['search']:6.1f} "
                      f"{m['start']:5.1f} {m['head_us']:6.0f} {m['busy_ms']:5.2f} "
                      f"{1e3 * m['busy_ms'] / m['head_us']:5.1f}")
            ray, nopin, w2 = med["ray"], med["w2-nopin"], med["w2"]
            print(f"{name:14} ray/w2-nopin: wall {ray['wall'] / nopin['wall']:.2f}, search "
                  f"{ray['search'] / nopin['search']:.2f}; ray/w2: wall "
                  f"{ray['wall'] / w2['wall']:.2f}, search {ray['search'] / w2['search']:.2f}")
            print()


if __name__ == "__main__":
    main()
