"""Nodes that are process trees (docs/target-contract.md, "Process trees"), checked
unmodified through the real CLI:

- the durlog demo started through a shell script that forks it and waits (no exec):
  durlog's own verdicts and counts (demo/durlog-wrap.sh, models/durlog-wrap.model);
- a pre-fork server whose two workers accept on the listening socket their parent
  made (demo/prefork.c), its planted bug needing both workers;
- a BGSAVE-like store whose child writes the snapshot while the parent serves and
  learns of its end by SIGCHLD (demo/bgsave.c), its planted bug needing a CRASH while
  the child runs;
- a node that runs system() at start-up (test/progs/system_start.c), and a Python
  node started through `#!/usr/bin/env python3` with a forking shim first on PATH;
- a caught SIGCHLD ending a held recv with EINTR, or restarting it under SA_RESTART
  (test/progs/sigchld.c), as Linux does.

Counts are exact; where they are known by hand the comment says how.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from cmc.kernel.proc.tasks import Tasks
from conftest import PROGS, ROOT, TEST_MODELS, counts, left_behind, run_cmc, without_timestamps

MODELS = ROOT / "models"
SHIM = PROGS.parent / "shim"
# env finds python3 on PATH: the shim first, then this interpreter's directory
SHIM_PATH = str(SHIM) + os.pathsep + os.path.dirname(sys.executable) + os.pathsep \
    + os.environ.get("PATH", "")


def cmc(tmp_path, model, *extra, env=None):
    return run_cmc("--model-file", model, *extra, cwd=tmp_path, env=env)


def ok(r) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def labels(out: str) -> list[str]:
    return [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("State ")]


def error_part(out: str) -> str:
    """The counterexample: from the first Error line up to the counts."""
    start = out.index("Error: ")
    return out[start:out.index(" states generated", start)].rsplit("\n", 1)[0]


# -- a shell wrapper that forks: durlog's own answers ----------------------------------
@pytest.mark.slow
def test_durlog_through_a_forking_shell_gives_durlogs_counts(tmp_path):
    r = cmc(tmp_path, MODELS / "durlog-wrap.model")
    ok(r)
    assert counts(r.stdout) == (2983, 1460, 14)         # models/durlog.model's


def test_a_wrapper_that_reaped_its_children_then_execd_is_copied(tmp_path):
    """A wrapper that runs a child and reaps it before it execs the program (the way
    pyenv's python3 shim does): the node is one process again once it has, and its
    worlds are copied, none replayed (before, every world of it was replayed from
    launch); the echo model's own counts."""
    wrapper = tmp_path / "execwrap.sh"
    wrapper.write_text('#!/bin/sh\nhere=$(dirname "$0")   # a child, reaped by the shell\n'
                       'exec "$@"\n')
    wrapper.chmod(0o755)
    model = (ROOT / "models" / "maelstrom" / "echo.model").read_text().replace(
        '"python3 {model_dir}/../../demo/', f'"{wrapper} {sys.executable} {ROOT}/demo/')
    (tmp_path / "echo.model").write_text(model)
    r = cmc(tmp_path, tmp_path / "echo.model", "--json", tmp_path / "r.json")
    ok(r)
    assert counts(r.stdout) == (9, 9, 4)                # models/maelstrom/echo.model's
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["replayed"] == {} and report["copies"] > 0, report["replayed"]


def test_durlog_bug_through_a_forking_shell_gives_durlogs_counterexample(tmp_path):
    bug = ("-D", "bin=../demo/build/durlog-bug")
    wrapped = cmc(tmp_path, MODELS / "durlog-wrap.model", *bug)
    plain = cmc(tmp_path, MODELS / "durlog.model", *bug)
    assert wrapped.returncode == plain.returncode == 1, wrapped.stdout[-3000:]
    assert "Invariant no_lost_commit is violated" in wrapped.stdout
    assert error_part(wrapped.stdout) == error_part(plain.stdout)
    assert counts(wrapped.stdout) == counts(plain.stdout)


# -- a daemon: setsid, setpgid, its parents gone ----------------------------------------
DAEMONIZE = PROGS / "daemonize"


def daemonized(tmp_path) -> str:
    """models/durlog.model with each node started through test/progs/daemonize."""
    text = (MODELS / "durlog.model").read_text()
    text = text.replace('= "{bin} ', f'= "{DAEMONIZE} {{bin}} ')
    path = MODELS / f".daemon-{os.getpid()}-{tmp_path.name}.model"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_a_daemon_is_the_nodes_bug_and_all(tmp_path):
    """durlog-bug run as a daemon (fork, the parent exits; setsid; fork, the parent
    exits; setpgid; exec): the node is the daemon, and the counterexample and counts are
    durlog-bug's own. A CRASH kills it in its own session: the relaunch binds the same
    ports, and nothing of it is left after the run."""
    bug = ("-D", f"bin={ROOT}/demo/build/durlog-bug")     # daemonize: relative to itself
    path = daemonized(tmp_path)
    try:
        daemon = cmc(tmp_path, path, *bug)
    finally:
        path.unlink()
    plain = cmc(tmp_path, MODELS / "durlog.model", *bug)
    assert daemon.returncode == plain.returncode == 1, daemon.stdout[-3000:] + daemon.stderr
    assert error_part(daemon.stdout) == error_part(plain.stdout)
    assert counts(daemon.stdout) == counts(plain.stdout)
    assert left_behind("build/durlog-bug 0 ") == []


def test_only_the_nodes_own_process_groups_are_killed():
    """A node's record names process groups by id, and an id is a pid, which Linux
    gives to another process once the group is empty: a CRASH, or the end of a
    world held for minutes, killed whichever group had that id then (a daemon's
    durlog lost its node in other worlds under load). A group is killed only while
    a process the node knows is in it, and an empty one is forgotten."""
    def group_of():           # a group of two processes, both this test's children
        lead = subprocess.Popen(["sleep", "60"], process_group=0)
        return lead, subprocess.Popen(["sleep", "60"], process_group=lead.pid)
    (known, other), stranger = group_of(), group_of()
    tasks = Tasks(None)
    try:
        tasks.procs = {known.pid: None}
        tasks.groups = {known.pid, stranger[0].pid}
        tasks.send_kill()
        # the member cmc did not know goes with the group
        assert (known.wait(timeout=10), other.wait(timeout=10)) == (-signal.SIGKILL,) * 2
        assert stranger[0].poll() is None and stranger[1].poll() is None, \
            "a group with no process of the node was killed"
        tasks.procs = {}
        tasks.prune_groups()
        assert tasks.groups == {stranger[0].pid}
    finally:
        os.killpg(stranger[0].pid, signal.SIGKILL)
        for p in stranger:
            p.wait()
    tasks.prune_groups()
    assert tasks.groups == set()


def dumped_run(tmp_path, out, *args):
    """cmc through test/worlds_dump.py: every world's fingerprinted text in `out`."""
    return subprocess.run([sys.executable, str(ROOT / "test" / "worlds_dump.py"), str(out),
                           *map(str, args)], cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=900)


@pytest.mark.slow
def test_a_daemon_has_the_programs_worlds(tmp_path):
    """durlog as a daemon: durlog's 2983/1460/14, on every run. A race once gave a
    few worlds more, or a nondeterminism error, on a loaded machine (a kill of a
    process group whose id another world's daemon had come to have: tasks.py,
    prune_groups); should the counts differ again, the failure names the worlds
    that run had and a second run did not."""
    path = daemonized(tmp_path)
    try:
        r = dumped_run(tmp_path, tmp_path / "worlds.txt", "--model-file", path,
                       "-D", f"bin={ROOT}/demo/build/durlog")
        ok(r)
        if counts(r.stdout) != (2983, 1460, 14):
            again = dumped_run(tmp_path, tmp_path / "again.txt", "--model-file", path,
                               "-D", f"bin={ROOT}/demo/build/durlog")
            ok(again)
            first, second = (set((tmp_path / f).read_text().splitlines())
                             for f in ("worlds.txt", "again.txt"))
            pytest.fail(f"a daemon's worlds: {counts(r.stdout)} instead of (2983, 1460, 14) "
                        f"(again: {counts(again.stdout)}); worlds of the first run only: "
                        f"{sorted(first - second)[:3]}; of the second only: "
                        f"{sorted(second - first)[:3]}")
    finally:
        path.unlink()


# -- a pre-fork server ---------------------------------------------------------------
def test_prefork_workers_share_the_listening_socket(tmp_path):
    # 19: every order of the four deliveries (two CONNECTs, two requests, a request
    # after its CONNECT), a tree; the witness: a world where each worker served one.
    r = cmc(tmp_path, MODELS / "prefork.model")
    ok(r)
    assert "No error has been found" in r.stdout
    assert counts(r.stdout) == (19, 19, 5)


def test_prefork_bug_needs_two_workers(tmp_path):
    r = cmc(tmp_path, MODELS / "prefork.model", "-D", "bin=../demo/build/prefork-bug")
    assert r.returncode == 1, r.stdout[-3000:]
    assert "Invariant unique_ids is violated" in r.stdout
    assert counts(r.stdout) == (15, 15, 5)
    assert labels(r.stdout) == ["<Initial predicate>", "<DELIVER alice -> ids CONNECT>",
                                "<DELIVER bob -> ids CONNECT>",
                                '<DELIVER alice -> ids "ID\\n">',
                                '<DELIVER bob -> ids "ID\\n">']
    assert "worker 0" in r.stdout and "worker 1" in r.stdout


def test_prefork_with_one_worker_has_no_bug_to_find(tmp_path):
    r = cmc(tmp_path, MODELS / "prefork.model", "-D", "bin=../demo/build/prefork-bug",
            "-D", "workers=1")
    assert r.returncode == 1, r.stdout[-3000:]
    assert "Invariant unique_ids" not in r.stdout
    assert "Error: Witness both_workers_served was never reached." in r.stdout
    assert counts(r.stdout) == (19, 19, 5)


def test_prefork_runs_are_byte_identical(tmp_path):
    runs = [cmc(tmp_path, MODELS / "prefork.model") for _ in range(3)]
    for r in runs:
        ok(r)
    assert len({without_timestamps(r.stdout) for r in runs}) == 1


# -- snapshot by fork ------------------------------------------------------------------
def test_bgsave_holds(tmp_path):
    r = cmc(tmp_path, MODELS / "bgsave.model")
    ok(r)
    assert "No error has been found" in r.stdout
    assert counts(r.stdout) == (315, 227, 10)


def test_bgsave_bug_is_a_crash_while_the_child_runs(tmp_path):
    r = cmc(tmp_path, MODELS / "bgsave.model", "-D", "bin=../demo/build/bgsave-bug")
    assert r.returncode == 1, r.stdout[-3000:]
    assert counts(r.stdout) == (16, 15, 4)
    assert "Invariant no_lost_write is violated" in r.stdout
    trace = labels(r.stdout)
    assert trace[-1] == "<CRASH kv>"
    # the child was still writing: its sleep never fired before the crash
    assert not any("FIRE" in step for step in trace), trace


def test_bgsave_bug_needs_the_crash(tmp_path):
    text = (MODELS / "bgsave.model").read_text().replace("budget crash 1", "budget crash 0")
    text = "\n".join(line for line in text.splitlines() if not line.startswith("witness"))
    model = MODELS / "bgsave-crash0.model.tmp"
    try:
        model.write_text(text)
        r = cmc(tmp_path, model, "-D", "bin=../demo/build/bgsave-bug")
    finally:
        model.unlink()
    ok(r)
    assert counts(r.stdout) == (99, 62, 9)


@pytest.mark.slow    # test_a_process_tree_is_copied_as_it_is_replayed[bgsave...] checks more
def test_bgsave_fast_gives_replays_output(tmp_path):
    replay = cmc(tmp_path, MODELS / "bgsave.model", "--no-fast")
    fast = cmc(tmp_path, MODELS / "bgsave.model", "--fast")
    ok(replay)
    ok(fast)
    assert without_timestamps(fast.stdout) == without_timestamps(replay.stdout)


# -- system() at start-up, a forking interpreter shim -----------------------------------
@pytest.mark.parametrize("variant", ["", "-static"])
def test_system_at_start_up(tmp_path, variant):
    r = cmc(tmp_path, TEST_MODELS / "system_start.model",
            "-D", f"bin=../progs/build/system_start{variant}")
    ok(r)
    assert counts(r.stdout) == (13, 9, 5)                # counter.model's


def test_system_at_start_up_failing_is_the_nodes_error(tmp_path):
    r = cmc(tmp_path, TEST_MODELS / "system_start.model", "-D", "cmd=exit 4")
    assert r.returncode == 3, r.stdout[-3000:]
    assert "Error: node svc (step 0, launch): exited with status 1" in r.stdout


def test_python_through_a_forking_shim(tmp_path):
    r = cmc(tmp_path, TEST_MODELS / "pyshim.model", env={"PATH": SHIM_PATH})
    ok(r)
    assert counts(r.stdout) == (19, 15, 6)


# -- signals and held calls --------------------------------------------------------
SIGCHLD = TEST_MODELS / "sigchld.model"


def with_invariant(tmp_path, inv: str):
    text = SIGCHLD.read_text().replace('"../progs/', f'"{PROGS.parent}/')
    path = tmp_path / "sigchld.model"
    path.write_text(text + inv)
    return path


@pytest.mark.parametrize("mode", ["eintr", "restart"])
def test_sigchld_counts(tmp_path, mode):
    # launch; CONNECT; then the line and the child's 1 s sleep in either order (each
    # order is its own world: the reply differs), then the other: 6, a tree
    r = cmc(tmp_path, SIGCHLD, "-D", f"mode={mode}")
    ok(r)
    assert counts(r.stdout) == (6, 6, 4)


def test_sigchld_without_sa_restart_ends_the_held_recv_with_eintr(tmp_path):
    r = cmc(tmp_path, with_invariant(tmp_path, 'invariant no_eintr: '
                                               'all r in replies: r.what != "EINTR"\n'),
            "-D", "mode=eintr")
    assert r.returncode == 1, r.stdout[-3000:]
    assert labels(r.stdout) == ["<Initial predicate>", "<DELIVER alice -> p CONNECT>",
                                "<FIRE p clock_nanosleep 1s>"]
    assert 'raw |-> "EINTR"' in r.stdout


def test_sigchld_under_sa_restart_restarts_the_held_recv(tmp_path):
    r = cmc(tmp_path, with_invariant(tmp_path, 'invariant no_eintr: '
                                               'all r in replies: r.what != "EINTR"\n'
                                               'invariant handler_not_first: '
                                               'all r in replies: r.chld == 0\n'),
            "-D", "mode=restart")
    assert r.returncode == 1, r.stdout[-3000:]
    assert "Invariant handler_not_first is violated" in r.stdout     # never no_eintr
    assert labels(r.stdout) == ["<Initial predicate>", "<DELIVER alice -> p CONNECT>",
                                "<FIRE p clock_nanosleep 1s>",
                                '<DELIVER alice -> p "hello\\n">']
    assert 'raw |-> "GOT hello chld=1 reaped=1"' in r.stdout


# -- Redis (Debian), unmodified: primary + replica past the full sync -------------------
@pytest.mark.skipif(shutil.which("redis-server") is None,
                    reason="redis-server is not installed (Debian: apt-get install redis-server)")
def test_redis_replica_serves_the_write_after_a_full_sync(tmp_path):
    """The primary's BGSAVE child writes the RDB, the parent sends it, the replica
    loads it and serves the write: the model's invariant (never) is violated by the
    first walk that gets there, the same walk on every run, shrunk from its 44 states to
    the 18 a full sync needs (cmc/engine/shrink.py)."""
    r = cmc(tmp_path, ROOT / "experiments" / "redis" / "replica.model", "--simulate",
            "--walks", "20", "--seed", "1")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Invariant replica_never_serves_the_write is violated" in r.stdout
    trace = labels(r.stdout)
    assert any('"+FULLRESYNC ' in step for step in trace)
    assert any(step.startswith('<DELIVER primary -> replica "REDIS0010') for step in trace)
    assert len(trace) == 18
    assert "The walk's behavior had 44 states; shrunk to 18 by dropping actions (281 " \
           "replays from launch).\n" in r.stdout


# -- copies of process trees (docs/design.md, "Copies of process trees") ----------------
def copied_and_replayed(tmp_path, model, *extra):
    """The run copied (the default) and replayed (--no-fast): the same output, byte for
    byte but for time stamps, and every world copied, none replayed."""
    fast = cmc(tmp_path, model, *extra, "--json", tmp_path / "fast.json")
    replay = cmc(tmp_path, model, *extra, "--no-fast")
    assert fast.returncode == replay.returncode, fast.stdout[-3000:] + fast.stderr[-3000:]
    assert without_timestamps(fast.stdout) == without_timestamps(replay.stdout)
    report = json.loads((tmp_path / "fast.json").read_text())
    assert report["replayed"] == {} and report["copies"] > 0, report["replayed"]
    return fast


SLOW = pytest.mark.slow     # (the default run has each program copied, without replay)
TREES = [  # model, -D, exit status, counts (each as --no-fast gives them)
    (MODELS / "prefork.model", (), 0, (19, 19, 5)),
    (MODELS / "prefork.model", ("-D", "bin=../demo/build/prefork-bug"), 1, None),
    pytest.param(MODELS / "bgsave.model", (), 0, (315, 227, 10), marks=SLOW),
    (MODELS / "bgsave.model", ("-D", "bin=../demo/build/bgsave-bug"), 1, None),
    pytest.param(MODELS / "durlog-wrap.model", ("-D", "bin=../demo/build/durlog-bug"), 1,
                 None, marks=SLOW),
    # a parent natively in wait4, its worker's pid and parent pid, a signal each way,
    # a worker's end reaped and the next forked: 3 clients in every order
    pytest.param(TEST_MODELS / "treeids.model", (), 0, (271, 271, 7), marks=SLOW),
]


@pytest.mark.parametrize("model, extra, status, expected", TREES,
                         ids=lambda v: v.stem if hasattr(v, "stem") else None)
def test_a_process_tree_is_copied_as_it_is_replayed(tmp_path, model, extra, status, expected):
    r = copied_and_replayed(tmp_path, model, *extra)
    assert r.returncode == status, r.stdout[-3000:]
    if expected is not None:
        assert counts(r.stdout) == expected


@pytest.mark.slow
def test_durlog_through_a_forking_shell_is_copied_as_it_is_replayed(tmp_path):
    r = copied_and_replayed(tmp_path, MODELS / "durlog-wrap.model")
    ok(r)
    assert counts(r.stdout) == (2983, 1460, 14)


def test_a_copied_tree_keeps_its_ids_where_the_program_looks(tmp_path):
    """treeids answers "bad" when a pid it noted has changed: every reply "ok" in
    every world, copied."""
    r = cmc(tmp_path, TEST_MODELS / "treeids.model", "--json", tmp_path / "r.json")
    ok(r)
    assert "bad" not in r.stdout
    assert json.loads((tmp_path / "r.json").read_text())["copies"] >= 80


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace needs CAP_SYS_ADMIN (root)")
def test_a_tree_of_its_own_pids_is_copied_as_it_is_replayed(tmp_path):
    """treeids under `machine pids private`: the node's first process is already process
    1 of a namespace, its copies are 1 of namespaces inside it (kept alive while copies
    made from them run: fork.Lease templates); the same output copied and replayed."""
    text = (TEST_MODELS / "treeids.model").read_text().replace(
        '"../progs/', f'"{PROGS.parent}/').replace("node t =", "machine pids private\nnode t =")
    model = tmp_path / "treeids-pids.model"
    model.write_text(text)
    r = copied_and_replayed(tmp_path, model)
    ok(r)
    assert counts(r.stdout) == (271, 271, 7)
