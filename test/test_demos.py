"""The demo suite catches every planted bug. Each demo is a real program with a
planted bug behind
#ifdef BUG that only one kind of environment action exposes: the correct build passes,
the bug build fails with the expected property and a shortest counterexample ending
in that action, and with that action's budget at 0 the bug build passes. Each run is
made with replay and with --fast, which must give the same exact counts."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import MODELS, ROOT, counts, left_behind, run_cmc

BUILD = ROOT / "demo" / "build"

# (generated, distinct, depth) of each demo's correct build, bug build, and bug build
# with the exposing action's budget at 0 (the bug gate's table in docs/demos.md).
COUNTS = {
    ("relay", "correct"): (997, 507, 17),
    ("relay", "bug"): (36, 24, 5),
    ("relay", "drop 0"): (85, 58, 13),
    ("lease", "correct"): (187, 86, 13),
    ("lease", "bug"): (93, 53, 8),
    ("lease", "fire 0"): (23, 16, 6),
    ("twopc", "correct"): (664, 412, 19),
    ("twopc", "bug"): (458, 292, 14),
    ("twopc", "crash 0"): (47, 31, 15),
    ("raft", "correct"): (1043, 513, 16),
    ("raft", "bug"): (268, 155, 8),
    ("raft", "crash 0"): (151, 88, 14),
}


@pytest.fixture(params=[pytest.param("replay", marks=pytest.mark.slow), "fast"])
def mode(request) -> tuple[str, ...]:
    """The extra arguments of each way of visiting worlds."""
    return ("--fast",) if request.param == "fast" else ("--no-fast",)


def labels(out: str) -> list[str]:
    """The action of every state of the printed behavior, State 1's first."""
    return [label for _, label in re.findall(r"^State (\d+): <(.*)>$", out, re.M)]


def budget_model(tmp_path, demo: str, kind: str, n: int, build: str, witnesses: bool = True):
    """models/DEMO.model with `budget KIND N` and the build `build`, written to tmp_path
    with absolute paths and without its build line (and, unless `witnesses`, without its
    witnesses)."""
    text = (MODELS / f"{demo}.model").read_text()
    text, found = re.subn(rf"^budget {kind} \d+", f"budget {kind} {n}", text, flags=re.M)
    if found == 0:              # fire is unlimited by default: add the line
        text += f"\nbudget {kind} {n}\n"
    text = re.sub(r"^build .*$", "", text, flags=re.M)
    if not witnesses:
        text = re.sub(r"^witness .*(\n[ \t]+.*)*", "", text, flags=re.M)
    text, found = re.subn(r'^param bin = "[^"]*"', f'param bin = "{BUILD / build}"', text,
                          flags=re.M)
    assert found == 1
    path = tmp_path / f"{build}-{kind}{n}.model"
    path.write_text(text)
    return path


def budget_zero_model(tmp_path, demo: str, kind: str):
    """models/DEMO.model with `budget KIND 0` and the bug build; without its witnesses
    (with no such action they may be unreachable: a vacuity check, not the property
    under test)."""
    return budget_model(tmp_path, demo, kind, 0, f"{demo}-bug", witnesses=False)


def check_correct(tmp_path, demo: str, mode: tuple[str, ...]):
    r = run_cmc("--model-file", MODELS / f"{demo}.model", *mode, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking completed. No error has been found.\n" in r.stdout
    assert counts(r.stdout) == COUNTS[demo, "correct"]


def check_bug(tmp_path, demo: str, prop: str, mode: tuple[str, ...], kind: str = "Invariant"):
    trace = tmp_path / "trace.json"
    r = run_cmc("--model-file", MODELS / f"{demo}.model", "-D", f"bin=../demo/build/{demo}-bug",
                "--trace-out", trace, *mode, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"Error: {kind} {prop} is violated.\n" in r.stdout, r.stdout
    assert trace.exists()
    steps = labels(r.stdout)
    assert steps[0] == "Initial predicate"
    assert all(re.match(r"(DELIVER|DROP|FIRE|CRASH) ", s) for s in steps[1:]), steps
    assert counts(r.stdout) == COUNTS[demo, "bug"]
    assert len(steps) == COUNTS[demo, "bug"][2]
    return r.stdout, steps


def check_needs(tmp_path, demo: str, kind: str, mode: tuple[str, ...]):
    model = budget_zero_model(tmp_path, demo, kind)
    r = run_cmc("--model-file", model, *mode, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking completed. No error has been found." in r.stdout
    assert counts(r.stdout) == COUNTS[demo, f"{kind} 0"]


def no_node_left(demo: str):
    assert left_behind(f"{BUILD / demo}", at_start=True) == []


# -- relay: only a DROP exposes the bug ---------------------------------------------------

def test_relay_correct(tmp_path, mode):
    check_correct(tmp_path, "relay", mode)
    no_node_left("relay")


def test_relay_bug_is_caught_by_a_drop(tmp_path, mode):
    out, steps = check_bug(tmp_path, "relay", "no_lost_message", mode)
    assert steps[1:] == [
        "DELIVER alice -> relay CONNECT",
        'DELIVER alice -> relay "SEND 1\\n"',
        "DELIVER relay -> mailbox CONNECT",
        "DROP relay -> mailbox",
    ]
    assert 'raw |-> "OK 1"' in out.split("State 5:")[1]
    no_node_left("relay")


def test_relay_bug_needs_a_drop(tmp_path, mode):
    check_needs(tmp_path, "relay", "drop", mode)
    no_node_left("relay")


# -- lease: only a FIRE exposes the bug ----------------------------------------------------

def test_lease_correct(tmp_path, mode):
    check_correct(tmp_path, "lease", mode)
    no_node_left("lease")


def test_lease_bug_is_caught_by_a_fire(tmp_path, mode):
    out, steps = check_bug(tmp_path, "lease", "one_leader", mode)
    assert steps[1:] == [
        "DELIVER w1 -> server CONNECT",
        'DELIVER w1 -> server "ACQUIRE 1\\n"',
        'DELIVER server -> w1 "GRANT 1000\\n"',
        "DELIVER w2 -> server CONNECT",
        'DELIVER w2 -> server "ACQUIRE 2\\n"',
        "FIRE server poll 1s",
        'DELIVER server -> w2 "GRANT 1000\\n"',
    ]
    no_node_left("lease")


def test_lease_bug_needs_a_fire(tmp_path, mode):
    check_needs(tmp_path, "lease", "fire", mode)
    no_node_left("lease")


# -- twopc: only a CRASH exposes the bug ---------------------------------------------------

@pytest.mark.slow
def test_twopc_correct(tmp_path, mode):
    check_correct(tmp_path, "twopc", mode)
    no_node_left("twopc")


def test_twopc_bug_is_caught_by_a_crash(tmp_path, mode):
    out, steps = check_bug(tmp_path, "twopc", "commit_is_final", mode)
    # the votes are in, the client hears COMMITTED, the coordinator crashes before its
    # commit record is written; recovering, it presumes abort
    assert steps[-3:] == ["CRASH coord", "DELIVER coord -> p1 CONNECT",
                          'DELIVER p1 -> coord "HELLO 1\\n"']
    crash = out.split("State 12:")[1]
    assert 'raw |-> "COMMITTED 1"' in crash
    no_node_left("twopc")


def test_twopc_bug_needs_a_crash(tmp_path, mode):
    check_needs(tmp_path, "twopc", "crash", mode)
    no_node_left("twopc")


@pytest.mark.slow
@pytest.mark.parametrize("demo,expected", [("twopc", (4595, 2522, 22)),
                                           ("durlog", (10087, 4239, 15)),
                                           ("relay", (15351, 5684, 19)),
                                           ("lease", (5475, 1870, 17)),
                                           ("raft", (3124, 1169, 17)),
                                           ("gokv", (1789, 968, 15))])
def test_liveness_holds_after_two_crashes(tmp_path, demo, expected):
    """Each demo's quiescent liveness property at budget crash 2 as well (issue 16,
    docs/demos.md). twopc failed it until the demo was fixed: a participant that crashed
    while greeting a restarted coordinator stayed in doubt for ever (the coordinator
    retried a lost participant only when something else woke it). gokv failed it at its
    own budgets: a crash of the backup left both PUTs unanswered for ever, until the
    primary redialed for the PUT itself. The others held. (tlog's, 16273 states, takes
    some six minutes and is left to `cmc` by hand: docs/demos.md.)"""
    r = run_cmc("--model-file", budget_model(tmp_path, demo, "crash", 2, demo), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert counts(r.stdout) == expected
    no_node_left(demo)


# -- raft: only a CRASH exposes the bug ----------------------------------------------------

@pytest.mark.slow
def test_raft_correct(tmp_path, mode):
    check_correct(tmp_path, "raft", mode)
    no_node_left("raft")


@pytest.mark.slow
def test_raft_bug_is_caught_by_a_crash(tmp_path, mode):
    out, steps = check_bug(tmp_path, "raft", "election_safety", mode)
    # n2 votes for n0, crashes before the vote is saved, and votes again for n1
    assert steps[1:] == [
        "DELIVER n0 -> n2 CONNECT",
        'DELIVER n0 -> n2 "RV 1 0 0 0\\n"',
        'DELIVER n2 -> n0 "RVR 1 1 2\\n"',
        "CRASH n2",
        "DELIVER n1 -> n2 CONNECT",
        'DELIVER n1 -> n2 "RV 1 1 0 0\\n"',
        'DELIVER n2 -> n1 "RVR 1 1 2\\n"',
    ]
    no_node_left("raft")


@pytest.mark.slow
def test_raft_bug_needs_a_crash(tmp_path, mode):
    check_needs(tmp_path, "raft", "crash", mode)
    no_node_left("raft")


# -- the gate ----------------------------------------------------------------------------

def test_bug_gate_script_on_two_demos():
    env = dict(os.environ, CMC=f"{sys.executable} -m cmc")
    r = subprocess.run(["bash", str(ROOT / "scripts" / "bug_gate.sh"), "relay", "lease"],
                       cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "4 passed, 0 failed"
    rows = [line.split() for line in lines if line.startswith(("relay ", "lease "))]
    assert [(row[0], row[1]) for row in rows] == [("relay", "correct"), ("relay", "bug"),
                                                  ("lease", "correct"), ("lease", "bug")]
    assert all(row[-1] == "PASS" for row in rows)
    # generated, distinct, depth, then the counterexample's length (states)
    assert [tuple(int(n) for n in row[-6:-3]) for row in rows] == [
        COUNTS[demo, build] for demo in ("relay", "lease") for build in ("correct", "bug")]
    assert [row[-3] for row in rows][::2] == ["-", "-"]
    assert all(int(row[-3]) >= 2 for row in rows[1::2])
