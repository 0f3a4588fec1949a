#!/usr/bin/env python3
"""Every demo under `time virtual`: the verdict and counts of its correct and bug builds.

For each model of models/virtual/ (models/NAME.model with the line `time virtual` and
its paths made relative to that folder: test/test_virtual_models.py), cmc runs it on the
correct build and on the bug build, and models/NAME.model (time async) beside it. Prints
one row per run: demo, build, verdict (the property violated, or ok), states generated,
distinct, depth, under time virtual and under time async.

    python3 experiments/virtual_demos.py [NAME ...]

Results: docs/demos.md, "Every demo under `time virtual`".
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
VIRTUAL = MODELS / "virtual"
BUG = {"durlog-wrap": "durlog"}          # demos whose bug build is another demo's


def run(model: pathlib.Path, bug: bool, demo: str, cwd: str) -> str:
    args = [sys.executable, "-m", "cmc", "--model-file", str(model), "--no-build"]
    if bug:                 # a relative bin is taken from the model's folder
        up = "../" if model.parent == MODELS else "../../"
        args += ["-D", f"bin={up}demo/build/{BUG.get(demo, demo)}-bug"]
    r = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1800)
    m = re.search(r"^(\d+) states generated, (\d+) distinct states found", r.stdout, re.M)
    d = re.search(r"depth of the complete state graph search is (\d+)", r.stdout)
    v = re.search(r"^Error: (?:Invariant|Action property|Quiescent property|Property|"
                  r"Linearizability property) (\S+) is violated|"
                  r"^Error: (Witness \S+ was never reached)|^Error: (.{0,80})", r.stdout, re.M)
    verdict = "ok" if r.returncode == 0 else next((g for g in v.groups() if g), "?") if v else \
        f"exit {r.returncode}"
    return (f"{verdict:34} {m.group(1) if m else '-':>7} {m.group(2) if m else '-':>7} "
            f"{d.group(1) if d else '-':>5}")


def main() -> None:
    names = sys.argv[1:] or sorted(p.stem for p in VIRTUAL.glob("*.model"))
    subprocess.run(["make", "-s", "-C", str(ROOT / "demo")], check=True)
    with tempfile.TemporaryDirectory(prefix="cmc-virtual-") as tmp:    # the traces go here
        for name in names:
            for bug in (False, True):
                v = run(VIRTUAL / f"{name}.model", bug, name, tmp)
                a = run(MODELS / f"{name}.model", bug, name, tmp)
                print(f"{name:12} {'bug' if bug else 'correct':8} virtual {v}   async {a}",
                      flush=True)


if __name__ == "__main__":
    main()
