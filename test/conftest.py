"""Shared helpers: every end-to-end test runs the real CLI on real processes."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
TEST_MODELS = ROOT / "test" / "models"
PROGS = ROOT / "test" / "progs" / "build"

# `python3` in a model (the Maelstrom demos, test programs) is the interpreter that runs
# the tests, found first on PATH: not a version manager's shim (pyenv's runs some forty
# programs under cmc at every launch of a node, about a second each). A test of the shim
# itself sets PATH of its own (test_process_tree.py).
os.environ["PATH"] = os.path.dirname(os.path.realpath(sys.executable)) + os.pathsep \
    + os.environ.get("PATH", "")


@pytest.fixture(scope="session", autouse=True)
def built():
    """Build the demos and the probe programs once per session."""
    for d in (ROOT / "demo", ROOT / "test" / "progs"):
        subprocess.run(["make", "-s", "-C", str(d)], check=True)


def run_cmc(*args, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "cmc", *map(str, args)], cwd=cwd or ROOT,
                          env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


# (a Progress line, printed as the run's time passes, is followed under --ray by a line
# per machine)
STAMPED = re.compile(r"^(Starting\.\.\.|Finished computing|Finished in|Progress\(|"
                     r"  Machine \S+: \d+ workers?, )")


def without_timestamps(out: str) -> str:
    """The output lines that must be byte-identical from run to run."""
    return "\n".join(line for line in out.splitlines() if not STAMPED.match(line))


def counts(out: str) -> tuple[int, int, int]:
    m = re.search(r"^(\d+) states generated, (\d+) distinct states found, (\d+) states left "
                  r"on queue\.$", out, re.M)
    assert m, out
    d = re.search(r"^The depth of the complete state graph search is (\d+)\.$", out, re.M)
    return int(m.group(1)), int(m.group(2)), int(d.group(1))


# The counter toy (test/models/counter.model, test/progs/counter.c), used by several files.
DROP = "budget drop 1\n"


def counter(tmp_path, extra: str = "", name: str = "counter.model"):
    """test/models/counter.model with `extra` lines, written into tmp_path."""
    path = tmp_path / name
    path.write_text((TEST_MODELS / "counter.model").read_text() + extra)
    return path


def cmc(tmp_path, model, *args):
    """cmc on a counter model, with the -D that finds the binary."""
    return run_cmc("--model-file", model, "-D", f"bin={PROGS}/counter", *args, cwd=tmp_path)
