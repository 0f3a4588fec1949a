"""A walk's counterexample shrunk (cmc/engine/shrink.py) on a real bug build: the
walk that finds raft's planted bug wanders for 12 states; its behavior is shrunk, by
replays of the three real nodes from launch, to 8 states: breadth-first search's
shortest counterexample (docs/demos.md, the bug gate: raft bug, trace 8). The shrunk
trace runs again with --replay.

twopc's planted bug needs a CRASH of the coordinator after both participants voted yes
and the client was told COMMITTED: a uniform walk spends its one crash in the first
steps (3000 uniform walks did not find it), a swarm walk (--swarm, its own weights of
actions drawn from its seed) crashes late. Its 16 states shrink to 14, breadth-first
search's shortest (docs/demos.md, the bug gate: twopc bug, trace 14)."""
from __future__ import annotations

import json

from conftest import MODELS, run_cmc

TWOPC_BUG = ["--model-file", str(MODELS / "twopc.model"), "-D", "bin=../demo/build/twopc-bug"]
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


def test_a_swarm_walk_finds_twopcs_bug_and_is_shrunk_to_the_shortest(tmp_path):
    r = run_cmc(*TWOPC_BUG, "--simulate", "--swarm", "--seed", "207", "--walks", "1",
                "--trace-out", tmp_path / "t.json", "--json", tmp_path / "r.json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr
    assert "Error: Invariant commit_is_final is violated.\n" in r.stdout
    assert "The behavior was found by swarm walk 1 (seed 207); run it alone with --simulate " \
           "--swarm --seed 207 --walks 1.\n" in r.stdout
    assert "The walk's behavior had 16 states; shrunk to 14 by dropping actions (105 replays " \
           "from launch).\n" in r.stdout
    assert [line for line in r.stdout.splitlines() if line.startswith("State ")][-3:] == [
        "State 12: <CRASH coord>", "State 13: <DELIVER coord -> p1 CONNECT>",
        'State 14: <DELIVER p1 -> coord "HELLO 1\\n">']
    data = json.loads((tmp_path / "r.json").read_text())["simulation"]
    assert (data["swarm"], data["walk_states"], data["failing_walk_seed"]) == (True, 16, 207)
    # the same walk, uniform: no crash where it matters
    r = run_cmc(*TWOPC_BUG, "--simulate", "--seed", "207", "--walks", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
