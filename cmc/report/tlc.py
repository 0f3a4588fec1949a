"""TLC's wording (tlc2/output/MP.java), so that people and tools that read TLC
output read cmc's. The engine emits events; this module renders them."""
from __future__ import annotations

import json
import sys
import time
from datetime import datetime

from ..engine.model import Outcome, PropertyKind, Stats, Step


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
        if "body" in m:                 # a Maelstrom message: its body
            body = render_value(m["body"])
        msgs.append(f"{m['src']} -> {m['dst']} {body}")
    replies = []
    for r in view["replies"]:
        replies.append("[" + ", ".join(f"{k} |-> {render_value(v)}" for k, v in r.items()) + "]")
    clock = [f"/\\ clock = {view['clock_ns'] / 1e9:.3f}s"] if "clock_ns" in view else []
    if "ticks" in view:                 # --trace-ticks: the FIREs folded into the step
        clock.append(f"/\\ folded = <<{', '.join(render_value(t) for t in view['ticks'])}>>")
    return clock + [
        f"/\\ node = {per_node(view['node'])}",
        f"/\\ durable = {per_node(view['durable'])}",
        f"/\\ alive = {per_node(view['alive'], boolean)}",
        f"/\\ crashes = {per_node(view['crashes'])}",
        f"/\\ network = <<{', '.join(msgs)}>>",
        f"/\\ replies = <<{', '.join(replies)}>>",
    ]


def render_evaluated_in(view: dict, next_view: dict | None) -> list[str]:
    """The world(s) a property failed to evaluate in, shown after the error's message
    (the world after the transition too, for an action property)."""
    lines = ["The world it was evaluated in:"] + render_world(view)
    if next_view is not None:
        lines += ["and the world after the transition:"] + render_world(next_view)
    return lines


def render_output(output: dict) -> list[str]:
    """What each node did during a step of a replay: its emulated calls, then the
    lines it printed, each line prefixed with the node's name."""
    lines = []
    for node, got in output.items():
        lines += [f"    {node}: {call}" for call in got.get("calls", [])]
        for stream in ("stdout", "stderr"):
            lines += [f"    {node} {stream}: {text}" for text in got.get(stream, "").splitlines()]
        lines += [f"    {node} lost at the crash: {what}" for what in got.get("lost", [])]
        lines += [f"    {node} unsynced: {what}" for what in got.get("unsynced", [])]
    return lines


def render_trace(trace: list[Step], loop_to: int | None = None) -> list[str]:
    lines = []
    for i, step in enumerate(trace, 1):
        label = "<Initial predicate>" if step.label is None else f"<{step.label}>"
        lines.append(f"State {i}: {label}")
        if isinstance(step.output, dict):
            lines += render_output(step.output)
        lines += render_world(step.view)
        lines.append("")
    if loop_to is not None:
        lines.append(f"State {len(trace) + 1}: Back to state {loop_to}")
        lines.append("")
    return lines


def collision_probability(stats: Stats) -> float:
    """TLC's optimistic estimate, for cmc's 128-bit fingerprints (docs/cmc.md,
    "Output")."""
    return stats.distinct * max(stats.generated - stats.distinct, 0) / 2.0**128


def violation_lines(outcome: Outcome, live_steps: int | None = None) -> list[str]:
    """The error line, the behavior and, for `eventually`, how the fair schedule ended."""
    prop = outcome.prop
    lines = [prop.kind.violated(prop.name)]
    if not outcome.trace:
        return lines
    live = prop.kind is PropertyKind.EVENTUALLY
    if live:
        lines.append("Error: The following behavior constitutes a counter-example:")
    else:
        lines.append("Error: The behavior up to this point is:")
    lines += render_trace(outcome.trace, outcome.loop_to)
    if live and outcome.suffix_from is not None:
        lines.append(fair_ending(outcome, live_steps))
    if prop.detail is not None:
        lines += render_history(prop.detail(outcome.trace[-1].view))
    return lines


HISTORY_COLUMNS = ("client", "op", "key", "value", "request", "reply", "invoked at",
                   "completed at")


def history_cells(row: dict) -> list[str]:
    """One operation of a history (cmc/lang/history.py's row) as the table's cells."""
    key = row["key"]
    plain = isinstance(key, str) and key and key.isprintable() and " " not in key
    return [row["client"], row["kind"],
            "-" if key is None else key if plain else render_value(key),
            render_value(row["value"]) if row["kind"] == "write" or row["reply"] is not None
            else "-",
            render_value(row["request"]),
            "(pending)" if row["reply"] is None else render_value(row["reply"]),
            f"state {row['invoked']}",
            "-" if row["completed"] is None else f"state {row['completed']}"]


def render_history(rows: list[dict]) -> list[str]:
    """The history of a linearizable property's violation, as a table: one operation
    per line in invoke order; `*` marks the operations of a key that has no sequential
    order; a pending operation may or may not have taken effect."""
    if rows and "anomalies" in rows[0]:
        return render_transactions(rows)
    bad = sorted({"-" if r["key"] is None else str(r["key"]) for r in rows if r["violating"]})
    which = ("the one register" if bad == ["-"] else
             "key" + ("s " if len(bad) > 1 else " ") + ", ".join(bad))
    lines = [f"The history: {len(rows)} operation{'s' if len(rows) != 1 else ''}; no "
             f"sequential order of the operations on {which} (marked *) explains what "
             "their clients saw:"]
    table = [list(HISTORY_COLUMNS)] + [history_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(HISTORY_COLUMNS))]
    for i, cells in enumerate(table):
        mark = "*" if i and rows[i - 1]["violating"] else " "
        lines.append((f"{mark} " + "  ".join(c.ljust(w) for c, w in zip(cells, widths))).rstrip())
    return lines


def render_transactions(rows: list[dict]) -> list[str]:
    """The transactions of a transactional property's violation, as a table like a
    history's, after the anomalies (Elle's names) that its level forbids."""
    first = rows[0]
    lines = [f"The history: {len(rows)} transaction{'s' if len(rows) != 1 else ''}; "
             f"{first['level']} forbids what they show: " + ", ".join(first["anomalies"])
             + " (docs/model-file.md, \"transactional\")"]
    table = [list(HISTORY_COLUMNS)] + [history_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(HISTORY_COLUMNS))]
    lines += [("  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths))).rstrip()
              for cells in table]
    return lines


def fair_ending(outcome: Outcome, live_steps: int | None) -> str:
    start, name = outcome.suffix_from, outcome.prop.name
    head = f"From state {start} on, the fair fault-free schedule runs"
    if outcome.why == "stopped":
        return (f"{head} until state {len(outcome.trace)}, where no DELIVER or FIRE is "
                f"enabled, and {name} never became true.")
    if outcome.why == "looped":
        return (f"{head} back to state {outcome.loop_to} without {name} becoming true: "
                "it would go round forever.")
    steps = f"{live_steps} steps (--live-steps)" if live_steps is not None else "--live-steps steps"
    return f"{head} {steps} without {name} becoming true."


class TlcReporter:
    """Plain TLC-style lines (CI); progress every `every` seconds."""

    def __init__(self, out=None, every: float = 60.0):
        self.out = out or sys.stdout
        self.every = every
        self.started = time.time()
        self.last = self.started
        self.simulation = False
        self.seed: int | None = None

    def say(self, line: str = "") -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def start(self, seed: int | None = None, walks: int | None = None,
              replay: bool = False, banner: str | None = None) -> None:
        if banner is not None:
            self.say(banner)
        self.say(f"Starting... ({stamp(self.started)})")
        if seed is not None:
            self.simulation = True
            self.seed = seed
            self.say(f"Running Random Simulation with seed {seed} ({walks} walk"
                     f"{'s' if walks != 1 else ''}).")
        if not replay:
            self.say("Computing initial states...")

    def initial(self, stats: Stats) -> None:
        self.say(f"Finished computing initial states: {stats.distinct} distinct state"
                 f"{'s' if stats.distinct != 1 else ''} generated at {stamp()}.")

    def progress(self, stats: Stats, force: bool = False) -> None:
        now = time.time()
        if not force and now - self.last < self.every:
            return
        self.last = now
        if self.simulation:
            self.say(simulation_progress(stats))
            return
        minutes = max((now - self.started) / 60, 1e-9)
        self.say(f"Progress({stats.depth}) at {stamp(now)}: {stats.generated} states generated "
                 f"({int(stats.generated / minutes)} s/min), {stats.distinct} distinct states found "
                 f"({int(stats.distinct / minutes)} ds/min), {stats.queue} states left on queue.")
        for line in machine_lines(stats):
            self.say(line)

    def finish(self, outcome: Outcome, live_steps: int | None = None,
               bound: str | None = None, notes: list[str] = ()) -> None:
        """The verdict and the statistics. `bound` names the option that bounded the
        depth (e.g. "--max-depth 4"), to say so when it cut the search short; `notes`
        (coverage, findings) follow the statistics."""
        st = outcome.stats
        if outcome.verdict == "ok":
            if self.simulation:
                self.say(f"Simulation completed: {st.walks} walk{'s' if st.walks != 1 else ''}"
                         ", no error has been found.")
            else:
                if outcome.stopped is not None:
                    self.say(f"Model checking stopped ({outcome.stopped.why}). No error has "
                             "been found in the worlds checked.")
                else:
                    self.say("Model checking completed. No error has been found.")
                if outcome.bounded and outcome.stopped is None:
                    self.say(f"  The search was bounded at depth {st.depth} ({bound}): "
                             f"{st.unexplored} state{'s' if st.unexplored != 1 else ''} at "
                             "that depth were not expanded.")
                self.say("  Estimates of the probability that TLC did not check all reachable states")
                self.say("  because two distinct states had the same fingerprint:")
                self.say(f"  calculated (optimistic):  val = {collision_probability(st):.1E}")
        else:
            for line in violation_lines(outcome, live_steps):
                self.say(line)
            if outcome.walk_from is not None:
                self.say(f"The behavior was found by swarm walk {outcome.walk} (seed "
                         f"{outcome.seed}) from a world at depth {outcome.walk_from} that the "
                         "breadth-first search found and had no time to expand; its trace "
                         "runs again with --replay.")
            elif outcome.walk is not None:
                swarm = " --swarm" if outcome.swarm else ""
                self.say(f"The behavior was found by {'swarm ' if swarm else ''}walk "
                         f"{outcome.walk} (seed {outcome.seed}); run it alone with "
                         f"--simulate{swarm} --seed {outcome.seed} --walks 1.")
            if outcome.shrunk_from is not None:
                stopped = ("; the time (--seconds) was up before it could be shrunk "
                           "further" if outcome.shrink_stopped else "")
                self.say(f"The walk's behavior had {outcome.shrunk_from} states; shrunk to "
                         f"{len(outcome.trace)} by dropping actions ({outcome.shrink_replays} "
                         f"replays from launch{stopped}).")
        if self.simulation:
            self.say(f"The number of states generated: {st.generated}")
            self.say(f"Simulation using seed {self.seed} and aril 0")
            self.say(simulation_progress(st))
        reduced = " (reduced by --por)" if st.reduced else ""
        self.say(f"{st.generated} states generated{reduced}, {st.distinct} distinct states "
                 f"found, {st.queue} states left on queue.")
        self.say(f"The depth of the complete state graph search is {st.depth}.")
        if outcome.stopped is not None:
            for line in outcome.stopped.lines():
                self.say(line)
        if outcome.walk_seed is not None and st.walks:
            n, seed = st.walks, outcome.walk_seed
            self.say(f"Then {n} swarm walk{'s' if n != 1 else ''} from its frontier (seed"
                     f"{f's {seed} to {seed + n - 1}' if n != 1 else f' {seed}'}) found no "
                     "violation.")
        for line in notes:
            self.say(line)
        self.end()

    def replayed(self, outcome: Outcome, live_steps: int | None) -> None:
        """--replay: the behavior, with each step's calls and output, and whether the
        trace's property is still violated at its end."""
        if outcome.verdict == "violated":
            for line in violation_lines(outcome, live_steps):
                self.say(line)
        else:
            prop = outcome.prop
            self.say(f"The behavior no longer violates {prop.kind} {prop.name}:")
            for line in render_trace(outcome.trace, outcome.loop_to):
                self.say(line)
        self.end()

    def close(self) -> None:
        """Stop any live display (a run that ends in an error calls only this)."""

    def end(self) -> None:
        now = time.time()
        self.say(f"Finished in {duration(now - self.started)} at ({stamp(now)})")


def machine_lines(stats: Stats) -> list[str]:
    """Under a Progress line of a --ray search, one line per machine: its workers, the
    states they generated (and per minute), the share of their time spent on jobs."""
    workers = getattr(stats, "workers", None)
    if not workers or not workers.get("ray"):
        return []
    out = []
    for m in workers["machines"]:
        lost = f", {m['lost']} lost" if m["lost"] else ""
        rate = int((m["states_per_second"] or 0) * 60)
        busy = f", {m['busy']:.0%} busy" if m["busy"] is not None else ""
        out.append(f"  Machine {m['host']}: {m['workers']} worker"
                   f"{'s' if m['workers'] != 1 else ''}{lost}, {m['generated']} states "
                   f"generated ({rate} s/min){busy}.")
    return out


def simulation_progress(stats: Stats) -> str:
    lengths = stats.walk_lengths or [0]
    mean = sum(lengths) / len(lengths)
    var = sum((x - mean) ** 2 for x in lengths) / len(lengths)
    return (f"Progress: {stats.generated} states checked, {stats.walks} traces generated "
            f"(trace length: mean={round(mean)}, var(x)={round(var)}, sd={round(var ** 0.5)})")
