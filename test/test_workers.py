"""--workers N: breadth-first search with N replay workers gives exactly the
counts, depth and shortest counterexample of one worker (issue 7)."""
from __future__ import annotations

import re

import pytest

from conftest import MODELS, ROOT, TEST_MODELS, cmc, counter, counts, run_cmc, without_timestamps

DURLOG = MODELS / "durlog.model"


def crash0(tmp_path):
    text = DURLOG.read_text().replace("budget crash 1", "budget crash 0")
    path = tmp_path / "durlog-crash0.model"
    path.write_text(re.sub(r"^build .*$", "", text, flags=re.M))
    return path


def test_same_counterexample_with_two_workers(tmp_path):
    outs = []
    for workers in (1, 2):
        r = run_cmc("--model-file", DURLOG, "-D", "bin=../demo/build/durlog-bug",
                    "--workers", workers, "--trace-out", tmp_path / "t.json", cwd=tmp_path)
        assert r.returncode == 1, r.stdout + r.stderr
        outs.append(without_timestamps(r.stdout))
    assert outs[0] == outs[1]
    assert counts(outs[1]) == (205, 120, 5)
    assert "State 5: <CRASH primary>" in outs[1].splitlines()


def test_same_counts_with_two_workers_on_a_full_search(tmp_path):
    model = crash0(tmp_path)
    results = []
    for workers in (1, 2):
        r = run_cmc("--model-file", model, "-D", f"bin={ROOT}/demo/build/durlog-bug",
                    "--workers", workers, cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        results.append((counts(r.stdout), without_timestamps(r.stdout)))
    assert results[0] == results[1]
    assert results[1][0] == (401, 211, 12)


@pytest.mark.parametrize("extra, status, expected, line", [
    ("", 0, (22, 9, 5), "Model checking completed. No error has been found."),
    ("invariant below_two: node[0].count < 2\n", 1, (18, 9, 5),
     'State 5: <DELIVER b -> counter "y\\n">'),
], ids=["full-search", "violation"])
def test_same_output_on_the_toy_with_three_workers(tmp_path, extra, status, expected, line):
    model = counter(tmp_path, extra)
    outs = []
    for workers in (1, 3):
        r = cmc(tmp_path, model, "-D", "flags=--tick 1000", "--workers", workers,
                "--trace-out", tmp_path / "t.json")
        assert r.returncode == status, r.stdout + r.stderr
        outs.append(without_timestamps(r.stdout))
    assert outs[0] == outs[1]
    assert counts(outs[1]) == expected
    assert line in outs[1].splitlines()


def test_workers_refused_outside_breadth_first():
    r = run_cmc("--model-file", TEST_MODELS / "counter.model", "--workers", 2, "--dfs", 3)
    assert r.returncode == 2
    assert "--workers applies to breadth-first search only" in r.stderr
