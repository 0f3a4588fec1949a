"""Issue 18, first part: `--ray ADDRESS` runs the workers of `--workers N` as Ray
actors, with the counts and counterexample of one worker. Run where Ray is installed
(`pip install 'cmc[ray]'`); without it, `--ray` is a usage error."""
from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from conftest import MODELS, counts, run_cmc, without_timestamps

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
@pytest.mark.parametrize("mode", ["--fast", "--no-fast"])
def test_ray_local_gives_one_workers_results(tmp_path, mode):
    for bin_ in ("../demo/build/durlog", "../demo/build/durlog-bug"):
        one = run_cmc("--model-file", DURLOG, "-D", f"bin={bin_}", mode,
                      "--trace-out", tmp_path / "one.json", cwd=MODELS)
        ray = run_cmc("--model-file", DURLOG, "-D", f"bin={bin_}", mode, "--ray", "local",
                      "--workers", "2", "--trace-out", tmp_path / "ray.json", cwd=MODELS)
        assert ray.returncode == one.returncode, ray.stdout[-2000:] + ray.stderr[-2000:]
        assert same(ray.stdout) == same(one.stdout)
    assert counts(one.stdout) == (199, 112, 5)


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
        assert counts(r.stdout) == (2145, 985, 14)
    finally:
        cluster.shutdown()


@needs_ray
def test_a_lost_actor_costs_only_its_jobs(tmp_path):
    """One of the two actors is killed (SIGKILL) in the middle of the search: its
    unanswered jobs are replayed by the other, and the result is one worker's."""
    import os
    import signal
    import subprocess
    import time
    p = subprocess.Popen([sys.executable, "-m", "cmc", "--model-file", str(DURLOG),
                          "--no-fast", "--ray", "local", "--workers", "2"], cwd=MODELS,
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
    assert counts(out) == (2145, 985, 14)
