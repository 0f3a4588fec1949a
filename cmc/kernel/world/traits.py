"""What --por compares (docs/design.md, "Partial-order reduction"): a world cut into
parts (`parts`, from the tuple Cluster._world makes), and the parts a step read or
changed (`changed`). Two steps whose parts are disjoint, neither holding "" (the clock),
commute."""
from __future__ import annotations

import collections


def parts(world: tuple, clock: int) -> dict:
    """The parts: every node; every connection, as its condition, each end, and each
    channel; the ports each node holds (its connections and UDP sockets: a new one takes
    the lowest free); the datagrams in flight between two addresses; the listeners and
    the UDP sockets on each port (a lookup reads those of its port); every client; each
    budget; the replies; and "", the clock (time virtual), which every action reads."""
    nodes, conns, dgrams, udp, listeners, clients, budgets, replies = world
    out: dict = {f"node {n[0]!r}": n for n in nodes}
    out.update((f"client {c[0]!r}", c) for c in clients)
    ports: dict[str, list] = {}
    for c in conns:
        key = c[0]
        out[f"connection {key!r}"] = (c[1], c[2])
        out[f"connection {key!r} end 0"] = c[5]
        out[f"connection {key!r} end 1"] = c[6]
        out[f"connection {key!r} channel 0"] = Channel(c[3])
        out[f"connection {key!r} channel 1"] = Channel(c[4])
        ports.setdefault(key[0], []).append(key)
    for u in udp:
        ports.setdefault(str(u[1]), []).append(u[0])
        out.setdefault(f"UDP :{_port(u[0])}", []).append(u)
    out.update((f"ports {owner}", held) for owner, held in ports.items())
    for d in dgrams:
        out[f"datagrams {d[:3]!r}"] = Channel(out.get(f"datagrams {d[:3]!r}", Channel(()))
                                              .items + (d,))
    for item in listeners:
        out.setdefault(f"listeners :{_port(item[0])}", []).append(item)
    out.update((f"budget {kind}", left) for kind, left in budgets)
    out["replies"] = replies
    out[""] = clock
    return out


def changed(before: dict, after: dict, read) -> frozenset[str]:
    """The parts a step read or changed, from the world's parts before and after it and
    what it is known to have read (`read`): those that differ, where a channel (or the
    datagrams between two addresses) that lost messages counts as taken from (" take")
    and one that gained some as sent to (" put"), which commute (a send reads its own
    end as well: a CRASH of the peer resets it), and a budget only when its last unit
    was spent (two spenders commute while there is enough for both)."""
    out = set(read)
    for part in before.keys() | after.keys():
        old, new = before.get(part), after.get(part)
        if old == new:
            continue
        if part.startswith("budget ") and new:
            continue        # spent, not the last: another spender is still enabled
        if isinstance(old, Channel) or isinstance(new, Channel):
            lost, gained = (old or Channel(())).compare(new or Channel(()))
            if old is None or new is None:      # made or gone with its connection
                lost = gained = True
            out.update(part + what for what, did in ((" take", lost), (" put", gained)) if did)
            if gained and " channel " in part:  # a send reads its own end (reset?)
                conn, side = part.rsplit(" channel ", 1)
                out.add(f"{conn} end {side}")
        else:
            out.add(part)
    return frozenset(out)


class Channel:
    """Messages in flight, compared as a multiset: a step that took some and one that
    put others commute (a FIFO's head is not its tail while a delivery is enabled)."""
    __slots__ = ("items",)

    def __init__(self, items: tuple):
        self.items = tuple(items)

    def __eq__(self, other) -> bool:
        return isinstance(other, Channel) and self.items == other.items

    def compare(self, new: "Channel") -> tuple[bool, bool]:
        """(some message of this one is not in new, new has one this one has not)."""
        left = collections.Counter(self.items)
        left.subtract(new.items)
        return any(v > 0 for v in left.values()), any(v < 0 for v in left.values())


def _port(addr: str) -> str:
    return addr.rsplit(":", 1)[-1]
