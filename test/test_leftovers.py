"""Nothing outlives cmc (issue 11): however a run ends -- by itself, on an error,
Ctrl-C, SIGTERM, SIGKILL of cmc or of one of its workers -- no process of it is left
(cmc, its workers, the nodes, their --fast copies), and no scratch directory once
the next run has started (one killed with SIGKILL cannot remove its own). For
replay, --fast, --workers 2 and both. `python test/leftovers.py` prints the table."""
from __future__ import annotations

import os

import pytest

from leftovers import DEATHS, MODES, STATUS, _model, _wait_until, cmc, owned_by, processes, \
    run_and_end

CASES = [(m, d) for m in MODES for d in DEATHS
         if d != "SIGKILL of a worker" or "--workers" in m]


def _slow_unless_fast(cases):
    """The default run ends the searches cmc runs by default (--fast, alone and with
    workers) every way; replayed ones (--no-fast) are ended so in the slow run."""
    return [pytest.param(m, d, id=f"{m}-{d}",
                         marks=[] if m.startswith("--fast") else [pytest.mark.slow])
            for m, d in cases]


@pytest.mark.parametrize("mode,death", _slow_unless_fast(CASES))
def test_nothing_is_left(tmp_path, mode, death):
    r = run_and_end(tmp_path, mode, death)
    assert r["status"] == STATUS[death], r["stdout"][-3000:] + r["stderr"][-3000:]
    assert r["processes"] == []
    assert r["dirs"] == []
    assert r["next status"] == 0
    if death == "SIGKILL":
        # it could not clean up itself: the next run did
        assert len(r["dirs before the next run"]) == 1
    else:
        assert r["dirs before the next run"] == []
    if death == "SIGKILL of a worker":
        assert "Error: worker process 0 died of SIGKILL" in r["stdout"], r["stdout"][-3000:]


# Nodes that are process trees (docs/target-contract.md, "Process trees"): a shell that
# forks durlog and waits. The shell dies with cmc (PR_SET_PDEATHSIG); durlog, its child,
# does not by itself: the guard (csrc cmc_guard) kills the node's group.
WRAPPED = [(m, d) for m in ("replay", "--fast", "--workers 2")
           for d in ("exit", "SIGTERM", "SIGKILL")] + [("--workers 2", "SIGKILL of a worker")]


@pytest.mark.parametrize("mode,death", _slow_unless_fast(WRAPPED))
def test_nothing_of_a_process_tree_is_left(tmp_path, mode, death):
    r = run_and_end(tmp_path, mode, death, wrap=True)
    assert r["status"] == STATUS[death], r["stdout"][-3000:] + r["stderr"][-3000:]
    assert r["processes"] == []
    assert r["dirs"] == []
    assert r["next status"] == 0


# Daemons (docs/target-contract.md, "Process trees"): durlog in a session of its own
# (setsid), in a group of its own (setpgid), its parents gone. Not in the node's first
# group: the guard kills the groups the node's processes made.
DAEMON = [("replay", "SIGKILL"), ("--workers 2", "SIGKILL"), ("replay", "exit")]


@pytest.mark.parametrize("mode,death", [
    pytest.param(m, d, id=f"{m}-{d}", marks=pytest.mark.slow) for m, d in DAEMON])
def test_nothing_of_a_daemon_is_left(tmp_path, mode, death):
    r = run_and_end(tmp_path, mode, death, wrap="daemon")
    assert r["status"] == STATUS[death], r["stdout"][-3000:] + r["stderr"][-3000:]
    assert r["processes"] == []
    assert r["dirs"] == []


def test_a_directory_that_is_not_cmcs_is_never_removed(tmp_path, monkeypatch):
    """Only directories marked as a cmc run's (OWNER) and unlocked are removed."""
    import tempfile

    from cmc.scratch import remove_stale
    scratch = tmp_path / "scratch"
    (scratch / "cmc-notours").mkdir(parents=True)
    (scratch / "cmc-gone").mkdir()
    (scratch / "cmc-gone" / "OWNER").write_text("1\n")
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    removed = remove_stale()
    assert str(scratch / "cmc-gone") in removed
    assert sorted(os.listdir(scratch)) == ["cmc-notours"]


def test_the_next_run_removes_a_killed_runs_directory_in_dev_shm(tmp_path):
    """Where cmc puts its scratch directory by itself (/dev/shm when it has room): a
    run killed with SIGKILL leaves it there, and the next run removes it."""
    model = _model(tmp_path, long=True)
    p = cmc(tmp_path, "--model-file", model, "--fast", shm=True)
    assert _wait_until(lambda: any(str(tmp_path / "bin") in a for _, _, a in processes(tmp_path)))
    left = owned_by(p.pid)
    assert len(left) == 1
    p.kill()
    p.communicate(timeout=60)
    assert _wait_until(lambda: not processes(tmp_path), timeout=20)
    assert os.path.isdir(left[0])                   # it could not remove its own
    nxt = cmc(tmp_path, "--model-file", _model(tmp_path), "--max-depth", "1", shm=True)
    nxt.communicate(timeout=120)
    assert nxt.returncode == 0
    assert not os.path.exists(left[0])
    assert owned_by(nxt.pid) == []
