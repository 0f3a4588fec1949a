#!/usr/bin/env python3
"""Every demo under `time virtual`: the verdict and counts of its correct and bug builds.

For each model of models/ (the demos of docs/demos.md), a copy is written next to it in
a temporary folder with the line `time virtual` added (and its relative paths made
absolute), and cmc runs it on the correct build and on the bug build. Prints one row
per run: demo, build, verdict (the property violated, or ok), states generated,
distinct, depth, and the same under time async for comparison.

    python3 experiments/virtual_demos.py [NAME ...]

Results: docs/demos.md, "Under time virtual".
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
BUG = {"durlog-wrap": "durlog"}          # demos whose bug build is another demo's


def run(model: pathlib.Path, bug: bool, demo: str, cwd: str) -> str:
    args = [sys.executable, "-m", "cmc", "--model-file", str(model), "--no-build"]
    if bug:
        args += ["-D", f"bin={ROOT / 'demo' / 'build' / (BUG.get(demo, demo) + '-bug')}"]
    r = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1800)
    m = re.search(r"^(\d+) states generated, (\d+) distinct states found", r.stdout, re.M)
    d = re.search(r"depth of the complete state graph search is (\d+)", r.stdout)
    v = re.search(r"^Error: (?:Invariant|Action property|Quiescent property|Property) (\S+) is "
                  r"violated|^Error: (Witness \S+ was never reached)|^Error: (.{0,80})", r.stdout, re.M)
    verdict = "ok" if r.returncode == 0 else next((g for g in v.groups() if g), "?") if v else \
        f"exit {r.returncode}"
    return (f"{verdict:34} {m.group(1) if m else '-':>7} {m.group(2) if m else '-':>7} "
            f"{d.group(1) if d else '-':>5}")


def main() -> None:
    names = sys.argv[1:] or sorted(p.stem for p in MODELS.glob("*.model"))
    subprocess.run(["make", "-s", "-C", str(ROOT / "demo")], check=True)
    with tempfile.TemporaryDirectory(prefix="cmc-virtual-") as tmp:
        for name in names:
            text = (MODELS / f"{name}.model").read_text()
            if "param bin" not in text or re.search(r"^time ", text, re.M):
                continue                # not a demo, or one that says its time already
            text = text.replace('"../', f'"{ROOT}/')
            virtual = pathlib.Path(tmp, f"{name}.model")
            virtual.write_text(text + "\ntime virtual\n")
            for bug in (False, True):
                a = run(MODELS / f"{name}.model", bug, name, str(MODELS))
                v = run(virtual, bug, name, tmp)
                print(f"{name:12} {'bug' if bug else 'correct':8} virtual {v}   async {a}",
                      flush=True)


if __name__ == "__main__":
    main()
