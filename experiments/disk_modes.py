#!/usr/bin/env python3
"""The disk demos' verdicts under each disk mode (docs/model-file.md, the `disk` line),
as a Markdown table.

Each of models/appendkv, swapstate and reclog.model is checked, correct build and
planted-bug build, with its `disk` line replaced by each of the four modes (a copy of
the model written beside it, removed after). A cell is the verdict (ok, or the
property violated), then states generated / distinct / depth. The existing demos are
checked under the default too (`--existing`), to show they keep their verdicts.

    python3 experiments/disk_modes.py [--existing]
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMOS = ("appendkv", "swapstate", "reclog")
MODES = ("off", "fsync", "fsync partial", "strict")
EXISTING = ("durlog", "relay", "lease", "twopc", "raft", "tlog", "gokv", "prefork", "bgsave",
            "durlog-wrap")
COUNTS = re.compile(r"^(\d+) states generated, (\d+) distinct states found.*?\n"
                    r"The depth of the complete state graph search is (\d+)", re.M | re.S)
VIOLATED = re.compile(r"^Error: (\w+) (?:property )?(\w+) is violated", re.M)


def run(model: pathlib.Path, *args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "cmc", "--model-file", str(model), *args],
                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    m = COUNTS.search(p.stdout)
    figures = f"{m.group(1)}/{m.group(2)}/{m.group(3)}" if m else "-"
    if p.returncode == 0:
        return f"ok {figures}"
    v = VIOLATED.search(p.stdout)
    if p.returncode == 1 and v:
        return f"**{v.group(2)}** {figures}"
    return f"exit {p.returncode}: " + p.stdout.strip().splitlines()[-1][:60]


def with_mode(name: str, mode: str) -> pathlib.Path:
    text = (ROOT / "models" / f"{name}.model").read_text()
    lines = [f"disk {mode}" if line.startswith("disk ") else line for line in text.splitlines()]
    path = ROOT / "models" / f".{name}-{mode.replace(' ', '-')}.model"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    subprocess.run(["make", "-s", "-C", str(ROOT / "demo")], check=True)
    print("| demo | build | " + " | ".join(f"disk {m}" for m in MODES) + " |")
    print("|---|---|" + "---|" * len(MODES))
    for name in DEMOS:
        for build in ("correct", "bug"):
            extra = () if build == "correct" else ("-D", f"bin=../demo/build/{name}-bug")
            cells = []
            for mode in MODES:
                path = with_mode(name, mode)
                try:
                    cells.append(run(path, *extra))
                finally:
                    path.unlink()
            print(f"| {name} | {build} | " + " | ".join(cells) + " |", flush=True)
    if "--existing" in sys.argv[1:]:
        print()
        print("| demo | build | disk fsync (the default) | disk off |")
        print("|---|---|---|---|")
        for name in EXISTING:
            if not (ROOT / "demo" / "build" / name.replace("durlog-wrap", "durlog")).exists():
                continue
            prog = "durlog" if name == "durlog-wrap" else name
            for build in ("correct", "bug"):
                extra = () if build == "correct" else ("-D", f"bin=../demo/build/{prog}-bug")
                text = (ROOT / "models" / f"{name}.model").read_text()
                off = ROOT / "models" / f".{name}-off.model"
                off.write_text(text + "\ndisk off\n")
                try:
                    cells = [run(ROOT / "models" / f"{name}.model", *extra), run(off, *extra)]
                finally:
                    off.unlink()
                print(f"| {name} | {build} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
