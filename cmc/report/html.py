"""`--html REPORT.html`: a counterexample as a message-sequence chart, in one file.

The page is self-contained (inline CSS, SVG and a little JS; nothing fetched) so that
it can be attached to a CI run or a bug report and opened offline. One lifeline per
node, then per client; one row per state, drawing the action that led to it and the
replies its step emitted. Clicking a row shows, in the side panel, the world after
that step and what each node did during it; up/down move between rows and `#step=N`
selects step N (0 = the initial state, TLC's "State 1"). docs/report.md shows it.

Everything shown comes from the program under check and is untrusted: every text
goes through `esc` here, in Python, and the side panels are rendered here too, one
per step, so the script only toggles visibility and handles no data.
"""
from __future__ import annotations

import html
import json
import re

from . import page

CONTROL = ("CONNECT", "FIN", "RST")
ROLE_SHOWN = {"other": "peer"}   # a lifeline's role under its name
GUTTER, COLUMN, LANE, PAD, HEAD = 150, 180, 30, 8, 58   # chart geometry, in px
OPS_LANE = 170       # the history timeline: one lane per client, right of the lifelines
CHAR_PX = 7.2        # width of a character of the 12px monospace font, to truncate labels
TEXT_CAP = 20000     # characters of one output stream shown per step (the rest is counted)
CALLS_CAP = 2000     # emulated calls shown per node and step
COLORS = {"DELIVER": "#343a40", "DROP": "#d9480f", "DUP": "#7048e8", "FIRE": "#1971c2",
          "CRASH": "#e03131", "REPLY": "#2b8a3e"}
OP_COLORS = {"write": "#1971c2", "read": "#2b8a3e", "bad": "#e03131"}

_UNESCAPE = {"\n": "n", "\r": "r", "\t": "t", '"': '"', "\\": "\\"}   # as the kernel's quote
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# -- the report as plain data ------------------------------------------------------------

def report_from_trace(*, model: str, prop_kind: str, prop_name: str, message: str,
                      steps, clients: list[str], verdict: str = "violated",
                      history: list[dict] | None = None, services: list[str] = ()) -> dict:
    """The dict `write_html` takes, from the engine's behavior: `steps` are Steps
    (`.action`, whose `fields` the page draws, `.view`, `.output`) as `engine.replay.replay(..., collect=True,
    observe=lambda s: s.drain())` returns them, so `.output` is each node's calls and
    output of that step (None when not recorded). `clients` are the model's client
    names, in declaration order (a Maelstrom model's too); `services` Maelstrom's
    services the model names (seq-kv ...). `history` is a linearizable property's history
    at the last step (cmc/lang/history.py's rows), drawn as a timeline beside the chart."""
    steps = list(steps)
    nodes = list(steps[0].view.get("node_names", [])) if steps else []
    return {
        "model": model, "property": {"kind": prop_kind, "name": prop_name},
        "verdict": verdict, "message": message, "nodes": nodes, "clients": list(clients),
        "services": list(services),
        "steps": [{"label": s.label, "action": s.action.fields if s.action else None,
                   "view": s.view,
                   "output": s.output if isinstance(s.output, dict) else {}}
                  for s in steps],
        "history": list(history) if history is not None else None,
    }


def maelstrom_body(item: dict) -> dict | None:
    """The body of a Maelstrom message: `item` is an action's fields, a message in
    flight or a reply event, its `body` given (messages in flight, replies) or in the
    envelope its `data` holds (`msg` MSG: an action's letter); None for any other."""
    body = item.get("body")
    if body is None and item.get("msg") == "MSG":
        try:
            body = json.loads(item.get("data") or "").get("body")
        except (ValueError, AttributeError):
            return None
    return body if isinstance(body, dict) else None


def body_label(body: dict) -> str:
    """A Maelstrom body as the chart writes it on an arrow: its type, then the other
    fields as compact JSON (`gossip {"message":1,"msg_id":1}`)."""
    rest = {k: v for k, v in body.items() if k != "type"}
    kind = str(body.get("type", ""))
    return f"{kind} {json.dumps(rest, separators=(',', ':'))}" if rest else kind


def show_bytes(data: str) -> str:
    """Message bytes the way traces show them: double-quoted, with C escapes."""
    def one(c):
        if c in _UNESCAPE:
            return "\\" + _UNESCAPE[c]
        return c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
    return '"' + "".join(map(one, data)) + '"'


# -- the page ------------------------------------------------------------------------------

def esc(text) -> str:
    """HTML-escaped, with control characters (ANSI escapes, NUL …) shown as \\xNN."""
    text = _CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))
    return html.escape(text, quote=True)


def value(v) -> str:
    return json.dumps(v, separators=(", ", ": "), ensure_ascii=False, default=str)


def clip(text: str, width_px: float) -> str:
    room = max(int(width_px / CHAR_PX), 10)
    return text if len(text) <= room else text[:room - 1] + "…"


def write_html(path: str, report: dict) -> None:
    """Write the report (the dict described in docs/report.md) as one self-contained
    HTML file. After a search, the behavior's steps have no output: replay its keys
    with recording on to collect it, then build the dict with `report_from_trace`:

        model_ = ClusterModel(spec_for(model, args), workroot, recording=True)
        system, steps = replay(model_, [s.key for s in outcome.trace[1:]], None,
                               collect=True, observe=lambda s: s.drain())
        system.close()
        write_html(path, report_from_trace(model=..., steps=steps, ...))

    (`cmc --replay` has those steps already.)"""
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(report))


def render(report: dict) -> str:
    """The page, as one string."""
    steps = [dict(s, action=s.get("action"), view=s.get("view") or {})
             for s in report.get("steps") or []]
    report = dict(report, steps=steps)
    chart = Chart(report, lifelines(report))
    prop = report.get("property") or {}
    what = f"{prop.get('kind', '')} {prop.get('name', '')}"
    params = (steps[0].get("view") or {}).get("params") if steps else None
    return PAGE.format(
        title=esc(f"{report.get('model', '')}: {what}"), css=CSS, js=JS, legend=LEGEND,
        verdict_class=esc(report.get("verdict", "violated")), prop=esc(what),
        message=esc(report.get("message", "")), model=esc(report.get("model", "")),
        states=len(steps), params=esc(", ".join(f"{k} = {value(v)}"
                                                for k, v in (params or {}).items())),
        head=chart.head(), body=chart.body(), width=chart.width, last=max(len(steps) - 1, 0),
        panels="\n".join(panel(report, i) for i in range(len(steps))))


def lifelines(report: dict) -> list[tuple[str, str]]:
    """(name, role) per column: the nodes, the clients, then any other endpoint an
    action names (a UDP peer that is not in the model, say)."""
    cols = [(n, "node") for n in report.get("nodes", [])]
    cols += [(c, "client") for c in report.get("clients", [])]
    cols += [(s, "service") for s in report.get("services", [])]
    known = {n for n, _ in cols}
    for s in report.get("steps") or []:
        a = s.get("action") or {}
        for name in (a.get("src"), a.get("dst"), a.get("node")):
            if name and name not in known:
                known.add(name)
                cols.append((name, "other"))
    return cols


def new_replies(steps: list[dict], i: int) -> list[dict]:
    """The replies emitted during step i: those whose index the previous world lacks."""
    before = {r.get("index") for r in (steps[i - 1]["view"].get("replies") or [])} if i else set()
    return [r for r in (steps[i]["view"].get("replies") or []) if r.get("index") not in before]


def reply_event(report: dict, r: dict) -> dict:
    """A reply drawn as an arrow from its node to its client: a Maelstrom reply by its
    body, any other by the line the node sent."""
    body = r.get("body")
    ev = {"kind": "REPLY", "src": reply_node(report, r), "dst": r.get("client"),
          "data": str(r.get("raw", "")), "msg": "DATA"}
    return dict(ev, body=body) if isinstance(body, dict) and "raw" not in r else ev


def reply_node(report: dict, r: dict) -> str:
    """A reply record names its node by index: the node's name."""
    return str(_at(report.get("nodes"), r.get("node"), r.get("node")))


class Chart:
    """The message-sequence chart as two SVGs: the lifelines' heads (kept in view
    while the chart scrolls) and the rows."""

    def __init__(self, report: dict, columns: list[tuple[str, str]]):
        self.report, self.columns = report, columns
        self.x = {name: GUTTER + COLUMN * i + COLUMN // 2 for i, (name, _) in enumerate(columns)}
        self.width = GUTTER + COLUMN * max(len(columns), 1) + 80   # room for a last note
        self.ops = report.get("history") or []
        self.op_lanes: dict[str, float] = {}        # client -> the left edge of its lane
        if report.get("history") is not None:
            clients = list(dict.fromkeys([*report.get("clients", []),
                                          *(str(op.get("client")) for op in self.ops)]))
            self.width -= 40            # a last note has room enough beside a lane
            for client in clients:
                self.op_lanes[client] = self.width
                self.width += OPS_LANE
            self.width += 10

    def head(self) -> str:
        out = []
        for name, role in self.columns:
            x = self.x[name]
            out.append(f'<g class="who {role}"><rect x="{x - 70}" y="8" width="140" height="28" '
                       f'rx="6"/><text x="{x}" y="27">{esc(clip(name, 126))}</text>'
                       f'<text class="role" x="{x}" y="50">{ROLE_SHOWN.get(role, role)}'
                       f'</text><title>{esc(name)}</title></g>')
        for client, left in self.op_lanes.items():
            out.append(f'<g class="who ops"><text x="{left + 8}" y="27">{esc(clip(client, 150))}'
                       f'</text><text class="role" x="{left + 8}" y="50">operations</text>'
                       f'<title>the operations of client {esc(client)}</title></g>')
        return "".join(out)

    def body(self) -> str:
        steps = self.report.get("steps") or []
        rows, y, tops = [], 0, []
        for i, step in enumerate(steps):
            tops.append(y)
            action = step.get("action") or {}
            events = [action] if action.get("kind") in COLORS else []   # else: the gutter only
            events += [reply_event(self.report, r) for r in new_replies(steps, i)]
            height = max(2 * PAD + LANE * max(len(events), 1), 60 if i == len(steps) - 1 else 0)
            rows.append(self.row(i, step, events, y, height))
            y += height
        tops.append(y)
        rows.append(self.timeline(tops))
        if not steps:
            rows.append('<text class="none" x="20" y="30">The behavior is empty: no state '
                        'to show.</text>')
            y = 50
        return f'<svg id="chart" width="{self.width}" height="{y + 4}">{"".join(rows)}</svg>'

    def timeline(self, tops: list[int]) -> str:
        """The history beside the chart: each operation a bar in its client's lane, from
        the row of the state it was invoked at to the row it completed at (a pending one
        runs on, dashed, to the end); red: a key with no sequential order."""
        out = ['<g class="timeline">']
        last = len(tops) - 2
        nth: dict[str, int] = {}        # a client's operations alternate between two places
        for op in self.ops:
            left = self.op_lanes.get(str(op.get("client")))
            start = op.get("invoked")
            if left is None or not isinstance(start, int) or not 1 <= start <= last + 1:
                continue
            end = op.get("completed")
            pending = not isinstance(end, int)
            # the request's label at the top of its row, the reply's lower down in the
            # row it came in, where the next operation's request label is not
            y1 = tops[start - 1] + 10
            y2 = tops[-1] - 6 if pending else tops[min(end, last + 1) - 1] + 26
            color = OP_COLORS["bad" if op.get("violating") else op.get("kind", "read")]
            dash = ' stroke-dasharray="5 4"' if pending else ""
            k = nth[str(op.get("client"))] = nth.get(str(op.get("client")), -1) + 1
            x = left + 10 + 10 * (k % 2)
            what = f"{op.get('kind')} {'' if op.get('key') is None else op.get('key')}".rstrip()
            said = "pending" if pending else show_bytes(str(op.get("reply", "")))
            title = (f"{op.get('client')}: {what}, {show_bytes(str(op.get('request', '')))} "
                     f"→ {said}; invoked at state {start}"
                     + ("" if pending else f", completed at state {end}"))
            asked = clip(show_bytes(str(op.get("request", ""))), OPS_LANE - 40)
            out.append(f'<g class="op{" bad" if op.get("violating") else ""}'
                       f'{" pending" if pending else ""}"><title>{esc(title)}</title>'
                       f'<line x1="{x}" y1="{y1}" x2="{x}" y2="{y2}" stroke="{color}" '
                       f'stroke-width="6" stroke-linecap="round"{dash}/>'
                       + label(left + 34, y1 + 8, asked, color, "start", "msg")
                       + ("" if pending else
                          label(left + 34, y2 + 10, clip("→ " + said, OPS_LANE - 40), color,
                                "start", "msg"))
                       + "</g>")
        out.append("</g>")
        return "".join(out)

    def row(self, i: int, step: dict, events: list[dict], top: int, height: int) -> str:
        label = step.get("label")
        kind = (step.get("action") or {}).get("kind", "") if label else "initial"
        last = i == len(self.report["steps"]) - 1
        out = [f'<g class="step{" last" if last else ""}" data-step="{i}" id="row-{i}">',
               f'<title>State {i + 1}: {esc(label or "Initial predicate")}</title>',
               f'<rect class="bg" x="0" y="{top}" width="{self.width}" height="{height}"/>',
               f'<text class="state" x="12" y="{top + 20}">State {i + 1}</text>',
               f'<text class="kind" x="12" y="{top + 36}">{esc(kind)}</text>']
        clock = step["view"].get("clock_ns")
        if clock is not None:            # time virtual: the time axis, one mark a state
            out.append(f'<text class="clock" x="{GUTTER - 12}" y="{top + 20}" '
                       f'text-anchor="end">@ {clock / 1e9:.3f}s</text>')
        if last and self.report.get("verdict", "violated") == "violated":
            out.append(f'<text class="bad" x="12" y="{top + 52}">✗ violated here</text>')
        alive = step["view"].get("alive") or []
        nodes = self.report.get("nodes", [])
        for name, role in self.columns:
            dead = role == "node" and name in nodes and not _at(alive, nodes.index(name), True)
            x = self.x[name]
            out.append(f'<line class="life{" dead" if dead else ""}" x1="{x}" y1="{top}" '
                       f'x2="{x}" y2="{top + height}"/>')
        for lane, ev in enumerate(events):
            out.append(self.event(ev, top + PAD + LANE * lane + 20))
        out.append("</g>")
        return "".join(out)

    def event(self, ev: dict, y: int) -> str:
        kind = ev.get("kind")
        color = COLORS[kind]
        if kind in ("FIRE", "CRASH"):
            x = self.x.get(ev.get("node"), GUTTER + 20)
            text = (ev.get("what") or "timeout") if kind == "FIRE" else "crash, restarted"
            return (f'<g class="ev e-{kind}"><title>{esc(kind)} {esc(ev.get("node"))} '
                    f'{esc(ev.get("what") or "")}</title>{mark(kind, x, x, y)}'
                    f'{label(x + 13, y + 4, clip(text, COLUMN - 20), color, "start")}</g>')
        x1 = self.x.get(ev.get("src"), GUTTER + 20)
        x2 = self.x.get(ev.get("dst"), GUTTER + 20)
        data, msg = ev.get("data"), ev.get("msg")
        body = maelstrom_body(ev)
        if body is not None:    # a Maelstrom message: its type, its body in the title
            text, full = body_label(body), json.dumps(body, indent=2)
        elif data is None:      # a FIFO drop resets the connection: no bytes to show
            text = full = "connection reset" if kind == "DROP" else ""
        else:
            text = data if msg in CONTROL or (msg is None and data in CONTROL) else show_bytes(data)
            full = text
        title = f'<title>{esc(kind)} {esc(full)}</title>'
        if x1 == x2:        # to itself (UDP to its own port, say): a loop
            return (f'<g class="ev e-{kind}">{title}<path d="M{x1} {y - 8}h30v14h-26" '
                    f'fill="none" stroke="{color}" stroke-width="2"/>'
                    f'{_head(x1 + 2, y + 6, -1, color)}'
                    f'{label(x1 + 36, y + 3, clip(text, COLUMN - 44), color, "start")}</g>')
        # a dropped or duplicated message does not arrive: its arrow stops short
        short = {"DROP": 0.62, "DUP": 0.55}.get(kind, 1.0)
        end = x1 + (x2 - x1) * short
        parts = [mark(kind, x1, end, y)]
        if kind == "DUP":
            d = 1 if end > x1 else -1
            parts.append(label(end + d * 6, y + 4, "×2", color, "start" if d > 0 else "end"))
        shown = clip(text, abs(x2 - x1) - 12)     # past a cross: the row is free there
        parts.append(label((x1 + end) / 2, y - 6, shown, color, "middle", "msg"))
        return f'<g class="ev e-{kind}">{title}{"".join(parts)}</g>'


def label(x: float, y: float, text: str, color: str, anchor: str, cls: str = "note") -> str:
    """Text on a chip of the row's colour, so that no lifeline runs through it."""
    width = len(text) * CHAR_PX + 6
    left = {"start": x - 3, "middle": x - width / 2, "end": x - width + 3}[anchor]
    return (f'<rect class="chip" x="{left:.0f}" y="{y - 12:.0f}" width="{width:.0f}" '
            f'height="16" rx="3"/><text class="{cls}" x="{x:.0f}" y="{y:.0f}" fill="{color}" '
            f'text-anchor="{anchor}">{esc(text)}</text>')


def mark(kind: str, x1: float, x2: float, y: int) -> str:
    """The drawing of an event, from x1 to x2 (FIRE and CRASH: at x1), without its text."""
    color = COLORS[kind]
    if kind == "FIRE":
        return (f'<circle cx="{x1}" cy="{y}" r="7" fill="#fff" stroke="{color}" stroke-width="2"/>'
                f'<path d="M{x1} {y - 4}V{y}H{x1 + 4}" fill="none" stroke="{color}" '
                'stroke-width="2"/>')
    if kind == "CRASH":
        return _cross(x1, y, 7, color, 4)
    d = 1 if x2 > x1 else -1
    if kind == "DROP":
        return _line(x1, x2 - d * 5, y, color, True) + _cross(x2, y, 6, color, 3)
    out = _line(x1, x2 - d * 9, y, color, kind != "DELIVER") + _head(x2, y, d, color)
    return out + (_line(x1, x2 - d * 9, y + 5, color, True) if kind == "DUP" else "")


def _line(x1: float, x2: float, y: int, color: str, dashed: bool) -> str:
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return (f'<line x1="{x1:.0f}" y1="{y}" x2="{x2:.0f}" y2="{y}" stroke="{color}" '
            f'stroke-width="2"{dash}/>')


def _cross(x: float, y: int, r: int, color: str, width: int) -> str:
    return (f'<path d="M{x - r:.0f} {y - r}l{2 * r} {2 * r}m0 {-2 * r}l{-2 * r} {2 * r}" '
            f'stroke="{color}" stroke-width="{width}" stroke-linecap="round"/>')


def _head(x: float, y: int, d: int, color: str) -> str:
    return (f'<path d="M{x:.0f} {y}l{-d * 10} -5v10z" fill="{color}" stroke="{color}" '
            'stroke-linejoin="round"/>')


def _at(values, i, default=None):
    ok = isinstance(values, list) and isinstance(i, int) and 0 <= i < len(values)
    return values[i] if ok else default


# -- the side panel --------------------------------------------------------------------

def panel(report: dict, i: int) -> str:
    steps = report["steps"]
    step, view = steps[i], steps[i]["view"]
    prev = steps[i - 1]["view"] if i else None
    label = step.get("label")
    action = step.get("action") or {}
    body = maelstrom_body(action)
    out = [f'<section class="panel" id="panel-{i}" hidden>',
           f'<h2>State {i + 1} <span class="muted">· step {i}</span></h2>',
           f'<pre class="label">{esc(label) if label else "Initial predicate"}</pre>',
           "" if body is None else f'<pre class="body">{esc(json.dumps(body, indent=2))}</pre>',
           "<h3>Nodes after this step</h3>", nodes_table(view, prev),
           flight(view), replies(report, steps, i), operations(report, i),
           outputs(step.get("output") or {}), "</section>"]
    return "".join(out)


def nodes_table(view: dict, prev: dict | None) -> str:
    names = view.get("node_names") or []
    rows = []
    for j, name in enumerate(names):
        def cell(part, show=value):
            now = _at(view.get(part), j)
            changed = prev is not None and now != _at(prev.get(part), j)
            cls = ' class="changed" title="changed by this step"' if changed else ""
            return f"<td{cls}><code>{esc(show(now))}</code></td>"
        rows.append(f"<tr><th>{esc(name)}</th>{cell('alive', lambda a: 'yes' if a else 'NO')}"
                    f"{cell('crashes', str)}{cell('node')}{cell('durable')}</tr>")
    return ('<table class="nodes"><tr><th>node</th><th>alive</th><th>crashes</th>'
            f'<th>state</th><th>durable</th></tr>{"".join(rows)}</table>')


def flight(view: dict) -> str:
    msgs = view.get("network") or []
    items = []
    for m in msgs:
        kind = m.get("kind")
        letter = maelstrom_body(m)
        body = show_bytes(m.get("data", "")) if kind in ("DATA", "DGRAM") else kind
        if letter is not None:
            body = body_label(letter)
        items.append(f"<li><code>{esc(m.get('src'))} → {esc(m.get('dst'))} {esc(body)}</code>"
                     + ("" if letter is None else
                        f'<pre class="body">{esc(json.dumps(letter, indent=2))}</pre>')
                     + "</li>")
    inner = f'<ul class="plain">{"".join(items)}</ul>' if items else '<p class="muted">none</p>'
    return f"<h3>Messages in flight ({len(msgs)})</h3>{inner}"


def replies(report: dict, steps: list[dict], i: int) -> str:
    every = steps[i]["view"].get("replies") or []
    new = {r.get("index") for r in new_replies(steps, i)}
    items = []
    for r in every:
        badge = '<span class="new">new</span> ' if r.get("index") in new else ""
        ev = reply_event(report, r)
        body = maelstrom_body(ev)
        shown = show_bytes(ev["data"]) if body is None else body_label(body)
        rest = ", ".join(f"{k}: {value(v)}" for k, v in r.items()
                         if k not in ("client", "node", "raw", "body" if body else ""))
        items.append(f"<li>{badge}<code>{esc(r.get('client'))} ← {esc(reply_node(report, r))}"
                     f" {esc(shown)}</code>"
                     + ("" if body is None else
                        f'<pre class="body">{esc(json.dumps(body, indent=2))}</pre>')
                     + f'<div class="muted small">{esc(rest)}</div></li>')
    inner = f'<ul class="plain">{"".join(items)}</ul>' if items else '<p class="muted">none</p>'
    return f"<h3>Replies ({len(every)})</h3>{inner}"


def operations(report: dict, i: int) -> str:
    """The history's operations invoked by state i + 1, as they stood then (none when the
    report has no history)."""
    if report.get("history") is None:
        return ""
    state = i + 1
    rows = []
    for op in report["history"]:
        start, end = op.get("invoked"), op.get("completed")
        if not isinstance(start, int) or start > state:
            continue
        done = isinstance(end, int) and end <= state
        cls = ' class="bad"' if op.get("violating") else ""
        key = "" if op.get("key") is None else op.get("key")
        rows.append(f"<tr{cls}><td>{esc(op.get('client'))}</td><td>{esc(op.get('kind'))} "
                    f"<code>{esc(key)}</code></td>"
                    f"<td><code>{esc(show_bytes(str(op.get('request', ''))))}</code></td>"
                    f"<td><code>{esc(show_bytes(str(op.get('reply')))) if done else 'pending'}"
                    f"</code></td><td>{start}</td><td>{end if done else ''}</td></tr>")
    if not rows:
        return '<h3>Operations (0)</h3><p class="muted">none invoked yet</p>'
    return (f"<h3>Operations ({len(rows)})</h3><table class=\"nodes ops\"><tr><th>client</th>"
            "<th>op</th><th>request</th><th>reply</th><th>invoked</th><th>completed</th></tr>"
            f"{''.join(rows)}</table>")


def outputs(output: dict) -> str:
    out = ["<h3>What each node did in this step</h3>"]
    if not output:
        out.append('<p class="muted">No output was recorded for this step.</p>')
    for node, got in output.items():
        got = got or {}
        calls = list(got.get("calls") or [])
        out.append(f'<div class="out"><h4>{esc(node)}</h4>')
        if not calls and not got.get("stdout") and not got.get("stderr"):
            out.append('<p class="muted">no calls, no output</p>')
        for key, title in (("lost", "lost at the crash"), ("unsynced", "unsynced writes")):
            if got.get(key):
                out.append(f'<div class="small muted">{title} ({len(got[key])})</div>'
                           f'<pre class="{key}">{esc(capped(chr(10).join(got[key])))}</pre>')
        for stream in ("stdout", "stderr"):
            if got.get(stream):
                out.append(f'<div class="small muted">{stream}</div>'
                           f'<pre class="{stream}">{esc(capped(got[stream]))}</pre>')
        if calls:
            more = len(calls) - CALLS_CAP
            shown = "\n".join(calls[:CALLS_CAP]) + (f"\n… {more} more calls" if more > 0 else "")
            out.append(f'<details open><summary class="small muted">emulated calls ({len(calls)})'
                       f'</summary><pre class="calls">{esc(shown)}</pre></details>')
        out.append("</div>")
    return "".join(out)


def capped(text: str) -> str:
    more = len(text) - TEXT_CAP
    return text if more <= 0 else text[:TEXT_CAP] + f"\n… {more} more characters"


LEGEND = "".join(
    f'<span class="key"><svg width="36" height="18">{mark(kind, x1, x2, 9)}</svg>{word}</span>'
    for kind, x1, x2, word in (("DELIVER", 3, 34, "delivered"), ("DROP", 3, 27, "dropped"),
                               ("DUP", 3, 34, "duplicated"), ("FIRE", 18, 18, "timeout fired"),
                               ("CRASH", 18, 18, "crash"), ("REPLY", 3, 34, "reply")))

PAGE = page.PAGE.replace("{head_h}", str(HEAD))
CSS, JS = page.CSS, page.JS
