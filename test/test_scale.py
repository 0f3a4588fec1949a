"""A million distinct states within 2 GiB (issue 16): what the search keeps per world.

experiments/million.py gives the breadth-first search (copying, as the command line
runs it) a model of five counters from 0 to 15 that costs almost nothing per step, so
that what grows is the search's own record; it prints the counts and the peak resident
set size of its process."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def million(*args: str) -> re.Match:
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "million.py"), *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:]
    m = re.search(r"^ok: (\d+) states generated, (\d+) distinct, depth (\d+); [\d.]+ s; "
                  r"peak RSS (\d+) MiB", r.stdout, re.M)
    assert m, r.stdout
    return m


def test_a_small_count_is_exact():
    """The counts the big run relies on, on a small instance: 10**3 worlds of three
    counters from 0 to 9, 1 + 3 * 10**2 * 9 generated, depth 3 * 9 + 1."""
    m = million("3", "10")
    assert (int(m[1]), int(m[2]), int(m[3])) == (2701, 1000, 28)


@pytest.mark.slow
def test_a_million_distinct_states_fit_in_2_gib():
    m = million()
    assert (int(m[1]), int(m[2]), int(m[3])) == (4915201, 1048576, 76)
    assert int(m[4]) < 2048, m[0]
