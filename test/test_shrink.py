"""A walk's counterexample shrunk (cmc/engine/shrink.py) on a real bug build: the
walk that finds raft's planted bug wanders for 12 states; its behavior is shrunk, by
replays of the three real nodes from launch, to 8 states: breadth-first search's
shortest counterexample (docs/demos.md, the bug gate: raft bug, trace 8). The shrunk
trace runs again with --replay."""
from __future__ import annotations

import json

from conftest import MODELS, run_cmc

RAFT_BUG = ["--model-file", str(MODELS / "raft.model"), "-D", "bin=../demo/build/raft-bug"]


def test_a_walk_on_rafts_bug_build_is_shrunk_to_the_shortest_counterexample(tmp_path):
    trace = tmp_path / "t.json"
    r = run_cmc(*RAFT_BUG, "--simulate", "--seed", "5036", "--walks", "1", "--trace-out",
                trace, "--json", tmp_path / "r.json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr
    assert "Error: Invariant election_safety is violated.\n" in r.stdout
    assert "The walk's behavior had 12 states; shrunk to 8 by dropping actions (65 replays " \
           "from launch).\n" in r.stdout
    states = [line for line in r.stdout.splitlines() if line.startswith("State ")]
    assert len(states) == 8
    assert json.loads((tmp_path / "r.json").read_text())["simulation"]["walk_states"] == 12
    again = run_cmc("--replay", trace, cwd=tmp_path)
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr
    assert "election_safety" in again.stdout
