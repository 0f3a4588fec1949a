"""--det (docs/cmc.md, "Searches", Determinism): every step is taken a second time from
a fresh launch whose initial stack is shifted (CMC_DET_PAD), so that a program whose
behaviour depends on memory it never wrote is reported as nondeterministic, naming the
node and the step, instead of giving counts that depend on the size of the environment."""
from __future__ import annotations

import re

import pytest

from conftest import PROGS, TEST_MODELS, counts, run_cmc

MODES = [["--no-fast"], ["--fast"], ["--no-fast", "--workers", "2"], ["--fast", "--workers", "2"],
         ["--no-fast", "--dfs", "4"], ["--dfs", "4"]]


def uninit(tmp_path, *args, env=None):
    return run_cmc("--model-file", TEST_MODELS / "uninit.model", "-D", f"bin={PROGS}/uninit",
                   *args, cwd=tmp_path, env=env)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: " ".join(m) or "bfs")
def test_det_reports_a_program_that_reads_memory_it_never_wrote(tmp_path, mode):
    r = uninit(tmp_path, "--det", *mode)
    assert r.returncode == 3, r.stdout + r.stderr
    assert re.search(r'^Error: nondeterminism: running the same step twice from a fresh launch '
                     r'\(--det\) gave a different world at the initial world; .*: '
                     r'node\[uninit\] was \{"mode": "(even|odd)", "bits": \d+\}, then '
                     r'\{"mode": "(even|odd)", "bits": \d+\} \(the second run was launched '
                     r'with its initial stack shifted', r.stdout, re.M), r.stdout


def test_without_det_the_same_program_passes(tmp_path):
    """Nothing else notices: a replay launches with the same environment each time."""
    r = uninit(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (3, 3, 3)     # launch, CONNECT delivered, the request delivered


@pytest.mark.parametrize("path", ["/usr/bin:/bin", "/" + "long" * 60 + ":/usr/bin:/bin"])
def test_det_catches_it_whatever_the_environment(tmp_path, path):
    r = uninit(tmp_path, "--det", env={"PATH": path})
    assert r.returncode == 3, r.stdout + r.stderr
    assert "node[uninit] was" in r.stdout


def test_det_names_a_blocked_call_that_differs(tmp_path):
    """A difference the trace does not show (here: the timeout of the call the node
    blocks in) is named from the parts of the world the fingerprint covers."""
    r = uninit(tmp_path, "--det", "-D", "flags=--wait")
    assert r.returncode == 3, r.stdout + r.stderr
    assert re.search(r"at the initial world; .*: node uninit: blocked call \(what, timeout ns\) "
                     r"was \[\"poll\", 1\d{9}\], then \[\"poll\", 1\d{9}\]", r.stdout), r.stdout
