"""Issue 5: the demo suite. Each demo is a real program with a planted bug behind
#ifdef BUG that only one kind of environment action exposes: the correct build passes,
the bug build fails with the expected property and a shortest counterexample ending
in that action, and with that action's budget at 0 the bug build passes."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import MODELS, ROOT, counts, run_cmc

BUILD = ROOT / "demo" / "build"


def labels(out: str) -> list[str]:
    """The action of every state of the printed behavior, State 1's first."""
    return [label for _, label in re.findall(r"^State (\d+): <(.*)>$", out, re.M)]


def budget_zero_model(tmp_path, demo: str, kind: str):
    """models/DEMO.model with `budget KIND 0` and the bug build, written to tmp_path with
    absolute paths; without its witnesses (with no such action they may be unreachable:
    a vacuity check, not the property under test) and without its build line."""
    text = (MODELS / f"{demo}.model").read_text()
    text, n = re.subn(rf"^budget {kind} \d+", f"budget {kind} 0", text, flags=re.M)
    if n == 0:                  # fire is unlimited by default: add the line
        text += f"\nbudget {kind} 0\n"
    text = re.sub(r"^build .*$", "", text, flags=re.M)
    text = re.sub(r"^witness .*(\n[ \t]+.*)*", "", text, flags=re.M)
    text, n = re.subn(r'^param bin = "[^"]*"', f'param bin = "{BUILD / demo}-bug"', text,
                      flags=re.M)
    assert n == 1
    path = tmp_path / f"{demo}-{kind}0.model"
    path.write_text(text)
    return path


def check_correct(tmp_path, demo: str):
    r = run_cmc("--model-file", MODELS / f"{demo}.model", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking completed. No error has been found.\n" in r.stdout
    return counts(r.stdout)


def check_bug(tmp_path, demo: str, prop: str, kind: str = "Invariant"):
    trace = tmp_path / "trace.json"
    r = run_cmc("--model-file", MODELS / f"{demo}.model", "-D", f"bin=../demo/build/{demo}-bug",
                "--trace-out", trace, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"Error: {kind} {prop} is violated.\n" in r.stdout, r.stdout
    assert trace.exists()
    steps = labels(r.stdout)
    assert steps[0] == "Initial predicate"
    assert all(re.match(r"(DELIVER|DROP|FIRE|CRASH) ", s) for s in steps[1:]), steps
    return r.stdout, steps


def check_needs(tmp_path, demo: str, kind: str):
    model = budget_zero_model(tmp_path, demo, kind)
    r = run_cmc("--model-file", model, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking completed. No error has been found." in r.stdout
    return counts(r.stdout)


def no_node_left(demo: str):
    out = subprocess.run(["ps", "-eo", "args="], stdout=subprocess.PIPE, text=True).stdout
    left = [line for line in out.splitlines() if line.startswith(f"{BUILD / demo}")]
    assert left == []


# -- relay: only a DROP exposes the bug ---------------------------------------------------

def test_relay_correct(tmp_path):
    generated, distinct, depth = check_correct(tmp_path, "relay")
    assert generated > distinct > 100 and depth >= 10
    no_node_left("relay")


def test_relay_bug_is_caught_by_a_drop(tmp_path):
    out, steps = check_bug(tmp_path, "relay", "no_lost_message")
    assert steps[1:] == [
        "DELIVER alice -> relay CONNECT",
        'DELIVER alice -> relay "SEND 1\\n"',
        "DELIVER relay -> mailbox CONNECT",
        "DROP relay -> mailbox",
    ]
    assert 'raw |-> "OK 1"' in out.split("State 5:")[1]
    no_node_left("relay")


def test_relay_bug_needs_a_drop(tmp_path):
    generated, distinct, depth = check_needs(tmp_path, "relay", "drop")
    assert distinct > 10
    no_node_left("relay")


# -- lease: only a FIRE exposes the bug ----------------------------------------------------

def test_lease_correct(tmp_path):
    generated, distinct, depth = check_correct(tmp_path, "lease")
    assert generated > distinct > 50 and depth >= 10
    no_node_left("lease")


def test_lease_bug_is_caught_by_a_fire(tmp_path):
    out, steps = check_bug(tmp_path, "lease", "one_leader")
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


def test_lease_bug_needs_a_fire(tmp_path):
    check_needs(tmp_path, "lease", "fire")
    no_node_left("lease")


# -- twopc: only a CRASH exposes the bug ---------------------------------------------------

@pytest.mark.slow
def test_twopc_correct(tmp_path):
    generated, distinct, depth = check_correct(tmp_path, "twopc")
    assert generated > distinct > 200 and depth >= 15
    no_node_left("twopc")


def test_twopc_bug_is_caught_by_a_crash(tmp_path):
    out, steps = check_bug(tmp_path, "twopc", "commit_is_final")
    # the votes are in, the client hears COMMITTED, the coordinator crashes before its
    # commit record is written; recovering, it presumes abort
    assert steps[-3:] == ["CRASH coord", "DELIVER coord -> p1 CONNECT",
                          'DELIVER p1 -> coord "HELLO 1\\n"']
    assert len(steps) == 14
    crash = out.split("State 12:")[1]
    assert 'raw |-> "COMMITTED 1"' in crash
    no_node_left("twopc")


def test_twopc_bug_needs_a_crash(tmp_path):
    check_needs(tmp_path, "twopc", "crash")
    no_node_left("twopc")


# -- raft: only a CRASH exposes the bug ----------------------------------------------------

@pytest.mark.slow
def test_raft_correct(tmp_path):
    generated, distinct, depth = check_correct(tmp_path, "raft")
    assert generated > distinct > 100
    no_node_left("raft")


@pytest.mark.slow
def test_raft_bug_is_caught_by_a_crash(tmp_path):
    out, steps = check_bug(tmp_path, "raft", "election_safety")
    assert any(s.startswith("CRASH ") for s in steps)
    no_node_left("raft")


@pytest.mark.slow
def test_raft_bug_needs_a_crash(tmp_path):
    check_needs(tmp_path, "raft", "crash")
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
