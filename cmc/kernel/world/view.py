"""What a world is: the tuple its fingerprint hashes, the view a model's properties and a
trace see, and the same world in named parts for telling a person where two worlds
differ (docs/target-contract.md, "Worlds and actions"; docs/design.md, "The world and
its fingerprint"). Every function takes the cluster (kernel/cluster.py) and reads it;
none changes it. A network of another kind adds its own part (`Network.world`).
"""
from __future__ import annotations

import json

import xxhash

from .net import fmt_addr


def digest(data: bytes) -> bytes:
    """The 128-bit hash of a text that a world's fingerprint is (xxh3-128)."""
    return xxhash.xxh3_128_digest(data)


def fingerprint(cluster) -> bytes:
    extra = cluster.net.world()
    whole = world(cluster) if extra is None else (world(cluster), extra)
    return digest(repr(whole).encode())


def canon(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def node_value(node):
    """node[i]: volatile if this incarnation emitted on fd 3, else durable."""
    if node.volatile_emitted:
        return node.volatile
    return node.durable


NODE_FIELDS = ("name", "alive", "incarnation", "state or input history", "durable state",
               "blocked call (what, timeout ns)",
               "files (their durable contents and unsynced writes, a digest)")


def world(cluster) -> tuple:
    """Everything a world's fingerprint covers, in a fixed order: its nodes, connections,
    datagrams, UDP sockets, listeners, clients, budgets and replies."""
    net, spec, virtual = cluster.net, cluster.spec, cluster.virtual

    def ep_state(ep):
        if ep is None:
            return None
        return (net.name_of(ep.owner), bytes(ep.rbuf), ep.eof, ep.reset, ep.reset_reported,
                ep.shut_wr, ep.closed, ep.accepted)
    nodes = []
    for n in cluster.nodes:
        blocked = n.tasks.blocked_calls()
        own = (canon(n.volatile) if n.volatile_emitted else "-") if n.ever_wrote_state \
            else tuple(n.history)
        disk = n.disk.digest(n.cwd) if n.ever_wrote_state and n.disk.on else None
        nodes.append((n.name, n.alive, n.incarnation, own, canon(n.durable), blocked, disk))

    def chan(msgs):
        if virtual:                # and each one's time left to its bound
            left = spec.latency_ns - net.clock
            items = [(m.kind, m.data, m.sent + left) for m in msgs]
        else:
            items = [(m.kind, m.data) for m in msgs]
        return tuple(sorted(items) if spec.network == "bag" else items)
    conns = []
    for key, c in net.keyed():
        conns.append((key, c.established, c.refused, chan(c.chan[0]), chan(c.chan[1]),
                      ep_state(c.a), ep_state(c.b)))
    dgrams = tuple(sorted(d.group() + ((d.sent + spec.latency_ns - net.clock,)
                                       if virtual else ()) for d in net.dgrams))
    udp = tuple(sorted((fmt_addr(a), o, tuple((fmt_addr(src), data) for src, data in s.rqueue))
                       for a, (o, s) in net.udp.items()))
    # A listener's backlog in its order: accept() takes the oldest first, so two
    # worlds that differ only in the order connections arrived are two worlds
    # (--check-merges found it in demo/durlog).
    listeners = sorted((fmt_addr(s.local), o, s.listening, tuple(c.key() for c in s.backlog))
                       for o, s in net.tcp)
    clients = [(c.name, c.next_req, c.finished, bytes(c.linebuf))
               + ((c.spec.after_ns - net.clock,) if c.waiting else ())
               for c in cluster.clients]
    # the budgets still to be spent; under `time virtual faults T`, while a fault is
    # left to spend, the time left to T (after T none is left)
    spendable = cluster.spendable()
    budgets = sorted(spendable.items(), key=lambda kv: kv[0])
    if spec.faults_ns is not None and any(spendable.get(k) for k in cluster.FAULTS):
        budgets.append(("faults for", spec.faults_ns - net.clock))
    return (tuple(nodes), tuple(conns), dgrams, udp, tuple(listeners), tuple(clients),
            tuple(budgets), canon(cluster.ledger.replies))


def parts(cluster) -> list[tuple[str, dict]]:
    """The world in named parts with named fields, for telling a person which part of
    two worlds differs (the engine's `difference` reports the first field that does):
    first what a trace shows of it (its view; the part named ""), then everything the
    fingerprint covers."""
    shown_view = view(cluster)
    shown = {}
    for part in ("node", "durable", "alive", "crashes"):
        for name, value in zip(shown_view["node_names"], shown_view[part]):
            shown[f"{part}[{name}]"] = value
    shown.update(replies=shown_view["replies"], network=shown_view["network"])
    nodes, conns, dgrams, udp, listeners, clients, budgets, replies = world(cluster)
    out = [("", shown)]
    out += [(f"node {n[0]}", dict(zip(NODE_FIELDS[1:], n[1:]))) for n in nodes]
    out += [(f"connection {c[0]}", dict(zip(("established", "refused", "channel out",
                                             "channel back", "one end", "other end"),
                                            c[1:]))) for c in conns]
    out += [("datagrams in flight", {"datagrams": dgrams}),
            ("UDP sockets", {"queues": udp}), ("listeners", {"listeners": listeners})]
    out += [(f"client {c[0]}", {"next request": c[1], "finished": c[2], "partial line": c[3]})
            for c in clients]
    out += [("budgets", dict(budgets)), ("replies", {"replies": replies})]
    return out + cluster.net.parts()


def network_view(net) -> list[dict]:
    """Every message and datagram in flight, as a trace shows it."""
    out = []
    for _, conn in net.keyed():
        for side in (0, 1):
            src, dst = net.chan_names(conn, side)
            for m in conn.chan[side]:
                out.append({"src": src, "dst": dst, "kind": m.kind,
                            "data": m.data.decode("utf-8", errors="replace")})
    for _, d in net.dgram_groups():
        src, dst = net.dgram_names(d)
        for same in (x for x in net.dgrams if x.group() == d.group()):
            out.append({"src": src, "dst": dst, "kind": "DGRAM",
                        "data": same.data.decode("utf-8", errors="replace")})
    return out + net.view()


def view(cluster) -> dict:
    """The world as a model's properties and a trace see it."""
    nodes, ledger = cluster.nodes, cluster.ledger
    return {
        "node": [node_value(n) for n in nodes],
        "volatile": [n.volatile if n.volatile_emitted else None for n in nodes],
        "durable": [n.durable for n in nodes],
        "alive": [n.alive for n in nodes],
        "crashes": [n.crashes for n in nodes],
        "replies": [dict(r) for r in ledger.replies],
        "network": network_view(cluster.net),
        "params": dict(cluster.spec.params),
        "node_names": [n.name for n in nodes],
        **({"history": [dict(op) for op in ledger.history]} if cluster.spec.history else {}),
        **({"clock_ns": cluster.net.clock} if cluster.virtual else {}),
        **coverage(cluster),
    }


def coverage(cluster) -> dict:
    """What a world shows of how far the run got, for coverage and vacuity
    (cmc/coverage.py), and nothing a property reads: the budgets spent, each ghost
    client's address and whether a node ever accepted its connection, and the
    addresses listened on."""
    spec, net = cluster.spec, cluster.net
    spent = {kind: given - cluster.budgets.get(kind, 0)
             for kind, given in sorted(spec.budgets.items()) if isinstance(given, int)}
    clients = [{"name": c.name, "address": fmt_addr((c.spec.host, c.spec.port)),
                "connected": c.conn is not None and c.conn.b is not None}
               for c in cluster.clients]
    listening = sorted({fmt_addr(s.local) for _, s in net.tcp if s.listening})
    return {"spent": spent, "clients": clients, "listening": listening}
