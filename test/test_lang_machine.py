"""The `machine` lines (docs/model-file.md, "`machine`"): the CPUs and memory every
node sees, and the errors, each at its place."""
from __future__ import annotations

import pytest

from langutil import assert_at, failure, load


def test_the_default_machine(tmp_path):
    m = load(tmp_path, 'node a = "/x"\n')
    assert (m.machine.cpus, m.machine.memory) == (2, 4 << 30)


@pytest.mark.parametrize("lines, cpus, memory", [
    ("machine cpus 1\n", 1, 4 << 30),
    ("machine memory 512MiB\n", 2, 512 << 20),
    ("machine cpus 16\nmachine memory 64GiB\n", 16, 64 << 30),
    ("machine memory 100KiB\nmachine cpus 3\n", 3, 100 << 10),
])
def test_machine_lines(tmp_path, lines, cpus, memory):
    m = load(tmp_path, f'node a = "/x"\n{lines}')
    assert (m.machine.cpus, m.machine.memory) == (cpus, memory)
    assert m.machine.pids == "auto"


@pytest.mark.parametrize("lines, pids", [("", "auto"), ("machine pids shared\n", "shared"),
                                         ("machine pids private\nmachine cpus 4\n", "private")])
def test_machine_pids(tmp_path, lines, pids):
    assert load(tmp_path, f'node a = "/x"\n{lines}').machine.pids == pids


@pytest.mark.parametrize("text, line, col, message", [
    ("machine cores 4\n", 2, 9, "unknown machine item cores: a machine line gives cpus N, "
                                "memory SIZE or disk SIZE (KiB, MiB, GiB), or pids shared or private"),
    ("machine pids own\n", 2, 14, "machine pids is shared or private"),
    ("machine pids privat\n", 2, 14, "machine pids is shared or private (did you mean "
                                     "private?)"),
    ("machine pids 1\n", 2, 14, "machine pids is shared or private"),
    ("machine cpus many\n", 2, 14, "machine cpus takes a count (machine cpus 2)"),
    ("machine memory lots\n", 2, 16, "machine memory takes a size (machine memory 4GiB)"),
    ("machine pids private\nmachine pids shared\n", 3, 9,
     "machine pids is given twice (the first is at line 2)"),
    ("machine cpus 0\n", 2, 14, "machine cpus must be 1 to 1024"),
    ("machine cpus 2GiB\n", 2, 14, "machine cpus takes a count, not GiB"),
    ("machine memory 4\n", 2, 16, "machine memory needs a unit: KiB, MiB or GiB "
                                  "(machine memory 4GiB)"),
    ("machine memory 4GB\n", 2, 16, "machine memory needs a unit (did you mean GiB?): KiB, "
                                    "MiB or GiB (machine memory 4GiB)"),
    ("machine cpus 2\nmachine cpus 3\n", 3, 9, "machine cpus is given twice (the first is at line 2)"),
])
def test_machine_errors(tmp_path, text, line, col, message):
    assert_at(failure(tmp_path, 'node a = "/x"\n' + text), line, col, message)
