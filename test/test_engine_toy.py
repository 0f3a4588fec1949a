"""The search engine (cmc/engine) on toy systems in pure Python (test/toy.py): no
process is started, every test takes milliseconds (the --workers ones a little more).

Each toy's counts are known independently of the engine: worked out by hand below
(the comments give the reasoning, in the order the engine takes the steps), and
checked against `reachable`, a plain breadth-first search over the toy's own states
that shares nothing with the engine. The counts are TLC's: the initial world counts as
generated, and so does every successor, already seen or not; the initial world has
depth 1.

What each toy has, with its actions in order:

- counter(n): x = 0, 1, ..., n-1, 0 (`inc`): n worlds in a ring.
- lost_update(2): two processes `read i` the register x into t_i, then `write i` t_i+1:
  13 worlds, 4 of the 6 interleavings end with x = 1.
- philosophers(n): a deadlock when each holds the left fork.
- retry(resend): a DROP or a DELIVER of a request, and a timeout (FIRE) that resends it
  or changes nothing.
- graph(edges): an explicit graph.
"""
from __future__ import annotations

import copy
from collections import deque

import pytest

from cmc.engine import search as search_module
from cmc.engine.bfs import BreadthFirst
from cmc.engine.dfs import DepthFirst
from cmc.engine.model import EngineLimit, Property
from cmc.engine.pool import WorkerPool
from cmc.engine.replay import Nondeterminism
from cmc.engine.shrink import shrink
from cmc.engine.search import Search
from cmc.engine.simulate import Walks
from cmc.engine.worlds import Copying, Replaying
from toy import (DELIVER, Toy, ToySystem, counter, graph, lost_update, philosophers,
                 retry)


class Collect:
    """A reporter that keeps a copy of the statistics of every event, in order."""

    def __init__(self):
        self.events: list[tuple[str, object]] = []

    def initial(self, stats) -> None:
        self.events.append(("initial", copy.deepcopy(stats)))

    def progress(self, stats) -> None:
        self.events.append(("progress", copy.deepcopy(stats)))

    def of(self, kind: str) -> list:
        return [stats for k, stats in self.events if k == kind]


def composed(order, model, props, reporter, fast=False, workers=0, worker_model=None, **kw):
    """A search of `order` (bfs.py, dfs.py, simulate.py), copying with `fast`, its steps
    taken by `workers` processes (pool.py) if any, each with `worker_model(index)`."""
    executor = WorkerPool(workers, worker_model) if workers else None
    return Search(model, props, reporter, order, Copying() if fast else Replaying(), executor,
                  **kw)


def bfs(*args, check_merges=False, **kw):
    return composed(BreadthFirst(check_merges), *args, **kw)


def dfs(*args, depth, **kw):
    return composed(DepthFirst(depth), *args, **kw)


def walks(*args, seed, walks, **kw):
    return composed(Walks(seed, walks), *args, **kw)


def replay_workers(*args, **kw):
    return bfs(*args, **kw)


def copy_workers(*args, **kw):
    return bfs(*args, fast=True, **kw)


def run(search, toy: Toy, props=(), **kw):
    """Run `search` (one of the makers above) on `toy`; returns (outcome, reporter). Whatever
    the outcome, the engine must have closed every system it opened."""
    reporter = Collect()
    outcome = search(toy, list(props), reporter, **kw).run()
    assert toy.open == set(), "the engine left systems open"
    assert len(reporter.of("initial")) == 1
    assert (reporter.of("initial")[0].generated, reporter.of("initial")[0].distinct) == (1, 1)
    return outcome, reporter


def counts(outcome) -> tuple[int, int, int]:
    return outcome.stats.generated, outcome.stats.distinct, outcome.stats.depth


def labels(outcome) -> list:
    return [step.label for step in outcome.trace]


def reachable(toy: Toy, max_depth: int | None = None) -> tuple[int, int, int]:
    """(generated, distinct, depth) by a plain BFS over the toy's states, not through the
    engine: the independent reference for the engine's counts."""
    depth = {toy.initial: 1}
    generated, queue = 1, deque([toy.initial])
    while queue:
        state = queue.popleft()
        if max_depth is not None and depth[state] >= max_depth:
            continue
        for _, _, after in toy.moves(state):
            generated += 1
            if after not in depth:
                depth[after] = depth[state] + 1
                queue.append(after)
    return generated, len(depth), max(depth.values())


def invariant(name, check):
    return Property("invariant", name, lambda view, _: check(view))


def state_prop(kind, name, check):
    return Property(kind, name, lambda view, _: check(view))


def both_done_x_is_2(view):
    return not all(pc == 2 for pc in view["pc"]) or view["x"] == 2


# Hand counts (generated, distinct, depth) of a full BFS, each generated = 1 + the
# number of actions enabled in each world:
# - counter(1): the world 0 and its self-loop: 2, 1, 1.
# - counter(4): 4 worlds in a ring, one action each: 1 + 4 = 5, 4, 4.
# - lost_update(2), by pcs (pc0, pc1): (0,0) (1,0) (0,1) (1,1) (2,0) (0,2) one world each;
#   (2,1) two (process 1 read x before or after process 0 wrote it), (1,2) two; (2,2)
#   three (x = 2 with t = (0, 1), x = 2 with t = (1, 0), x = 1 with t = (0, 0)): 13.
#   Actions: 2 in each of the four worlds with both pcs < 2, 1 in each of the six with
#   one pc = 2: 1 + 8 + 6 = 15. The last worlds are 4 steps from the first: depth 5.
# - philosophers(2): phases (0,0) (1,0) (0,1) (1,1) (2,0) (0,2) (the others would share
#   a fork); actions 2 + 2 + 2 + 0 + 1 + 1: 9, 6, 3.
# - retry(): (in flight, acked, drops) S=(T,F,1): drop B=(F,F,0), deliver A=(F,T,1),
#   timeout S; B: timeout C=(T,F,0); A: timeout A; C: deliver D=(F,T,0), timeout C;
#   D: timeout D. 1 + 3 + 1 + 1 + 2 + 1 = 9, 5, and D is 4 states deep.
# - retry(False): S, A and B, whose timeouts change nothing: 1 + 3 + 1 + 1 = 6, 3, 2.
HAND = [
    ("counter(1)", lambda: counter(1), (2, 1, 1)),
    ("counter(4)", lambda: counter(4), (5, 4, 4)),
    ("lost_update(2)", lambda: lost_update(2), (15, 13, 5)),
    ("philosophers(2)", lambda: philosophers(2), (9, 6, 3)),
    ("retry()", lambda: retry(), (9, 5, 4)),
    ("retry(False)", lambda: retry(False), (6, 3, 2)),
]


# -- the reference itself ---------------------------------------------------------------

@pytest.mark.parametrize("make, expected", [h[1:] for h in HAND], ids=[h[0] for h in HAND])
def test_the_reference_search_gives_the_hand_counts(make, expected):
    """The plain BFS `reachable` that the larger toys are checked against agrees with
    every count worked out by hand."""
    assert reachable(make()) == expected


def test_the_philosophers_worlds_are_a_closed_form():
    """The distinct worlds of philosophers(n) are every assignment of phases in which no
    fork is held twice: fork i is held by philosopher i when its phase is 1 or 2, and by
    philosopher i-1 when its phase is 2. Counting assignments round the ring is the
    trace of M^n, M[previous phase][phase] = 0 just when previous = 2 and phase >= 1;
    the traces are 6, 14, 34, 82 (a(n) = 2a(n-1) + a(n-2)), and every such world is
    reachable, which the reference confirms."""
    m = [[1, 1, 1], [1, 1, 1], [1, 0, 0]]
    power = [[int(i == j) for j in range(3)] for i in range(3)]
    for n in range(1, 6):
        power = [[sum(power[i][k] * m[k][j] for k in range(3)) for j in range(3)]
                 for i in range(3)]
        if n >= 2:
            assert reachable(philosophers(n))[1] == sum(power[i][i] for i in range(3))
    assert [reachable(philosophers(n))[1] for n in (2, 3, 4, 5)] == [6, 14, 34, 82]


# -- breadth-first search -------------------------------------------------------------

@pytest.mark.parametrize("make, expected", [h[1:] for h in HAND], ids=[h[0] for h in HAND])
def test_bfs_counts_every_world_and_every_step(make, expected):
    """Breadth-first search counts TLC's way: generated (the initial world and every
    successor, self-loops and worlds already seen included), distinct and depth are
    exactly the hand counts; nothing is left on the queue and nothing is bounded."""
    outcome, _ = run(bfs, make())
    assert outcome.verdict == "ok" and outcome.prop is None and outcome.trace == []
    assert counts(outcome) == expected
    assert (outcome.stats.queue, outcome.stats.unexplored, outcome.bounded) == (0, 0, False)


@pytest.mark.parametrize("make", [lambda: counter(10), lambda: lost_update(3),
                                  lambda: philosophers(3), lambda: philosophers(4)],
                         ids=["counter(10)", "lost_update(3)", "philosophers(3)",
                              "philosophers(4)"])
def test_bfs_counts_agree_with_the_reference_on_larger_toys(make):
    """On toys too large to count by hand (lost_update(3): 112 generated, 84 distinct,
    depth 7), breadth-first search gives the reference's counts."""
    assert counts(run(bfs, make())[0]) == reachable(make())


def test_bfs_finds_the_lost_update_by_a_shortest_trace():
    """An invariant is checked on every world when it is found, and the first violation
    in BFS order is reported with a shortest trace. By hand, in BFS order (S the
    initial world): S gives A (read 0), B (read 1); A gives C (write 0), D (read 1);
    B gives D again, E; C gives F; D gives G (write 0), H (write 1); E gives I; F gives
    J = both done with x = 2; G gives K (write 1) = both done with x = 1: violated at
    the 13th world generated, the 12th distinct, with H, I and J left on the queue.
    K's path is S, A, D, G, K: 5 states."""
    outcome, _ = run(bfs, lost_update(), [invariant("no_lost_update", both_done_x_is_2)])
    assert outcome.verdict == "violated" and outcome.prop.name == "no_lost_update"
    assert counts(outcome) == (13, 12, 5) and outcome.stats.queue == 3
    assert labels(outcome) == [None, "read 0", "read 1", "write 0", "write 1"]
    assert [step.view["x"] for step in outcome.trace] == [0, 0, 0, 1, 1]
    assert outcome.trace[-1].view == {"pc": [2, 2], "t": [0, 0], "x": 1}


def test_bfs_max_depth_leaves_the_worlds_at_the_bound_unexpanded():
    """With a depth bound of 3, the worlds 3 deep are found but not expanded: lost_update
    generates S, A, B (depth 1 and 2) and their 2 + 2 + 2 successors: 7 generated, 6
    distinct, and the 3 worlds at the bound ((2,0), (1,1), (0,2)) are counted as
    unexplored, so the verdict says the search was bounded."""
    outcome, _ = run(bfs, lost_update(), max_depth=3)
    assert outcome.verdict == "ok" and outcome.bounded
    assert counts(outcome) == (7, 6, 3) == reachable(lost_update(), max_depth=3)
    assert outcome.stats.unexplored == 3


def test_max_states_is_never_a_silent_truncation():
    """More distinct worlds than --max-states is an EngineLimit error, not a smaller
    search, and every system is still closed."""
    toy = lost_update()
    with pytest.raises(EngineLimit, match="more than 5 distinct states"):
        bfs(toy, [], Collect(), max_states=5).run()
    assert toy.open == set()
    assert run(bfs, lost_update(), max_states=13)[0].verdict == "ok"


def test_an_action_property_is_checked_on_every_step():
    """An action property sees each step (the world before and after). `x' == x + 1`
    holds on counter(4) until the wrap from 3 to 0: the trace is the 4 worlds to x = 3
    and the step that wraps (5 states); all 5 steps were generated, 4 worlds found."""
    grows = Property("action", "grows", lambda view, after: after["x"] == view["x"] + 1)
    outcome, _ = run(bfs, counter(4), [grows])
    assert outcome.verdict == "violated" and outcome.prop is grows
    assert counts(outcome) == (5, 4, 4)
    assert [step.view["x"] for step in outcome.trace] == [0, 1, 2, 3, 0]
    assert labels(outcome) == [None, "inc", "inc", "inc", "inc"]


def test_witnesses_reached_and_never_reached():
    """A witness only has to be reached once; one never reached is reported after the
    whole search, with an empty trace."""
    three = state_prop("witness", "three", lambda v: v["x"] == 3)
    four = state_prop("witness", "four", lambda v: v["x"] == 4)
    outcome, _ = run(bfs, counter(4), [three])
    assert outcome.verdict == "ok" and counts(outcome) == (5, 4, 4)
    outcome, _ = run(bfs, counter(4), [three, four])
    assert outcome.verdict == "violated" and outcome.prop is four and outcome.trace == []
    assert counts(outcome) == (5, 4, 4)


def test_an_invariant_violated_in_the_initial_world():
    """The initial world is checked before anything else: a one-state trace, one world
    generated."""
    outcome, _ = run(bfs, counter(4), [invariant("positive", lambda v: v["x"] > 0)])
    assert outcome.verdict == "violated" and counts(outcome) == (1, 1, 1)
    assert labels(outcome) == [None]


def test_progress_events_after_every_expansion(monkeypatch):
    """The engine reports through its reporter, never prints: with the progress period
    at 0, BFS sends one progress event after each of lost_update's 13 expansions, each
    with the counts so far; after S: 3 generated, 3 distinct, A and B on the queue."""
    monkeypatch.setattr(search_module, "PROGRESS_EVERY", 0)
    outcome, reporter = run(bfs, lost_update())
    progress = reporter.of("progress")
    assert [kind for kind, _ in reporter.events] == ["initial"] + ["progress"] * 13
    assert (progress[0].generated, progress[0].distinct, progress[0].queue) == (3, 3, 2)
    assert (progress[-1].generated, progress[-1].distinct, progress[-1].queue) == (15, 13, 0)
    assert [p.generated for p in progress] == sorted(p.generated for p in progress)


def test_bfs_replays_every_world_it_expands():
    """Without --fast, a world is visited by replaying its path from a fresh launch. On
    lost_update: 1 launch for S (whose first step reuses it) + 1 replay for its second
    step; each world with k >= 1 actions is replayed once to be opened and k - 1 times
    more (A, B, D: 2 each; C, E, F, G, H, I: 1 each); each of the 3 final worlds once
    to see it has no action: 1 + 1 + 6 + 6 + 3 = 17 launches."""
    toy = lost_update()
    run(bfs, toy)
    assert toy.launches == 17


def test_fast_bfs_copies_worlds_instead_of_replaying():
    """With fast, each successor but the last is taken on a copy (fork) of the world,
    and every world found is kept as a snapshot: same counts and verdict as replay, a
    single launch, and one copy per world with two actions (S, A, B, D): 4 copies."""
    toy = lost_update()
    outcome, _ = run(bfs, toy, fast=True)
    assert counts(outcome) == (15, 13, 5) and outcome.stats.copies == 4
    assert toy.launches == 1
    outcome, _ = run(bfs, lost_update(), [invariant("no_lost_update", both_done_x_is_2)],
                     fast=True)
    assert counts(outcome) == (13, 12, 5)
    assert labels(outcome) == [None, "read 0", "read 1", "write 0", "write 1"]


def test_fast_bfs_counts_the_worlds_it_relaunches(monkeypatch):
    """A world found while as many snapshots as the search keeps are alive is not kept:
    it is replayed from launch when expanded, and counted (`relaunched`, the JSON
    report's). With the default room, none; keeping none, every world of lost_update's
    13 but the initial one (whose launch is held), the three without an action too
    (opened to see that): 12, each a launch."""
    outcome, _ = run(bfs, lost_update(), fast=True)
    assert outcome.stats.relaunched == 0
    monkeypatch.setattr(Search, "room", classmethod(lambda cls, kept, keep: False))
    toy = lost_update()
    outcome, _ = run(bfs, toy, fast=True)
    assert counts(outcome) == (15, 13, 5)
    assert outcome.stats.relaunched == 12
    assert toy.launches == 1 + outcome.stats.relaunched


def test_replay_that_reaches_another_world_is_nondeterminism():
    """The engine compares the fingerprint of every replayed world with the recorded
    one: a toy whose `inc` adds the number of launches so far goes from 0 to 1 on the
    first launch, then to 2 when world 1 is replayed, which is reported at step 1."""
    toy = Toy(0, lambda x: [("inc", DELIVER, x + toy.launches)], lambda x: {"x": x})
    with pytest.raises(Nondeterminism) as info:
        bfs(toy, [], Collect(), max_states=10).run()
    assert info.value.step == 1 and "at step 1 (inc)" in str(info.value)
    assert "made again from launch" not in str(info.value)       # replayed by design
    assert toy.open == set()


def test_a_fast_search_says_why_it_made_the_world_again(monkeypatch):
    """Copying (fast), a world is made again from launch only for want of a copy: the
    nondeterminism that replay finds then says which want (here: none was kept)."""
    monkeypatch.setattr(Search, "room", classmethod(lambda cls, kept, keep: False))
    toy = Toy(0, lambda x: [("inc", DELIVER, x + toy.launches)], lambda x: {"x": x})
    with pytest.raises(Nondeterminism) as info:
        bfs(toy, [], Collect(), max_states=10, fast=True).run()
    assert str(info.value).endswith("at step 1 (inc); the program under check (or cmc) is "
                                    "not deterministic (this world was made again from "
                                    "launch: no copy of it was kept)")


def test_det_launches_the_initial_world_shifted_and_names_the_difference():
    """With det, the initial world is launched a second time shifted (Model.fresh's
    shift) and must be the same; a toy whose x is the shift differs, and the error names
    the field from the system's parts: "toy: x was 0, then 1"."""
    class Shifted(Toy):
        def fresh(self, shift: int = 0) -> ToySystem:
            self.launches += 1
            return ToySystem(self, shift)
    toy = Shifted(0, lambda x: [("inc", DELIVER, (x + 1) % 4)], lambda x: {"x": x})
    assert counts(run(bfs, toy)[0]) == (5, 4, 4)        # unnoticed without det
    with pytest.raises(Nondeterminism, match="toy: x was 0, then 1"):
        bfs(toy, [], Collect(), det=True).run()
    assert toy.open == set()


# -- quiescence --------------------------------------------------------------------------

def all_thinking(view):
    return all(phase == 0 for phase in view["phase"])


def test_a_deadlock_is_a_quiescent_world():
    """A world with no action enabled is quiescent, and a quiescent property is checked
    when the world is expanded. philosophers(2), by hand: S gives A = (1,0), B = (0,1);
    A gives C = (2,0), D = (1,1); B gives D again, E = (0,2); C gives S again; then D,
    the deadlock, is expanded: violated after 8 generated, 6 distinct; D's path is S, A,
    D."""
    prop = state_prop("quiescent", "all_thinking", all_thinking)
    outcome, _ = run(bfs, philosophers(2), [prop])
    assert outcome.verdict == "violated" and outcome.prop is prop
    assert counts(outcome) == (8, 6, 3)
    assert labels(outcome) == [None, "take left 0", "take left 1"]
    assert outcome.trace[-1].view == {"phase": [1, 1]}


def test_a_timeout_that_changes_nothing_leaves_a_world_quiescent():
    """A world where no DELIVER is enabled is quiescent when every FIRE leads back to it.
    retry(): after the drop, B's timeout resends the request (B is not quiescent), and
    the quiescent worlds A and D are acked: ok, with retry()'s 9, 5, 4. retry(False):
    B's timeout changes nothing, so B is quiescent and not acked: violated when B (found
    first, by the drop) is expanded, after S's 3 steps and B's timeout: 5 generated, 3
    distinct; the trace is S, B."""
    acked = state_prop("quiescent", "acked", lambda v: v["acked"])
    outcome, _ = run(bfs, retry(), [acked])
    assert outcome.verdict == "ok" and counts(outcome) == (9, 5, 4)
    outcome, _ = run(bfs, retry(False), [acked])
    assert outcome.verdict == "violated" and outcome.prop is acked
    assert counts(outcome) == (5, 3, 2) and labels(outcome) == [None, "drop"]


# -- liveness: `eventually` over the fair schedule -----------------------------------------

def eventually(name, check):
    return state_prop("eventually", name, check)


def test_eventually_fails_on_a_lasso():
    """counter(3) never reaches x = 3: from the first world the fair schedule goes 0, 1,
    2 and back to 0, a lasso. The trace is 0, 1, 2 (3 states) with the schedule from
    state 1 (there is no prefix) and back to state 1."""
    outcome, _ = run(bfs, counter(3), [eventually("three", lambda v: v["x"] == 3)])
    assert outcome.verdict == "violated" and outcome.why == "looped"
    assert [step.view["x"] for step in outcome.trace] == [0, 1, 2]
    assert (outcome.suffix_from, outcome.loop_to) == (1, 1)
    assert counts(outcome) == (4, 3, 3)


def test_eventually_fails_when_the_schedule_stops():
    """philosophers(2), `eventually someone eats`: from S the schedule takes the first
    action each time (take left 0, take right 0) and philosopher 0 eats; from A too; from
    B = (0,1) it takes `take left 0` into the deadlock (1,1) and stops there. Worlds are
    decided in the order found, so B is the first to fail: the trace is S, B (the
    shortest prefix) then (1,1), the schedule starting at state 2."""
    outcome, _ = run(bfs, philosophers(2),
                     [eventually("someone_eats", lambda v: 2 in v["phase"])])
    assert outcome.verdict == "violated" and outcome.why == "stopped"
    assert labels(outcome) == [None, "take left 1", "take left 0"]
    assert (outcome.suffix_from, outcome.loop_to) == (2, None)


def test_eventually_ignores_faults_and_fires_timeouts():
    """The fair schedule injects no fault (it never drops) and takes the timeouts when
    nothing can be delivered. retry(): from every world the request is acked (B resends,
    then delivers): ok. retry(False): from S the schedule delivers (it does not take the
    drop, though the drop comes first), but from B the timeout leads back to B forever:
    a lasso after the prefix S, B, back to state 2. A schedule that dropped would fail
    from S already (the schedule from state 1)."""
    acked = eventually("acked", lambda v: v["acked"])
    assert run(bfs, retry(), [acked])[0].verdict == "ok"
    outcome, _ = run(bfs, retry(False), [acked])
    assert outcome.verdict == "violated" and outcome.why == "looped"
    assert labels(outcome) == [None, "drop"]
    assert (outcome.suffix_from, outcome.loop_to) == (2, 2)


def test_eventually_is_bounded_by_live_steps():
    """counter(5) reaches x = 4 from x = 0 in 4 steps: with live_steps 4 it holds from
    every world; with 3 it fails from the first, out of steps, after 0, 1, 2, 3."""
    four = eventually("four", lambda v: v["x"] == 4)
    assert run(bfs, counter(5), [four], live_steps=4)[0].verdict == "ok"
    outcome, _ = run(bfs, counter(5), [four], live_steps=3)
    assert outcome.verdict == "violated" and outcome.why == "out of steps"
    assert [step.view["x"] for step in outcome.trace] == [0, 1, 2, 3]
    assert (outcome.suffix_from, outcome.loop_to) == (1, None)


# -- depth-first search ----------------------------------------------------------------

def test_dfs_counts_equal_bfs_when_every_world_has_one_depth():
    """In lost_update every path to a world has the same length (each step advances one
    pc), so depth-first search, bounded past the deepest world, generates exactly BFS's
    15 steps and 13 worlds. At a bound of 5 the three final worlds sit at the bound:
    the same counts, but 3 unexplored and the verdict bounded."""
    outcome, _ = run(dfs, lost_update(), depth=6)
    assert counts(outcome) == (15, 13, 5) and not outcome.bounded
    outcome, _ = run(dfs, lost_update(), depth=5)
    assert counts(outcome) == (15, 13, 5) and outcome.bounded
    assert outcome.stats.unexplored == 3


def test_dfs_follows_the_first_action_first():
    """Children are generated in reverse action order and the first action's child is
    expanded next. lost_update by hand: S gives B, A; A gives D, C; C gives F; F gives
    J (x = 2); J has no action; D gives H, G; G gives K (x = 1): violated at the 10th
    world generated, 10 distinct, with B and H left on the stack; the trace is the path
    taken, here also 5 states."""
    outcome, _ = run(dfs, lost_update(), [invariant("no_lost_update", both_done_x_is_2)],
                     depth=10)
    assert outcome.verdict == "violated"
    assert counts(outcome) == (10, 10, 5) and outcome.stats.queue == 2
    assert labels(outcome) == [None, "read 0", "read 1", "write 0", "write 1"]


# s -a-> a -a2-> a2 -c-> c -d-> d, and s -b-> b -c-> c: c is 4 deep by a, 3 by b.
SHORTCUT = {"s": [("a", "a"), ("b", "b")], "a": [("a2", "a2")], "a2": [("c", "c")],
            "b": [("c", "c")], "c": [("d", "d")]}


def test_dfs_expands_again_a_world_found_by_a_shorter_path():
    """With depth bound 4, DFS goes s, a, a2 and finds c 4 deep, at the bound; then b
    finds c 3 deep, and c is expanded from there and d is found (4 deep): d is reached
    exactly as the bound says. By hand: s gives b, a; a gives a2; a2 gives c; b gives c;
    c gives d: 7 generated, 6 distinct, and only d is left unexplored. The invariant
    `not at d` is violated along the shorter path s, b, c, d."""
    outcome, _ = run(dfs, graph(SHORTCUT), depth=4)
    assert outcome.verdict == "ok" and outcome.bounded
    assert counts(outcome) == (7, 6, 4) == reachable(graph(SHORTCUT), max_depth=4)
    assert outcome.stats.unexplored == 1
    outcome, _ = run(dfs, graph(SHORTCUT), [invariant("not_d", lambda v: v["at"] != "d")],
                     depth=4)
    assert outcome.verdict == "violated" and labels(outcome) == [None, "b", "c", "d"]
    witness = state_prop("witness", "at_d", lambda v: v["at"] == "d")
    assert run(dfs, graph(SHORTCUT), [witness], depth=4)[0].verdict == "ok"
    outcome, _ = run(dfs, graph(SHORTCUT), [witness], depth=3)
    assert outcome.verdict == "violated" and outcome.trace == []


def test_dfs_fast_copies_and_agrees():
    """Depth-first with fast: the same counts and trace as replay, one copy per world
    with two actions (S, A, B, D: 4)."""
    outcome, _ = run(dfs, lost_update(), depth=6, fast=True)
    assert counts(outcome) == (15, 13, 5) and outcome.stats.copies == 4


def test_dfs_checks_quiescent_and_eventually_too():
    """The same property kinds as BFS: the deadlock of philosophers(2) is found by DFS
    (through A, whose children are pushed (1,1) first), and the lasso of counter(3)."""
    outcome, _ = run(dfs, philosophers(2),
                     [state_prop("quiescent", "all_thinking", all_thinking)], depth=10)
    assert outcome.verdict == "violated" and outcome.trace[-1].view == {"phase": [1, 1]}
    outcome, _ = run(dfs, counter(3), [eventually("three", lambda v: v["x"] == 3)],
                     depth=10)
    assert outcome.why == "looped" and len(outcome.trace) == 3


# -- simulation -------------------------------------------------------------------------

def test_simulation_counts_every_state_of_every_walk():
    """counter(5) has one action per world, so every walk is the same: with walks of 8
    states, 3 walks generate 24 states and find the 5 worlds; the reporter gets one
    progress event per walk."""
    outcome, reporter = run(walks, counter(5), seed=7, walks=3, max_depth=8)
    assert outcome.verdict == "ok"
    assert counts(outcome) == (24, 5, 8)
    assert outcome.stats.walks == 3 and outcome.stats.walk_lengths == [8, 8, 8]
    assert [p.walks for p in reporter.of("progress")] == [1, 2, 3]


def test_simulation_finds_the_lost_update_and_the_seed_reproduces_it():
    """Every walk of lost_update ends at a final world after 5 states; half the walks
    lose the update (read 0 then write 0 first, or read 1 then write 1 first, each has
    probability 1/4). The walk that finds it is numbered, every walk before it ran its
    full 5 states, and walk i of seed S is walk 1 of seed S + i: alone, each walk before
    it keeps both updates, and it loses one along the same trace. For twenty seeds
    (several of which find it only at the second or third walk)."""
    prop = invariant("no_lost_update", both_done_x_is_2)
    for seed in range(100, 120):
        outcome, _ = run(walks, lost_update(), [prop], seed=seed, walks=50)
        assert outcome.verdict == "violated" and outcome.seed == seed + outcome.walk - 1
        assert outcome.stats.walk_lengths == [5] * outcome.walk
        assert outcome.stats.generated == 5 * outcome.walk
        assert len(outcome.trace) == 5 and outcome.trace[-1].view["x"] == 1
        for i in range(outcome.walk):
            alone, _ = run(walks, lost_update(), [prop], seed=seed + i, walks=1)
            assert (alone.verdict == "violated") == (i == outcome.walk - 1)
        assert alone.walk == 1 and labels(alone) == labels(outcome)


def test_simulation_tries_the_timeouts_of_a_world_before_calling_it_quiescent():
    """With a quiescent property, a walk at a world with no DELIVER takes its FIREs (the
    steps are part of the walk): retry(False) after the drop takes B's timeout, which
    leads back to B, so B is quiescent and not acked. The trace ends drop, timeout."""
    acked = state_prop("quiescent", "acked", lambda v: v["acked"])
    outcome, _ = run(walks, retry(False), [acked], seed=1, walks=100)
    assert outcome.verdict == "violated" and outcome.prop is acked
    assert labels(outcome)[-2:] == ["drop", "timeout"]
    assert outcome.trace[-1].view == outcome.trace[-2].view
    assert run(walks, retry(), [acked], seed=1, walks=100)[0].verdict == "ok"


# -- parallel workers (processes) -------------------------------------------------------

PARALLEL = [replay_workers, copy_workers]


def test_fast_workers_count_the_worlds_they_relaunch(monkeypatch):
    """A worker replays from launch each world it expands without holding a snapshot
    of it (the initial world at least), and the parent adds up their `relaunched`:
    with workers that keep none, all 10 of lost_update's worlds with an action."""
    outcome, _ = run(copy_workers, lost_update(), workers=2,
                     worker_model=lambda i: lost_update())
    assert counts(outcome) == (15, 13, 5) and 1 <= outcome.stats.relaunched <= 10
    monkeypatch.setattr(Search, "room", classmethod(lambda cls, kept, keep: False))
    outcome, _ = run(copy_workers, lost_update(), workers=2,
                     worker_model=lambda i: lost_update())
    assert counts(outcome) == (15, 13, 5) and outcome.stats.relaunched == 10


@pytest.mark.parametrize("search", PARALLEL, ids=["workers", "workers-fast"])
def test_workers_give_exactly_the_counts_of_one_search(search):
    """Two worker processes (forked, each with its own toy) take the steps; the parent
    merges them in BFS order: lost_update's 15, 13, 5, the 14 steps after the initial
    world all taken by the workers, and the same shortest counterexample as BFS."""
    outcome, _ = run(search, lost_update(), workers=2, worker_model=lambda i: lost_update())
    assert outcome.verdict == "ok" and counts(outcome) == (15, 13, 5)
    machines = outcome.stats.workers["machines"]
    assert outcome.stats.workers["count"] == 2
    assert sum(m["generated"] for m in machines) == 14
    outcome, _ = run(search, lost_update(), [invariant("no_lost_update", both_done_x_is_2)],
                     workers=2, worker_model=lambda i: lost_update())
    assert outcome.verdict == "violated" and counts(outcome) == (13, 12, 5)
    assert labels(outcome) == [None, "read 0", "read 1", "write 0", "write 1"]


@pytest.mark.parametrize("search", PARALLEL, ids=["workers", "workers-fast"])
def test_workers_check_quiescent_and_eventually_like_one_search(search):
    """The quiescent deadlock (8, 6) and the stopped schedule of philosophers(2) are
    found with workers exactly as by BFS."""
    outcome, _ = run(search, philosophers(2),
                     [state_prop("quiescent", "all_thinking", all_thinking)],
                     workers=2, worker_model=lambda i: philosophers(2))
    assert counts(outcome) == (8, 6, 3)
    assert labels(outcome) == [None, "take left 0", "take left 1"]
    outcome, _ = run(search, philosophers(2),
                     [eventually("someone_eats", lambda v: 2 in v["phase"])],
                     workers=2, worker_model=lambda i: philosophers(2))
    assert outcome.why == "stopped"
    assert labels(outcome) == [None, "take left 1", "take left 0"]


# -- a search stopped by its time (--seconds) -------------------------------------------------

class Ticks:
    """A clock that moves one second each time it is read: the search reads it once at
    its start and once before each world it expands, so `seconds` S lets it expand
    S - 1 worlds (their steps all taken) and stop before the next."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


# a binary tree of depth 4: 1, 2, 4, 8 worlds per depth; breadth-first expands s, a, b, ...
TREE = {"s": [("l", "a"), ("r", "b")], "a": [("l", "aa"), ("r", "ab")],
        "b": [("l", "ba"), ("r", "bb")], "aa": [("l", "aaa"), ("r", "aab")],
        "ab": [("l", "aba"), ("r", "abb")], "ba": [("l", "baa"), ("r", "bab")],
        "bb": [("l", "bba"), ("r", "bbb")]}


@pytest.mark.parametrize("seconds, expect", [
    (2, (2, 0, 2, (1, 2))),            # s expanded: a and b found and checked, not expanded
    (3, (2, 1, 2, (1, 2, 2))),         # then a: aa and ab found
    (5, (3, 1, 4, (1, 2, 4, 2))),      # s a b aa: depth 3 found, aaa aab below it
    (9, (4, 1, 8, (1, 2, 4, 8))),      # ... and the first leaf
    (16, None),                        # all 15 worlds expanded: the search ends
])
def test_a_search_stopped_by_its_time_says_what_it_proved(seconds, expect):
    outcome = bfs(graph(TREE), [], Collect(), seconds=seconds, clock=Ticks()).run()
    assert outcome.verdict == "ok"
    if expect is None:
        assert outcome.stopped is None and outcome.stats.distinct == 15
        return
    complete, expanded, at_next, per_depth = expect
    proven = outcome.stopped
    assert (proven.complete, proven.expanded, proven.at_next, proven.per_depth) == expect
    assert outcome.bounded and proven.why == f"--seconds {seconds}"
    assert outcome.stats.distinct == sum(per_depth)
    assert proven.lines()[0].startswith(f"The search stopped (--seconds {seconds}): every "
                                        f"world to depth {complete} was checked, and "
                                        f"{expanded} of the {at_next} worlds")


def test_a_stopped_search_checks_every_world_it_found():
    """A violation among the worlds found before the time is up is still reported."""
    bad = Property("invariant", "not_ab", lambda v, _: v["at"] != "ab")
    outcome = bfs(graph(TREE), [bad], Collect(), seconds=3, clock=Ticks()).run()
    assert outcome.verdict == "violated" and outcome.prop.name == "not_ab"
    assert [s.view["at"] for s in outcome.trace] == ["s", "a", "ab"]


def stopped_then_walks(props, seconds, walk_seed):
    return bfs(graph(TREE), props, Collect(), seconds=seconds, clock=Ticks(),
               walk_seed=walk_seed).run()


def test_the_time_a_search_leaves_goes_to_swarm_walks_from_its_frontier():
    """--seconds 10 (Ticks: read at the start, so the deadline is 11): breadth-first
    search has the first half, to 6, so it expands s a b aa (the reads at 2..5) and stops
    at the read of 6, with ab ba bb aaa aab found and not expanded; a walk reads the clock
    before it starts (7..10, four walks), starts at one of those (its seed picks) and
    walks to a leaf. Of seed 11's walks the fourth reaches bba from bb: a violation, its
    trace the shortest path, and the walk that found it named (seeds 0 to 10 start their
    four walks elsewhere or step to bbb)."""
    bad = Property("invariant", "not_bba", lambda v, _: v["at"] != "bba")
    outcome = stopped_then_walks([bad], 10, 11)
    assert outcome.verdict == "violated" and outcome.prop.name == "not_bba"
    assert [s.view["at"] for s in outcome.trace] == ["s", "b", "bb", "bba"]
    assert (outcome.walk, outcome.seed, outcome.walk_from) == (4, 14, 3)
    assert stopped_then_walks([bad], 10, 10).verdict == "ok"
    # nothing to find: the walks run until the time is up, and the verdict says how far
    # the search got and how many walks followed
    outcome = stopped_then_walks([], 10, 4)
    assert outcome.verdict == "ok" and outcome.bounded
    assert outcome.stopped.complete == 3 and outcome.stopped.per_depth == (1, 2, 4, 2)
    assert (outcome.stats.walks, outcome.walk_seed) == (4, 4)
    # the same seed, the same walks
    assert stopped_then_walks([], 10, 4).stats.distinct == outcome.stats.distinct
    # a witness the search did not reach is not judged: the search did not end
    never = Property("witness", "never", lambda v, _: v["at"] == "nowhere")
    assert stopped_then_walks([never], 10, 4).verdict == "ok"


# -- a walk's counterexample, shrunk ----------------------------------------------------------

# s -loop-> a -back-> s goes round; s -go-> b -on-> c -end-> bad is the way to the violation
WANDER = {"s": [("loop", "a"), ("go", "b")], "a": [("back", "s")], "b": [("on", "c"), ("up", "s")],
          "c": [("end", "bad"), ("up", "s")]}


def test_a_walks_violation_is_shrunk_to_the_fewest_actions():
    """Whatever a walk wandered through, its behavior is shrunk to go, on, end (4
    states, BFS's shortest); the walk's own length is kept, and the shrunk behavior
    replays from launch (every system the shrinking opened is closed: run checks it)."""
    prop = invariant("not_bad", lambda v: v["at"] != "bad")
    wandered = 0
    for seed in range(20):
        outcome, _ = run(walks, graph(WANDER), [prop], seed=seed, walks=50, max_depth=60)
        assert outcome.verdict == "violated"
        assert labels(outcome) == [None, "go", "on", "end"]
        if outcome.shrunk_from is not None:
            wandered += 1
            assert outcome.shrunk_from > 4 and outcome.shrink_replays > 0
        else:
            assert outcome.stats.walk_lengths[-1] == 4      # it went straight there
    assert wandered >= 10
    bfs_outcome, _ = run(bfs, graph(WANDER), [prop])
    assert labels(bfs_outcome) == [None, "go", "on", "end"]


def test_shrinking_stops_when_its_time_is_up():
    """--seconds: shrinking stops when the search's time is up (`until`), with the
    shortest behavior found by then, and says it is not minimal."""
    prop = invariant("not_bad", lambda v: v["at"] != "bad")
    wander = [("loop",), ("back",), ("loop",), ("back",), ("go",), ("on",), ("end",)]
    assert shrink(graph(WANDER), prop, wander) == ([("go",), ("on",), ("end",)], 12, True)
    assert shrink(graph(WANDER), prop, wander, lambda: True) == (wander, 0, False)
    reads = iter(range(100))
    keys, replays, minimal = shrink(graph(WANDER), prop, wander, lambda: next(reads) >= 2)
    assert (keys, replays, minimal) == (wander[4:], 2, False)


def test_an_action_propertys_violation_is_shrunk_to_its_step():
    """An action property is checked on the shrunk steps too: the violating step is
    kept, whatever the walk did before it."""
    prop = Property("action", "never_up", lambda v, w: not (v["at"] == "c" and w["at"] == "s"))
    for seed in range(10):
        outcome, _ = run(walks, graph(WANDER), [prop], seed=seed, walks=50, max_depth=60)
        if outcome.verdict == "violated":
            assert labels(outcome) == [None, "go", "on", "up"]
