"""ZooKeeper 3.8 (Debian's zookeeper), standalone and unmodified, under cmc (issue 49):
the JVM with its default flags, its host name resolved by cmc, two four-letter words at
2 s of one clock, both answered (`srvr` says standalone, `ruok` is answered `imok` and
closed, a reply line without its newline). Its worlds are copied (a NIO selector
thread asleep natively in epoll_wait too: proc/fork.py) with the same output as a replay
of every world from launch. Slow: a JVM search both ways. Skipped where ZooKeeper is not installed
(.ci/run installs it)."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import TEST_MODELS, counts, run_cmc
from test_fast import both_ways

JAR = "/usr/share/java/zookeeper.jar"
COUNTS = (25, 23, 7)      # ZooKeeper 3.8.0, OpenJDK 17
CRASH_COUNTS = (220, 216, 22)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(JAR) or shutil.which("java") is None,
                       reason="ZooKeeper is not installed (Debian zookeeper)"),
]


def test_zookeeper_standalone_answers_and_is_copied_as_replayed(tmp_path):
    rc, out, fast = both_ways(TEST_MODELS / "zookeeper.model", tmp_path, "--max-memory", "4G",
                              fast_args=())
    assert rc == 0, out[-2000:]
    assert "Model checking completed. No error has been found." in out
    assert counts(out) == COUNTS
    assert fast["copies"] > 0, fast
    assert fast["replayed"] == {}, fast["replayed"]


def test_an_acknowledged_create_survives_a_crash(tmp_path):
    """test/models/zookeeper_crash.model: a create acknowledged, one CRASH anywhere, the
    znode read back on a new session; ZooKeeper fsyncs its log before it answers, and
    with zookeeper.snapshot.trust.empty the search finishes with the create kept in
    every world, read back after a crash (the witness), every world copied."""
    report = tmp_path / "r.json"
    p = run_cmc("--model-file", TEST_MODELS / "zookeeper_crash.model", "--max-memory", "4G",
                "--strict", "--json", report, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert counts(p.stdout) == CRASH_COUNTS
    data = json.loads(report.read_text())
    assert data["copies"] > 0 and data["replayed"] == {}, (data["copies"], data["replayed"])


def test_a_crash_after_the_first_transaction_leaves_no_snapshot(tmp_path):
    """ZooKeeper's defaults: the snapshot of its empty tree, taken at its first start,
    is not fsynced, so a crash after the first logged create leaves a log without a
    snapshot, and ZooKeeper 3.8 will not start again (ZOOKEEPER-3056, for which 3.5.5
    added zookeeper.snapshot.trust.empty). cmc says so, with ZooKeeper's own words."""
    p = run_cmc("--model-file", TEST_MODELS / "zookeeper_crash.model", "--max-memory", "4G",
                "-D", "trust=false", timeout=900)
    assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
    assert "Error: node zk (step 3, <CRASH zk>): exited with status 1 outside a CRASH " \
           "action" in p.stdout
    assert "java.io.IOException: No snapshot found, but there are log entries." in p.stdout
    assert "Traceback" not in p.stdout + p.stderr
