"""pysyncobj (PyPI) with its file journal, under cmc (issue 32, acceptance 5):
test/models/pysyncobj*.model, test/pysyncobj/counter_node.py.

Two nodes of a replicated counter, SyncObj(journalFile=...): pysyncobj keeps its Raft
log in a shared writable mmap of the journal file, which cmc models under `disk fsync`
(docs/target-contract.md, "The disk"). What holds today:
- the cluster launches, elects node a and commits a ghost client's INC ("OK 1"), with
  no ERR answer: a seeded simulation in seconds, and the whole breadth-first search
  (slow: 2097 states, depth 18, about 8 minutes). The search runs with --no-fast: by
  default every world in the queue keeps its two Python processes (some 8 MB each),
  and the queue of this search passes --max-memory 3G at about 570 distinct states;
  replaying every world keeps none, and checks on the way that pysyncobj does the same
  on every launch (it does);
- a CRASH under `disk fsync` finds what pysyncobj does not make durable: it creates
  the journal with open()+write() and no fsync and never msyncs the mapping, so the
  relaunched node finds an empty journal and stops (`ValueError: cannot mmap an empty
  file`): cmc reports it at the first CRASH (exit 3);
- under `disk off` the relaunched node reads its journal and goes on.
"""
from __future__ import annotations

import importlib.metadata
import sys

import pytest

from conftest import TEST_MODELS, counts, run_cmc

def _installed() -> bool:
    """Whether pysyncobj is installed, without importing it: importing it would patch
    the socket module of this test process (pysyncobj/win_inet_pton.py)."""
    try:
        importlib.metadata.version("pysyncobj")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


pytestmark = pytest.mark.skipif(not _installed(),
                                reason="pysyncobj is not installed (pip install pysyncobj)")

MAX_MEMORY = "3G"


def check(model: str, tmp_path, *args):
    return run_cmc("--model-file", TEST_MODELS / model, "-D", f"python={sys.executable}",
                   "--max-memory", MAX_MEMORY, *args, cwd=tmp_path, timeout=900)


def walks(n: int):
    return ("--simulate", "--seed", "1", "--walks", str(n), "--max-depth", "40")


def test_launches_and_commits(tmp_path):
    r = check("pysyncobj.model", tmp_path, *walks(10))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    # the witness `committed` was reached (a witness never reached is an error), and
    # no answer was an ERR
    assert "Simulation completed: 10 walks, no error has been found." in r.stdout
    assert counts(r.stdout) == (180, 138, 18)


@pytest.mark.slow
def test_launches_and_commits_in_every_order(tmp_path):
    r = check("pysyncobj.model", tmp_path, "--no-fast")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Model checking completed. No error has been found." in r.stdout
    assert counts(r.stdout) == (2097, 1596, 18)


def test_a_crash_finds_the_journal_not_durable(tmp_path):
    r = check("pysyncobj-crash.model", tmp_path)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    assert ("Error: node a (step 1, <CRASH a>): exited with status 1 outside a CRASH action"
            in r.stdout), r.stdout[-3000:]
    assert "ValueError: cannot mmap an empty file" in r.stdout


@pytest.mark.slow
def test_a_crash_under_disk_off_relaunches(tmp_path):
    r = check("pysyncobj-crash-off.model", tmp_path, *walks(20))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    # witnesses `committed` and `relaunched` both reached
    assert "Simulation completed: 20 walks, no error has been found." in r.stdout
    assert counts(r.stdout) == (331, 256, 20)
