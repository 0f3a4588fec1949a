"""--shard K/N (test/conftest.py): CI runs the slow tests as two shares side by side;
every selected file is in exactly one share, and the shares are balanced by the
seconds each file took."""
from __future__ import annotations

import subprocess
import sys

import pytest

import conftest
from conftest import ROOT


def test_every_file_in_one_share_and_the_longest_apart():
    saved = dict(conftest.SHARE_SECONDS)
    try:
        conftest.SHARE_SECONDS.clear()
        conftest.SHARE_SECONDS.update({"a.py": 100, "b.py": 90, "c.py": 20, "d.py": 10})
        owner = conftest.shares(["d.py", "c.py", "b.py", "a.py", "e.py"], 2)
        # a to share 0, b to 1, e (unknown: 60) to 1, c to 0, d to 0: 130 against 150
        assert owner == {"a.py": 0, "b.py": 1, "e.py": 1, "c.py": 0, "d.py": 0}
        assert conftest.shares(["a.py", "b.py"], 1) == {"a.py": 0, "b.py": 0}
    finally:
        conftest.SHARE_SECONDS.clear()
        conftest.SHARE_SECONDS.update(saved)


def collected(*args: str) -> set[str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "slow",
                        *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return {line for line in r.stdout.splitlines() if "::" in line}


@pytest.mark.slow
def test_the_two_shares_are_the_slow_tests():
    every, first, second = collected(), collected("--shard", "0/2"), collected("--shard", "1/2")
    assert first and second and not first & second
    assert first | second == every


def test_a_bad_share_is_refused():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "--shard", "2/2",
                        "test/test_shares.py"], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    assert r.returncode != 0 and "--shard 2/2: K/N with 0 <= K < N" in r.stderr
