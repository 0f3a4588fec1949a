"""Zygotes (docs/design.md, "Zygotes: a start run once"): with --fast, a node's start
is run once per key (node, incarnation, clock, directory) and forked at every later
launch with that key. The counts are --no-fast's; the launches drop to one per key; a
start that changes its directory where cmc does not see it is launched every time."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import MODELS, PROGS, ROOT, TEST_MODELS, counts, left_behind

BUILD = ROOT / "demo" / "build"


def zygote_run(model, *args, cwd=None):
    """cmc through test/zygote_counts.py: its output and what it launched and forked."""
    r = subprocess.run([sys.executable, str(ROOT / "test" / "zygote_counts.py"),
                        "--model-file", str(model), *args], cwd=cwd or ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    return r.stdout, json.loads(r.stderr.strip().splitlines()[-1])


def bootlog(tmp_path, extra: str = ""):
    text = (TEST_MODELS / "bootlog.model").read_text().replace(
        '"../progs/build/bootlog"', f'"{PROGS}/bootlog"') + extra
    path = tmp_path / "bootlog.model"
    path.write_text(text)
    return path


@pytest.mark.parametrize("how", ["", "home"])
def test_a_start_ends_before_it_opens_a_file_of_its_directory(tmp_path, how):
    """bootlog appends to a file of its directory natively at every start but the first,
    by a relative path or by $HOME's: a kept start ends before that open (an open cmc
    lets through unseen comes to it while a start runs), so every relaunch is a fork of
    the incarnation's kept start, which then appends to its own world's file: the
    invariant that the file counts the crashes holds, with replay's counts. (Before,
    such a start was launched each time: it changed its directory unseen.) The key has
    the directory's shape (names, sizes), not its data: a start may stat it unseen."""
    path = bootlog(tmp_path)
    out, fast = zygote_run(path, "--fast", "-D", f"how={how}")
    assert counts(out) == (15, 14, 5)
    assert fast == {"launches": 3, "zygote starts": 9, "declined": {}}
    out, replay = zygote_run(path, "--no-fast", "-D", f"how={how}")
    assert counts(out) == (15, 14, 5)
    assert replay == {"launches": 45, "zygote starts": 0, "declined": {}}
    assert left_behind(f"{PROGS}/bootlog") == []


def test_a_start_is_kept_for_what_its_directory_shows(tmp_path):
    """bootlog stat asks, first thing in its start, whether a file is there (access(2):
    native, unseen) and the client's line makes it: the relaunches after a CRASH with and
    without the file have one incarnation and clock but must not share a kept start
    (the key has the directory's names). With a key of node, incarnation and clock
    alone, the invariant fails (a relaunch reports no file where there is one: checked
    by hand)."""
    path = bootlog(tmp_path, "\ninvariant marked_iff_answered: "
                   "(node[0].marked == 1) == (len(replies) > 0)\n")
    out, fast = zygote_run(path, "--fast", "-D", "how=stat")
    out2, replay = zygote_run(path, "--no-fast", "-D", "how=stat")
    assert counts(out) == counts(out2) == (15, 14, 5)
    assert fast["zygote starts"] > 0 and fast["declined"] == {}


def test_a_start_with_a_sanitizers_address_space_is_launched(tmp_path):
    """bootlog reserve reserves 20 GiB of writable address space before its start ends,
    as ASan does for its shadow: more than cmc searches for the directory's name (it
    read that page map whole and ran out of memory: CI's sanitizer step). The start is
    not kept, and says why; the counts are replay's."""
    out, fast = zygote_run(bootlog(tmp_path), "--fast", "-D", "how=reserve")
    assert counts(out) == (15, 14, 5)
    assert fast["zygote starts"] == 0 and fast["launches"] == 9
    assert fast["declined"] == {"node n has 20 GiB of writable address space to search "
                                "for its directory's name": 3}


@pytest.mark.parametrize("mode", [pytest.param("--no-fast", marks=pytest.mark.slow), "--fast"])
def test_a_crash_ends_its_incarnation_before_the_relaunch(tmp_path, mode):
    """bootlog lock takes a flock of a file of its directory natively, then fills 256 MB,
    which the kernel frees before it lets the lock go when the process is killed. A
    CRASH's relaunch (launched, or forked from the kept start) finds the lock free: the
    ended incarnation is reaped before it, not on the helper's thread while cmc goes on
    as a world's end is (docs/performance.md). Reaped that way, every relaunch found the
    lock held (the invariant fails at its first CRASH, both ways); so did etcd's
    relaunch, at times, in CI (its data directory's locks)."""
    path = tmp_path / "bootlock.model"
    path.write_text((TEST_MODELS / "bootlock.model").read_text().replace(
        '"../progs/build/bootlog"', f'"{PROGS}/bootlog"'))
    out, seen = zygote_run(path, mode, "--max-memory", "3G")
    assert counts(out) == (15, 14, 5)
    assert (seen["zygote starts"] > 0) == (mode == "--fast")
    assert left_behind(f"{PROGS}/bootlog") == []


@pytest.mark.parametrize("name, want, launches, starts", [
    pytest.param("durlog", (2983, 1460, 14), 11, 424, marks=pytest.mark.slow),
    pytest.param("tlog", (4671, 2478, 14), 11, 648, marks=pytest.mark.slow),
    pytest.param("gokv", (486, 289, 13), 8, 80, marks=pytest.mark.skipif(
        not (BUILD / "gokv").exists(), reason="demo/build/gokv is built only where Go is "
        "installed (Debian: golang-go; CI installs it)")),
])
def test_a_relaunch_is_a_fork_of_the_kept_start(name, want, launches, starts):
    """A C program, one of pthreads and one in Go: every launch keeps its start (the
    key's first) or is forked from one; the counts are those of --no-fast (asserted
    for both ways in test_fast.py and test_thread_demo.py)."""
    out, stats = zygote_run(MODELS / f"{name}.model", "--fast")
    assert counts(out) == want
    assert stats == {"launches": launches, "zygote starts": starts, "declined": {}}
    assert left_behind(str(BUILD / name)) == []


def test_a_start_that_read_its_pid_is_copied_under_that_pid(tmp_path):
    """pidboot reads its pid in its start (so a copy is told the kept start's) and then
    kills and raises itself by it, reads /proc/PID/limits, has a child check it is its
    parent, and at each relaunch checks that the pid file names a process that has
    ended (the kept start of the incarnation before is alive: cmc says no process has
    that pid). Every reply "ok", the same counts both ways, and every relaunch forked."""
    text = (TEST_MODELS / "pidboot.model").read_text().replace(
        '"../progs/build/pidboot"', f'"{PROGS}/pidboot"')
    path = tmp_path / "pidboot.model"
    path.write_text(text)
    out, fast = zygote_run(path, "--fast")
    assert counts(out) == (20, 16, 6)
    assert fast == {"launches": 3, "zygote starts": 11, "declined": {}}
    out, replay = zygote_run(path, "--no-fast")
    assert counts(out) == (20, 16, 6)
    assert replay["launches"] == 53 and replay["zygote starts"] == 0
    assert left_behind(f"{PROGS}/pidboot") == []
