#!/usr/bin/env python3
"""The walk of one DELIVER along the copying path, counted in the code it passes.

A reader following one step of a search with --fast (the default) starts where the
engine asks a world for a copy and ends when the copy has taken a DELIVER. This
script does exactly that on the durlog demo (launch, copy the world, take the first
DELIVER the copy offers) with a profiler on, and records every call that goes from a
function in one of cmc's files into a function in another: a *stop*. A function
entered again later (a loop, the same helper) counts once, at its first entry, so
the figure says how many places a reader visits, not how often the code runs them.
Stops one after another in one file are one *place*; a *return* is a place in a file
the walk had already left: the reader goes back to a file they read a moment ago.

    python3 experiments/deliver_walk.py [-v]      # -v: list the stops

To measure an older tree, copy this script into its experiments/ and run it there (it
imports cmc from the tree it is in).

Results: docs/design.md, "One step, read from end to end".
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cmc.adapter import ClusterModel, cluster_spec    # noqa: E402
from cmc.lang import load_model                        # noqa: E402

CMC = str(ROOT / "cmc") + os.sep


def walk(model_file: str) -> list[tuple[str, str]]:
    """The stops of one DELIVER on a copy, in order: (file under cmc/, function)."""
    model = load_model(model_file, {})
    with tempfile.TemporaryDirectory(prefix="cmc-walk-") as root:
        systems = ClusterModel(cluster_spec(model, 8, 10.0), root, many=True)
        try:
            first = systems.fresh()
            stops: list[tuple[str, str]] = []
            seen: set[tuple[str, str]] = set()

            def profile(frame, event, _arg):
                if event != "call":
                    return
                callee = frame.f_code.co_filename
                caller = frame.f_back.f_code.co_filename if frame.f_back else ""
                if not callee.startswith(CMC) or not caller.startswith(CMC):
                    return
                if callee == caller:
                    return
                place = (callee[len(CMC):], frame.f_code.co_qualname)
                if place not in seen:
                    seen.add(place)
                    stops.append(place)
            sys.setprofile(profile)
            try:
                copy = first.fork()
                key = next(a.key for a in copy.actions() if a.kind.name == "DELIVER")
                copy.apply(key)
            finally:
                sys.setprofile(None)
            return stops
        finally:
            systems.close_all()


def places(stops: list[tuple[str, str]]) -> list[str]:
    """The files the walk passes through, in order: stops in one file one after
    another are one place."""
    out: list[str] = []
    for file, _ in stops:
        if not out or out[-1] != file:
            out.append(file)
    return out


def returns(stops: list[tuple[str, str]]) -> int:
    """Places in a file the walk had left before."""
    seen: set[str] = set()
    count = 0
    for file in places(stops):
        count += file in seen
        seen.add(file)
    return count


# The linux room (and, to measure a tree from before the kernel was cut by role, the
# same modules where they were): a call into it is a look-up of what Linux does, one
# line over a C call or a /proc read, which a reader does not leave their file for.
LINUX = ("kernel/linux/", "kernel/_native.py", "kernel/abi.py", "kernel/sockaddr.py",
         "kernel/filter.py", "kernel/syscalls_x86_64.py")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-v", action="store_true", help="list the stops")
    ap.add_argument("model", nargs="?", default=str(ROOT / "models" / "durlog.model"))
    args = ap.parse_args()
    stops = walk(args.model)
    if args.v:
        for file, fn in stops:
            print(f"  {file}: {fn}")
    files = len({f for f, _ in stops})
    print(f"{len(stops)} functions entered from another file, in {files} files: "
          f"{len(places(stops))} places, {returns(stops)} of them returns to a file "
          "already left")
    above = [s for s in stops if not s[0].startswith(LINUX)]
    print(f"not counting the linux room: {len(places(above))} places, {returns(above)} "
          "returns")


if __name__ == "__main__":
    main()
