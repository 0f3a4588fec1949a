"""--por (cmc/engine/por.py): sleep sets over observed footprints.

On toys in pure Python first (no process: milliseconds), whose counts are known by
hand: n processes of k steps each that touch nothing in common (every world is reached
once: k+1 to the n worlds, each but the first by one transition), the same with a part
they all touch (nothing commutes: the full search's counts), a model with an action
property (nothing skipped), and --check-por catching footprints that lie. Then the demos
through the real CLI: the same distinct worlds, depth and verdict as the full search,
fewer transitions, and every skipped transition landing on a world reached
(--check-por)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cmc.engine.bfs import BreadthFirst
from cmc.engine.model import Property
from cmc.engine.por import PorCheckFailed, SleepSets
from cmc.engine.search import Search
from cmc.engine.worlds import Copying, Replaying
from toy import PartsToy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Quiet:
    def initial(self, stats):
        pass

    def progress(self, stats):
        pass


def search(reduction, toy, props=(), fast=False, check_por=False):
    """A breadth-first search of `toy`, reduced by `reduction` (SleepSets) or not (None),
    copying with `fast`."""
    outcome = Search(toy, list(props), Quiet(), BreadthFirst(),
                     Copying() if fast else Replaying(),
                     reduction=reduction(check_por) if reduction else None).run()
    assert toy.open == set(), "the engine left systems open"
    return outcome


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("n,k", [(2, 1), (2, 2), (3, 2), (4, 1)])
def test_independent_processes_reach_each_world_once(n, k, fast):
    full = search(None, PartsToy(n, k), fast=fast)
    reduced = search(SleepSets, PartsToy(n, k), fast=fast)
    worlds = (k + 1) ** n
    assert full.stats.distinct == reduced.stats.distinct == worlds
    assert full.stats.depth == reduced.stats.depth == n * k + 1
    # the full search: from each world, one transition per process not done
    assert full.stats.generated == 1 + n * k * (k + 1) ** (n - 1)
    # sleep sets: each world but the first entered by exactly one transition
    assert reduced.stats.generated == worlds
    assert reduced.stats.reduced is True
    assert reduced.stats.slept == full.stats.generated - reduced.stats.generated


def test_a_part_every_step_touches_skips_nothing():
    full = search(None, PartsToy(3, 2))
    reduced = search(SleepSets, PartsToy(3, 2, shared=True))
    assert (reduced.stats.generated, reduced.stats.distinct) == (55, 27)
    assert (full.stats.generated, full.stats.distinct) == (55, 27)
    assert reduced.stats.slept == 0


def test_a_violation_at_the_same_depth():
    """x records the order the processes stepped in: the invariant fails in the worlds
    where process 1 stepped first and then 0 (x = 2 after 'step 1', 'step 0'). The steps
    do not commute (both write x), so nothing is skipped; a shortest counterexample."""
    bad = Property("invariant", "not_one_then_zero", lambda v, _: v["x"] != 2)
    full = search(None, PartsToy(2, 1, writes_x=True), [bad])
    reduced = search(SleepSets, PartsToy(2, 1, writes_x=True), [bad])
    assert full.verdict == reduced.verdict == "violated"
    assert [s.label for s in full.trace] == [s.label for s in reduced.trace] \
        == [None, "step 1", "step 0"]


def test_action_properties_keep_every_transition():
    ok = Property("action", "anything", lambda v, w: True)
    reduced = search(SleepSets, PartsToy(3, 2), [ok])
    assert reduced.stats.reduced is False
    assert (reduced.stats.generated, reduced.stats.distinct, reduced.stats.slept) == (55, 27, 0)


def test_check_por_catches_footprints_that_lie():
    """The steps write x in the order taken, so no two commute; footprints that claim
    otherwise skip worlds, and --check-por says so (the search alone misses them)."""
    lied = search(SleepSets, PartsToy(2, 1, lie=True, writes_x=True))
    assert lied.stats.distinct < 5          # worlds lost: why the check exists
    with pytest.raises(PorCheckFailed, match="never reached"):
        search(SleepSets, PartsToy(2, 1, lie=True, writes_x=True), check_por=True)
    honest = search(SleepSets, PartsToy(3, 2), check_por=True)
    assert honest.stats.generated == 27


# -- the demos, through the CLI --------------------------------------------------------

def cmc_json(model: str, *flags: str) -> dict:
    with_json = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"por-{os.getpid()}.json")
    try:
        subprocess.run([sys.executable, "-m", "cmc", "--model-file", model, "--json",
                        with_json, *flags], cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=600)
        with open(with_json) as f:
            return json.load(f)
    finally:
        if os.path.exists(with_json):
            os.remove(with_json)


def test_twopc_reduced_with_one_worker_and_two():
    """The same worlds, depth and verdict as the full search, fewer transitions, every
    skipped one landing on a world reached (--check-por), and two workers giving one
    worker's counts."""
    full = cmc_json("models/twopc.model")
    one = cmc_json("models/twopc.model", "--por", "--check-por")
    two = cmc_json("models/twopc.model", "--por", "--workers", "2")
    assert full["verdict"] == one["verdict"] == two["verdict"] == "ok"
    assert one["counts"]["distinct"] == full["counts"]["distinct"]
    assert one["depth"] == two["depth"] == full["depth"]
    assert one["counts"] == two["counts"]
    assert one["por"] == two["por"] == {
        "reduced": True, "skipped": full["counts"]["generated"] - one["counts"]["generated"]}
    assert one["counts"]["generated"] < full["counts"]["generated"]
    assert "por" not in full

def gate(*cmc_flags: str) -> dict:
    """scripts/bug_gate.sh over every demo with these flags: {(demo, build): row}."""
    env = dict(os.environ, CMC=" ".join([sys.executable, "-m", "cmc", *cmc_flags]))
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "bug_gate.sh")], cwd=ROOT,
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=3600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        cols = line.split()
        if len(cols) > 3 and cols[1] in ("correct", "bug") and cols[-1] == "PASS":
            rows[cols[0], cols[1]] = cols
    return rows


@pytest.mark.slow
def test_bug_gate_with_por_gives_the_full_verdicts_and_lengths():
    """Every demo both ways, with and without --por: the same verdict and property; for
    a correct build the same distinct count and depth, fewer or as many transitions;
    for a bug build a counterexample of the same length."""
    full, reduced = gate(), gate("--por")
    assert full.keys() == reduced.keys() and len(full) >= 30
    for (demo, build), a in full.items():
        b = reduced[demo, build]
        # columns: demo build expected got generated distinct depth trace seconds result
        got_a, got_b = a[a.index("exit"):-6], b[b.index("exit"):-6]
        assert got_a == got_b, (demo, build, a, b)
        generated_a, distinct_a, depth_a, trace_a = a[-6:-2]
        generated_b, distinct_b, depth_b, trace_b = b[-6:-2]
        if build == "correct":
            assert (distinct_a, depth_a) == (distinct_b, depth_b), (demo, a, b)
            assert int(generated_b) <= int(generated_a), (demo, a, b)
        else:
            assert trace_a == trace_b, (demo, a, b)
