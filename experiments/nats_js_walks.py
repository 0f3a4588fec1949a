"""Issue 52's acceptance for NATS JetStream, by hand (it takes most of an hour):
walk test/models/nats-js.model (three nats-server with JetStream, an R3 stream, a
publish acknowledged, a CRASH, a read) with seeds S..S+N-1, each twice, two walks at
a time, and print for each seed both walks' counts and whether either named
nondeterminism.

    python3 experiments/nats_js_walks.py [--seeds 8] [--first 1] [--max-depth 240]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ROOT / "test" / "models" / "nats-js.model"


def walk(seed: int, depth: int) -> tuple[str, bool, int]:
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([sys.executable, "-m", "cmc", "--model-file", str(MODEL),
                            "--simulate", "--walks", "1", "--seed", str(seed),
                            "--max-depth", str(depth), "--max-memory", "4G", "--no-pin"],
                           cwd=d, capture_output=True, text=True, timeout=3600)
    out = r.stdout + r.stderr
    m = re.search(r"(\d+) states generated, (\d+) distinct states found", out)
    return (m.group(0) if m else out[-300:]), "nondeterminism" in out, r.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--max-depth", type=int, default=240)
    a = ap.parse_args()
    bad = 0
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = {(s, k): pool.submit(walk, s, a.max_depth)
                for s in range(a.first, a.first + a.seeds) for k in (0, 1)}
        for s in range(a.first, a.first + a.seeds):
            one, two = runs[s, 0].result(), runs[s, 1].result()
            same = one[0] == two[0] and one[2] == two[2]
            bad += (not same) or one[1] or two[1]
            print(f"seed {s}: {one[0]} (exit {one[2]}) | {two[0]} (exit {two[2]}) | "
                  f"{'same' if same else 'DIFFERENT'}"
                  f"{' | NONDETERMINISM' if one[1] or two[1] else ''}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
