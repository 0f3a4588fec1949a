"""The `time` line and `budget delay` (docs/model-file.md, "`time async` | `time
virtual`"): what a model says about its clock, and the errors, each at its place."""
from __future__ import annotations

import pytest

from langutil import assert_at, failure, load


def test_time_is_async_by_default(tmp_path):
    m = load(tmp_path, 'node a = "/x"\n')
    assert (m.time.mode, m.time.virtual) == ("async", False)


@pytest.mark.parametrize("line, mode, latency, horizon", [
    ("time async", "async", 0, 60 * 10**9),
    ("time virtual", "virtual", 0, 60 * 10**9),
    ("time virtual latency 10ms", "virtual", 10 * 10**6, 60 * 10**9),
    ("time virtual horizon 2s latency 250us", "virtual", 250 * 10**3, 2 * 10**9),
    ("time virtual latency 7ns horizon 90s", "virtual", 7, 90 * 10**9),
])
def test_a_time_line(tmp_path, line, mode, latency, horizon):
    m = load(tmp_path, f'node a = "/x"\n{line}\n')
    assert (m.time.mode, m.time.latency_ns, m.time.horizon_ns) == (mode, latency, horizon)


def test_a_faults_window(tmp_path):
    m = load(tmp_path, 'node a = "/x"\ntime virtual faults 3s horizon 14s\n')
    assert (m.time.faults_ns, m.time.horizon_ns) == (3 * 10**9, 14 * 10**9)
    assert load(tmp_path, 'node a = "/x"\ntime virtual\n').time.faults_ns is None


def test_budget_delay_under_virtual_time(tmp_path):
    m = load(tmp_path, 'node a = "/x"\ntime virtual latency 1ms\nbudget delay 2\n')
    assert m.budgets["delay"] == 2
    assert "delay" not in load(tmp_path, 'node a = "/x"\n').budgets


@pytest.mark.parametrize("text, line, col, message", [
    ("time sync\n", 2, 6, "unknown time sync (did you mean async?): time is async (the "
                          "default: each node's clock moves on its own FIREs) or virtual (one "
                          "clock for the cluster)"),
    ("time async latency 1ms\n", 2, 12, "unexpected latency after time async: only time "
                                        "virtual takes a latency, a horizon or a faults window"),
    ("time virtual latncy 1ms\n", 2, 14, "unknown time option latncy (did you mean latency?): "
                                         "time virtual takes latency D, horizon D and faults D"),
    ("time virtual faults 1s faults 2s\n", 2, 24, "faults is given twice"),
    ("time virtual latency 1min\n", 2, 22, "unknown unit min: a duration "
                                           "is a whole number of ns, us, ms or s (10ms)"),
    ("time virtual latency 1ms latency 2ms\n", 2, 26, "latency is given twice"),
    ("time virtual horizon 0s\n", 2, 6, "a horizon of 0 leaves no time to run: give one > 0"),
    ("time virtual\ntime async\n", 3, 1, "a second time line; a model has at most one (the "
                                         "first is at line 2)"),
    ("budget delay 1\n", 2, 8, "budget delay is for time virtual: under time async a message "
                               "may arrive at any time already"),
])
def test_time_errors(tmp_path, text, line, col, message):
    assert_at(failure(tmp_path, 'node a = "/x"\n' + text), line, col, message)


def test_a_client_after_a_time(tmp_path):
    m = load(tmp_path, 'node a = "/x"\ntime virtual\n'
                       'client c after 250ms -> "127.0.0.1:7000": "x"\n'
                       'client after -> "127.0.0.1:7000": "y"\n')
    assert [(c.name, c.after_ns) for c in m.clients] == [("c", 250 * 10**6), ("after", None)]


def test_a_client_after_a_time_needs_virtual_time(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\nclient c after 1s -> "127.0.0.1:7000": "x"\n'),
              2, 8, "client c after ...: a client waits for the clock only under time virtual "
                    "(add a line `time virtual`)")
