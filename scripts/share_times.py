#!/usr/bin/env python3
"""Seconds each test file took, from pytest's --junitxml reports (every test's
setup, call and teardown): what test/conftest.py's SHARE_SECONDS weighs the files of
the slow tests by, to split them into shares (`pytest -m slow --shard K/N`).

    python3 scripts/share_times.py slow-0.xml slow-1.xml
"""
from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET


def file_seconds(paths: list[str]) -> dict[str, float]:
    out: dict[str, float] = collections.Counter()
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            parts = case.get("classname", "").split(".")
            name = next((p for p in parts if p.startswith("test_")), parts[-1]) + ".py"
            out[name] += float(case.get("time", 0))
    return dict(out)


def main() -> None:
    seconds = file_seconds(sys.argv[1:])
    print(f"{sum(seconds.values()):.0f} s in all")
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<32} {s:8.1f}")


if __name__ == "__main__":
    main()
