"""The TSC is cmc's (docs/design.md, "The TSC is cmc's"; docs/target-contract.md,
"The TSC"): rdtsc and rdtscp in a node read the node's logical clock, in dynamic and
static programs, in a forked child, and while the program has a SIGSEGV handler of
its own, which still gets its own faults. Real programs under the real filter."""
from __future__ import annotations

import json

import pytest

from conftest import PROGS, run_cmc, without_timestamps

# the monotonic clock starts at 1000 s (docs/target-contract.md, "Time"): a 1 GHz counter
START = 1000 * 10**9


def state(out: str) -> dict:
    line = next(line for line in out.splitlines() if line.startswith("/\\ node = "))
    return json.loads(line.split("|-> ", 1)[1].rstrip("]"))


@pytest.mark.parametrize("variant", ["", "-static"])
def test_rdtsc_reads_the_logical_clock(tmp_path, variant):
    """Both instructions read 1000 s as a 1 GHz count; rdtscp's TSC_AUX is 0; the
    program's own handler caught its own write to address 0 and sigaction gave it back
    as the old action; a forked child reads the counter too. Under time virtual a
    polled counter moves as a polled clock does: 21 reads to pass 5 ms."""
    path = tmp_path / "m.model"
    path.write_text(f'node s = "{PROGS}/tsc{variant} 5000"\n'
                    "time virtual\n"
                    "invariant show: node[0].spun == null\n")
    r = run_cmc("--model-file", path, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert state(r.stdout) == {"rdtsc": START, "rdtscp": START, "aux": 0, "segv": 1,
                               "old_is_mine": 1, "child": 1, "spun": 21}
    again = run_cmc("--model-file", path, cwd=tmp_path)
    assert without_timestamps(again.stdout) == without_timestamps(r.stdout)


@pytest.mark.slow
def test_under_async_time_a_polled_counter_stands_still(tmp_path):
    """Under time async the counter, like the clock, moves only on a FIRE: the spin never
    ends and the watchdog names the node."""
    path = tmp_path / "m.model"
    path.write_text(f'node s = "{PROGS}/tsc 5000"\n')
    r = run_cmc("--model-file", path, "--watchdog", "1", cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "node s" in r.stdout + r.stderr and "watchdog" in r.stdout + r.stderr

