#!/usr/bin/env python3
"""Where the scratch space lives, side by side: memory (/dev/shm, the default) against
a disk folder (--scratch DIR; default /tmp), on the same searches.

Each round runs every model once each way, alternating, and the figure is the median
wall time over ROUNDS rounds; the counts of the two ways must be equal. The machine
is noisy: read the ratio, measured side by side, not the seconds.

    python3 experiments/scratch_place.py [--rounds N] [--disk DIR] [MODEL ...]

Default models: models/durlog.model, models/raft.model (copying, the default) and
test/models/prealloc.model. Results: docs/performance.md, "What a world costs".
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
COUNTS = re.compile(r"^(\d+) states generated, (\d+) distinct", re.M)
EXTRA = {"prealloc.model": ["-D", f"bin={ROOT}/test/progs/build/prealloc"]}


def once(model: str, scratch: str | None) -> tuple[float, tuple]:
    args = [sys.executable, "-m", "cmc", "--model-file", model, *EXTRA.get(
        os.path.basename(model), [])]
    env = dict(os.environ)
    env.pop("TMPDIR", None)
    if scratch:
        args += ["--scratch", scratch]
    began = time.monotonic()
    out = subprocess.run(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True).stdout
    m = COUNTS.search(out)
    return time.monotonic() - began, (m.groups() if m else out[-200:])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--disk", default="/tmp")
    ap.add_argument("models", nargs="*", default=["models/durlog.model", "models/raft.model",
                                                  "test/models/prealloc.model"])
    a = ap.parse_args()
    disk = tempfile.mkdtemp(prefix="scratch-place-", dir=a.disk)
    print(f"{'model':28} {'states':>13} {'/dev/shm s':>10} {'disk s':>8} {'disk/shm':>8}")
    for model in a.models:
        shm, dsk, seen = [], [], set()
        for _ in range(a.rounds):
            t, c = once(model, None)
            shm.append(t)
            seen.add(c)
            t, c = once(model, disk)
            dsk.append(t)
            seen.add(c)
        assert len(seen) == 1, f"{model}: the counts differ: {seen}"
        ms, md = statistics.median(shm), statistics.median(dsk)
        print(f"{model:28} {'/'.join(seen.pop()):>13} {ms:10.2f} {md:8.2f} {md / ms:8.2f}",
              flush=True)
    os.rmdir(disk)
    return 0


if __name__ == "__main__":
    sys.exit(main())
