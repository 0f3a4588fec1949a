"""Threads, end to end, on tlog (demo/tlog.c, models/tlog.model), durlog's
replicated log with a multi-threaded primary, as a threaded server ships: a thread per
client connection (detached), one connection to the backup shared by every client
thread under a mutex, and a reader thread that wakes the waiting client threads with a
condition variable. Up to four threads of the primary are blocked at once (accept, recv
on the backup connection, two condvar waits), so this checks threads
(docs/target-contract.md, "Threads") end to end: the correct build passes, the bug build
(ACK before the backup's ACK and before the fsync) is caught by a CRASH and only by one,
the counts are exact in replay and --fast, the output is the same byte for byte from run
to run and in both modes, and --det finds nothing."""
from __future__ import annotations

import json
import re

import pytest

from conftest import MODELS, ROOT, counts, left_behind, run_cmc, without_timestamps

BUILD = ROOT / "demo" / "build"
MODEL = MODELS / "tlog.model"

# (generated, distinct, depth): the correct build, the bug build, and the bug build
# with `budget crash 0`.
COUNTS = {
    "correct": (4671, 2478, 14),
    "bug": (205, 122, 5),
    "crash 0": (551, 323, 12),
}

# The shortest behavior: alice's PUT 7 is forwarded and acknowledged at once, then the
# primary crashes before the backup has it and before its own fsync.
BUG_STEPS = [
    "Initial predicate",
    "DELIVER primary -> backup CONNECT",
    "DELIVER alice -> primary CONNECT",
    'DELIVER alice -> primary "PUT 7\\n"',
    "CRASH primary",
]

OK = "Model checking completed. No error has been found.\n"


def labels(out: str) -> list[str]:
    """The action of every state of the printed behavior, State 1's first."""
    return re.findall(r"^State \d+: <(.*)>$", out, re.M)


def no_node_left(name: str = "tlog"):
    assert left_behind(f"{BUILD / name}", at_start=True) == []


def correct(tmp_path, *args) -> str:
    r = run_cmc("--model-file", MODEL, *args, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert OK in r.stdout
    assert counts(r.stdout) == COUNTS["correct"]
    return r.stdout


def bug(tmp_path, *args) -> str:
    trace = tmp_path / "trace.json"
    r = run_cmc("--model-file", MODEL, "-D", "bin=../demo/build/tlog-bug",
                "--trace-out", trace, *args, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Invariant no_lost_commit is violated.\n" in r.stdout, r.stdout
    assert trace.exists()
    assert labels(r.stdout) == BUG_STEPS
    assert counts(r.stdout) == COUNTS["bug"]
    acked, crashed = r.stdout.split("State 4:")[1].split("State 5:")
    assert 'raw |-> "ACK 7", val |-> 7' in acked          # told committed ...
    assert '"log": [7]' not in crashed                    # ... and gone after the crash
    return without_timestamps(r.stdout).replace(str(trace), "TRACE")


def crash0_model(tmp_path):
    """models/tlog.model with `budget crash 0` and the bug build, absolute paths, no
    build line and no witness (both_acked is a vacuity check, not under test)."""
    text = MODEL.read_text()
    text, n = re.subn(r"^budget crash \d+", "budget crash 0", text, flags=re.M)
    assert n == 1
    text = re.sub(r"^build .*$", "", text, flags=re.M)
    text = re.sub(r"^witness .*$", "", text, flags=re.M)
    text, n = re.subn(r'^param bin = "[^"]*"', f'param bin = "{BUILD / "tlog"}-bug"', text,
                      flags=re.M)
    assert n == 1
    path = tmp_path / "tlog-crash0.model"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_tlog_correct_fast(tmp_path):
    correct(tmp_path, "--fast")
    no_node_left()


@pytest.mark.slow
def test_tlog_correct_replay_gives_what_fast_gives(tmp_path):
    replay = correct(tmp_path, "--no-fast")
    fast = correct(tmp_path, "--fast")
    assert without_timestamps(fast) == without_timestamps(replay)
    no_node_left()


def test_tlog_bug_is_caught_by_a_crash_the_same_both_ways(tmp_path):
    (tmp_path / "replay").mkdir()
    (tmp_path / "fast").mkdir()
    replay = bug(tmp_path / "replay", "--no-fast")
    fast = bug(tmp_path / "fast", "--fast")
    assert fast == replay
    no_node_left()


@pytest.mark.parametrize("mode", [pytest.param(("--no-fast",), marks=pytest.mark.slow),
                                  ("--fast",)], ids=["replay", "fast"])
def test_tlog_bug_needs_a_crash(tmp_path, mode):
    r = run_cmc("--model-file", crash0_model(tmp_path), *mode, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert OK in r.stdout
    assert counts(r.stdout) == COUNTS["crash 0"]
    no_node_left()


@pytest.mark.slow
def test_tlog_five_runs_are_byte_identical(tmp_path):
    """Threads run one at a time in a fixed order: the host's scheduler shows nowhere."""
    outs = {without_timestamps(correct(tmp_path, "--fast")) for _ in range(5)}
    assert len(outs) == 1
    no_node_left()


@pytest.mark.slow
def test_tlog_det_is_clean(tmp_path):
    correct(tmp_path, "--det", "--fast")
    no_node_left()


# -- gokv: the same protocol in Go (demo/gokv), goroutines over the Go runtime's threads

GOKV = MODELS / "gokv.model"
GOKV_COUNTS = {"correct": (486, 289, 13), "bug": (80, 56, 5)}
needs_go = pytest.mark.skipif(not (BUILD / "gokv").exists(),
                              reason="demo/build/gokv is built only where Go is installed "
                                     "(Debian: golang-go; CI installs it)")


def gokv(tmp_path, build: str, *args) -> str:
    """Run models/gokv.model on the correct or the bug build; its output, timestamps
    and the trace's path left out."""
    trace = tmp_path / "trace.json"
    extra = ("-D", "bin=../demo/build/gokv-bug", "--trace-out", trace) if build == "bug" else ()
    r = run_cmc("--model-file", GOKV, *extra, *args, cwd=tmp_path)
    if build == "bug":
        assert r.returncode == 1, r.stdout + r.stderr
        assert "Error: Invariant no_lost_commit is violated.\n" in r.stdout, r.stdout
        assert labels(r.stdout) == BUG_STEPS
    else:
        assert r.returncode == 0, r.stdout + r.stderr
        assert OK in r.stdout
    assert counts(r.stdout) == GOKV_COUNTS[build]
    no_node_left("gokv")
    return without_timestamps(r.stdout).replace(str(trace), "TRACE")


@needs_go
def test_gokv_correct_holds_and_the_bug_is_caught_by_a_crash(tmp_path):
    gokv(tmp_path, "correct")
    assert gokv(tmp_path, "bug", "--no-fast") == gokv(tmp_path, "bug", "--fast")


@needs_go
@pytest.mark.slow
def test_gokv_five_runs_byte_identical_det_clean_fast_equal(tmp_path):
    """The Go runtime's threads (sysmon, the netpoller, idle Ms) run one at a time:
    five runs print the same, --det finds nothing, --fast (which copies the threaded
    worlds) prints what replay prints."""
    outs = {gokv(tmp_path, "correct", "--no-fast") for _ in range(5)}
    assert len(outs) == 1
    assert gokv(tmp_path, "correct", "--fast") in outs
    gokv(tmp_path, "correct", "--det")


GOSSIP = MODELS / "gogossip.model"
GOSSIP_COUNTS = {"correct": (625, 302, 12), "bug": (91, 58, 6)}


def gossip(tmp_path, build: str, *args) -> str:
    """models/gogossip.model (three Go nodes that send a membership map in Go's map
    order) on the correct or the bug build; its output without timestamps."""
    extra = ("-D", "bin=../demo/build/gogossip-bug") if build == "bug" else ()
    r = run_cmc("--model-file", GOSSIP, *extra, *args, "--json", tmp_path / "r.json",
                cwd=tmp_path)
    assert r.returncode == (1 if build == "bug" else 0), r.stdout + r.stderr
    if build == "bug":
        assert "Error: Action property versions_never_decrease is violated.\n" in r.stdout
    assert counts(r.stdout) == GOSSIP_COUNTS[build]
    return without_timestamps(r.stdout)


@pytest.mark.skipif(not (BUILD / "gogossip").exists(), reason="demo/build/gogossip is built "
                    "only where Go is installed (Debian: golang-go; CI installs it)")
@pytest.mark.slow
def test_gogossip_five_runs_byte_identical_det_clean_copied(tmp_path):
    """Issue 32, acceptance 1: Go ranges over a map in an order drawn from its random
    numbers, seeded by the TSC, which is cmc's: five runs print the same, --det finds
    nothing, and the copied search (every world copied: `replayed` empty) prints what
    replay prints; the bug build is caught the same both ways."""
    outs = {gossip(tmp_path, "correct", "--no-fast") for _ in range(5)}
    assert len(outs) == 1
    assert gossip(tmp_path, "correct") in outs
    assert json.loads((tmp_path / "r.json").read_text())["replayed"] == {}
    gossip(tmp_path, "correct", "--det")
    assert gossip(tmp_path, "bug") == gossip(tmp_path, "bug", "--no-fast")
