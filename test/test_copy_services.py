"""Third-party services copied, not replayed (issue 33, acceptance 3): NATS, one server,
and etcd, one member, are multi-threaded Go programs; each is checked with `--no-fast`
(every world replayed from launch) and copied (the default), and the two runs must give
the same output, byte for byte apart from timestamps (test_fast.both_ways), with worlds
really copied (`copies` > 0 in the JSON report) and none replayed because it could not
be copied (`replayed` empty). Slow: each test is two searches of a real service."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import TEST_MODELS, counts
from test_fast import both_ways

NATS = "/usr/sbin/nats-server"
ETCD = shutil.which("etcd")
# (generated, distinct, depth) with the versions they were found with (Debian's
# nats-server 2.9.10, etcd-server 3.4.23); another version may make other worlds.
NATS_COUNTS = (103, 103, 9)
ETCD_COUNTS = (82, 82, 5)


def _version(argv: list[str], pattern: str) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return m.group(1) if m else None


NATS_VERSION = _version([NATS, "--version"], r"v(\d+\.\d+\.\d+)")
ETCD_VERSION = _version([ETCD, "--version"], r"etcd Version: (\d+\.\d+\.\d+)") if ETCD else None


def copied_as_replayed(model, tmp_path, *args):
    """Both ways, under the machine's memory bound; the copied run's JSON report."""
    rc, out, fast = both_ways(model, tmp_path, "--max-memory", "3G", *args,
                              fast_args=())
    assert "nondeterminism" not in out, out[-2000:]
    assert fast["copies"] > 0, fast
    assert fast["replayed"] == {}, fast["replayed"]
    return rc, out, fast


@pytest.mark.slow
@pytest.mark.skipif(NATS_VERSION is None, reason=f"{NATS} is not installed (Debian nats-server)")
def test_nats_one_server_copied_as_replayed(tmp_path):
    """test/models/nats_one.model: a subscriber and a publisher on one server, two
    crashes, under one clock."""
    rc, out, fast = copied_as_replayed(TEST_MODELS / "nats_one.model", tmp_path)
    assert rc == 0, out[-2000:]
    assert "Model checking completed. No error has been found." in out
    if NATS_VERSION == "2.9.10":    # the version these counts were found with
        assert counts(out) == NATS_COUNTS


@pytest.mark.slow
@pytest.mark.skipif(ETCD is None, reason="etcd is not installed (Debian etcd-server)")
def test_etcd_one_member_copied_as_replayed(tmp_path):
    """test/models/etcd_one.model: a PUT over the v2 API, one crash, one FIRE (no
    answer at this budget: the model says why)."""
    rc, out, fast = copied_as_replayed(TEST_MODELS / "etcd_one.model", tmp_path,
                                       "-D", f"etcd={ETCD}")
    assert rc == 0, out[-2000:]
    assert "Model checking completed. No error has been found." in out
    if ETCD_VERSION == "3.4.23":    # the version these counts were found with
        assert counts(out) == ETCD_COUNTS



def test_a_node_that_cannot_be_copied_under_a_folded_timer_is_replayed(tmp_path):
    """test/progs/pairtick.c keeps both ends of a socket pair (no copy can be made) and
    ticks every 100 ms under time virtual: the fold's copy of the world lends the node,
    which then cannot be forked when the tick runs it. No traceback (there was one): the
    fold goes on without a copy, the successors are replayed, saying why, and the
    output is a replay's."""
    rc, out, fast = both_ways(TEST_MODELS / "pairtick.model", tmp_path, fast_args=())
    assert rc == 0 and "Traceback" not in out, out[-2000:]
    assert counts(out) == (25, 23, 7)
    assert fast["replayed"] == {"node n has socket:[...] open": 7}, fast["replayed"]


def test_memory_a_fork_would_not_copy_is_copied(tmp_path):
    """test/progs/forkadvice.c keeps its count in a page it gave MADV_DONTFORK (as Node's
    V8 does its heap): cmc answers that advice itself (the kernel's errors for a bad
    address or range), so a copy has the page; copied as replayed, none replayed."""
    rc, out, fast = both_ways(TEST_MODELS / "forkadvice.model", tmp_path, fast_args=())
    assert rc == 0, out[-2000:]
    assert counts(out) == (19, 19, 5)
    assert (fast["copies"], fast["replayed"]) == (5, {})


def test_memory_a_fork_would_wipe_is_replayed(tmp_path):
    """The same page given MADV_WIPEONFORK (which runs natively): a copy would see zeros,
    so the node is not copied; its worlds are replayed, saying why, with the output of a
    replay."""
    rc, out, fast = both_ways(TEST_MODELS / "forkadvice.model", tmp_path, "-D", "how=wipe",
                              fast_args=())
    assert rc == 0, out[-2000:]
    assert counts(out) == (19, 19, 5)
    assert fast["replayed"] == {
        "node n: process 0 has memory a fork would wipe (madvise MADV_WIPEONFORK)": 5}


def test_a_node_reading_a_random_file_it_keeps_open_is_copied(tmp_path):
    """test/progs/randkeep.c keeps /dev/urandom open (cmc's file of the node's random
    stream) and reads four bytes per request: a copy reads on from the original's
    place in its own file (copyplan 'memfd'), so the copied search is the replayed one,
    and no world is replayed for want of a copy (the JVM keeps two such files open)."""
    rc, out, fast = both_ways(TEST_MODELS / "randkeep.model", tmp_path, fast_args=())
    assert rc == 0, out[-2000:]
    assert counts(out) == (19, 19, 5)
    assert fast["copies"] > 0 and fast["replayed"] == {}, (fast["copies"], fast["replayed"])


@pytest.mark.parametrize("how", ["epoll", "poll", "select"])
def test_a_thread_asleep_natively_in_a_wait_is_copied(how, tmp_path):
    """test/progs/asleep.c: a worker thread sleeps natively in epoll_wait, poll or
    select (glibc's: pselect6) over a pipe the main thread writes, as a JVM selector
    thread with nothing to watch but its wake-up descriptor does. Copied while it sleeps
    (the copy's thread makes its wait again on the copy's own pipe and epoll instance),
    with the output of a replay of every world, and no world replayed."""
    rc, out, fast = both_ways(TEST_MODELS / "asleep.model", tmp_path, "-D", f"how={how}",
                              fast_args=())
    assert rc == 0, out[-2000:]
    assert counts(out) == (19, 19, 5)
    assert fast["copies"] > 0 and fast["replayed"] == {}, (fast["copies"], fast["replayed"])


def test_a_thread_asleep_natively_under_a_signal_mask_is_replayed(tmp_path):
    """The same worker waiting in ppoll with a signal mask of its own: a thread made to
    make the call again would keep that mask, so no copy is made; the worlds are
    replayed, saying why, with the same output."""
    rc, out, fast = both_ways(TEST_MODELS / "asleep.model", tmp_path, "-D", "how=ppoll",
                              fast_args=())
    assert rc == 0, out[-2000:]
    assert counts(out) == (19, 19, 5)
    assert fast["replayed"] == {
        "node n: thread 1 sleeps natively in ppoll under a signal mask of its own": 5}
