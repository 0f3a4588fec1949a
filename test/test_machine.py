"""The machine a node sees is the model's (docs/model-file.md, "`machine`";
docs/target-contract.md, "The machine"): CPUs, memory and host name the same on every
host and in every worker, however the process that launched the node is pinned.
Real programs under the real filter."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PROGS, ROOT, counts, run_cmc


def state(out: str) -> dict:
    line = next(line for line in out.splitlines() if line.startswith("/\\ node = "))
    return json.loads(line.split("|-> ", 1)[1].rstrip("]"))


def machine_model(tmp_path, lines: str, variant: str = ""):
    path = tmp_path / "m.model"
    path.write_text(f'node db1 = "{PROGS}/machine{variant}"\n{lines}'
                    "invariant show: node[0].host == null\n")
    return path


@pytest.mark.parametrize("variant", ["", "-static"])
def test_the_default_machine(tmp_path, variant):
    """2 CPUs, 4 GiB, the node's name as host name, on CPU 0."""
    r = run_cmc("--model-file", machine_model(tmp_path, "", variant), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert state(r.stdout) == {"affinity": 2, "nprocs": 2, "nprocs_conf": 2, "online": "0-1",
                               "cpuinfo": 2, "mem_mib": 4096, "meminfo_kib": 4 << 20,
                               "host": "db1", "cpu": 0}


def test_a_model_line_changes_it_and_pinning_does_not(tmp_path):
    """`machine cpus 3` and `machine memory 6GiB`; cmc itself pinned to one CPU (as a
    search worker is) changes nothing the node sees."""
    path = machine_model(tmp_path, "machine cpus 3\nmachine memory 6GiB\n")
    if shutil.which("taskset") is None:
        pytest.skip("taskset is not installed")
    r = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "cmc", "--model-file",
                        str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert state(r.stdout) == {"affinity": 3, "nprocs": 3, "nprocs_conf": 3, "online": "0-2",
                               "cpuinfo": 3, "mem_mib": 6144, "meminfo_kib": 6 << 20,
                               "host": "db1", "cpu": 0}


GOKV = ROOT / "demo" / "build" / "gokv"


@pytest.mark.skipif(not GOKV.exists(), reason="Go is not installed (demo/gokv not built)")
@pytest.mark.slow
def test_a_go_service_counts_the_same_in_pinned_workers():
    """Go sizes its scheduler by the affinity mask: with two search workers, each pinned
    to a CPU, gokv gave `nondeterminism ... at the initial world` before the machine was
    the model's; now it gives one worker's counts."""
    models = ROOT / "models"
    one = run_cmc("--model-file", models / "gokv.model", "--workers", "1", cwd=models)
    two = run_cmc("--model-file", models / "gokv.model", "--workers", "2", cwd=models)
    assert one.returncode == 0 and two.returncode == 0, two.stdout + two.stderr
    assert counts(one.stdout) == counts(two.stdout) == (486, 289, 13)


@pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace needs CAP_SYS_ADMIN (root)")
def test_a_node_of_its_own_pids_is_process_1_on_every_launch(tmp_path):
    """`machine pids private`: the node's first process is 1 in a PID namespace of its
    own, its first child 2 (it sees 1 as its parent, waitpid returns 2, and kill of the
    reaped child fails with ESRCH), on every launch: the state holds them, and a replay
    (--no-fast) finds the same world. With the host's ids (the default) the same state is
    caught as nondeterminism."""
    path = tmp_path / "pids.model"
    path.write_text(f'node db1 = "{PROGS}/machine pids"\nmachine pids private\n'
                    "invariant show: node[0].pid == null\n")
    for mode in ("--fast", "--no-fast"):
        r = run_cmc("--model-file", path, mode, cwd=tmp_path)
        assert r.returncode == 1, r.stdout + r.stderr
        assert state(r.stdout) == {"pid": 1, "child": 2, "childs_parent": 1, "reaped": 2,
                                   "killed": 1}
    path.write_text(path.read_text().replace("machine pids private", "machine pids shared"))
    r = run_cmc("--model-file", path, cwd=tmp_path)
    assert r.returncode == 3
    assert "nondeterminism: replaying the same actions gave a different world at the " \
           "initial world" in r.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="a PID namespace needs CAP_SYS_ADMIN (root)")
def test_a_start_that_makes_a_session_gets_pids_of_its_own(tmp_path):
    """Without a `machine pids` line, a node whose start makes a process group of its own
    (a child's setsid, as PostgreSQL's postmaster does) is launched again in a PID
    namespace of its own, and said so: the session's id is 2 on every launch, copied or
    replayed, and the search ends. `machine pids shared` keeps the host's ids, and a
    replay finds another world."""
    path = tmp_path / "session.model"
    path.write_text(f'node db1 = "{PROGS}/machine session"\n'
                    "invariant show: node[0].pid == null\n")
    for mode in ("--fast", "--no-fast"):
        r = run_cmc("--model-file", path, mode, "--json", tmp_path / "r.json", cwd=tmp_path)
        assert r.returncode == 1, r.stdout + r.stderr
        assert state(r.stdout) == {"pid": 1, "child": 2, "sid": 2}
        assert ("Node db1 made a process group of its own at its start: each launch of it "
                "numbered its processes from 1 in a PID namespace of its own") in r.stdout
        assert json.loads((tmp_path / "r.json").read_text())["own_pids"] == ["db1"]
    path.write_text(path.read_text() + "machine pids shared\n")
    r = run_cmc("--model-file", path, "--json", tmp_path / "r.json", cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "nondeterminism: replaying the same actions gave a different world at the " \
           "initial world" in r.stdout
    assert json.loads((tmp_path / "r.json").read_text())["own_pids"] == []


@pytest.mark.parametrize("variant", ["", "-static"])
def test_names_are_the_models_on_every_machine(tmp_path, variant):
    """test/progs/names.c: the host name is the node's; its own name, the other node's
    and localhost resolve to 127.0.0.1 through the /etc/hosts cmc shows; a DNS query to
    the resolver of the /etc/resolv.conf cmc shows is answered at once (A 127.0.0.1 for a
    node, NXDOMAIN for a name nobody has): nothing is in flight, so the search has one
    world."""
    path = tmp_path / "names.model"
    path.write_text(f'node n1 = "{PROGS}/names{variant} n2 7161"\n'
                    f'node n2 = "{PROGS}/names{variant} n1 7162"\n'
                    "invariant show: node[0].host == null\n")
    r = run_cmc("--model-file", path, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert counts(r.stdout) == (1, 1, 1)
    line = next(line for line in r.stdout.splitlines() if line.startswith("/\\ node = "))
    first = line.split("n1 |-> ", 1)[1].split(", n2 |-> ")[0]
    assert json.loads(first) == {"host": "n1", "self": "127.0.0.1", "peer": "127.0.0.1",
                               "localhost": "127.0.0.1", "unknown": -2,
                               "dns_peer": "127.0.0.1", "dns_unknown": 1, "dns_count": 1}
