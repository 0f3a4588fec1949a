"""Nothing a node reads about its machine's state comes from the host (issue 52;
docs/target-contract.md, "The machine"): free space (statfs, fstatfs, statvfs), CPU
time (getrusage, times), /proc/self/stat, statm and status, /proc/stat, /proc/loadavg,
/proc/uptime and sysinfo are the model's. test/progs/figures reads each (natively they
differ from run to run: CPU times, free blocks, resident pages, pids) and writes them on
fd 3, again after each connection, having written 5000 bytes more: under cmc they are
the same on every launch, copy and replay, and free space follows what it wrote."""
from __future__ import annotations

import json

import pytest

from conftest import PROGS, run_cmc

EXT4, BLOCK = 0xEF53, 4096


def model(tmp_path, lines: str = "") -> str:
    path = tmp_path / "figures.model"
    path.write_text(f'node f = "{PROGS}/figures"\nmachine pids private\n{lines}'
                    'client c -> "127.0.0.1:9101": "hi"\n'
                    "invariant one_round: node[0].round[0] < 1\n")
    return str(path)


def states(out: str) -> list[dict]:
    return [json.loads(line.split("|-> ", 1)[1].rstrip().rstrip("]"))
            for line in out.splitlines() if line.startswith("/\\ node = ")]


def test_the_figures_are_the_models_and_free_space_follows_writes(tmp_path):
    r = run_cmc("--model-file", model(tmp_path), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    first, second = states(r.stdout)
    total = (16 << 30) // BLOCK                     # machine disk: 16 GiB by default
    # "data": 10000 bytes (3 blocks), then 15000 (4); one file of the node's directory
    assert first["statfs"] == [EXT4, BLOCK, total, total - 3, total - 3, 1 << 20,
                               (1 << 20) - 1, 255, BLOCK]
    assert second["statfs"] == [EXT4, BLOCK, total, total - 4, total - 4, 1 << 20,
                                (1 << 20) - 1, 255, BLOCK]
    for s in (first, second):
        assert s["statfs_root"] == s["fstatfs"] == s["statfs"]
        assert s["statvfs"] == [BLOCK] + s["statfs"][2:5]
        # CPU time is the node's clock (time async: it has not moved); no children
        assert s["rusage_self"] == s["rusage_thread"] == [0, 0, 0, 0, 10240, 0, 0, 0, 0]
        assert s["rusage_children"] == [0] * 9
        assert s["times"] == [100000, 0, 0, 0, 0]         # the monotonic clock at 1000 s
        assert s["sysinfo"] == [1000, 4 << 30, 2 << 30, 1, 0]
        assert s["stat"] == s["pid_stat"]                  # /proc/self and /proc/1
        assert s["stat"].startswith("1 (figures) R 0 1 0 0 -1 ")
        assert s["statm"] == "25600 2560 0 64 0 2560 0\n"
        assert "\nPid:\t1\nPPid:\t0\n" in s["status"] and "\nVmRSS:\t10240 kB\n" in s["status"]
        assert "\nCpus_allowed_list:\t0-1\n" in s["status"]
        assert s["proc_stat"].startswith("cpu  0 0 0 0 ")
        assert (s["loadavg"], s["uptime"]) == ("0.00 0.00 0.00 1/1 1\n", "1000.00 1000.00\n")


def test_launches_copies_and_replays_read_the_same(tmp_path):
    """The second line is read in a copy of the first world (the default), in a world
    launched again (--no-fast), and under --det (every step twice, the second launch
    shifted): the same output, byte for byte."""
    outs = []
    for flags in ((), ("--no-fast",), ("--det",)):
        r = run_cmc("--model-file", model(tmp_path), *flags, cwd=tmp_path)
        assert r.returncode == 1, r.stdout + r.stderr
        outs.append(states(r.stdout))
    assert outs[0] == outs[1] == outs[2]


def test_a_model_line_sizes_the_disk(tmp_path):
    r = run_cmc("--model-file", model(tmp_path, "machine disk 1GiB\n"), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert states(r.stdout)[0]["statfs"][2:5] == [1 << 18, (1 << 18) - 3, (1 << 18) - 3]


@pytest.mark.parametrize("line, message", [
    ("machine disk 0GiB\n", "machine disk must be more than 0"),
    ("machine disk 12\n", "machine disk needs a unit"),
])
def test_a_bad_disk_line(tmp_path, line, message):
    r = run_cmc("--model-file", model(tmp_path, line), cwd=tmp_path)
    assert r.returncode == 2 and message in r.stdout + r.stderr
