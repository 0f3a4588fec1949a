"""Shared helpers: every end-to-end test runs the real CLI on real processes."""
from __future__ import annotations

import compileall
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
    """Build the demos and the probe programs once per session, and compile cmc's
    modules: every test that runs cmc starts a Python that imports some ninety of
    them, and where bytecode is not written (PYTHONDONTWRITEBYTECODE, as on many CI
    machines) each such run would compile them all again, a seventh of a second; the
    variable stops Python writing bytecode, not reading it."""
    for d in (ROOT / "demo", ROOT / "test" / "progs"):
        subprocess.run(["make", "-s", "-C", str(d)], check=True)
    compileall.compile_dir(ROOT / "cmc", quiet=1)


def run_cmc(*args, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "cmc", *map(str, args)], cwd=cwd or ROOT,
                          env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


def left_behind(marker: str, at_start: bool = False) -> list[str]:
    """The command lines containing `marker` (`at_start`: beginning with it) of
    processes that outlived their run of
    cmc: a node cmc left behind is an orphan, whose parent is neither a cmc (the
    subreaper of its nodes while it runs) nor another process of this repository's (a
    node, a shell over one, a test); a node of a run going on beside this one (a CI
    share of the slow tests, test/conftest.py --shard) is not. Zombies aside."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,stat=,args="],
                         stdout=subprocess.PIPE, text=True).stdout
    procs = {}
    for line in out.splitlines():
        pid, ppid, stat, args = (line.split(None, 3) + [""])[:4]
        procs[int(pid)] = (int(ppid), stat, args)

    def ours(pid: int) -> bool:
        args = procs.get(pid, (0, "", ""))[2]
        return " -m cmc" in args or str(ROOT) in args
    return [args for ppid, stat, args in procs.values()
            if (args.startswith(marker) if at_start else marker in args)
            and not stat.startswith("Z") and not ours(ppid)]


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


# -- shares of a run (CI runs the slow tests as two, side by side) --------------------------
# Seconds each file's slow tests took in CI's two shares side by side on the 2-core
# machine (`.ci/run` prints them: scripts/share_times.py over each share's --junitxml;
# 2026-12-06, 4245 s in all, rounded, and a guess for the tests made slow since); a file
# not listed counts as SHARE_UNKNOWN.
SHARE_SECONDS: dict[str, float] = {
    "test_check_merges.py": 970, "test_memory.py": 570, "test_thread_demo.py": 485,
    "test_pysyncobj.py": 450, "test_process_tree.py": 345, "test_demos.py": 340,
    "test_por.py": 255, "test_fast.py": 250, "test_thread_progs.py": 135,
    "test_leftovers.py": 110, "test_nats.py": 80, "test_scale.py": 70,
    "test_history.py": 40, "test_etcd.py": 35, "test_zookeeper.py": 165, "test_maelstrom.py": 30,
    "test_virtual_models.py": 30, "test_copy_services.py": 30, "test_zygote.py": 30,
    "test_postgres.py": 20, "test_disk.py": 10, "test_shares.py": 10,
    "test_misbehaviour.py": 10, "test_tsc.py": 10, "test_walking_skeleton.py": 5,
    "test_machine.py": 5}
SHARE_UNKNOWN = 60.0


def pytest_addoption(parser):
    parser.addoption("--shard", default=None, metavar="K/N",
                     help="run only share K (0 to N-1) of N of the selected tests: whole "
                          "files, balanced by SHARE_SECONDS")


def shares(files: list[str], n: int) -> dict[str, int]:
    """Each file's share: the longest first, each to the share with the least so far."""
    loads, owner = [0.0] * n, {}
    for f in sorted(files, key=lambda f: (-SHARE_SECONDS.get(f, SHARE_UNKNOWN), f)):
        i = min(range(n), key=lambda j: (loads[j], j))
        owner[f] = i
        loads[i] += SHARE_SECONDS.get(f, SHARE_UNKNOWN)
    return owner


def pytest_collection_modifyitems(config, items):
    shard = config.getoption("--shard")
    if not shard:
        return
    try:
        k, n = (int(x) for x in shard.split("/"))
        assert 0 <= k < n
    except (ValueError, AssertionError):
        raise pytest.UsageError(f"--shard {shard}: K/N with 0 <= K < N") from None
    owner = shares(sorted({it.path.name for it in items}), n)
    config.hook.pytest_deselected(items=[it for it in items if owner[it.path.name] != k])
    items[:] = [it for it in items if owner[it.path.name] == k]
