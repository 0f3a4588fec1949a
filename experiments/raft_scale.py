#!/usr/bin/env python3
"""The largest raft configuration each way of searching finishes in a time limit.

models/raft.model (three nodes, `budget fire 0`, `budget crash 1`) with its budgets
raised step by step, in the order below (growing budgets); each
configuration is checked with the command line, one way after another, and a way
stops at its first configuration that does not finish within the limit (default
600 s: cmc is stopped with SIGTERM and its partial counts are printed). The model's
quiescent liveness property is left out: it is stated for the shipped budgets. Ways: copying
(the default), replay (--no-fast), copying with two workers.

    python3 experiments/raft_scale.py [--limit S] [--ways fast,replay,workers2]

Results: docs/performance.md, "How far raft goes".
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "raft.model"

# (crash, drop, fire): budgets of each configuration, smallest first
CONFIGS = [(1, 0, 0), (1, 1, 0), (2, 0, 0), (2, 1, 0), (1, 0, 1), (2, 1, 1), (2, 2, 1),
           (3, 2, 1), (2, 2, 2)]
WAYS = {"fast": [], "replay": ["--no-fast"], "workers2": ["--workers", "2"]}


def model_copy(folder: str, crash: int, drop: int, fire: int) -> str:
    text = MODEL.read_text()
    text = re.sub(r"^budget fire \d+", f"budget fire {fire}", text, flags=re.M)
    text = re.sub(r"^budget crash \d+", f"budget crash {crash}", text, flags=re.M)
    # the safety search's size: the liveness property is stated for the shipped budgets
    # (no drop, no timeout: a dropped connect is never retried without a FIRE)
    text = re.sub(r"^quiescent .*(\n[ \t]+.*)*", "", text, flags=re.M)
    if drop:
        text = re.sub(r"^budget crash \d+", f"budget crash {crash}\nbudget drop {drop}", text,
                      count=1, flags=re.M)
    path = os.path.join(folder, f"raft-c{crash}d{drop}f{fire}.model")
    with open(path, "w") as f:
        f.write(text.replace('"../demo/build/raft"', f'"{ROOT}/demo/build/raft"')
                .replace('"make -C ../demo"', f'"make -C {ROOT}/demo"'))
    return path


def check(path: str, extra: list[str], limit: float) -> tuple[str, float, str]:
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "cmc", "--model-file", path, *extra],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=limit)
        finished = True
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)   # as Ctrl-C (docs/errors.md); SIGINT may be ignored in a background job
        out, _ = p.communicate()
        finished = False
    wall = time.monotonic() - t0
    counts = re.findall(r"(\d+) states generated(?: \(\d+ s/min\))?, (\d+) distinct states "
                        r"found", out)
    verdict = "ok" if "No error has been found" in out else (
        "violated" if "is violated" in out else f"exit {p.returncode}")
    shown = f"{counts[-1][0]}/{counts[-1][1]}" if counts else "?"    # the last progress line
    return (verdict if finished else "timeout"), wall, shown


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=float, default=600)
    ap.add_argument("--ways", default="fast,replay,workers2")
    args = ap.parse_args()
    subprocess.run(["make", "-s", "-C", str(ROOT / "demo")], check=True)
    folder = tempfile.mkdtemp(prefix="cmc-raft-scale-")
    try:
        print(f"{'way':9} {'crash':>5} {'drop':>4} {'fire':>4} {'verdict':>8} {'wall s':>7} "
              f"{'generated/distinct':>19}")
        for way in args.ways.split(","):
            for crash, drop, fire in CONFIGS:
                path = model_copy(folder, crash, drop, fire)
                verdict, wall, counts = check(path, WAYS[way], args.limit)
                print(f"{way:9} {crash:5} {drop:4} {fire:4} {verdict:>8} {wall:7.0f} "
                      f"{counts:>19}", flush=True)
                if verdict == "timeout":
                    break
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
