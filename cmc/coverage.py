"""Coverage and vacuity (docs/cmc.md, "Coverage and vacuity"): what a search took and
reached, and what never happened that the model implies should.

A `Coverage` is the engine's observer (engine.model.Observer): the search hands it
every distinct world it finds, every step it takes and every world it finds quiescent,
in this process and in a one-worker search's order, so the figures are the same
however many workers took the steps. From the worlds' views (the kernel's, with what a
world shows of how far the run got: budgets spent, clients connected, addresses
listened on) and the model's text it counts:

- the steps taken, by kind and by the node they act on, and the new worlds they
  produced by kind, node, channel (sender -> receiver) and depth: where a search's
  worlds come from, measured;
- the deepest world reached with each amount of each budget spent;
- for each property, in how many of the worlds (steps, for an action property;
  quiescent worlds, for a quiescent one) it was checked on it held *for a reason*
  (cmc/lang/vacuity.py: its trigger was true there);
- for each ghost client, in how many worlds a reply had come to it;

and says, once the search is over, what never happened (`findings`): a client never
connected, a node whose state the model reads never wrote it, a reply regex or an op
line that never matched, a property that held only vacuously, a quiescent property no
world was quiescent for. TLC prints coverage so that a spec that does nothing is seen;
cmc says so outright.
"""
from __future__ import annotations

import collections
import hashlib
from dataclasses import dataclass

from .engine.model import Action, ActionKind, PropertyKind
from .lang import Property, StateChecks, operation_count, txn_count, unparse
from .lang.vacuity import indices_read, names_read, primed_names, trigger

STATE_NAMES = {"node": "state (fd 3 or fd 193)", "volatile": "state on fd 3",
               "durable": "durable state on fd 193"}
SHOWN_REPLY = 60            # characters of a reply line quoted in a finding


@dataclass(frozen=True)
class Finding:
    """Something the model implies should happen and never did: `kind` a short word
    for machines (the JSON report), `message` the sentence for a person."""
    kind: str
    message: str


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


class _Counted:
    """One property: where it was checked, and where it held for a reason."""

    def __init__(self, prop: Property, kind: PropertyKind):
        self.prop = prop
        self.kind = kind
        self.trigger = trigger(prop)
        if kind is PropertyKind.ACTION and self.trigger is not None \
                and self.trigger.domain is not None:
            self.trigger = None          # a step that changes nothing it reads: primed
        self.check = None if self.trigger is None else Property(
            prop.kind, prop.name, self.trigger.expr, prop.loc)
        self.primed = primed_names(prop.expr) if kind is PropertyKind.ACTION else ()
        self.checked = 0
        self.held = 0               # for a reason

    @property
    def label(self) -> str:
        return f"{self.kind} {self.prop.name}"


class Coverage:
    def __init__(self, model):
        self.model = model
        self.checks = StateChecks(_digest)
        self.worlds = 0
        self.quiescent_worlds = 0
        self.taken: collections.Counter = collections.Counter()    # (kind, node) -> steps
        # new worlds by what produced them: (kind, node, channel or None, depth of the
        # world stepped from); the step just observed, which a new world follows at once
        self.produced: collections.Counter = collections.Counter()
        self._last: tuple | None = None
        self.deepest: dict[str, dict[int, int]] = {}    # budget -> spent -> deepest depth
        self.answered: collections.Counter = collections.Counter()  # client -> worlds
        self.addresses: dict[str, str] = {}             # ghost client -> its address
        self.connected: set[str] = set()
        self.listening: set[str] = set()
        self.written: dict[str, set[int]] = {name: set() for name in STATE_NAMES}
        self.node_names: list[str] = []
        self.reply_lines: dict[str, bool] = {}          # raw line -> matched the regex
        self.requests: dict[str, int | None] = {}       # request -> its op line, or None
        self.props = [_Counted(p, PropertyKind(p.kind)) for p in model.properties]
        self.read = frozenset().union(*(names_read(p.expr) for p in model.properties))
        # the nodes each state name is read of (None: any node's may be)
        self.read_of: dict[str, frozenset[int] | None] = {}
        for name in STATE_NAMES:
            each = [indices_read(p.expr, name) for p in model.properties]
            self.read_of[name] = None if None in each else frozenset().union(*each)

    # -- the engine's observer ---------------------------------------------------------
    def world(self, view: dict, depth: int | None) -> None:
        self.worlds += 1
        if self._last is not None:         # the step just taken found this new world
            kind, node, channel = self._last
            self.produced[kind, node, channel, None if depth is None else depth - 1] += 1
            self._last = None
        self.node_names = view.get("node_names", self.node_names)
        for c in self.props:
            if c.kind.checked.name == "STATE":
                c.checked += 1
                c.held += self._triggered(c, view, None)
        if depth is not None:
            for budget, spent in view.get("spent", {}).items():
                known = self.deepest.setdefault(budget, {})
                known[spent] = max(known.get(spent, 0), depth)
        for client in view.get("clients", ()):
            self.addresses[client["name"]] = client["address"]
            if client["connected"]:
                self.connected.add(client["name"])
        self.listening.update(view.get("listening", ()))
        for name, seen in self.written.items():
            seen.update(i for i, v in enumerate(view.get(name, ())) if v is not None)
        replies = view.get("replies", ())
        for client in {r["client"] for r in replies}:
            self.answered[client] += 1
        if self.model.reply is not None:
            for r in replies:
                raw = r.get("raw")
                if raw is not None and raw not in self.reply_lines:
                    self.reply_lines[raw] = self.model.reply.regex.fullmatch(raw) is not None
        for entry in view.get("history", ()):
            req = entry.get("req")
            if isinstance(req, str) and req not in self.requests:
                self.requests[req] = next((i for i, op in enumerate(self.model.ops)
                                           if op.regex.fullmatch(req)), None)

    def step(self, action: Action, view: dict, next_view: dict) -> None:
        fields = action.fields or {}
        node = fields.get("node") or fields.get("dst")
        self.taken[(action.kind.value, node)] += 1
        channel = f"{fields['src']} -> {fields['dst']}" if "src" in fields else None
        self._last = (action.kind.value, node, channel)
        for c in self.props:
            if c.kind is PropertyKind.ACTION:
                c.checked += 1
                c.held += self._triggered(c, view, next_view)

    def quiescent(self, view: dict) -> None:
        self.quiescent_worlds += 1
        for c in self.props:
            if c.kind is PropertyKind.QUIESCENT:
                c.checked += 1
                c.held += self._triggered(c, view, None)

    def _triggered(self, c: _Counted, view: dict, next_view: dict | None) -> bool:
        if c.kind is PropertyKind.LINEARIZABLE:
            return operation_count(self.model, view) > 0
        if c.kind is PropertyKind.TRANSACTIONAL:
            return txn_count(view) > 0
        if c.kind is PropertyKind.WITNESS:
            return self.checks.check(c.prop, view, None)
        if c.check is not None:
            return self.checks.check(c.check, view, next_view)
        if c.primed:
            return any(view.get(n) != next_view.get(n) for n in c.primed)
        return True

    # -- what never happened -----------------------------------------------------------
    def findings(self) -> list[Finding]:
        out = []
        for name, address in self.addresses.items():
            if name in self.connected:
                continue
            why = (f"nothing listens at {address} in any world" if address not in
                   self.listening else f"every connection to {address} was refused or "
                   "never delivered")
            out.append(Finding("client-never-connected", f"client {name} never connected: "
                               f"{why}"))
        for name, what in STATE_NAMES.items():
            if name not in self.read:
                continue
            of = self.read_of[name]
            for i, node in enumerate(self.node_names):
                if i not in self.written[name] and (of is None or i in of):
                    out.append(Finding("state-never-written", f"node {node} never wrote its "
                                       f"{what}, though the model reads {name}[...]"))
        reply = self.model.reply
        if reply is not None and not any(self.reply_lines.values()):
            lines = list(self.reply_lines)
            why = ("no reply came in any world" if not lines else
                   f"none of the {len(lines)} reply line{'s' if len(lines) != 1 else ''} "
                   f"that came matched (the first: {lines[0][:SHOWN_REPLY]!r})")
            out.append(Finding("reply-never-matched", f"reply /{reply.regex.pattern}/ never "
                               f"matched a reply: {why}"))
        if any(c.kind is PropertyKind.LINEARIZABLE for c in self.props):
            used = set(self.requests.values())
            for i, op in enumerate(self.model.ops):
                if i not in used:
                    out.append(Finding("op-never-matched", f"op {op.kind} /{op.regex.pattern}/ "
                                       "matched no request of any world's history"))
        for c in self.props:
            finding = self._vacuous(c)
            if finding is not None:
                out.append(finding)
        return out

    def _vacuous(self, c: _Counted) -> Finding | None:
        if c.kind is PropertyKind.QUIESCENT and self.worlds and not c.checked:
            return Finding("never-checked", f"{c.label} was never checked: no world "
                           "was quiescent")
        if not c.checked or c.held or c.kind in (PropertyKind.WITNESS,
                                                 PropertyKind.EVENTUALLY):
            return None
        if c.kind in (PropertyKind.LINEARIZABLE, PropertyKind.TRANSACTIONAL):
            return Finding("vacuous", f"{c.label} held vacuously: its history had no "
                           "operation in any world")
        t = c.trigger
        action = c.kind is PropertyKind.ACTION
        if t is not None:
            where = f"{t.loc.file}:{t.loc.line}:{t.loc.col}"
            if t.domain is not None:
                fact = (f"the domain of `all {t.domain} in` ({unparse(t.shown)}, at {where}) "
                        "was empty in every world")
            else:
                fact = (f"the left side of => ({unparse(t.shown)}, at {where}) was never "
                        f"true {'on any step' if action else 'in any world'}")
        elif c.primed:
            fact = f"no step changed {', '.join(c.primed)}"
        else:
            return None
        if action:
            return Finding("never-triggered", f"{c.label} was never triggered: {fact}")
        return Finding("vacuous", f"{c.label} held vacuously: {fact}")

    # -- the report ----------------------------------------------------------------------
    def steps_by_kind(self) -> dict[str, dict[str, int]]:
        """Steps taken by kind (in ActionKind's order) and by the node acted on."""
        order = [k.value for k in ActionKind]
        out: dict[str, dict[str, int]] = {}
        for (kind, node), n in sorted(self.taken.items(), key=lambda kv: (
                order.index(kv[0][0]) if kv[0][0] in order else len(order), kv[0][0],
                str(kv[0][1]))):
            out.setdefault(kind, {})[node or "-"] = n
        return out

    def origins(self) -> dict[str, dict]:
        """The new worlds by what produced them: by kind, by node, by channel, by the
        depth of the world stepped from (the initial world aside)."""
        out: dict[str, dict] = {"kind": {}, "node": {}, "channel": {}, "depth": {}}
        for (kind, node, channel, depth), n in self.produced.items():
            for part, key in (("kind", kind), ("node", node or "-"),
                              ("channel", channel), ("depth", depth)):
                if key is not None:
                    out[part][key] = out[part].get(key, 0) + n
        order = [k.value for k in ActionKind]
        out["kind"] = dict(sorted(out["kind"].items(), key=lambda kv: order.index(kv[0])
                                  if kv[0] in order else len(order)))
        for part in ("node", "channel"):
            out[part] = dict(sorted(out[part].items(), key=lambda kv: (-kv[1], str(kv[0]))))
        out["depth"] = {str(d): n for d, n in sorted(out["depth"].items())}
        return out

    def data(self) -> dict:
        """Coverage for the JSON report."""
        return {
            "worlds": self.worlds,
            "quiescent_worlds": self.quiescent_worlds,
            "steps": self.steps_by_kind(),
            "new_worlds_from": self.origins(),
            "deepest": {b: {str(k): d for k, d in sorted(v.items())}
                        for b, v in sorted(self.deepest.items()) if self.model.budgets.get(b)},
            "properties": [{"kind": c.kind.value, "name": c.prop.name, "checked": c.checked,
                            "held_for_a_reason": c.held} for c in self.props],
            "clients": {name: self.answered.get(name, 0) for name in self._clients()},
        }

    def _clients(self) -> list[str]:
        names = [c.name for c in self.model.clients]
        if self.model.maelstrom is not None:
            names += [c.name for c in self.model.maelstrom.clients]
        return names

    def lines(self, whole: bool = False) -> list[str]:
        """The coverage lines printed after the statistics: a few, or (`whole`) all."""
        steps = self.steps_by_kind()
        out = ["Coverage:" + ("" if whole else " (all of it with --coverage)")]
        if whole:
            for kind, nodes in steps.items():
                per = ", ".join(f"{node} {n}" for node, n in nodes.items())
                out.append(f"  {kind}: {sum(nodes.values())} steps ({per})")
            if not steps:
                out.append("  no step was taken")
        else:
            taken = ", ".join(f"{kind} {sum(nodes.values())}" for kind, nodes in steps.items())
            out.append(f"  Steps taken: {taken or 'none'}.")
        if whole:
            origins = self.origins()
            for part, label in (("kind", "kind"), ("node", "node"), ("channel", "channel"),
                                ("depth", "depth stepped from")):
                if origins[part]:
                    sep = ": " if part == "depth" else " "
                    out.append(f"  New worlds by {label}: " + ", ".join(
                        f"{k}{sep}{n}" for k, n in origins[part].items()) + ".")
        for budget, spent in sorted(self.deepest.items()):
            if self.model.budgets.get(budget) and (whole or len(spent) > 1):
                per = ", ".join(f"{k} spent at depth {d}" for k, d in sorted(spent.items()))
                out.append(f"  Budget {budget}: deepest world with {per}.")
        props = []
        for c in self.props:
            if c.kind is PropertyKind.EVENTUALLY:
                continue
            where = {"TRANSITION": "steps", "QUIESCENCE": "quiescent worlds"}.get(
                c.kind.checked.name, "worlds")
            props.append(f"{c.label} {c.held} of {c.checked} {where}")
        if props:
            out.append("  Held for a reason: " + "; ".join(props) + ".")
        clients = self._clients()
        if clients:
            out.append("  Worlds with a reply to: " + ", ".join(
                f"{name} {self.answered.get(name, 0)}" for name in clients) + ".")
        if whole:
            out.append(f"  Worlds: {self.worlds} distinct, {self.quiescent_worlds} quiescent.")
        return out
