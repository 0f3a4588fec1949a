"""Time virtual: one clock for the cluster (docs/model-file.md, "`time async` | `time
virtual`"; docs/design.md, "One clock for the cluster"). The clock itself is the
network's (`Network.clock`: messages are stamped with it); here, the rules of how it
moves, over a cluster's nodes (their timed waits), clients (a start `after` a time) and
messages in flight (their latency bounds):

- `next_fire`: the one FIRE enabled, the earliest deadline's, when the clock may reach
  it;
- `advance`: a thread polling the clock moves it, never past what only a FIRE passes.
"""
from __future__ import annotations

from .actions import ClientStart, Fire


def waits(cluster) -> list[tuple]:
    """Every timed wait of a live node: (deadline, node index, thread index, node,
    thread)."""
    out = []
    for node in cluster.nodes:
        if node.alive:
            out += [(t.block.since + t.block.timeout_ns, node.index, t.tag, node, t)
                    for t in node.tasks.blocked() if t.block.timeout_ns]
    return out


def next_fire(cluster, budgets: dict) -> list[Fire | ClientStart]:
    """The one FIRE time virtual enables: the earliest deadline's (node order, then
    thread order, among equal ones; a client waiting to start after the nodes), when
    the clock may reach it: not past the horizon, and not past a message's latency
    bound (sent + latency) unless the delay budget pays for each message it would
    pass (`budgets`: what the cluster may spend now)."""
    due = waits(cluster)
    due += [(c.spec.after_ns, len(cluster.nodes) + i, 0, c, None)
            for i, c in enumerate(cluster.clients) if c.waiting]
    if not due:
        return []
    at, _, _, node, t = min(due, key=lambda w: w[:3])
    spec, net = cluster.spec, cluster.net
    if at > spec.horizon_ns:
        return []
    now = net.clock
    late = count_late(net.in_flight_sent(), now, spec, at)
    if late > budgets.get("delay", 0):
        return []
    if t is None:                                 # a client's start
        return [ClientStart(node.name, max(at, now))]
    several = sum(1 for w in due if w[3] is node) > 1
    return [Fire(node.index, node.name, t.block.what, t.block.timeout_ns, t.tag,
                 at=max(at, now), late=late, **node.tasks.fire_names(t, several))]


def healed(spec, now: int) -> bool:
    """Whether the faults have healed (`time virtual faults T`: the clock at T or later)."""
    return spec.faults_ns is not None and now >= spec.faults_ns


def count_late(sent_times, now: int, spec, at: int) -> int:
    """How many of the messages in flight (sent at `sent_times`) the clock passes the
    latency bound of, moving from `now` to `at` (a deadline already past: `now`). Once
    the faults have healed a message also arrives before what is due at its bound: the
    healed network is never late, nor on time by a tie."""
    at, tie = max(at, now), healed(spec, now)
    bounds = [sent + spec.latency_ns for sent in sent_times]
    return sum(1 for b in bounds if now <= b and (b < at or tie and b == at))


def advance(cluster, ns: int) -> None:
    """Move the clock by `ns` in the middle of a step (a thread polling it), never past
    the next deadline, a message's latency bound or the horizon: those are moved past
    only by a FIRE, which the search takes as a step."""
    net, spec = cluster.net, cluster.spec
    limit = min([w[0] for w in waits(cluster)] +
                [sent + spec.latency_ns for sent in net.in_flight_sent()] +
                [spec.horizon_ns])
    net.clock = max(net.clock, min(net.clock + ns, limit))
