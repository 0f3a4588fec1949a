"""The HTML report (a counterexample as a message-sequence chart) and the live
progress display. The HTML is checked on a hand-made report (escaping, every mark,
nothing fetched) and, in a real headless Chromium, on the durlog-bug counterexample
produced by running the real program."""
from __future__ import annotations

import html
import html.parser
import json
import io
import os
import re
import tempfile
import time

import pytest

from browser import CHROMIUM, Browser
from conftest import MODELS
from cmc.engine.model import Action as EngineAction
from cmc.engine.model import ActionKind, Outcome, Property, Stats, Step
from cmc.kernel.world.actions import Crash, Fire, MessageAction, ResetChannel
from cmc.kernel.world.net import quote
from cmc.report import tlc
from cmc.report.console import LiveReporter, make_reporter
from cmc.report.html import render, report_from_trace, write_html

HOSTILE = "<script>alert(1)</script> & \"quotes\" 'q' \x1b[31mred\x1b[0m"


def world(log1=(), alive2=True, replies=(), network=()):
    return {"node": [{"log": list(log1)}, {"log": []}], "volatile": [None, None],
            "durable": [None, {"d": "</td><b>"}], "alive": [True, alive2], "crashes": [0, 0],
            "replies": list(replies), "network": list(network), "node_names": ["n1", "n2"],
            "params": {"bin": "./prog"}}


def handmade() -> dict:
    ack = {"client": "c1", "node": 1, "index": 0, "req": "GET", "raw": "<b>ACK</b>", "val": 1}
    actions = [None,
               {"kind": "DELIVER", "src": "c1", "dst": "n1", "msg": "DATA",
                "data": "GET </pre><img src=x onerror=alert(1)>\n"},
               {"kind": "DROP", "src": "n1", "dst": "n2", "msg": None, "data": None},
               {"kind": "DUP", "src": "n1", "dst": "n2", "msg": "DATA", "data": "x"},
               {"kind": "FIRE", "node": "n2", "what": "nanosleep 0.1s"},
               {"kind": "CRASH", "node": "n1"},
               {"kind": "DELIVER", "src": "n1", "dst": "10.0.0.9:53", "msg": "DATA",
                "data": "y" * 300}]
    labels = [None,
              'DELIVER c1 -> n1 "GET </pre><img src=x onerror=alert(1)>\\n"',
              "DROP n1 -> n2",
              'DUP n1 -> n2 "x"',
              "FIRE n2 nanosleep 0.1s",
              "CRASH n1",
              'DELIVER n1 -> 10.0.0.9:53 "' + "y" * 300 + '"']
    steps = [{"label": lab, "action": act,
              "view": world(alive2=i != 4, replies=[ack] if i >= 5 else [],
                            network=[{"src": "n1", "dst": "n2", "kind": "DATA",
                                      "data": "<i>in flight</i>"}]),
              "output": {"n1": {"stdout": HOSTILE, "stderr": "warn <u>", "calls": [
                  f'sendto(5, 0x1, 6, 0, NULL, 0) = 6  "<step {i}>"']}, "n2": {}}}
             for i, (lab, act) in enumerate(zip(labels, actions))]
    return {"model": "hand<made>.model", "property": {"kind": "invariant", "name": "safe"},
            "verdict": "violated", "message": "Error: Invariant safe is violated.",
            "nodes": ["n1", "n2"], "clients": ["c1"], "steps": steps}


class Tags(html.parser.HTMLParser):
    """Every tag of a page, with its attributes, as a browser's parser sees them."""

    def __init__(self, page: str):
        super().__init__()
        self.tags = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def rows(page: str) -> list[str]:
    """The chart's rows, one string of markup per state."""
    chart = re.search(r'<svg id="chart".*?</svg>', page, re.S).group()
    return chart.split('<g class="step')[1:]


# -- html.py on a hand-made report -------------------------------------------------------

def test_every_mark_kind_is_drawn_in_its_row():
    page = render(handmade())
    chart = rows(page)
    assert len(chart) == 7
    expected = [[], ["DELIVER"], ["DROP"], ["DUP"], ["FIRE"], ["CRASH", "REPLY"], ["DELIVER"]]
    for i, kinds in enumerate(expected):
        assert sorted(re.findall(r'class="ev e-(\w+)"', chart[i])) == sorted(kinds), i
    assert "connection reset" in chart[2]          # a FIFO drop has no bytes to show
    assert "×2" in chart[3]
    assert ">nanosleep 0.1s</text>" in chart[4]
    assert "crash, restarted" in chart[5] and "&quot;&lt;b&gt;ACK&lt;/b&gt;&quot;" in chart[5]
    assert 'class="life dead"' in chart[4] and 'class="life dead"' not in chart[3]
    assert "✗ violated here" in chart[6]
    # an endpoint the model does not name gets a lifeline of its own
    assert re.search(r'<g class="who other">.*?10\.0\.0\.9:53', page)


def test_untrusted_text_is_escaped():
    page = render(handmade())
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img" not in page and "</pre><img" not in page
    assert "<b>ACK" not in page and "<i>in flight" not in page and "</td><b>" not in page
    assert "&lt;step 5&gt;" in page and "hand&lt;made&gt;.model" in page
    assert "\x1b" not in page and "\\x1b[31mred" in page       # control characters shown
    assert [t for t, _ in Tags(page).tags].count("script") == 1  # only the page's own


def test_page_is_self_contained():
    page = render(handmade())
    assert "http://" not in page and "https://" not in page
    for tag, attrs in Tags(page).tags:
        assert tag not in ("link", "img", "iframe", "object", "embed", "base"), tag
        assert not {"src", "href", "xlink:href", "srcset", "action"} & set(attrs), (tag, attrs)
        assert "url(" not in attrs.get("style", "")
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    assert "url(" not in style and "@import" not in style and "@font-face" not in style


def test_long_message_is_truncated_on_the_arrow_and_whole_in_its_tooltip():
    last = rows(render(handmade()))[6]
    shown = re.search(r'<text class="msg"[^>]*>([^<]*)</text>', last).group(1)
    assert shown.endswith("…") and len(shown) < 100     # of 302 characters
    assert "&quot;" + "y" * 300 + "&quot;</title>" in last     # whole in the tooltip


def test_side_panel_of_each_step():
    page = render(handmade())
    crash = re.search(r'<section class="panel" id="panel-5" hidden>(.*?)</section>', page, re.S)
    text = crash.group(1)
    assert '<pre class="label">CRASH n1</pre>' in text
    assert '<span class="new">new</span> <code>c1 ← n2 &quot;&lt;b&gt;ACK&lt;/b&gt;&quot;' in text
    assert "n1 → n2 &quot;&lt;i&gt;in flight&lt;/i&gt;&quot;" in text
    assert '<pre class="stderr">warn &lt;u&gt;</pre>' in text
    assert "no calls, no output" in text            # n2 did nothing
    assert 'id="panel-0" hidden><h2>State 1' in page and "Initial predicate" in page
    assert page.count('<section class="panel"') == 7


def test_actions_render_their_labels_from_fields():
    """The kernel's action is fields; its label and the report's record come from them
    (no reporter parses a label)."""
    raw = b'PUT 7\n\r\t"\\ \x00\x7f caf\xc3\xa9 \xff'
    deliver = MessageAction("DELIVER", (), 0, 0, "alice", "primary", "DATA", raw)
    assert deliver.label == "DELIVER alice -> primary " + quote(raw)
    assert deliver.fields() == {"kind": "DELIVER", "src": "alice", "dst": "primary",
                                "data": raw.decode("utf-8", "replace"), "msg": "DATA"}
    connect = MessageAction("DELIVER", (), 0, 0, "primary", "backup", "CONNECT")
    assert connect.label == "DELIVER primary -> backup CONNECT"
    assert connect.fields()["msg"] == connect.fields()["data"] == "CONNECT"
    drop = ResetChannel((), "primary", "backup")
    assert drop.label == "DROP primary -> backup"
    assert drop.fields() == {"kind": "DROP", "src": "primary", "dst": "backup",
                             "data": None, "msg": None}
    fire = Fire(0, "primary", "nanosleep", 10**8)
    assert fire.label == "FIRE primary nanosleep 0.1s"
    assert fire.fields() == {"kind": "FIRE", "node": "primary", "what": "nanosleep 0.1s"}
    crash = Crash(0, "primary")
    assert crash.label == "CRASH primary" and crash.fields() == {"kind": "CRASH",
                                                               "node": "primary"}


def test_actions_of_a_real_run_carry_fields(tmp_path):
    report = durlog_bug_report(str(tmp_path))
    shown = [(s["label"], s["action"]) for s in report["steps"][1:]]
    assert [label for label, _ in shown] == DURLOG_BUG
    for label, action in shown:
        kind, _, rest = label.partition(" ")
        assert action["kind"] == kind
        if kind in ("FIRE", "CRASH"):
            assert rest.startswith(action["node"] + " ") or rest == action["node"]
        else:
            assert rest.startswith(f"{action['src']} -> {action['dst']}")


def test_report_from_trace_and_write_html(tmp_path):
    views = [world(), world(log1=[7])]
    put = MessageAction("DELIVER", (), 0, 0, "c1", "n1", "DATA", b"PUT 7\n")
    steps = [Step(None, views[0], None, {"n1": {"stdout": "up\n"}}),
             Step(EngineAction(put.key, ActionKind.DELIVER, put.label, put.fields()),
                  views[1], None, None)]
    report = report_from_trace(model="m.model", prop_kind="invariant", prop_name="safe",
                               message="Error: Invariant safe is violated.", steps=steps,
                               clients=["c1"])
    assert report["nodes"] == ["n1", "n2"] and report["steps"][1]["action"]["data"] == "PUT 7\n"
    assert report["steps"][1]["output"] == {}
    path = tmp_path / "r.html"
    write_html(str(path), report)
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Error: Invariant safe is violated." in page
    assert 'class="changed"' in page                # n1's log changed in step 1
    empty = render(dict(report, steps=[]))
    assert "The behavior is empty" in empty


# -- the live display -----------------------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self):
        return True


def outcome(verdict="violated") -> Outcome:
    stats = Stats(generated=191, distinct=104, queue=63, depth=5)
    view = world()
    prop = Property("invariant", "safe", lambda v, n: True)
    trace = [Step(None, view),
             Step(EngineAction(("CRASH", 0), ActionKind.CRASH, "CRASH n1"), view)]
    if verdict == "ok":
        trace = []
    return Outcome(verdict, stats, prop if trace else None, trace)


def run_reporter(reporter, result: Outcome) -> str:
    reporter.start()
    stats = Stats(generated=1, distinct=1, queue=1, depth=1)
    reporter.initial(stats)
    for i in range(2000):
        stats.generated, stats.distinct, stats.depth = i, i // 2, i // 400
        reporter.progress(stats)
    reporter.say("a line said while searching")
    reporter.finish(result)
    return reporter.out.getvalue()


def test_make_reporter_chooses_by_terminal(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    assert type(make_reporter(io.StringIO())) is tlc.TlcReporter
    assert type(make_reporter(Terminal())) is LiveReporter
    monkeypatch.setenv("TERM", "dumb")
    assert type(make_reporter(Terminal())) is tlc.TlcReporter


@pytest.mark.parametrize("verdict", ["ok", "violated"])
def test_live_display_leaves_exactly_tlc_lines(monkeypatch, verdict):
    monkeypatch.setattr(tlc, "stamp", lambda t=None: "2026-11-30 08:38:16")
    plain = run_reporter(tlc.TlcReporter(io.StringIO()), outcome(verdict))
    live = run_reporter(LiveReporter(Terminal()), outcome(verdict))
    first = "Model checking completed." if verdict == "ok" else "Error: Invariant safe"
    tail = plain[plain.index(first):]
    assert live.endswith(tail) and "\x1b" not in tail
    head = plain[:plain.index("a line said")]
    assert live.startswith(head)                     # the lines before the display, too
    assert "a line said while searching\n" in live
    assert "distinct states" in live and "Progress(" not in live


def test_live_display_shows_the_counts_and_refreshes_at_most_4_times_a_second(monkeypatch):
    # a terminal that can redraw (under TERM=dumb cmc picks the plain reporter, and
    # rich would not redraw either)
    monkeypatch.setenv("TERM", "xterm-256color")
    reporter = LiveReporter(Terminal())
    reporter.start()
    reporter.initial(Stats(generated=1, distinct=1, queue=1, depth=1))
    began = time.monotonic()
    for i in range(20000):       # as fast as an engine calls it: progress() never draws
        reporter.progress(Stats(generated=191, distinct=104, queue=63, depth=5))
    time.sleep(0.6)
    elapsed = time.monotonic() - began
    reporter.close()
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", reporter.out.getvalue())
    frames = shown.count("distinct states")
    assert 1 <= frames <= 2 + 4 * elapsed
    assert re.search(r"104\s+191\s+63\s+5\s", shown)
    reporter.say("after")                           # closed: plain lines again
    assert reporter.out.getvalue().endswith("\x1b[2Kafter\n")


# -- the real browser, on the real counterexample ---------------------------------------------

DURLOG_BUG = ['DELIVER primary -> backup CONNECT', 'DELIVER alice -> primary CONNECT',
              'DELIVER alice -> primary "PUT 7\\n"', 'CRASH primary']


def durlog_bug_report(workdir: str) -> dict:
    """Run durlog-bug's counterexample on the real program, collecting each step's
    world and each node's calls and output, as `cmc --replay` does."""
    from cmc.adapter import engine_action
    from cmc.check import spec_for
    from cmc.cli import parse_args
    from cmc.kernel.cluster import Cluster
    from cmc.lang import load_model
    model_file, params = str(MODELS / "durlog.model"), {"bin": "../demo/build/durlog-bug"}
    model = load_model(model_file, params)
    args = parse_args(["--model-file", model_file, "-D", "bin=../demo/build/durlog-bug"])
    cluster = Cluster(spec_for(model, args), workdir)
    cluster.recording = True
    try:
        cluster.launch()
        steps = [Step(None, cluster.view(), None, cluster.drain())]
        for label in DURLOG_BUG:
            action = next(a for a in cluster.actions() if a.label == label)
            taken = engine_action(cluster.apply(action.key))
            steps.append(Step(taken, cluster.view(), None, cluster.drain()))
    finally:
        cluster.close()
    return report_from_trace(model="durlog.model", prop_kind="invariant",
                             prop_name="no_lost_commit",
                             message="Error: Invariant no_lost_commit is violated.",
                             steps=steps, clients=[c.name for c in model.clients])


SHOWN = "document.querySelector('.panel:not([hidden])')"


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no headless browser: {CHROMIUM} is "
                    "missing (Debian: apt-get install chromium)")
def test_report_in_a_real_browser(tmp_path):
    page = tmp_path / "durlog-bug.html"
    with tempfile.TemporaryDirectory(prefix="cmc-") as work:
        write_html(str(page), durlog_bug_report(work))
    url = page.as_uri()
    with Browser() as b:
        b.open(url + "#step=1")                      # the URL selects a step
        assert b.eval(f"{SHOWN}.id") == "panel-1"
        assert "DELIVER primary -> backup CONNECT" in b.eval(f"{SHOWN}.innerText")

        b.click("#row-4 .e-CRASH")                   # the red X of the CRASH step
        assert b.eval("location.hash") == "#step=4"
        text = b.eval(f"{SHOWN}.innerText")
        assert "CRASH primary" in text and 'alice ← primary "ACK 7"' in text
        primary = b.eval(f"{SHOWN}.querySelector('table.nodes tr:nth-child(2)').innerText")
        assert primary.split("\t") == ["primary", "yes", "1", '{"role": "primary", "log": []}',
                                       "null"]
        if os.environ.get("CMC_SCREENSHOT"):         # docs/report.md: how to refresh it
            b.screenshot(os.environ["CMC_SCREENSHOT"])

        b.click("#row-3 .e-DELIVER .msg")             # the "PUT 7\n" arrow's label
        assert b.eval(f"{SHOWN}.id") == "panel-3"
        outputs = b.eval(f"[...{SHOWN}.querySelectorAll('.out')].map(e => e.innerText)")
        primary_out = next(o for o in outputs if o.startswith("primary"))
        assert "primary: acked 7" in primary_out
        assert any("sendto(" in line and '"ACK 7\\n"' in line
                   for line in primary_out.splitlines())

        b.key("ArrowUp", 38)                         # the keyboard moves between steps
        assert b.eval("location.hash") == "#step=2"
        assert b.eval("document.querySelector('.step.sel').id") == "row-2"
        b.key("ArrowDown", 40)
        b.key("ArrowDown", 40)
        assert b.eval(f"{SHOWN}.id") == "panel-4"
        assert all(u.startswith("file://") for u in b.requests()), b.requests()

        shot = tmp_path / "shot.png"
        b.screenshot(str(shot))
        assert shot.read_bytes().startswith(b"\x89PNG")


def test_cli_html_option_draws_the_counterexample(tmp_path):
    """--html on a search that finds a violation, and on --replay of its trace."""
    from conftest import MODELS, run_cmc
    page, trace = tmp_path / "r.html", tmp_path / "t.json"
    r = run_cmc("--model-file", MODELS / "durlog.model", "-D", "bin=../demo/build/durlog-bug",
                "--trace-out", trace, "--html", page, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"The counterexample was drawn in {page}." in r.stdout
    html = page.read_text()
    assert "CRASH primary" in html and "primary: acked 7" in html and "sendto(" in html
    again = tmp_path / "again.html"
    r = run_cmc("--replay", trace, "-D", "bin=../demo/build/durlog-bug", "--html", again,
                cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "primary: acked 7" in again.read_text()


def test_maelstrom_messages_by_their_body():
    """A Maelstrom run's page: a letter's arrow says its body's type and fields (not the
    escaped envelope), its tooltip and the panel the body as indented JSON; a reply is
    named by its body's type; the Maelstrom clients head their lifelines as clients and
    a service as a service."""
    gossip = {"src": "n1", "dest": "n2", "body": {"type": "gossip", "message": 1, "msg_id": 4}}
    letter = json.dumps(gossip)
    ack = {"client": "c1", "node": 0, "index": 0, "req": {"type": "broadcast", "message": 1},
           "body": {"type": "broadcast_ok", "in_reply_to": 1}}
    view = dict(world(replies=[ack]), network=[
        {"src": "n1", "dst": "n2", "kind": "MSG", "data": letter, "body": gossip["body"]}])
    steps = [{"label": None, "action": None, "view": world(), "output": {}},
             {"label": 'DELIVER n1 -> n2 {"type":"gossip","message":1,"msg_id":4}',
              "action": {"kind": "DELIVER", "src": "n1", "dst": "n2", "data": letter,
                         "msg": "MSG"}, "view": view, "output": {}}]
    page = render({"model": "b.model", "property": {"kind": "invariant", "name": "p"},
                   "verdict": "violated", "message": "m", "nodes": ["n1", "n2"],
                   "clients": ["c1"], "services": ["seq-kv"], "steps": steps})
    row = rows(page)[1]
    assert re.search(r'>gossip {&quot;message&quot;:1,&quot;m[^<]*</text>', row)
    assert "broadcast_ok {&quot;in_reply_to&quot;:1}</text>" in row
    assert "&quot;src&quot;" not in row                     # no envelope on the arrow
    assert html.unescape(re.search(r"<title>DELIVER (.*?)</title>", row, re.S).group(1)) == \
        json.dumps(gossip["body"], indent=2)
    assert re.findall(r'class="role" x="[0-9.]+" y="50">([^<]*)<', page) == [
        "node", "node", "client", "service"]
    assert html.escape(json.dumps(ack["body"], indent=2), quote=True) in page
