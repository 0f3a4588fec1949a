#!/usr/bin/env python3
"""What a world costs in memory and scratch space, before and after, side by side.

For each model, cmc from two trees (BEFORE: a git revision, checked out into a
temporary worktree; AFTER: this tree) runs the same search in turn, with its scratch
directory in a tmpfs folder of its own (TMPDIR=/dev/shm/cmc-world-cost/...: memory,
as by default). While it runs, every 20 ms, this script sums the proportional set
size of cmc's process tree and the blocks its scratch folder takes; the figure is
the largest sum (the peak), and the peak over the distinct states reached. A run
that passes --cap (default 3 GB) is stopped at once by this script (SIGKILL of its
tree) and its row says so: the machine is shared.

    python3 experiments/world_cost.py [--before REV] [--cap SIZE] [--seconds S] [NAME ...]
    python3 experiments/world_cost.py --after-only --no-cap-states --fire 6 --seconds 600 --cap 2G etcd etcd-off

NAMES: durlog, prealloc, etcd (one member, `budget fire 2`), etcd-off (the same
with `disk off`); default all. The etcd rows need Debian's etcd-server. Each run ends
at its --max-states (the counts are in the rows) or at --seconds (default 120),
whichever comes first. Results: docs/performance.md, "What a world costs".
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
sys.path.insert(0, str(ROOT))
from cmc.resources import pss, scratch_files, tree_pids    # noqa: E402  (the same sums)

MB = 1 << 20
RUNS = {    # name: (model, extra arguments)
    "durlog": ("models/durlog.model", []),
    "prealloc": ("test/models/prealloc.model",
                 ["-D", f"bin={ROOT}/test/progs/build/prealloc"]),
    "etcd": ("experiments/etcd/one.model", ["--max-states", "300"]),
    "etcd-off": ("experiments/etcd/one.model", ["--max-states", "300"]),   # + disk off
}


def blocks(root: str) -> int:
    return sum(sum(sizes) for sizes in scratch_files(root).values())


def run(tree_root: pathlib.Path, name: str, cap: int, seconds: float,
        no_cap_states: bool = False, fire: int | None = None) -> dict:
    model, extra = RUNS[name]
    if no_cap_states:
        extra = [x for i, x in enumerate(extra) if x != "--max-states"
                 and (i == 0 or extra[i - 1] != "--max-states")]
    scratch = tempfile.mkdtemp(prefix=f"{name}-", dir="/dev/shm/cmc-world-cost")
    env = dict(os.environ, TMPDIR=scratch, PYTHONPATH=str(tree_root))
    work = tempfile.mkdtemp(prefix="cmc-world-cost-")
    path = tree_root / model
    if name.endswith("-off") or fire is not None:
        text = (tree_root / model).read_text()
        if fire is not None:
            text = text.replace("budget fire 2", f"budget fire {fire}")
        path = pathlib.Path(work) / "changed.model"
        path.write_text(text + ("disk off\n" if name.endswith("-off") else ""))
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "cmc", "--model-file", str(path),
                             *extra], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    peak, mem_at_peak, why = 0, 0, ""
    while proc.poll() is None:
        mem = sum(pss(p) for p in tree_pids(proc.pid))
        total = mem + blocks(scratch)
        if total > peak:
            peak, mem_at_peak = total, mem
        if total > cap:
            why = f"passed {cap // MB} MB"
        elif time.monotonic() - began > seconds:
            why = f"stopped at {seconds:g} s"
        if why:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    out = proc.communicate()[0]
    wall = time.monotonic() - began
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    distinct = [int(m) for m in re.findall(r"(\d+) distinct states found", out)]
    cap_hit = re.search(r"more than (\d+) distinct states", out)
    states = distinct[-1] if distinct else int(cap_hit.group(1)) if cap_hit else 0
    return {"peak": peak, "memory": mem_at_peak, "states": states, "wall": wall,
            "why": why or ("done" if distinct else out.strip().splitlines()[-1][:60])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="HEAD~1")
    ap.add_argument("--cap", default="3G")
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--after-only", action="store_true",
                    help="run this tree only (a long run: issue 29's ten minutes of etcd)")
    ap.add_argument("--fire", type=int, help="the etcd models' fire budget (default 2)")
    ap.add_argument("--no-cap-states", action="store_true",
                    help="run the etcd models without their --max-states")
    ap.add_argument("names", nargs="*", default=list(RUNS))
    a = ap.parse_args()
    cap = int(a.cap[:-1]) * (1 << 30) if a.cap.endswith("G") else int(a.cap[:-1]) * MB
    os.makedirs("/dev/shm/cmc-world-cost", exist_ok=True)
    before = pathlib.Path(tempfile.mkdtemp(prefix="cmc-before-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(before),
                    a.before], check=True)
    so = next((ROOT / "cmc" / "kernel").glob("_cmc_helper*.so"))
    shutil.copy(so, before / "cmc" / "kernel")
    (before / "experiments" / "etcd").mkdir(exist_ok=True)
    shutil.copy(ROOT / "experiments" / "etcd" / "one.model", before / "experiments" / "etcd")
    shutil.copy(ROOT / "test" / "models" / "prealloc.model", before / "test" / "models")
    print(f"{'model':10} {'tree':7} {'states':>7} {'peak MB':>8} {'of it mem':>9} "
          f"{'KB/state':>9} {'wall s':>7}  end")
    try:
        for name in a.names:
            trees = (("after", ROOT),) if a.after_only else (("before", before), ("after", ROOT))
            for label, root in trees:
                r = run(root, name, cap, a.seconds, a.no_cap_states, a.fire)
                per = r["peak"] / 1024 / max(r["states"], 1)
                print(f"{name:10} {label:7} {r['states']:7d} {r['peak'] / MB:8.1f} "
                      f"{r['memory'] / MB:9.1f} {per:9.1f} {r['wall']:7.1f}  {r['why']}",
                      flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)])
        shutil.rmtree("/dev/shm/cmc-world-cost", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
