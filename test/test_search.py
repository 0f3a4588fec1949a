"""Every search mode, through the real CLI, gives the exact counts of a toy whose state
space is known by hand.

The toy (test/progs/counter.c, test/models/counter.model): one node counts the lines
it receives; ghost clients a and b each connect and send one line. The node's only
state on fd 3 is the count, so a world is fixed by where each client's connection
stands:

    0  its CONNECT and its line are in flight
    1  the CONNECT was delivered (the node accepted the connection), the line is in flight
    2  the line was delivered (and counted)

The count is the number of clients at 2, so it adds nothing. Every pair is reachable:
distinct = 3 * 3 = 9. A world enables one DELIVER per client below 2 (the head of its
channel). A client is below 2 in 2 * 3 = 6 of the 9 worlds, so the worlds generate
2 * 6 = 12 successors; with the initial world (TLC counts it), generated = 13. The
farthest world is (2, 2), 4 steps away: depth 5 (the initial world is depth 1).

With `budget drop 1`, a client below 2 can be dropped: a FIFO DROP resets its
connection. Dropped at 0 (its CONNECT is refused) or at 1 (the node reads the reset
and closes its end), the connection is gone and the client finished either way: one
stage D. Worlds are pairs over {0, 1, 2, D} with at most one D (one drop in all):
distinct = 9 + 2 * 3 = 15. Generated: in the 9 drop-free worlds, each client below 2
enables a DELIVER and a DROP: 2 * 2 * 6 = 24; in the 6 worlds with a D, the other
client, below 2 in 2 of its 3 stages, enables a DELIVER only: 2 * 2 = 4. So
generated = 1 + 24 + 4 = 29, and the depth is still 5.

With `--tick 1000` the node polls with a 1 s timeout whose firing changes nothing:
every world also enables a FIRE back to itself, generated = 13 + 9 = 22.

With `--max-depth 3` the worlds of depth 3 are not expanded: found are the 6 worlds
whose stages add up to at most 2; generated = 1 + 2 (from the initial world) + 2 * 2
(from the two worlds of depth 2) = 7.
"""
from __future__ import annotations

import json
import re

import pytest

from conftest import DROP, PROGS, cmc, counter, counts, run_cmc, without_timestamps

BOTH_COUNTED = "invariant not_both: node[0].count < 2\n"


def states(out: str) -> list[str]:
    return re.findall(r"^State \d+: (.*)$", out, re.M)


# -- breadth-first: exact counts ----------------------------------------------------------

# By hand (the docstring): a world is the pair of client stages; the node is blocked in
# the same poll() in every world (it looks only at the connections it polled, so a
# just-accepted one never sends it into read()), so the blocked call adds no world.
@pytest.mark.parametrize("extra, flags, expected", [
    ("", "", (13, 9, 5)),               # 3*3 worlds; 1 initial + 2*6 DELIVERs
    (DROP, "", (29, 15, 5)),            # 9 + 2*3 with one D; 1 + 24 (DELIVER|DROP) + 4
    ("", "--tick 1000", (22, 9, 5)),    # the same 9 worlds, each with a FIRE to itself: 13 + 9
    (DROP, "--tick 1000", (44, 15, 5)), # 29 + a FIRE in each of the 15 worlds
])
def test_bfs_counts_are_exact(tmp_path, extra, flags, expected):
    r = cmc(tmp_path, counter(tmp_path, extra), "-D", f"flags={flags}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking completed. No error has been found.\n" in r.stdout
    assert counts(r.stdout) == expected


def test_bfs_counts_of_the_static_build(tmp_path):
    r = run_cmc("--model-file", counter(tmp_path, DROP), "-D", f"bin={PROGS}/counter-static",
                cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (29, 15, 5)


def test_bfs_counterexample_is_shortest(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, DROP + BOTH_COUNTED))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Invariant not_both is violated.\n" in r.stdout
    assert states(r.stdout) == ["<Initial predicate>", "<DELIVER a -> counter CONNECT>",
                                "<DELIVER a -> counter \"x\\n\">",
                                "<DELIVER b -> counter CONNECT>",
                                "<DELIVER b -> counter \"y\\n\">"]
    assert (tmp_path / "counter.trace.json").exists()


def test_max_depth_bounds_the_search_and_says_so(tmp_path):
    r = cmc(tmp_path, counter(tmp_path), "--max-depth", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (7, 6, 3)
    assert ("  The search was bounded at depth 3 (--max-depth 3): 3 states at that depth "
            "were not expanded.\n") in r.stdout


def test_bag_network_with_dup(tmp_path):
    # network bag, budget dup 1: a copy of b's line is delivered too, and counted
    model = counter(tmp_path, "network bag\nbudget dup 1\n")
    r = cmc(tmp_path, model, "--trace-out", "t.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Invariant count_in_range is violated.\n" in r.stdout
    labels = states(r.stdout)
    assert sum(label.startswith("<DUP ") for label in labels) == 1 and len(labels) == 7
    again = cmc(tmp_path, model, "--replay", "t.json")
    assert again.returncode == 1 and states(again.stdout) == labels


# -- depth-first ---------------------------------------------------------------------------

def test_dfs_visits_every_world_within_the_bound(tmp_path):
    r = cmc(tmp_path, counter(tmp_path), "--dfs", "10")
    assert r.returncode == 0, r.stdout + r.stderr
    # every path to a world has the same length here, so nothing is expanded twice
    assert counts(r.stdout) == (13, 9, 5)
    assert "bounded" not in r.stdout


def test_dfs_depth_bound(tmp_path):
    r = cmc(tmp_path, counter(tmp_path), "--dfs", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (7, 6, 3)
    assert "(--dfs 3)" in r.stdout


def test_dfs_finds_the_violation_and_a_witness_beyond_the_bound_fails(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, DROP + BOTH_COUNTED), "--dfs", "8")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Invariant not_both is violated.\n" in r.stdout
    labels = states(r.stdout)
    assert labels[0] == "<Initial predicate>" and len(labels) >= 5
    model = counter(tmp_path, "witness two: node[0].count == 2\n", "w.model")
    r = cmc(tmp_path, model, "--dfs", "4")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Witness two was never reached.\n" in r.stdout


# -- simulation ----------------------------------------------------------------------------

def test_simulation_passes_and_counts_walks(tmp_path):
    r = cmc(tmp_path, counter(tmp_path), "--simulate", "--seed", "7", "--walks", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Running Random Simulation with seed 7 (5 walks).\n" in r.stdout
    assert "Simulation completed: 5 walks, no error has been found.\n" in r.stdout
    # without faults every walk delivers all four messages: 5 states each
    assert "The number of states generated: 25\n" in r.stdout
    assert "Simulation using seed 7 and aril 0\n" in r.stdout
    assert ("Progress: 25 states checked, 5 traces generated (trace length: mean=5, "
            "var(x)=0, sd=0)\n") in r.stdout


def test_simulation_walk_is_reproduced_alone_by_its_seed(tmp_path):
    model = counter(tmp_path, DROP + BOTH_COUNTED)
    r = cmc(tmp_path, model, "--simulate", "--seed", "100", "--walks", "40")
    assert r.returncode == 1, r.stdout + r.stderr
    m = re.search(r"^The behavior was found by walk (\d+) \(seed (\d+)\); run it alone with "
                  r"--simulate --seed (\d+) --walks 1\.$", r.stdout, re.M)
    assert m and m.group(2) == m.group(3) and int(m.group(2)) == 100 + int(m.group(1)) - 1
    again = cmc(tmp_path, model, "--simulate", "--seed", m.group(2), "--walks", "1")
    assert again.returncode == 1
    assert "found by walk 1 " in again.stdout

    def behavior(out):
        return out[out.index("Error: The behavior"):out.index("The behavior was found")]
    assert behavior(again.stdout) == behavior(r.stdout)
    same = cmc(tmp_path, model, "--simulate", "--seed", "100", "--walks", "40")
    assert without_timestamps(same.stdout) == without_timestamps(r.stdout)


# -- replay ----------------------------------------------------------------------------------

@pytest.fixture
def violated(tmp_path):
    """A model whose invariant fails, and the trace file of the failure."""
    model = counter(tmp_path, DROP + BOTH_COUNTED)
    trace = tmp_path / "t.json"
    r = cmc(tmp_path, model, "--trace-out", trace)
    assert r.returncode == 1, r.stdout + r.stderr
    return model, trace, r.stdout


def test_replay_runs_the_trace_again(tmp_path, violated):
    model, trace, search_out = violated
    r = cmc(tmp_path, model, "--replay", trace)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Invariant not_both is violated.\n" in r.stdout
    assert states(r.stdout) == states(search_out)
    # each step shows what the node did: its emulated calls
    assert re.search(r"^    counter: accept\(", r.stdout, re.M)
    assert re.search(r"^    counter: write\(3, .*\"\{\\\"count\\\":2\}\\n\"", r.stdout, re.M)


def test_replay_takes_the_model_from_the_trace(tmp_path, violated):
    _, trace, _ = violated
    r = run_cmc("--replay", trace, "-D", f"bin={PROGS}/counter", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr


def test_replay_refuses_other_params(tmp_path, violated):
    model, trace, _ = violated
    r = cmc(tmp_path, model, "--replay", trace, "-D", "flags=--tick 5")
    assert r.returncode == 2
    assert "refused, the trace does not belong to this model" in r.stderr
    assert 'param flags is "" in the trace but "--tick 5" here (add -D flags=)' in r.stderr
    assert "Traceback" not in r.stderr


def test_replay_refuses_other_budgets(tmp_path, violated):
    model, trace, _ = violated
    data = json.loads(trace.read_text())
    data["budgets"]["drop"] = 0
    trace.write_text(json.dumps(data))
    r = cmc(tmp_path, model, "--replay", trace)
    assert r.returncode == 2
    assert "budget drop is 0 in the trace but 1 in the model file" in r.stderr


def test_replay_of_a_behavior_that_no_longer_violates(tmp_path, violated):
    model, trace, _ = violated
    data = json.loads(trace.read_text())
    data["actions"].pop()
    trace.write_text(json.dumps(data))
    r = cmc(tmp_path, model, "--replay", trace)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "The behavior no longer violates invariant not_both:\n" in r.stdout
    assert len(states(r.stdout)) == 4


def test_replay_of_a_file_that_is_no_trace(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    r = cmc(tmp_path, counter(tmp_path), "--replay", bad)
    assert r.returncode == 2
    assert "not a cmc trace file" in r.stderr


# -- determinism -----------------------------------------------------------------------------

def test_det_passes_a_deterministic_program_with_the_same_counts(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, DROP), "--det")
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (29, 15, 5)


def test_det_catches_nondeterminism_in_a_world_never_replayed(tmp_path):
    # with --pid-at 2 the worlds where both lines are counted hold the node's pid; at
    # --max-depth 5 they are never expanded, so only --det runs their step again
    model = counter(tmp_path)
    args = ("-D", "flags=--pid-at 2", "--max-depth", "5")
    r = cmc(tmp_path, model, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    r = cmc(tmp_path, model, *args, "--det")
    assert r.returncode == 3, r.stdout + r.stderr
    assert re.search(r'^Error: nondeterminism: running the same step twice from a fresh '
                     r'launch \(--det\) gave a different world at step 4 \(DELIVER . -> '
                     r'counter ".\\n"\); .* node\[counter\] was \{"count": 2, "pid": \d+\}, '
                     r'then \{"count": 2, "pid": \d+\} \(the second run was launched with its '
                     r'initial stack shifted', r.stdout, re.M), r.stdout


@pytest.mark.parametrize("mode", [["--dfs", "5"], ["--simulate", "--seed", "1", "--walks", "2"]])
def test_det_in_the_other_searches(tmp_path, mode):
    r = cmc(tmp_path, counter(tmp_path), "-D", "flags=--pid-at 2", "--det", *mode)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "running the same step twice from a fresh launch (--det)" in r.stdout


def test_nondeterminism_is_always_checked_on_replay(tmp_path):
    r = cmc(tmp_path, counter(tmp_path), "-D", "flags=--pid-at 0", "--no-fast")
    assert r.returncode == 3, r.stdout + r.stderr
    assert ("Error: nondeterminism: replaying the same actions gave a different world at "
            "the initial world") in r.stdout


# -- caps ------------------------------------------------------------------------------------

def test_state_cap_is_an_engine_error(tmp_path):
    r = cmc(tmp_path, counter(tmp_path), "--max-states", "5")
    assert r.returncode == 3, r.stdout + r.stderr
    assert ("Error: state cap exceeded: more than 5 distinct states (--max-states); raise "
            "the cap or lower the budgets\n") in r.stdout


def test_channel_cap_is_an_engine_error(tmp_path):
    model = tmp_path / "flood.model"
    model.write_text(f'node counter = "{PROGS}/counter 7000"\n'
                     f'node flood = "{PROGS}/flood 7000 5"\n'
                     "invariant sent: node[1].sent == 0 or node[1].sent == 5\n")
    r = run_cmc("--model-file", model, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_cmc("--model-file", model, "--channel-cap", "3", cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Error: channel cap exceeded: more than 3 messages in flight" in r.stdout
