"""cmc checks the real durlog program end to end: the correct build passes, the bug
build is caught (a crash after the ACK, by a shortest trace) and passes without crashes,
the output is the same byte for byte, time through libc is logical, an interrupt leaves
nothing behind, and --replay shows each step of a trace."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import MODELS, ROOT, TEST_MODELS, counts, left_behind, run_cmc, without_timestamps

DURLOG = MODELS / "durlog.model"
BUG = "bin=../demo/build/durlog-bug"


def crash0_model(tmp_path):
    """durlog.model with `budget crash 0`, written elsewhere (paths made absolute)."""
    text = DURLOG.read_text()
    assert "budget crash 1" in text
    text = text.replace("budget crash 1", "budget crash 0")
    text = re.sub(r'^build .*$', "", text, flags=re.M)
    path = tmp_path / "durlog-crash0.model"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_correct_durlog_passes(tmp_path):
    r = run_cmc("--model-file", DURLOG, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("cmc ") and "\nStarting... (" in out
    assert "Computing initial states...\n" in out
    assert re.search(r"^Finished computing initial states: 1 distinct state generated at "
                     r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.$", out, re.M)
    assert "Model checking completed. No error has been found.\n" in out
    assert "  calculated (optimistic):  val = " in out
    generated, distinct, depth = counts(out)
    assert generated > distinct > 100 and depth > 5
    assert re.search(r"^Finished in \d\ds at \(", out, re.M) or "min" in out


def test_bug_is_caught_with_crash_after_ack(tmp_path):
    trace = tmp_path / "t.json"
    r = run_cmc("--model-file", DURLOG, "-D", BUG, "--trace-out", trace, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert "Error: Invariant no_lost_commit is violated.\n" in out
    assert "Error: The behavior up to this point is:\n" in out
    states = re.findall(r"^State (\d+): <(.*)>$", out, re.M)
    assert states[0] == ("1", "Initial predicate")
    labels = [label for _, label in states]
    # every step names its action; the last one crashes the primary after it acked
    assert all(re.match(r"(DELIVER|DROP|FIRE|CRASH) ", lb) for lb in labels[1:])
    assert labels[-1] == "CRASH primary"
    assert 'DELIVER alice -> primary "PUT 7\\n"' in labels
    acked_at = next(i for i, b in enumerate(out.split("State ")) if "raw |-> \"ACK 7\"" in b)
    assert acked_at < len(states)
    # shortest: connect to backup, client connect, request, crash
    assert len(states) == 5
    assert trace.exists()


def test_bug_needs_the_crash(tmp_path):
    model = crash0_model(tmp_path)
    r = run_cmc("--model-file", model, "-D", f"bin={ROOT}/demo/build/durlog-bug", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking completed. No error has been found." in r.stdout


def test_same_model_same_output_byte_for_byte(tmp_path):
    outs = []
    for _ in range(2):
        r = run_cmc("--model-file", DURLOG, "-D", BUG, "--trace-out", tmp_path / "t.json",
                    cwd=tmp_path)
        assert r.returncode == 1
        outs.append(without_timestamps(r.stdout))
    assert outs[0] == outs[1]
    model = crash0_model(tmp_path)
    full = [without_timestamps(run_cmc("--model-file", model, "-D",
                                       f"bin={ROOT}/demo/build/durlog-bug").stdout)
            for _ in range(2)]
    assert full[0] == full[1] and "No error has been found" in full[0]


@pytest.mark.parametrize("variant", ["clock", "clock-static"])
def test_clock_through_libc_is_logical(variant):
    r = run_cmc("--model-file", TEST_MODELS / "clock.model", "-D", f"bin=../progs/build/{variant}")
    assert r.returncode == 0, r.stdout + r.stderr
    generated, distinct, depth = counts(r.stdout)
    assert (generated, distinct, depth) == (2, 2, 2)


def _cmc_processes():
    return left_behind("demo/build/durlog")


def _durlog_running(tmp_path, settle: float):
    """cmc checking durlog with its own TMPDIR, `settle` seconds after its scratch
    directory appeared (well inside the search): (process, TMPDIR)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    p = subprocess.Popen([sys.executable, "-m", "cmc", "--model-file", str(DURLOG)], cwd=tmp_path,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and not any(tmp.iterdir()):
        time.sleep(0.05)
    time.sleep(settle)
    assert p.poll() is None
    return p, tmp


def _left_nothing(tmp) -> None:
    assert list(tmp.iterdir()) == []
    assert _cmc_processes() == []


def test_ctrl_c_leaves_nothing_behind(tmp_path):
    p, tmp = _durlog_running(tmp_path, 2.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, out + err
    assert "interrupted" in err
    _left_nothing(tmp)


def test_sigterm_leaves_nothing_behind(tmp_path):
    """At any moment: here 3 s after the start, whatever cmc is doing then."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    p = subprocess.Popen([sys.executable, "-m", "cmc", "--model-file", str(DURLOG)], cwd=tmp_path,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)
    p.terminate()
    p.communicate(timeout=30)
    _left_nothing(tmp)


def test_interrupts_during_cleanup_leave_nothing_behind(tmp_path):
    """A second Ctrl-C or SIGTERM (pressed twice; a supervisor that repeats itself)
    lands in the cleanup of the first: it must not cut the cleanup in half, nor turn
    the exit status into a kill."""
    p, tmp = _durlog_running(tmp_path, 1.0)
    sent, deadline = 0, time.time() + 60
    while p.poll() is None and time.time() < deadline:
        p.send_signal(signal.SIGINT if sent % 2 else signal.SIGTERM)
        sent += 1
        time.sleep(0.002)
    out, err = p.communicate(timeout=30)
    assert sent > 1
    assert p.returncode == 130, out + err
    assert "interrupted" in err and "Traceback" not in err
    _left_nothing(tmp)


def test_replay_shows_each_step_of_durlog_bug_with_node_output(tmp_path):
    """`cmc --replay` runs the written trace again from a fresh launch and shows,
    step by step, the action, each node's emulated calls and output, and the world."""
    trace = tmp_path / "t.json"
    r = run_cmc("--model-file", DURLOG, "-D", BUG, "--trace-out", trace, cwd=tmp_path)
    assert r.returncode == 1
    r = run_cmc("--replay", trace, cwd=tmp_path)      # the params come from the trace
    assert r.returncode == 1, r.stdout + r.stderr
    steps = re.split(r"^(?=State \d+: )", r.stdout, flags=re.M)[1:]
    assert [s.splitlines()[0] for s in steps] == [
        "State 1: <Initial predicate>",
        "State 2: <DELIVER primary -> backup CONNECT>",
        "State 3: <DELIVER alice -> primary CONNECT>",
        'State 4: <DELIVER alice -> primary "PUT 7\\n">',
        "State 5: <CRASH primary>",
    ]
    launch, connect, accept, put, crash = steps
    assert "    primary stdout: primary: recovered 0 value(s)" in launch
    assert re.search(r"^    backup: listen\(500, \d+\) = 0$", launch, re.M)
    assert re.search(r"^    primary: connect\(501, .*\) = 0$", connect, re.M)
    assert "    backup stdout: backup: primary connected" in connect
    assert re.search(r"^    primary: accept\(500, .*\) = 502$", accept, re.M)
    assert re.search(r'^    primary: recvfrom\(502, .*\) = 6  "PUT 7\\n"$', put, re.M)
    assert re.search(r'^    primary: sendto\(502, .*\) = 6  "ACK 7\\n"$', put, re.M)
    assert "    primary stdout: primary: acked 7" in put
    assert 'raw |-> "ACK 7"' in put
    # after the crash the relaunched primary recovers nothing: the ack was a lie
    assert "    primary stdout: primary: recovered 0 value(s)" in crash
    assert '/\\ crashes = [primary |-> 1, backup |-> 0]' in crash
    assert "Error: Invariant no_lost_commit is violated." in r.stdout
