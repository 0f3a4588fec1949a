#!/usr/bin/env python3
"""What a state costs when a node has threads, or is a process tree, side by side with
one that has neither.

durlog (demo/durlog.c) and tlog (demo/tlog.c) speak the same protocol in the same
two-node model; durlog's primary is one thread over poll(), tlog's has a thread per
client connection, a reader thread and condition variables (every futex call is
notified and emulated; each settle of the node reads /proc for the threads cmc is not
holding). gokv (demo/gokv) is the same protocol in Go: the Go runtime's five or more
threads. durlog-wrap starts each durlog node through a shell script that forks it and
waits (demo/durlog-wrap.sh): two processes per node, the shell parked in wait4, and a
shell's start-up at every launch. Each model is checked ROUNDS times, the runs of the models interleaved; the
figure per model is the fastest run's wall time over its states generated (every
state is a replay from the launch: the cost per state grows with depth, which the
three models share within a step). Prints the costs and the ratios to durlog's.

    python3 experiments/threads_cost.py [ROUNDS]
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = {
    "durlog (1 thread, poll)": ["--model-file", "models/durlog.model"],
    "tlog (threads, futexes)": ["--model-file", "models/tlog.model"],
    "gokv (Go runtime)": ["--model-file", "models/gokv.model"],
    "durlog-wrap (sh + durlog)": ["--model-file", "models/durlog-wrap.model"],
}
COUNTS = re.compile(r"^(\d+) states generated, (\d+) distinct", re.M)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    subprocess.run(["make", "-s", "-C", str(ROOT / "demo")], check=True)
    best: dict[str, tuple[float, int]] = {}
    with tempfile.TemporaryDirectory(prefix="threads-cost-") as tmp:
        for _ in range(rounds):
            for name, args in MODELS.items():
                if "gokv" in name and not (ROOT / "demo" / "build" / "gokv").exists():
                    continue
                start = time.perf_counter()
                r = subprocess.run([sys.executable, "-m", "cmc", *args], cwd=ROOT,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={"PATH": "/usr/bin:/bin", "TMPDIR": tmp})
                took = time.perf_counter() - start
                m = COUNTS.search(r.stdout)
                if r.returncode != 0 or m is None:
                    sys.exit(f"{name}: exit {r.returncode}\n{r.stdout[-1000:]}{r.stderr[-1000:]}")
                generated = int(m.group(1))
                if name not in best or took < best[name][0]:
                    best[name] = (took, generated)
    base = best["durlog (1 thread, poll)"]
    base_per = base[0] / base[1]
    print(f"{'model':28} {'states':>7} {'best s':>8} {'ms/state':>9} {'ratio':>6}")
    for name, (took, generated) in best.items():
        per = took / generated
        print(f"{name:28} {generated:7d} {took:8.2f} {per * 1000:9.2f} {per / base_per:6.2f}")


if __name__ == "__main__":
    main()
