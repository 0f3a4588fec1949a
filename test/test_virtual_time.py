"""`time virtual`: one clock for the cluster (docs/model-file.md, "`time`"; docs/design.md,
"One clock for the cluster"). Real programs under the real filter: timers of two nodes
fire in the order of their deadlines (one FIRE enabled at a time) where `time async`
takes every order; a thread polling the clock sees it move and ends, the same way on
every run; a FIRE's label and every state of a trace show the clock; the static and
dynamic builds agree."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from cmc.kernel.world.clock import count_late
from conftest import PROGS, counts, run_cmc, without_timestamps


def model(tmp_path, text: str, name: str = "m.model"):
    path = tmp_path / name
    path.write_text(text)
    return path


def timers(tmp_path, time: str, extra: str = "", variant: str = ""):
    """a sleeps 300 ms three times, b 500 ms twice; each says when it woke (its clock)."""
    return model(tmp_path, f'node a = "{PROGS}/timers{variant} 9001 300 300 300"\n'
                           f'node b = "{PROGS}/timers{variant} 9002 500 500"\n'
                           f"time {time}\n"
                           "invariant on_own_clock:\n"
                           '    (node["a"].woke == null or node["a"].at_ms == 300 * node["a"].woke)\n'
                           '    and (node["b"].woke == null or node["b"].at_ms == 500 * node["b"].woke)\n'
                           'witness all_woke: node["a"].woke == 3 and node["b"].woke == 2\n' + extra)


# b's second wake is at 1000 ms on the one clock, after a's third (900 ms).
ONE_CLOCK = 'invariant one_clock: node["b"].woke == 2 => node["a"].woke == 3\n'


@pytest.mark.parametrize("variant", ["", "-static"])
def test_timers_fire_in_the_order_of_their_deadlines(tmp_path, variant):
    """One FIRE at a time, the earliest deadline first: a at 300, b at 500, a at 600 and
    900, b at 1000 -- one path of 5 FIREs (6 states). Each node's wakes are on time."""
    r = run_cmc("--model-file", timers(tmp_path, "virtual", ONE_CLOCK, variant), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (6, 6, 6)


def test_async_time_takes_every_order(tmp_path):
    """The same nodes under time async: each node's clock moves only on its own FIREs,
    so every interleaving of a's 3 and b's 2 FIREs is a behavior: (3+1)*(2+1) = 12
    worlds, 17 transitions (18 generated), depth 6; and b can wake twice before a has
    woken three times."""
    r = run_cmc("--model-file", timers(tmp_path, "async"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (18, 12, 6)
    r = run_cmc("--model-file", timers(tmp_path, "async", ONE_CLOCK), cwd=tmp_path)
    assert r.returncode == 1 and "Invariant one_clock is violated" in r.stdout


def test_a_trace_shows_the_clock(tmp_path):
    """Every state of a trace shows the clock, a FIRE's label its timeout and the clock it
    fires at; the trace is the same on every run."""
    path = timers(tmp_path, "virtual", 'invariant b_sleeps: node["b"].woke == null\n')
    r = run_cmc("--model-file", path, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "<FIRE a clock_nanosleep 300ms @ 0.300s>" in r.stdout
    assert "<FIRE b clock_nanosleep 500ms @ 0.500s>" in r.stdout
    clocks = [line for line in r.stdout.splitlines() if line.startswith("/\\ clock = ")]
    assert clocks == ["/\\ clock = 0.000s", "/\\ clock = 0.300s", "/\\ clock = 0.500s"]
    again = run_cmc("--model-file", path, cwd=tmp_path)
    assert without_timestamps(again.stdout) == without_timestamps(r.stdout)


@pytest.mark.parametrize("variant", ["", "-static"])
def test_a_thread_polling_the_clock_sees_it_move(tmp_path, variant):
    """spinclock reads CLOCK_MONOTONIC until 5 ms have passed. From the 9th read in a
    row with no other call between (a runtime reads the clock a few times in a row on
    its own), each read moves the clock twice as far as the one before, from 1 us:
    after read k (k >= 9) it shows (2^(k-8) - 1) us, so the 21st read is the first past
    5 ms (8.191 ms). One world: the node then waits in accept() for ever."""
    path = model(tmp_path, f'node s = "{PROGS}/spinclock{variant} 5000"\n'
                           "time virtual\n"
                           "invariant polled:\n"
                           "    node[0].done == null or (node[0].reads == 21\n"
                           "                             and node[0].waited_ns == 8191000)\n"
                           "witness done: node[0].done\n")
    r = run_cmc("--model-file", path, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (1, 1, 1)


def test_under_async_time_a_polled_clock_stands_still(tmp_path):
    """Under time async the clock moves only on a FIRE: the poller never ends, and the
    watchdog says which call it was spinning in."""
    path = model(tmp_path, f'node s = "{PROGS}/spinclock 5000"\n')
    r = run_cmc("--model-file", path, "--watchdog", "1", cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "node s" in r.stdout + r.stderr and "watchdog" in r.stdout + r.stderr


def test_the_horizon_ends_the_clock(tmp_path):
    """`horizon 700ms`: no FIRE takes the clock past it; the world where a waits for its
    900 ms wake and b for its 1000 ms is a leaf (a at 600 ms and b at 500 ms have
    fired: 4 states in a row)."""
    r = run_cmc("--model-file", timers(tmp_path, "virtual horizon 700ms"), cwd=tmp_path)
    assert r.returncode == 1 and "Witness all_woke was never reached" in r.stdout, \
        r.stdout + r.stderr
    assert counts(r.stdout) == (4, 4, 4)


def test_a_client_can_wait_for_the_clock(tmp_path):
    """`client alice after 1s`: alice connects and sends when the clock reaches 1 s,
    which (latency 0) is only once nothing else is in flight: bob's PUT is acknowledged
    first, at 0 s, on every path. The HTML report marks each state with the clock."""
    durlog = PROGS.parent.parent.parent / "demo" / "build" / "durlog"
    path = model(tmp_path, f'node primary = "{durlog} 0 127.0.0.1:7000 127.0.0.1:7001"\n'
                           f'node backup  = "{durlog} 1 127.0.0.1:7000 127.0.0.1:7001"\n'
                           'client alice after 1s -> "127.0.0.1:7000": "PUT 7\\n"\n'
                           'client bob   -> "127.0.0.1:7000": "PUT 8\\n"\n'
                           "reply /ACK (?P<val>\\d+)/\n"
                           "time virtual\n"
                           "invariant bob_first: all r in replies: r.client == \"bob\"\n"
                           "    or len(replies) == 2\n"
                           'invariant no_alice: all r in replies: r.client != "alice"\n')
    r = run_cmc("--model-file", path, "--html", tmp_path / "r.html", cwd=tmp_path)
    assert r.returncode == 1 and "Invariant no_alice is violated" in r.stdout, r.stdout + r.stderr
    assert "State 7: <FIRE client alice starts @ 1.000s>" in r.stdout
    assert counts(r.stdout) == (15, 13, 11)
    page = (tmp_path / "r.html").read_text()          # the chart's time axis: each state
    marks = [m.split(">")[1].split("<")[0] for m in page.split('class="clock"')[1:]]
    assert marks == ["@ 0.000s"] * 6 + ["@ 1.000s"] * 5


MODELS = PROGS.parent.parent.parent / "models"


def test_a_lease_holds_on_one_clock_and_not_on_many():
    """demo/leaseread (docs/demos.md): leader leases for local reads, where timing is the
    protocol. Under time virtual (latency 10ms) the correct build holds, exactly
    283/197/26, and the bug build (the successor waits half the lease) serves a stale
    read; under time async the correct build cannot hold: each node's clock runs on its
    own FIREs."""
    r = run_cmc("--model-file", MODELS / "leaseread.model", cwd=MODELS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (283, 197, 26)
    r = run_cmc("--model-file", MODELS / "leaseread.model", "-D",
                "bin=../demo/build/leaseread-bug", cwd=MODELS)
    assert r.returncode == 1 and "Invariant no_stale_read is violated" in r.stdout
    assert "<FIRE n1 poll 500ms @ 0.900s>" in r.stdout
    r = run_cmc("--model-file", MODELS / "leaseread-async.model", cwd=MODELS)
    assert r.returncode == 1 and "Invariant no_stale_read is violated" in r.stdout


def ticker(tmp_path, time: str, extra: str = ""):
    """ticker sleeps 10 ms five times without a word, then writes once (at 50 ms)."""
    return model(tmp_path, f'node t = "{PROGS}/ticker 9200 10 5"\n'
                           f"time {time}\n"
                           "invariant on_time: node[0].ticks == null or node[0].at_ms == 50\n"
                           "witness ticked: node[0].ticks == 5\n" + extra)


@pytest.mark.parametrize("mode", [(), ("--no-fast",)], ids=["copies", "replays"])
def test_idle_ticks_are_folded(tmp_path, mode):
    """The four silent ticks change nothing another node or a property sees: under time
    virtual they are folded into the launch (tried on a copy of the world, or, replayed,
    on the world itself), and only the tick that writes is a step: 2 worlds, where time
    async has 6 (each tick its own step)."""
    r = run_cmc("--model-file", ticker(tmp_path, "virtual"), *mode, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (2, 2, 2)
    r = run_cmc("--model-file", ticker(tmp_path, "async"), *mode, cwd=tmp_path)
    assert counts(r.stdout) == (6, 6, 6)


@pytest.mark.parametrize("mode", [(), ("--no-fast",), ("--workers", "2"), ("--det",)])
def test_a_crash_among_folded_ticks(tmp_path, mode):
    """With `budget crash 1`: the launch (four ticks folded, the fifth due), then the
    writing tick or a CRASH; a CRASH relaunches the node, whose four silent ticks are
    folded again. After the crash, the worlds from before and after the write differ in
    what the node declared (an input history, or a state line), and meet again once the
    new incarnation writes: 5 worlds, 6 generated, depth 3, the same whether worlds are
    copied, replayed, split among workers or taken twice."""
    r = run_cmc("--model-file", ticker(tmp_path, "virtual", "budget crash 1\n"), *mode,
                cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (6, 5, 3)


def test_a_trace_lists_the_folded_ticks(tmp_path):
    """--trace-ticks: each state of a trace shows the FIREs folded into the step that
    reached it: the launch folded four silent ticks, the writing tick folded none."""
    path = ticker(tmp_path, "virtual", "invariant silent: node[0].ticks == null\n")
    r = run_cmc("--model-file", path, "--trace-ticks", cwd=tmp_path)
    assert r.returncode == 1 and "Invariant silent is violated" in r.stdout, r.stdout
    folded = [line for line in r.stdout.splitlines() if line.startswith("/\\ folded")]
    ticks = ", ".join(f'"FIRE t clock_nanosleep 10ms @ 0.0{k}0s"' for k in range(1, 5))
    assert folded == [f"/\\ folded = <<{ticks}>>", "/\\ folded = <<>>"]
    plain = run_cmc("--model-file", path, cwd=tmp_path)
    assert "/\\ folded" not in plain.stdout


def test_faults_only_within_their_window(tmp_path):
    """`time virtual faults T`: the budgets' faults are taken only while the clock is
    before T. With T = 0 a crash budget changes nothing (the same worlds as none); with T
    past every timer it is the whole budget; with T between a's first wake (300 ms) and
    b's (500 ms)... 550 ms, a crash comes before the clock reaches 550 ms, never after."""
    def run(time, budget):
        r = run_cmc("--model-file", timers(tmp_path, time, budget), cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        return counts(r.stdout)
    none = run("virtual", "")
    whole = run("virtual", "budget crash 1\n")
    assert run("virtual faults 0s", "budget crash 1\n") == none
    assert run("virtual faults 2s", "budget crash 1\n") == whole
    part = run("virtual faults 550ms", "budget crash 1\n")
    assert none < part < whole
    assert (none, part, whole) == ((6, 6, 6), (39, 35, 7), (55, 45, 8))


@pytest.mark.parametrize("faults, now, at, late", [
    (None, 100, 100, 0),    # a timer due at a message's bound may fire before it arrives
    (None, 100, 150, 1),    # one due past it passes the bound: the message is late
    (200, 100, 100, 0),     # the same while the faults have not healed
    (100, 100, 100, 1),     # healed: the message arrives before the timer due at its bound
    (100, 100, 150, 1),
    (100, 120, 150, 0),     # its bound is behind the clock: late already, not counted again
])
def test_which_messages_a_fire_makes_late(faults, now, at, late):
    """world/clock.count_late: a message sent at 100 with latency 0, the clock at `now`,
    a FIRE due at `at`, `time virtual faults` at `faults`."""
    spec = SimpleNamespace(latency_ns=0, faults_ns=faults)
    assert count_late([100], now, spec, at) == late
