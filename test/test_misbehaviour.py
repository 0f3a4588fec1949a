"""A program that misbehaves is a target error, never a hang nor a silent wrong
answer (docs/target-contract.md, "Unsupported: what cmc says"): cmc exits 3 with a
message that names the node, the step and the call, and leaves no process and no
temporary directory behind.

Each case runs test/progs/misbehave_*.c (dynamic and static) through the real CLI.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from conftest import TEST_MODELS

# id: (program, mode or None, extra cmc arguments, regexes the error must match, xfail)
STEP = r"node victim \(step (\d+), <[^\n]*>\): "
CASES = {
    "abort": ("die", "abort", [], [STEP + r"died of signal SIGABRT outside a CRASH action"], None),
    "segv": ("die", "segv", [], [STEP + r"died of signal SIGSEGV outside a CRASH action "
                                 r"\(a fault at address 0x0 \(SEGV_MAPERR: nothing mapped "
                                 r"there\), instruction at 0x[0-9a-f]+ \(/\S+/misbehave_die"
                                 r"(-static)?\+0x[0-9a-f]+\)\)$"], None),
    "exit-status": ("die", "exit", [], [STEP + r"exited with status 7 outside a CRASH action",
                                        r"misbehave_die: exiting with status 7"], None),
    "spin-cpu": ("spin", "cpu", ["--watchdog", "1"],
                 [STEP + r"ran for 1 s without blocking in an emulated call", r"--watchdog"], None),
    "spin-calls": ("spin", "calls", ["--watchdog", "1"],
                   [STEP + r"ran for 1 s without blocking in an emulated call"], None),
    "json-fd3": ("json", "3", [], [STEP + r"wrote a line that is not JSON on fd 3",
                                   re.escape("{\"broken\": ")], None),
    "json-fd193": ("json", "193", [], [STEP + r"wrote a line that is not JSON on fd 193",
                                       re.escape("{\"broken\": ")], None),
    "unshare": ("fork", "unshare", [], [STEP + r"process 1 called unshare\(0x4000000, .*\), "
                                               r"which leaves its namespaces"], None),
    "ptrace": ("fork", "ptrace", [], [STEP + r"process 1 called ptrace\(0x0, .*\), which "
                                             r"traces a process"], None),
    "thread-spins": ("thread", "spin", ["--watchdog", "1"],
                     [STEP + r"thread 1 ran for 1 s without blocking in an emulated call"],
                     None),
    "thread-pi-futex": ("thread", "pi", [],
                        [STEP + r"called futex\(0x[0-9a-f]+, 0x8[67], .*\), which uses a "
                                r"futex operation cmc does "
                                r"not emulate"], None),
    "raw-socket": ("unsupported", "raw", [], [STEP + r"called socket\(2, 0x3, 0x1\b"], None),
    "packet-socket": ("unsupported", "packet", [], [STEP + r"called socket\(17, 0x3\b"], None),
    "unknown-ioctl": ("unsupported", "ioctl", [], [STEP + r"called ioctl\(5\d\d, 0x8906\b"], None),
}


# the watchdog extends its deadline while the spinning node waits for cmc rather than
# runs, so a loop of calls takes some five times --watchdog to be stopped: the static
# build's case (the same calls) is left to the slow run
SLOW = {("spin-calls", "static")}


def _params():
    out = []
    for case, (_, _, _, _, xfail) in CASES.items():
        for variant in ("dynamic", "static"):
            marks = [pytest.mark.xfail(strict=False, reason=xfail)] if xfail else []
            if (case, variant) in SLOW:
                marks.append(pytest.mark.slow)
            out.append(pytest.param(case, variant, marks=marks, id=f"{case}-{variant}"))
    return out


def _leftovers() -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], stdout=subprocess.PIPE, text=True).stdout
    return [line for line in out.splitlines()
            if "progs/build/misbehave_" in line or "sleep 31.5" in line]


def run_misbehaving(args, tmp_path, timeout=15):
    """Run cmc; on a hang, interrupt it (SIGTERM: cmc removes its nodes) and say so."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    p = subprocess.Popen([sys.executable, "-m", "cmc", *map(str, args)], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        pytest.fail(f"cmc hung for {timeout} s (interrupted: exit {p.returncode})\n{out[-2000:]}")
    return p.returncode, out, err, tmp


@pytest.mark.parametrize("case,variant", _params())
def test_misbehaviour_is_a_target_error(case, variant, tmp_path):
    prog, mode, extra, patterns, _ = CASES[case]
    suffix = "-static" if variant == "static" else ""
    args = ["--model-file", TEST_MODELS / f"misbehave_{prog}.model",
            "-D", f"bin=../progs/build/misbehave_{prog}{suffix}", *extra]
    if mode is not None:
        args += ["-D", f"mode={mode}"]
    status, out, err, tmp = run_misbehaving(args, tmp_path)
    try:
        assert status == 3, f"exit {status}\n{out[-3000:]}\n{err[-2000:]}"
        error = out[out.find("Error: "):]
        assert error.startswith("Error: node victim (step "), out[-3000:]
        for pattern in patterns:
            assert re.search(pattern, error, re.S), f"{pattern!r} not in:\n{error}"
        step = int(re.search(STEP, error).group(1))
        assert step >= 1, "the misbehaviour comes after the first delivery"
        assert "Traceback" not in out + err
    finally:
        assert _leftovers() == [], "cmc left processes behind"
        assert list(tmp.iterdir()) == [], "cmc left a temporary directory behind"


def test_no_process_left_after_a_clean_run(tmp_path):
    """The reference point: a model that passes leaves nothing either."""
    status, out, err, tmp = run_misbehaving(
        ["--model-file", TEST_MODELS / "misbehave_die.model", "-D", "mode=abort",
         "--max-depth", "1"], tmp_path)
    assert status == 0, out + err
    assert _leftovers() == []
    assert list(tmp.iterdir()) == []
