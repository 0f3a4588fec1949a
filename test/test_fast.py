"""`--fast` visits worlds by forking their processes from a snapshot, and must
give exactly what replay gives: the same output (verdict, counts, depth, the same
shortest behavior, the same error), byte for byte apart from timestamps, and the
same trace file. Every demo is run both ways (bug builds by default, correct builds
in the slow suite), also with 2 workers, plus programs that keep files open
(test/progs/journal.c), a self-pipe, epoll, or cannot be copied (an AF_UNIX socket
pair: replayed instead, and the JSON report's `replayed` says why),
and programs that misbehave. `copies` in the JSON report shows that worlds were
really copied.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import MODELS, ROOT, TEST_MODELS, left_behind, run_cmc, without_timestamps

DEMOS = ["durlog", "relay", "lease", "twopc", "raft"]


def both_ways(model, tmp_path, *args, fast_args=("--fast",), env=None):
    """Run cmc on `model` with replay and with --fast; return both (exit, output,
    report, trace text) and check that they agree."""
    runs = []
    for mode, extra in (("replay", ("--no-fast",)), ("fast", fast_args)):
        report = tmp_path / f"{mode}.json"
        trace = tmp_path / f"{mode}.trace.json"
        p = run_cmc("--model-file", model, *args, *extra, "--json", report,
                    "--trace-out", trace, cwd=model.parent, env=env)
        data = json.loads(report.read_text())
        text = trace.read_text() if trace.exists() else None
        out = without_timestamps(p.stdout).replace(str(trace), "TRACE")
        runs.append((p.returncode, out, p.stderr, data, text))
    (rc1, out1, err1, d1, t1), (rc2, out2, err2, d2, t2) = runs
    assert rc1 == rc2, (out1[-1500:], err1[-1500:], out2[-1500:], err2[-1500:])
    assert out2 == out1
    assert err2 == err1
    for field in ("verdict", "counts", "depth", "property", "trace", "message", "error"):
        assert d2[field] == d1[field], field
    if t1 is not None:
        strip = lambda t: {k: v for k, v in json.loads(t).items() if k != "cmc_mode"}  # noqa
        assert strip(t2) == strip(t1)
    assert not d1.get("copies")
    return rc1, out1, d2


@pytest.mark.parametrize("demo", [
    pytest.param(d, marks=[pytest.mark.slow] if d in ("raft", "twopc") else []) for d in DEMOS])
def test_fast_finds_the_same_bug_as_replay(demo, tmp_path):
    rc, out, fast = both_ways(MODELS / f"{demo}.model", tmp_path,
                              "-D", f"bin=../demo/build/{demo}-bug")
    assert rc == 1, out[-2000:]
    assert fast["copies"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("demo", DEMOS)
def test_fast_checks_the_correct_demo_as_replay_does(demo, tmp_path):
    rc, out, fast = both_ways(MODELS / f"{demo}.model", tmp_path)
    assert rc == 0, out[-2000:]
    assert fast["copies"] > fast["counts"]["distinct"] // 2


@pytest.mark.parametrize("demo", ["durlog", pytest.param("twopc", marks=pytest.mark.slow)])
def test_fast_with_two_workers_is_replay_again(demo, tmp_path):
    rc, out, fast = both_ways(MODELS / f"{demo}.model", tmp_path,
                              "-D", f"bin=../demo/build/{demo}-bug",
                              fast_args=("--fast", "--workers", "2"))
    assert rc == 1
    assert fast["copies"] > 0


def test_fast_gives_each_copy_its_own_files(tmp_path):
    """journal keeps a file open for appending, another for reading (its offset moves),
    its directory, and writes a file by relative path: a copy sharing any of them with
    the world it came from would diverge from replay (replay checks every fingerprint
    on the way, so this fails loudly)."""
    rc, out, fast = both_ways(TEST_MODELS / "journal.model", tmp_path)
    assert rc == 0, out[-2000:]
    assert fast["copies"] > 100


def test_fast_gives_a_copy_its_own_pipe(tmp_path):
    """journal --pipe keeps a byte in a self-pipe and takes the oldest out at each
    write: a copy gets a pipe of its own holding what the original's holds (a shared
    pipe, or an empty one, would diverge from replay). No world is replayed."""
    rc, out, fast = both_ways(TEST_MODELS / "journal.model", tmp_path, "-D", "flags=--pipe")
    assert rc == 0, out[-2000:]
    assert fast["copies"] > 100 and fast["replayed"] == {}


@pytest.mark.slow
def test_fast_replays_a_world_it_cannot_copy(tmp_path):
    """With an AF_UNIX socket pair open the node's worlds cannot be copied faithfully:
    all replayed, and the JSON report says why, how often."""
    rc, out, fast = both_ways(TEST_MODELS / "journal.model", tmp_path, "-D", "flags=--unix")
    assert rc == 0, out[-2000:]
    assert fast["copies"] == 0
    assert list(fast["replayed"]) == ["node j has socket:[...] open"]
    assert sum(fast["replayed"].values()) > 100


def test_fast_on_an_epoll_server(tmp_path):
    """cmc made the node's epoll instance: a copy gets an empty one of its own."""
    rc, out, fast = both_ways(TEST_MODELS / "epoll_kv.model", tmp_path)
    assert rc == 0, out[-2000:]
    assert fast["copies"] > 0


@pytest.mark.parametrize("probe", ["poll", "select", "epoll", "udp", "time", "random",
                                   "shutdown", "mixed"])
def test_fast_runs_the_probes_as_replay_does(probe, tmp_path):
    rc, out, _ = both_ways(TEST_MODELS / f"probe_{probe}.model", tmp_path)
    assert rc == 0, out[-2000:]


@pytest.mark.parametrize("case,mode", [("die", "abort"), ("json", "3"), ("fork", "ptrace"),
                                       ("unsupported", "ioctl")])
def test_fast_reports_a_misbehaving_program_as_replay_does(case, mode, tmp_path):
    rc, out, fast = both_ways(TEST_MODELS / f"misbehave_{case}.model", tmp_path,
                              "-D", f"mode={mode}")
    assert rc == 3
    assert fast["error"]["kind"] == "target"


def test_fast_leaves_no_process_behind(tmp_path):
    both_ways(MODELS / "durlog.model", tmp_path, "-D", "bin=../demo/build/durlog-bug")
    assert left_behind(str(ROOT / "demo" / "build" / "durlog")) == []


def test_fast_is_not_for_simulation(tmp_path):
    p = run_cmc("--model-file", MODELS / "durlog.model", "--fast", "--simulate", cwd=ROOT)
    assert p.returncode == 2
    assert "--fast applies to breadth-first and depth-first search" in p.stderr


@pytest.mark.parametrize("model,args,rc", [
    pytest.param(MODELS / "durlog.model", ("--dfs", "10"), 0, marks=pytest.mark.slow),
    (MODELS / "twopc.model", ("--dfs", "15", "-D", "bin=../demo/build/twopc-bug"), 1),
    pytest.param(TEST_MODELS / "journal.model", ("--dfs", "10"), 0, marks=pytest.mark.slow),
], ids=["durlog", "twopc-bug", "journal"])
def test_fast_depth_first_is_replay_again(model, args, rc, tmp_path):
    """Depth-first search with --fast: every child pushed keeps its copy as the
    snapshot to expand it from."""
    got, out, fast = both_ways(model, tmp_path, *args)
    assert got == rc, out[-2000:]
    assert fast["copies"] > 0


@pytest.mark.parametrize("how", [("--fast",), ("--fast", "--workers", "2")],
                         ids=["fast", "fast-workers"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["int", "term"])
def test_interrupted_fast_search_leaves_nothing_behind(how, sig, tmp_path):
    """Snapshots are processes too: Ctrl-C and SIGTERM remove them, their copies'
    directories and the workers."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    p = subprocess.Popen([sys.executable, "-m", "cmc", "--model-file", str(MODELS / "raft.model"),
                          *how], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and not any(tmp.iterdir()):
        time.sleep(0.05)
    time.sleep(1.0)                      # inside the search (it takes several seconds)
    assert p.poll() is None
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode in (130, -signal.SIGTERM, 128 + signal.SIGTERM), out + err
    assert list(tmp.iterdir()) == []
    assert left_behind(str(ROOT / "demo" / "build" / "raft")) == []


@pytest.mark.slow
def test_fast_copies_a_python_node(tmp_path):
    """CPython as the program under check: its start-up is what replay pays for at
    every world, and what a copy skips."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    rc, out, fast = both_ways(TEST_MODELS / "pynode.model", tmp_path, env={"PATH": path})
    assert rc == 0, out[-2000:]
    assert fast["copies"] > 0


@pytest.mark.slow
def test_fast_refuses_a_program_that_reaches_another_worlds_files(tmp_path):
    """journal --abs writes by the absolute path of its directory taken at start: a
    copy would write into the original's files. Replay checks it; --fast must say it
    cannot, never give another answer."""
    model = TEST_MODELS / "journal.model"
    r = run_cmc("--model-file", model, "-D", "flags=--abs", "--no-fast", cwd=model.parent)
    assert r.returncode == 0, r.stdout[-2000:]
    r = run_cmc("--model-file", model, "-D", "flags=--abs", "--fast", cwd=model.parent)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]
    assert "changed the files of the world it was copied from" in r.stdout + r.stderr
    assert "check it with --no-fast" in r.stdout + r.stderr


def test_fast_copies_a_node_that_ends_by_itself(tmp_path):
    """The node exits (status 0) in some worlds, copies among them: its end is seen on
    its pidfd, since the listener it shares with the original does not hang up."""
    rc, out, fast = both_ways(TEST_MODELS / "journal-quit.model", tmp_path)
    assert rc == 0, out[-2000:]
    assert fast["copies"] > 0


def test_a_copy_forks_only_the_nodes_a_step_runs(tmp_path):
    """A copy of a world shares every node's process with the world it was
    copied from (docs/design.md, "Copying a world"); a step forks the nodes it runs,
    and the others stay the same processes in both worlds. In durlog's first world
    the primary is blocked connecting to the backup: alice's CONNECT to the primary
    only joins its backlog (no process runs), the primary's CONNECT to the backup runs
    both (the backup accepts, the primary's connect returns)."""
    from cmc.adapter import ClusterModel
    from cmc.check import spec_for
    from cmc.cli import parse_args
    from cmc.lang import load_model
    path = str(MODELS / "durlog.model")
    model = load_model(path, {})
    worlds = ClusterModel(spec_for(model, parse_args(["--model-file", path])),
                          str(tmp_path), many=True)

    def pids(w):
        return {n.name: n.tasks.pid for n in w._c.nodes}

    def connect(w, src, dst):
        return next(a.key for a in w.actions() if a.fields["kind"] == "DELIVER" and
                    (a.fields["src"], a.fields["dst"], a.fields["msg"]) == (src, dst, "CONNECT"))
    try:
        world = worlds.fresh()
        first = pids(world)
        copy = world.fork()
        assert pids(copy) == first                      # lent, not forked
        copy.apply(connect(copy, "alice", "primary"))
        assert pids(copy) == first                      # nothing ran: nothing forked
        copy.apply(connect(copy, "primary", "backup"))
        assert set(pids(copy).values()) & set(first.values()) == set()   # both ran
        assert pids(world) == first
        for key in (connect(world, "alice", "primary"), connect(world, "primary", "backup")):
            world.apply(key)
        assert pids(world) == first                     # the last user takes them as they are
        assert world.fingerprint() == copy.fingerprint()
        copy.close()
        world.close()
        assert os.listdir(tmp_path) == []               # every directory went with them
    finally:
        worlds.close_all()
