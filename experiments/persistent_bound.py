"""How far persistent sets could go on a model, at best: the full breadth-first
search's state graph, then a breadth-first search on that graph that expands each
world with a persistent set of one node's actions where one exists, checked with an
oracle (docs/performance.md, "Partial-order reduction"; docs/design.md says why the
reduction is not built).

    python3 experiments/persistent_bound.py models/twopc.model [more models]

The oracle knows the whole graph, so it is kinder than anything cmc could know while
searching (declared peers included):
- two actions enabled in a world are independent there when each stays enabled after
  the other and both orders reach one world (as experiments/por_bound.py's oracle);
- a set T of the actions enabled in world s is persistent when along every path from s
  that takes no action of T, each action taken is independent, where it is taken, of
  every action of T (Godefroid's definition 4.1, checked on the graph itself);
- an action is visible only when it changes the truth of a property of the model (an
  invariant, a witness, or a quiescent property as "not quiescent, or it holds"): the
  weakest visibility under which the reduced search still reaches a violation if the
  full one does (the condition C2 of Peled's ample sets, for those propositions);
- the cycle condition for a breadth-first search: a set is used only when none of the
  worlds it leads to was seen before (else the world is expanded fully).

The candidate sets are the actions of each node (its deliveries, drops of messages
to it, FIREs, CRASH) and of each client, smallest first; with --unions every union
of those; --no-proviso drops the cycle condition (unsound in general, so a bound
above any sound reduction with these sets). Prints, per model, the full
search's distinct worlds and transitions and the reduced one's.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from por_bound import recorded  # noqa: E402


def graph(model: str, defines: list[str]):
    """(initial world, world -> [(action key, world)], world -> its view, the search,
    the properties whose truth makes an action visible)."""
    initial, edges, views, search = recorded(model, defines)
    props = list(search.state_props) + list(search.quiescent_props)
    return initial, edges, views, search, props


def node_of(key, listeners: dict) -> str:
    """Which node (or client) an action acts on."""
    kind = key[0]
    if kind in ("CRASH", "FIRE"):
        return f"node {key[1]}"
    if kind in ("DELIVER", "DROP", "DUP") and isinstance(key[1], tuple):
        owner, _, dst, _ = key[1]
        if key[2] == 0:
            return f"node {listeners.get(dst, dst)}"
        return f"node {owner}" if str(owner).isdigit() else f"client {owner}"
    return repr(key)


def listeners_of(model: str) -> dict:
    """Address -> node index: node i's command is `BIN i ADDR0 ADDR1 ...` and it
    listens at ADDRi (the demos' convention)."""
    out = {}
    i = 0
    for line in open(model):
        m = re.match(r'node \w+\s*=\s*"(.*)"', line)
        if m:
            words = m.group(1).split()
            addrs = [w for w in words if re.fullmatch(r"[\d.]+:\d+", w)]
            if i < len(addrs):
                out[addrs[i]] = str(i)
            i += 1
    return out


def reduced(initial, edges, views, search, props, listeners, unions=False,
            proviso=True) -> tuple[int, int]:
    succ = {fp: dict(out) for fp, out in edges.items()}

    def quiescent(s):
        return not any(k[0] == "DELIVER" or (k[0] == "FIRE" and t != s)
                       for k, t in edges.get(s, []))

    truth_cache: dict = {}

    def truths(s):
        if s not in truth_cache:
            v = views[s]
            q = quiescent(s)
            truth_cache[s] = tuple(
                (not q) or p.check(v, None) if p in search.quiescent_props
                else p.check(v, None) for p in props)
        return truth_cache[s]

    def independent(u, a, b):
        ua, ub = succ.get(u, {}).get(a), succ.get(u, {}).get(b)
        if ua is None or ub is None:
            return False
        return succ.get(ua, {}).get(b) is not None and \
            succ.get(ua, {}).get(b) == succ.get(ub, {}).get(a)

    def persistent(s, T) -> bool:
        seen, todo = {s}, [s]
        while todo:
            u = todo.pop()
            for a, v in edges.get(u, []):
                if a in T:
                    continue
                if not all(independent(u, a, t) for t in T):
                    return False
                if v not in seen:
                    seen.add(v)
                    todo.append(v)
        return True

    visited, queue, taken = {initial}, collections.deque([initial]), 0
    while queue:
        s = queue.popleft()
        enabled = [k for k, _ in edges.get(s, [])]
        groups = collections.defaultdict(list)
        for k in enabled:
            groups[node_of(k, listeners)].append(k)
        chosen = enabled
        candidates = list(groups.values())
        if unions:
            parts = list(groups.values())
            candidates = [[k for i, part in enumerate(parts) if bits >> i & 1 for k in part]
                          for bits in range(1, 1 << len(parts))]
        for g in sorted(candidates, key=len):
            if len(g) == len(enabled):
                break
            if any(truths(succ[s][k]) != truths(s) for k in g):
                continue                              # visible
            if proviso and any(succ[s][k] in visited for k in g):
                continue                              # the cycle condition
            if persistent(s, set(g)):
                chosen = g
                break
        for k in chosen:
            taken += 1
            t = succ[s][k]
            if t not in visited:
                visited.add(t)
                queue.append(t)
    return len(visited), taken


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("-D", dest="defines", action="append", default=[])
    p.add_argument("--unions", action="store_true",
                   help="candidates: every union of the nodes' and clients' sets")
    p.add_argument("--no-proviso", dest="proviso", action="store_false",
                   help="without the cycle condition (unsound in general: a bound)")
    args = p.parse_args()
    print(f"{'model':<16} {'distinct':>8} {'trans':>7} | {'reduced':>8} {'trans':>7} | "
          f"{'distinct x':>10} {'trans x':>8}")
    for model in args.models:
        initial, edges, views, search, props = graph(model, args.defines)
        distinct = len(views)
        full = sum(len(v) for v in edges.values())
        d, t = reduced(initial, edges, views, search, props, listeners_of(model),
                       args.unions, args.proviso)
        print(f"{os.path.basename(model):<16} {distinct:>8} {full:>7} | {d:>8} {t:>7} | "
              f"{distinct / d:>10.2f} {full / t:>8.2f}")


if __name__ == "__main__":
    main()
