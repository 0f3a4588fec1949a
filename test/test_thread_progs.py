"""Threaded programs as they ship (docs/target-contract.md, "Threads"): a C lease holder
whose lease runs out in a background thread's pthread_cond_timedwait
(test/progs/lease_thread.c), a Python socketserver.ThreadingTCPServer with a heartbeat
thread on Event.wait(timeout) (test/progs/pythreads.py), and a Rust std::net server with
a thread per connection and an Arc<(Mutex, Condvar)> (test/progs/rust_tpc.rs); and C
workers that check what the kernel keeps for each thread (test/progs/threadstate.c).

For each: the exact counts (the C and Python ones are also counted by hand: see the
comments), five runs with the same output byte for byte, `--det` clean, and `--fast`
giving replay's output. The Rust program is built only where rustc is installed; its
tests are skipped only when rustc is absent.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass

import pytest

from conftest import PROGS, TEST_MODELS, counts, run_cmc, without_timestamps

# The node runs env, then the python3 found on PATH (as test_fast.py does for pynode).
PY_PATH = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

@dataclass(frozen=True)
class Prog:
    model: str
    args: tuple = ()
    env: dict | None = None
    rust: bool = False


PROGRAMS = {
    # (generated, distinct, depth). alice ACQUIREs then RENEWs, bob ACQUIREs once; the
    # reaper's FIRE drops the lease: 42 worlds of (alice's and bob's progress, holder,
    # term, expiries, renewals, the replies so far), 52 with the 10 transitions into
    # worlds already seen.
    "lease_thread": (Prog("lease_thread.model"), (52, 42, 8)),
    "lease_thread-static": (Prog("lease_thread.model",
                                 ("-D", f"bin={PROGS}/lease_thread-static")), (52, 42, 8)),
    # alice INCs twice, bob asks for BEATS once, two heartbeats: 158 worlds, since
    # which connection each handler thread waits on is part of a world (thread indexes
    # follow the order of the accepts, and cmc runs threads in index order); every
    # world also has serve_forever's 0.5 s poll FIRE, which leads back to itself.
    # (66 worlds before issue 16 merged those two orders; --check-merges passes now.)
    "pythreads": (Prog("pythreads.model", env={"PATH": PY_PATH}), (363, 158, 8)),
    # -D wait=0: bob waits with Condvar::wait_while (no FIRE). Thread indexes follow the
    # order of the accepts, so "bob waits while alice's thread reads" is two worlds.
    "rust_tpc-untimed": (Prog("rust_tpc.model", ("-D", "wait=0"), rust=True), (25, 18, 6)),
    # The default: bob waits with Condvar::wait_timeout_while (2 s), a FIRE. After it
    # the clock stands at the deadline, std computes a zero timeout and waits again:
    # that wait takes a nanosecond of the node's time (calls/threads.py), and the loop
    # ends, as on Linux.
    "rust_tpc": (Prog("rust_tpc.model", rust=True), (37, 29, 7)),
    # Three workers that check their signal mask, alternate stack, MXCSR, robust list
    # and rseq area at each CHECK (test/progs/threadstate.c); alice sends two, bob one,
    # and the node serves one connection at a time.
    "threadstate": (Prog("threadstate.model"), (22, 16, 6)),
    "threadstate-static": (Prog("threadstate.model",
                                ("-D", f"bin={PROGS}/threadstate-static")), (22, 16, 6)),
}


# CPython's start-up is paid at every replayed world: its longer runs are slow tests.
SLOW = ("pythreads",)


def params(slow: tuple = ()):
    return [pytest.param(name, id=name, marks=[pytest.mark.slow] if name in slow else [])
            for name in PROGRAMS]


def need(prog: Prog) -> None:
    if prog.rust and shutil.which("rustc") is None:
        pytest.skip("rustc is not installed: test/progs/Makefile does not build "
                    "build/rust_tpc without it (Debian: apt-get install rustc)")


def cmc(prog: Prog, tmp_path, *extra):
    return run_cmc("--model-file", TEST_MODELS / prog.model, *prog.args, *extra,
                   cwd=tmp_path, env=prog.env)


_replays: dict[str, list] = {}


def replays(name: str, tmp_path_factory, n: int = 1) -> list:
    """The first n of five replay runs of the program (fewer when one fails: every test
    then fails on its exit status), made once per session and shared by the tests."""
    runs = _replays.setdefault(name, [])
    while len(runs) < n and not (runs and runs[-1].returncode != 0):
        runs.append(cmc(PROGRAMS[name][0], tmp_path_factory.mktemp(f"{name}-{len(runs)}"),
                        "--no-fast"))
    return runs


def ok(r) -> None:
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("name", params(slow=SLOW))
def test_exact_counts(name, tmp_path_factory):
    prog, expected = PROGRAMS[name]
    need(prog)
    r = replays(name, tmp_path_factory)[0]
    ok(r)
    assert "No error has been found" in r.stdout
    assert counts(r.stdout) == expected


@pytest.mark.parametrize("name", params(slow=SLOW))
def test_five_runs_are_byte_identical(name, tmp_path_factory):
    prog, _ = PROGRAMS[name]
    need(prog)
    runs = replays(name, tmp_path_factory, 5)
    for r in runs:
        ok(r)
    assert len(runs) == 5
    first = without_timestamps(runs[0].stdout)
    for r in runs[1:]:
        assert without_timestamps(r.stdout) == first
        assert r.stderr == runs[0].stderr


@pytest.mark.parametrize("name", params(slow=SLOW))
def test_det_is_clean(name, tmp_path, tmp_path_factory):
    prog, _ = PROGRAMS[name]
    need(prog)
    r = cmc(prog, tmp_path, "--det")
    ok(r)
    assert "nondeterminism" not in r.stdout + r.stderr
    assert counts(r.stdout) == counts(replays(name, tmp_path_factory)[0].stdout)


@pytest.mark.parametrize("name", params(slow=SLOW))
def test_fast_gives_replays_output(name, tmp_path, tmp_path_factory):
    prog, _ = PROGRAMS[name]
    need(prog)
    r = cmc(prog, tmp_path, "--fast")
    replay = replays(name, tmp_path_factory)[0]
    ok(replay)
    ok(r)
    assert without_timestamps(r.stdout) == without_timestamps(replay.stdout)
    assert r.stderr == replay.stderr


# -- what the traces say of the threads ------------------------------------------------
def with_extra(tmp_path, prog: Prog, extra: str) -> Prog:
    """prog's model with `extra` appended, written next to the original (its relative
    paths resolve the same)."""
    path = TEST_MODELS / prog.model
    copy = tmp_path / prog.model
    text = path.read_text().replace('"../progs/', f'"{TEST_MODELS.parent / "progs"}/')
    copy.write_text(text + extra)
    return Prog(str(copy), prog.args, prog.env, prog.rust)


def violated(tmp_path, name: str, prop: str):
    """Run program `name` with the property `prop` added, which must be violated:
    (the action of every state of the behavior, State 1's first; the output)."""
    r = cmc(with_extra(tmp_path, PROGRAMS[name][0], prop), tmp_path)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    labels = [line.split(": ", 1)[1] for line in r.stdout.splitlines()
              if line.startswith("State ")]
    return labels, r.stdout


def test_the_lease_runs_out_in_the_reaper_thread(tmp_path):
    """The reaper's pthread_cond_timedwait is the node's one timed wait: its FIRE is
    labelled without a thread, and bob gets the lease in term 2 only after it."""
    labels, out = violated(tmp_path, "lease_thread",
                           'invariant bob_never_second:\n'
                           '    not (some r in replies: r.name == "bob" and r.term == 2)\n')
    assert labels == ["<Initial predicate>", "<DELIVER alice -> lease CONNECT>",
                      '<DELIVER alice -> lease "ACQUIRE alice\\n">',
                      "<DELIVER bob -> lease CONNECT>", "<FIRE lease futex 5s>",
                      '<DELIVER bob -> lease "ACQUIRE bob\\n">']
    assert '{"holder": null, "term": 1, "expired": 1, "renewed": 0}' in out


def test_a_python_heartbeat_fire_names_its_thread(tmp_path):
    """Two timed waits (serve_forever's poll in thread 0, the heartbeat's Event.wait in
    thread 1): each FIRE names its thread."""
    labels, _ = violated(tmp_path, "pythreads",
                         'invariant no_beat_seen:\n'
                         '    not (some r in replies: r.what == "BEATS" and r.n == 1)\n')
    assert labels == ["<Initial predicate>", "<DELIVER bob -> svc CONNECT>",
                      "<FIRE svc thread 1 futex 1s>", '<DELIVER bob -> svc "BEATS\\n">']


@pytest.mark.parametrize("variant", ["", "-static"])
def test_sched_yield_lets_the_other_thread_run(tmp_path, variant):
    """Two threads spin on a shared word with sched_yield until it is their turn: under
    one-thread-at-a-time this ends only because a yield runs every other thread first."""
    r = run_cmc("--model-file", TEST_MODELS / "yield_turns.model", "--watchdog", "5",
                "-D", f"bin=../progs/build/yield_turns{variant}", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert counts(r.stdout) == (1, 1, 1)


@pytest.mark.parametrize("name", ["threadstate", "threadstate-static"])
def test_copied_threads_keep_what_the_kernel_keeps_for_each(name, tmp_path):
    """Each thread of a copied world has its own signal mask, alternate stack, MXCSR,
    robust list and rseq area again (csrc: born_dressed; docs/design.md, "Copies of
    threaded nodes"): the workers find none changed, in worlds that were all copied."""
    prog, want = PROGRAMS[name]
    r = cmc(prog, tmp_path, "--fast", "--json", tmp_path / "r.json")
    ok(r)
    assert counts(r.stdout) == want
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["copies"] > 0 and report["replayed"] == {}, report["replayed"]
