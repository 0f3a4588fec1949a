"""experiments/persistent_bound.py, the bound on what persistent sets could skip
(docs/performance.md, "Partial-order reduction"), on state graphs built by hand, whose
reductions are known: n processes of k steps that never touch each other (one order of
them is persistent in every world: n*k + 1 worlds of the (k+1)^n), the same processes
sharing a counter that each step doubles and adds to (no two orders meet: nothing is
skipped), and a step that changes a property's truth (visible: its world is expanded
fully). Pure Python: no process runs."""
from __future__ import annotations

import itertools
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "experiments"))

import persistent_bound  # noqa: E402


class Prop:
    def __init__(self, check):
        self.check = check


class Search:
    def __init__(self, props=()):
        self.state_props = list(props)
        self.quiescent_props = []


def graph(n: int, k: int, shared: bool = False):
    """(initial, edges, views): worlds are (program counters, counter); the action of
    process i is ('FIRE', i)."""
    def succ(state):
        pcs, x = state
        for i, pc in enumerate(pcs):
            if pc < k:
                yield ("FIRE", i), (pcs[:i] + (pc + 1,) + pcs[i + 1:], x * 2 + i if shared else x)
    initial = ((0,) * n, 0)
    edges, todo = {}, [initial]
    while todo:
        s = todo.pop()
        if s in edges:
            continue
        edges[s] = list(succ(s))
        todo.extend(t for _, t in edges[s])
    views = {s: {"pcs": list(s[0]), "x": s[1]} for s in edges}
    return initial, edges, views


def bound(n, k, shared=False, props=()):
    initial, edges, views = graph(n, k, shared)
    search = Search(props)
    return persistent_bound.reduced(initial, edges, views, search, list(props), {}), \
        (len(edges), sum(len(v) for v in edges.values()))


def test_independent_processes_take_one_order():
    for n, k in itertools.product((2, 3), (1, 2, 3)):
        (distinct, taken), (full_d, full_t) = bound(n, k)
        assert full_d == (k + 1) ** n
        assert (distinct, taken) == (n * k + 1, n * k), (n, k)


def test_processes_that_share_a_counter_skip_nothing():
    (distinct, taken), (full_d, full_t) = bound(3, 2, shared=True)
    assert (distinct, taken) == (full_d, full_t)


def test_a_visible_step_is_never_taken_alone():
    # the property flips when process 0 takes its step, so no world where process 0
    # can still step is expanded by a set of its step alone; process 1's set is used
    prop = Prop(lambda view, _: view["pcs"][0] == 0)
    (distinct, taken), _ = bound(2, 1, props=[prop])
    assert (distinct, taken) == (3, 2)       # process 1 first, then process 0
    both = Prop(lambda view, _: view["pcs"][0] == 0 and view["pcs"][1] == 0)
    (distinct, taken), (full_d, full_t) = bound(2, 1, props=[both])
    assert (distinct, taken) == (full_d, full_t) == (4, 4)
