"""Every property kind is checked as documented, through the real CLI, on real
programs: the toy counter of test_search.py (its state space is derived there) and the
clock program."""
from __future__ import annotations

import re

from conftest import DROP, PROGS, TEST_MODELS, cmc, counter, counts, run_cmc



def clock(tmp_path, *args):
    return run_cmc("--model-file", TEST_MODELS / "clock-live.model",
                   "-D", f"bin={PROGS}/clock", *args, cwd=tmp_path)


def states(out: str) -> list[str]:
    return re.findall(r"^State \d+: (.*)$", out, re.M)


def worlds(out: str) -> list[str]:
    """The node line of every state of the behavior."""
    return re.findall(r"^/\\ node = (.*)$", out, re.M)


# -- invariant ---------------------------------------------------------------------------

def test_invariant_holds(tmp_path):
    r = cmc(tmp_path, counter(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking completed. No error has been found.\n" in r.stdout


def test_invariant_violated(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, "invariant at_most_one: node[0].count <= 1\n"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Invariant at_most_one is violated.\nError: The behavior up to this point " \
           "is:\nState 1: <Initial predicate>\n" in r.stdout
    assert worlds(r.stdout)[-1] == '[counter |-> {"count": 2}]'
    assert len(states(r.stdout)) == 5


# -- witness -----------------------------------------------------------------------------

def test_witness_reached(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, "witness both: node[0].count == 2\n"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_witness_never_reached_is_a_violation_without_a_behavior(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, "witness three: node[0].count == 3\n"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Witness three was never reached.\n" in r.stdout
    assert "behavior" not in r.stdout and states(r.stdout) == []
    assert counts(r.stdout) == (13, 9, 5)         # the whole space was searched
    assert list(tmp_path.glob("*.trace.json")) == []


# -- quiescent ---------------------------------------------------------------------------

def test_quiescent_holds(tmp_path):
    # without faults the only quiescent world is the one where both lines are counted
    r = cmc(tmp_path, counter(tmp_path, "quiescent all_counted: node[0].count == 2\n"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_quiescent_violated(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, DROP + "quiescent all_counted: node[0].count == 2\n"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Quiescent property all_counted is violated.\n" in r.stdout
    labels = states(r.stdout)
    assert len(labels) == 4 and labels[-1].startswith("<DROP ")
    assert worlds(r.stdout)[-1] == '[counter |-> {"count": 1}]'
    assert re.findall(r"^/\\ network = (.*)$", r.stdout, re.M)[-1] == "<<>>"


def test_a_timer_that_changes_nothing_does_not_keep_a_world_busy(tmp_path):
    # --tick: every world has a FIRE back to itself; (2, 2) is still quiescent (a FIRE
    # that leads back does not keep a world busy: docs/cmc.md, "Properties: when each
    # is checked")
    r = cmc(tmp_path, counter(tmp_path, "quiescent never: false\n"), "-D", "flags=--tick 1000")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Quiescent property never is violated.\n" in r.stdout
    assert len(states(r.stdout)) == 5
    assert worlds(r.stdout)[-1] == '[counter |-> {"count": 2}]'


def test_quiescent_in_simulation_tries_the_fires(tmp_path):
    # --tick: no world is ever without a FIRE; a walk finds the quiescent worlds by
    # taking their FIREs, which all lead back
    model = counter(tmp_path, DROP + "quiescent all_counted: node[0].count == 2\n")
    r = cmc(tmp_path, model, "-D", "flags=--tick 1000", "--simulate", "--seed", "5",
            "--walks", "30", "--max-depth", "12")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Quiescent property all_counted is violated.\n" in r.stdout
    labels = states(r.stdout)
    assert labels[-1] == "<FIRE counter poll 1s>" and any("DROP" in lb for lb in labels)
    assert worlds(r.stdout)[-1] == '[counter |-> {"count": 1}]'


def test_a_timer_that_changes_the_world_keeps_it_busy(tmp_path):
    model = tmp_path / "clock.model"
    model.write_text(f'node c = "{PROGS}/clock"\nquiescent never: false\n')
    r = run_cmc("--model-file", model, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    # the initial world's FIRE (the 2.5 s nanosleep) changes it: the first quiescent
    # world is the one after it, where the program blocks in accept forever
    labels = states(r.stdout)
    assert len(labels) == 2 and re.fullmatch(r"<FIRE c \w*nanosleep 2.5s>", labels[1])


# -- action ------------------------------------------------------------------------------

ACCEPTED_KEPT = """
# a's line, once its connection is accepted, is never lost
action accepted_line_kept:
    (some m in network: m.src == "a" and m.kind == "DATA")
      and not (some m in network: m.src == "a" and m.kind == "CONNECT")
    => (some m in network': m.src == "a") or node'[0].count > node[0].count
"""


def test_action_holds(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, DROP + "action grows: node'[0].count >= node[0].count\n"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (29, 15, 5)


def test_action_violated_on_a_transition_into_a_world_already_seen(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, DROP + ACCEPTED_KEPT))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Action property accepted_line_kept is violated.\n" in r.stdout
    assert states(r.stdout) == ["<Initial predicate>", "<DELIVER a -> counter CONNECT>",
                                "<DROP a -> counter>"]
    # The initial world generated 4 worlds (DELIVER a, DELIVER b, DROP a, DROP b); the
    # second one then generated 2 new worlds and, by DROP a, the world that DROP a from
    # the initial world had already found: 8 generated, 7 distinct.
    assert counts(r.stdout)[:2] == (8, 7)


# -- eventually --------------------------------------------------------------------------

ALL_COUNTED = "eventually all_counted: node[0].count == 2\n"


def test_eventually_holds(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, ALL_COUNTED))
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (13, 9, 5)


def test_eventually_violated_when_the_fair_schedule_stops(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, DROP + ALL_COUNTED))
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("Error: Temporal property all_counted was violated.\n"
            "Error: The following behavior constitutes a counter-example:\n") in r.stdout
    # the shortest prefix to the first world that fails (a dropped), then the fair suffix
    assert states(r.stdout) == ["<Initial predicate>", "<DROP a -> counter>",
                                "<DELIVER b -> counter CONNECT>",
                                "<DELIVER b -> counter \"y\\n\">"]
    assert ("From state 2 on, the fair fault-free schedule runs until state 4, where no "
            "DELIVER or FIRE is enabled, and all_counted never became true.\n") in r.stdout


def test_eventually_violated_by_a_lasso(tmp_path):
    r = cmc(tmp_path, counter(tmp_path, DROP + ALL_COUNTED), "-D", "flags=--tick 1000")
    assert r.returncode == 1, r.stdout + r.stderr
    assert states(r.stdout)[-1] == "Back to state 4"
    assert ("From state 2 on, the fair fault-free schedule runs back to state 4 without "
            "all_counted becoming true: it would go round forever.\n") in r.stdout


def test_eventually_within_live_steps(tmp_path):
    model = counter(tmp_path, ALL_COUNTED)
    r = cmc(tmp_path, model, "--live-steps", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    r = cmc(tmp_path, model, "--live-steps", "3")
    assert r.returncode == 1, r.stdout + r.stderr
    assert len(states(r.stdout)) == 4          # the initial world, then 3 fair steps
    assert ("From state 1 on, the fair fault-free schedule runs 3 steps (--live-steps) "
            "without all_counted becoming true.\n") in r.stdout


def test_eventually_fires_timeouts(tmp_path):
    r = clock(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = clock(tmp_path, "--live-steps", "0")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Temporal property slept was violated.\n" in r.stdout
    assert states(r.stdout) == ["<Initial predicate>"]


def test_eventually_when_the_fire_budget_runs_out_within_a_round(tmp_path):
    # Both pingers have a pending timeout: the fair schedule's first round fires p1,
    # then p2's FIRE is no longer enabled (budget fire 1). A new round begins: it
    # delivers p1's CONNECT and "ping\n", and the counter counts it.
    model = tmp_path / "ping.model"
    model.write_text(f'node counter = "{PROGS}/counter 7000"\n'
                     f'node p1 = "{PROGS}/pinger 7000"\n'
                     f'node p2 = "{PROGS}/pinger 7000"\n'
                     "budget fire 1\n"
                     "eventually pinged: node[0].count == 1\n")
    r = run_cmc("--model-file", model, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_cmc("--model-file", model, "--live-steps", "2", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    labels = states(r.stdout)
    assert len(labels) == 3 and re.fullmatch(r"<FIRE p1 \w*nanosleep 1s>", labels[1])
    assert labels[2] == "<DELIVER p1 -> counter CONNECT>"


def test_eventually_in_dfs_and_simulation(tmp_path):
    model = counter(tmp_path, DROP + ALL_COUNTED)
    r = cmc(tmp_path, model, "--dfs", "10")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Temporal property all_counted was violated.\n" in r.stdout
    r = cmc(tmp_path, model, "--simulate", "--seed", "1", "--walks", "30")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Error: Temporal property all_counted was violated.\n" in r.stdout
    assert "where no DELIVER or FIRE is enabled" in r.stdout


def test_eventually_trace_replays(tmp_path):
    model = counter(tmp_path, DROP + ALL_COUNTED)
    r = cmc(tmp_path, model, "--trace-out", "t.json")
    assert r.returncode == 1
    again = cmc(tmp_path, model, "--replay", "t.json")
    assert again.returncode == 1, again.stdout + again.stderr
    assert states(again.stdout) == states(r.stdout)
    refused = cmc(tmp_path, model, "--replay", "t.json", "--live-steps", "7")
    assert refused.returncode == 2
    assert "the trace was written with --live-steps 100, not 7" in refused.stderr


# -- evaluation errors during the search ---------------------------------------------------

def test_evaluation_error_names_the_property_and_the_world(tmp_path):
    model = counter(tmp_path, "invariant typo: node[0].count >= node[0].cuont\n")
    r = cmc(tmp_path, model)
    assert r.returncode == 2, r.stdout + r.stderr
    line = len(model.read_text().splitlines())
    assert r.stderr.startswith(
        f"{model}:{line}:31: in property typo: cannot order int and null (0 >= null)\n"
        "    invariant typo: node[0].count >= node[0].cuont\n"
        "                                  ^\n"
        "The world it was evaluated in:\n"
        '/\\ node = [counter |-> {"count": 0}]\n')
    assert "Traceback" not in r.stderr


def test_evaluation_error_in_an_action_shows_both_worlds(tmp_path):
    model = counter(tmp_path, "action bad: node'[0].count - node[0].count >= \"1\"\n")
    r = cmc(tmp_path, model, "--tlc-exit-codes")
    assert r.returncode == 151, r.stdout + r.stderr
    assert "in property bad: cannot order int and string (0 >= \"1\")" in r.stderr
    assert "The world it was evaluated in:\n" in r.stderr
    assert "and the world after the transition:\n" in r.stderr
    assert "Traceback" not in r.stderr
