"""The probe suite: under the real filter, every call family returns what Linux
returns. One small C program per call family, run through the real CLI, built dynamic
and static.

Each probe checks what every call returns (value, errno, bytes) exactly as Linux does
on loopback and reports `{"phase":N,"done":B,"fail":[...]}` on fd 3 (see the harness
at the top of any test/progs/probe_*.c). Its model asserts that no check failed in any
reachable world (`invariant no_failure`), that the probe ran to the end in some world
(`witness done`) and in every world where nothing can happen any more
(`quiescent finished`). So a probe passes when cmc exits 0.

Every probe must also pass natively, on the real kernel: `test_probe_natively` runs
its nodes as plain processes on loopback with fd 3 and fd 193 redirected to files.
That is how we know the expectations are Linux's, not cmc's.

Then two whole programs: test/progs/pynode.py (CPython as the binary under check,
socket + selectors) and test/progs/epoll_kv.c (epoll, non-blocking sockets, a planted
-DBUG that acknowledges before the write is durable), each checked to the right verdict.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import ROOT, TEST_MODELS, counts, run_cmc

# probe -> xfail reason (None: expected to pass). A reason names the kernel
# discrepancy the probe finds today; strict=False, so a fix shows as XPASS.
PROBES: dict[str, str | None] = {
    "nonblock": None,
    "poll": None,
    "iov": None,
    "peek": None,
    "shutdown": None,
    "names": None,
    "sockopt": None,
    "fcntl": None,
    "accept4": None,
    "ipv6": None,
    "time": None,
    "random": None,
    "refused": None,
    "unix": None,
    "select": None,
    "epoll": None,
    "udp": None,
    "mixed": None,
    "rlimit": None,
    "fallocate": None,
    "self": None,
    "mmsg": None,
}

# probes whose state space takes long enough to be marked slow
SLOW: set[str] = set()


def _params():
    out = []
    for name, reason in PROBES.items():
        for variant in ("dynamic", "static"):
            marks = []
            if reason:
                marks.append(pytest.mark.xfail(strict=False, reason=reason))
            if name in SLOW:
                marks.append(pytest.mark.slow)
            out.append(pytest.param(name, variant, marks=marks, id=f"{name}-{variant}"))
    return out


def _binary(name: str, variant: str) -> str:
    return f"../progs/build/probe_{name}" + ("-static" if variant == "static" else "")


@pytest.mark.parametrize("name,variant", _params())
def test_probe_under_cmc(name, variant, tmp_path):
    model = TEST_MODELS / f"probe_{name}.model"
    r = run_cmc("--model-file", model, "-D", f"bin={_binary(name, variant)}", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert "Model checking completed. No error has been found." in r.stdout


@pytest.mark.parametrize("variant", ["dynamic", "static"])
def test_a_nodes_connections_to_itself_are_not_the_network(variant, tmp_path):
    """probe_self talks to itself over TCP and UDP (connect, accept, data both ways,
    FIN, a reset, a datagram): handed over at once, none of it an action, so the whole
    probe runs at launch and the search has its one world (docs/target-contract.md,
    "A node's connections to itself are not the network")."""
    model = TEST_MODELS / "probe_self.model"
    r = run_cmc("--model-file", model, "-D", f"bin={_binary('self', variant)}", "--json",
                tmp_path / "r.json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert counts(r.stdout) == (1, 1, 1)
    world = json.loads((tmp_path / "r.json").read_text())
    assert world["coverage"]["steps"] == {}


# -- the same probes on the real kernel --------------------------------------------------
def _native_nodes(name: str):
    from cmc.lang import load_model
    model = load_model(str(TEST_MODELS / f"probe_{name}.model"),
                       {"bin": f"../progs/build/probe_{name}"})
    return [(n.name, list(n.argv)) for n in model.nodes]


def _redirect(f3: str, f193: str):
    """preexec_fn: fds 3 and 193 of the child are the given files."""
    def pre():
        for path, target in ((f3, 3), (f193, 193)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            if fd != target:
                os.dup2(fd, target)          # dup2 makes target inheritable
                os.close(fd)
            else:
                os.set_inheritable(fd, True)
    return pre


def run_natively(nodes, workdir, timeout=30.0):
    """Run each node as a plain process in its own fresh directory, in declaration
    order, each started once the previous one reported its first line on fd 3 (or
    exited). Returns {name: (exit status, [fd-3 lines], stderr)}."""
    procs = []
    for name, argv in nodes:
        cwd = workdir / name
        cwd.mkdir()
        f3, f193 = str(workdir / f"{name}.3"), str(workdir / f"{name}.193")
        err = open(workdir / f"{name}.stderr", "wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMC_")}
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=err, close_fds=False,
                             preexec_fn=_redirect(f3, f193))
        procs.append((name, p, f3, err))
        deadline = time.time() + 5
        while time.time() < deadline and p.poll() is None and \
                (not os.path.exists(f3) or os.path.getsize(f3) == 0):
            time.sleep(0.02)
    out = {}
    deadline = time.time() + timeout
    for name, p, f3, err in procs:
        try:
            status = p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            status = "timeout"
        err.close()
        with open(f3) as f:
            lines = f.read().splitlines()
        out[name] = (status, lines, (workdir / f"{name}.stderr").read_text(errors="replace"))
    return out


@pytest.mark.parametrize("name", list(PROBES))
def test_probe_natively(name, tmp_path):
    results = run_natively(_native_nodes(name), tmp_path)
    for node, (status, lines, stderr) in results.items():
        assert status == 0, f"{node}: exit {status}\n{stderr}"
        assert lines, f"{node}: no line on fd 3\n{stderr}"
        last = json.loads(lines[-1])
        assert last["fail"] == [], f"{node}: {last['fail']}"
        assert last["done"] is True, f"{node} stopped at phase {last['phase']}\n{stderr}"


# -- whole programs -------------------------------------------------------------------
def _python_first_on_path() -> dict:
    """PATH with this interpreter's directory first, so that the `python3` that
    pynode.py's `#!/usr/bin/env python3` finds is a real CPython (not a shim)."""
    return {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}


def test_python_node_is_checked(tmp_path):
    """CPython itself, running test/progs/pynode.py (socket + selectors, non-blocking)."""
    r = run_cmc("--model-file", TEST_MODELS / "pynode.model", cwd=tmp_path,
                env=_python_first_on_path())
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert "Model checking completed. No error has been found." in r.stdout
    generated, distinct, depth = counts(r.stdout)
    assert distinct > 10 and depth > 5


def test_python_node_bug_is_caught(tmp_path):
    r = run_cmc("--model-file", TEST_MODELS / "pynode.model", "-D", "flags=--bug",
                cwd=tmp_path, env=_python_first_on_path())
    assert r.returncode == 1, r.stdout[-6000:] + r.stderr[-3000:]
    assert "Error: Invariant acked_is_on_the_backup is violated." in r.stdout
    assert 'raw |-> "OK 1"' in r.stdout


@pytest.fixture(scope="module")
def epoll_kv_bug(tmp_path_factory):
    """The -DBUG build of epoll_kv (the Makefile builds the correct one)."""
    out = tmp_path_factory.mktemp("epoll_kv") / "epoll_kv-bug"
    subprocess.run(["cc", "-O2", "-Wall", "-std=gnu11", "-DBUG", "-o", str(out),
                    str(ROOT / "test" / "progs" / "epoll_kv.c")], check=True)
    return out


@pytest.mark.parametrize("variant", ["epoll_kv", "epoll_kv-static"])
def test_epoll_kv_is_correct(variant, tmp_path):
    r = run_cmc("--model-file", TEST_MODELS / "epoll_kv.model", "-D",
                f"bin=../progs/build/{variant}", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert "Model checking completed. No error has been found." in r.stdout
    generated, distinct, depth = counts(r.stdout)
    assert distinct > 20


def test_epoll_kv_bug_is_caught(epoll_kv_bug, tmp_path):
    r = run_cmc("--model-file", TEST_MODELS / "epoll_kv.model", "-D", f"bin={epoll_kv_bug}",
                cwd=tmp_path)
    assert r.returncode == 1, r.stdout[-6000:] + r.stderr[-3000:]
    assert "Error: Invariant acked_is_durable is violated." in r.stdout
    states = re.findall(r"^State (\d+): <(.*)>$", r.stdout, re.M)
    assert states[-1][1].startswith("DELIVER ") and "PUT" in states[-1][1]
