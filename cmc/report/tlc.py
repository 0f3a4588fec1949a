"""TLC's wording (tlc2/output/MP.java), so that people and tools that read TLC
output read cmc's. The engine emits events; this module renders them."""
from __future__ import annotations

import json
import sys
import time
from datetime import datetime

from ..engine.model import Outcome, Stats, Step

KIND_WORDING = {
    "invariant": "Error: Invariant {} is violated.",
    "action": "Error: Action property {} is violated.",
    "quiescent": "Error: Quiescent property {} is violated.",
    "eventually": "Error: Temporal property {} was violated.",
    "witness": "Error: Witness {} was never reached.",
}


def stamp(t: float | None = None) -> str:
    return datetime.fromtimestamp(t if t is not None else time.time()).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float) -> str:
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h:02d}h {m:02d}min {s:02d}s"
    if m:
        return f"{m:02d}min {s:02d}s"
    return f"{s:02d}s"


def render_value(v) -> str:
    return json.dumps(v, separators=(", ", ": "), ensure_ascii=False)


def render_world(view: dict) -> list[str]:
    names = view["node_names"]

    def per_node(values, fmt=render_value):
        return "[" + ", ".join(f"{n} |-> {fmt(v)}" for n, v in zip(names, values)) + "]"

    def boolean(b):
        return "TRUE" if b else "FALSE"
    msgs = []
    for m in view["network"]:
        body = m["kind"] if m["kind"] != "DATA" else render_value(m["data"])
        msgs.append(f"{m['src']} -> {m['dst']} {body}")
    replies = []
    for r in view["replies"]:
        replies.append("[" + ", ".join(f"{k} |-> {render_value(v)}" for k, v in r.items()) + "]")
    return [
        f"/\\ node = {per_node(view['node'])}",
        f"/\\ durable = {per_node(view['durable'])}",
        f"/\\ alive = {per_node(view['alive'], boolean)}",
        f"/\\ crashes = {per_node(view['crashes'])}",
        f"/\\ network = <<{', '.join(msgs)}>>",
        f"/\\ replies = <<{', '.join(replies)}>>",
    ]


def render_trace(trace: list[Step]) -> list[str]:
    lines = []
    for i, step in enumerate(trace, 1):
        label = "<Initial predicate>" if step.label is None else f"<{step.label}>"
        lines.append(f"State {i}: {label}")
        lines += render_world(step.view)
        lines.append("")
    return lines


class TlcReporter:
    """Plain TLC-style lines (CI); progress every `every` seconds."""

    def __init__(self, out=None, every: float = 60.0):
        self.out = out or sys.stdout
        self.every = every
        self.started = time.time()
        self.last = self.started

    def say(self, line: str = "") -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def start(self) -> None:
        self.say(f"Starting... ({stamp(self.started)})")
        self.say("Computing initial states...")

    def initial(self, stats: Stats) -> None:
        self.say(f"Finished computing initial states: {stats.distinct} distinct state"
                 f"{'s' if stats.distinct != 1 else ''} generated at {stamp()}.")

    def progress(self, stats: Stats, force: bool = False) -> None:
        now = time.time()
        if not force and now - self.last < self.every:
            return
        self.last = now
        minutes = max((now - self.started) / 60, 1e-9)
        self.say(f"Progress({stats.depth}) at {stamp(now)}: {stats.generated} states generated "
                 f"({int(stats.generated / minutes)} s/min), {stats.distinct} distinct states found "
                 f"({int(stats.distinct / minutes)} ds/min), {stats.queue} states left on queue.")

    def finish(self, outcome: Outcome) -> None:
        st = outcome.stats
        if outcome.verdict == "ok":
            self.say("Model checking completed. No error has been found.")
            collision = st.distinct * max(st.generated - st.distinct, 0) / 2.0**128
            self.say("  Estimates of the probability that TLC did not check all reachable states")
            self.say("  because two distinct states had the same fingerprint:")
            self.say(f"  calculated (optimistic):  val = {collision:.1E}")
        else:
            self.say(KIND_WORDING[outcome.prop.kind].format(outcome.prop.name))
            if outcome.trace:
                self.say("Error: The behavior up to this point is:")
                for line in render_trace(outcome.trace):
                    self.say(line)
        self.say(f"{st.generated} states generated, {st.distinct} distinct states found, "
                 f"{st.queue} states left on queue.")
        self.say(f"The depth of the complete state graph search is {st.depth}.")
        self.end()

    def end(self) -> None:
        now = time.time()
        self.say(f"Finished in {duration(now - self.started)} at ({stamp(now)})")
