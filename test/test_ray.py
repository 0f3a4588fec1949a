"""`--ray ADDRESS` runs the workers of `--workers N` as Ray actors, and gives the counts
and counterexample of one worker. Run where Ray is installed
(`pip install 'cmc[ray]'`); without it, `--ray` is a usage error."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import MODELS, ROOT, counts, run_cmc, without_timestamps

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (pip install "
                               "'cmc[ray]')")
DURLOG = MODELS / "durlog.model"


def same(out: str) -> list[str]:
    """The lines that must match one worker's: no time stamps, no Ray log lines."""
    return [line for line in without_timestamps(out).splitlines()
            if not line.startswith("The behavior was written")]


def actor_processes(root: int) -> list[int]:
    """The pids of the Ray actors under the process `root` (cmc, which started the local
    Ray instance): processes titled `ray::_Handled...` whose parent is not one. Each actor
    forks a helper of its own that keeps the title; killing that is not losing the actor."""
    import os
    parent, title = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                title[int(entry)] = f.read().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    def under(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == root:
                return True
        return False
    return sorted(pid for pid, t in title.items()
                  if t.startswith("ray::_Handled") and pid in parent and under(pid)
                  and not title.get(parent[pid], "").startswith("ray::_Handled"))


@pytest.mark.skipif(HAS_RAY, reason="Ray is installed here")
def test_ray_without_ray_is_a_usage_error():
    r = run_cmc("--model-file", DURLOG, "--ray", "local", "--workers", "2", cwd=MODELS)
    assert r.returncode == 2
    assert "cmc: --ray needs Ray, which is not installed: pip install 'cmc[ray]'" in r.stderr


def test_ray_with_another_search_is_a_usage_error():
    r = run_cmc("--model-file", DURLOG, "--ray", "local", "--dfs", "5", cwd=MODELS)
    assert r.returncode == 2
    assert "--ray runs the workers of a breadth-first search" in r.stderr


@needs_ray
def test_more_workers_than_the_cluster_has_cpus_is_a_usage_error():
    """Ray would keep the actors past its CPUs waiting for ever: refused at once."""
    r = run_cmc("--model-file", DURLOG, "--ray", "local", "--workers", "999", cwd=MODELS)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert re.search(r"^cmc: --ray: --workers 999 needs 999 CPUs \(one per actor\); the Ray "
                     r"cluster has \d+$", r.stderr, re.M), r.stderr
    assert "Traceback" not in r.stderr


@needs_ray
@pytest.mark.parametrize("mode", ["--fast", "--no-fast"])
def test_ray_local_gives_one_workers_results(tmp_path, mode):
    for bin_ in ("../demo/build/durlog", "../demo/build/durlog-bug"):
        one = run_cmc("--model-file", DURLOG, "-D", f"bin={bin_}", mode,
                      "--trace-out", tmp_path / "one.json", cwd=MODELS)
        ray = run_cmc("--model-file", DURLOG, "-D", f"bin={bin_}", mode, "--ray", "local",
                      "--workers", "2", "--trace-out", tmp_path / "ray.json", cwd=MODELS)
        assert ray.returncode == one.returncode, ray.stdout[-2000:] + ray.stderr[-2000:]
        assert same(ray.stdout) == same(one.stdout)
    assert counts(one.stdout) == (205, 120, 5)


@needs_ray
def test_ray_cluster_of_two_raylets(tmp_path):
    """Two raylets of one CPU each on this machine: one actor lands on each."""
    from ray.cluster_utils import Cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        r = run_cmc("--model-file", DURLOG, "--ray", cluster.address, "--workers", "2",
                    cwd=MODELS)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert counts(r.stdout) == (2983, 1460, 14)
    finally:
        cluster.shutdown()


@needs_ray
def test_a_lost_actor_costs_only_its_jobs(tmp_path):
    """One of the two actors is killed (SIGKILL) in the middle of the search: its
    unanswered jobs are replayed by the other, and the result is one worker's."""
    report = tmp_path / "r.json"
    p = subprocess.Popen([sys.executable, "-m", "cmc", "--model-file", str(DURLOG),
                          "--no-fast", "--ray", "local", "--workers", "2", "--json",
                          str(report)], cwd=MODELS,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        actors, deadline = [], time.time() + 120
        while len(actors) < 2 and time.time() < deadline and p.poll() is None:
            actors = actor_processes(p.pid)
            time.sleep(0.2)
        assert len(actors) == 2, f"the actors never started: {actors}"
        time.sleep(4.0)                     # in the middle of the search (about 20 s)
        assert p.poll() is None, "the search ended before an actor could be killed"
        os.kill(actors[0], signal.SIGKILL)
        out, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:            # SIGTERM: cmc stops Ray and its nodes as it ends
            p.terminate()
            p.communicate(timeout=120)
    assert p.returncode == 0, out[-2000:] + err[-2000:]
    assert re.search(r"cmc: Ray actor \d \(on .*\) was lost; its \d+ unanswered jobs? went "
                     r"to the 1 left", err), err[-2000:]
    assert counts(out) == (2983, 1460, 14)
    machine, = json.loads(report.read_text())["workers"]["machines"]
    assert (machine["workers"], machine["lost"]) == (2, 1)
    # every transition taken once: the lost actor's jobs were replayed, its answers never
    # taken (the initial state is not a transition)
    assert machine["generated"] == counts(out)[0] - 1


# -- two machines on one: the second raylet in namespaces of its own ----------------------
OTHER = "cmc-other"


def namespaces_work() -> bool:
    """unshare(1) can make a UTS and mount namespace and mount a tmpfs in it (root,
    outside a container that forbids it)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--uts", "--propagation", "private", "sh",
                            "-c", f"hostname {OTHER} && mount -t tmpfs none /dev/shm"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return probe.returncode == 0


can_unshare = pytest.mark.skipif(
    not HAS_RAY or not namespaces_work(),
    reason="needs Ray, and root with unshare(1) (util-linux) for a second machine's "
           "namespaces")


@contextlib.contextmanager
def two_machines(*mounts: str):
    """A Ray cluster of two nodes with one CPU each: the head (this machine) and one in
    a UTS and mount namespace of its own, so that it has another host name (`OTHER`),
    its own /dev/shm (the head's scratch directory is not there), and `mounts` (shell
    commands run in it first, e.g. to hide or replace a binary). Yields (address, the
    pid of the second node's process, whose /proc/PID/root shows its files)."""
    from ray.cluster_utils import Cluster
    import ray
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    setup = " && ".join((f"hostname {OTHER}", "mount -t tmpfs none /dev/shm") + mounts)
    ray_cli = pathlib.Path(sys.executable).parent / "ray"
    other = subprocess.Popen(
        ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c",
         f"{setup} && exec {ray_cli} start --address={cluster.address} --num-cpus=1 --block"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        try:
            deadline = time.time() + 120        # until the second node has joined
            while sum(n["Alive"] for n in ray.nodes()) < 2:
                assert other.poll() is None and time.time() < deadline, \
                    "the second Ray node did not start"
                time.sleep(0.2)
        finally:
            ray.shutdown()
        yield cluster.address, other.pid
    finally:
        os.killpg(other.pid, signal.SIGTERM)
        other.wait(timeout=120)
        cluster.shutdown()


@can_unshare
def test_two_machines_give_one_workers_results_and_their_accounts(tmp_path):
    """One actor on each machine: the counts of one worker; the JSON report's `workers`
    has each machine's account (states generated add up to those the merge took); the
    other machine made its own scratch directory at the head's path, and removed it."""
    from cmc.engine.model import Stats
    from cmc.report.tlc import TlcReporter
    report = tmp_path / "r.json"
    with two_machines() as (address, other):
        r = run_cmc("--model-file", DURLOG, "--ray", address, "--workers", "2",
                    "--json", report, cwd=MODELS)
        left = [n for n in os.listdir(f"/proc/{other}/root/dev/shm") if n.startswith("cmc-")]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (2983, 1460, 14)
    assert left == []
    workers = json.loads(report.read_text())["workers"]
    assert workers["count"] == 2 and workers["ray"] == address
    hosts = {m["host"]: m for m in workers["machines"]}
    assert sorted(hosts) == sorted([socket.gethostname(), OTHER])
    assert all(m["workers"] == 1 and m["lost"] == 0 and m["generated"] > 0
               for m in hosts.values())
    assert sum(m["generated"] for m in hosts.values()) == 2982     # all but the initial
    # the lines a Progress line has under it, from this run's accounts
    out = io.StringIO()
    TlcReporter(out, every=0).progress(Stats(generated=2983, distinct=1460, depth=14,
                                             workers=workers))
    lines = out.getvalue().splitlines()[1:]
    assert [line.split(":")[0] for line in lines] == \
        [f"  Machine {m['host']}" for m in workers["machines"]]
    assert all(re.fullmatch(r"  Machine \S+: 1 worker, \d+ states generated \(\d+ s/min\), "
                            r"\d+% busy\.", line) for line in lines), lines


@can_unshare
@pytest.mark.parametrize("fault", ["missing", "another build"])
def test_a_machine_that_cannot_run_the_model_is_named(fault):
    binary = ROOT / "demo" / "build" / "durlog"
    mount = {"missing": f"mount -t tmpfs none {binary.parent}",
             "another build": f"mount --bind {binary}-bug {binary}"}[fault]
    with two_machines(mount) as (address, _):
        r = run_cmc("--model-file", DURLOG, "--ray", address, "--workers", "2", cwd=MODELS)
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    said = {"missing": "is missing", "another build": "is not the head's (another build "
            "or version)"}[fault]
    assert re.search(rf"^  Ray actor \d on {OTHER}: node primary: {re.escape(str(binary))} "
                     rf"{re.escape(said)}$", r.stderr, re.M), r.stderr[-2000:]
    assert "not every machine can run this model" in r.stderr
    assert socket.gethostname() + ":" not in r.stderr      # the head's actor has it all
