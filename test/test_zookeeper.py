"""ZooKeeper 3.8 (Debian's zookeeper), standalone and unmodified, under cmc (issue 49):
the JVM with its default flags, its host name resolved by cmc, two four-letter words at
2 s of one clock, both answered (`srvr` says standalone, `ruok` is answered `imok` and
closed, a reply line without its newline). Its worlds are copied with the same output
as a replay of every world from launch, but for the successors of the worlds where a
NIO selector thread sleeps natively in epoll_wait, which are replayed, saying so (a gap
of issue 49). Slow: a JVM search both ways. Skipped where ZooKeeper is not installed
(.ci/run installs it)."""
from __future__ import annotations

import os
import shutil

import pytest

from conftest import TEST_MODELS, counts
from test_fast import both_ways

JAR = "/usr/share/java/zookeeper.jar"
COUNTS = (25, 23, 7)      # ZooKeeper 3.8.0, OpenJDK 17
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
    assert set(fast["replayed"]) <= {"node zk: thread 19 sleeps natively in epoll_wait"}, \
        fast["replayed"]
