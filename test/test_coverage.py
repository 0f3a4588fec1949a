"""Coverage and vacuity (cmc/coverage.py, docs/cmc.md "Coverage and vacuity"): what a
search took and reached, and what never happened that the model implies should.

In process: a model file read by the language, and worlds as the kernel's views are,
handed to a Coverage as the engine hands them. Then through the real command line: a
client sent to a port nobody listens on, --strict, the banner, --json -, --junit, --out
and a closed stdout, on the counter program."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


from conftest import PROGS, ROOT, cmc, counter, counts, left_behind, run_cmc
from cmc.cli import _PipeSafe
from cmc.coverage import Coverage
from cmc.engine.model import Action, ActionKind
from cmc.lang import load_model

BIN = f"bin={PROGS}/counter"


def model(tmp_path, text: str):
    path = tmp_path / "m.model"
    path.write_text('node a = "/bin/true"\nnode b = "/bin/true"\n' + text)
    return load_model(str(path), {})


def view(node=(None, None), durable=(None, None), replies=(), history=None,
         clients=(), listening=(), spent=None):
    out = {"node": list(node), "volatile": list(node), "durable": list(durable),
           "alive": [True, True], "crashes": [0, 0], "replies": list(replies),
           "network": [], "params": {}, "node_names": ["a", "b"],
           "spent": spent or {}, "clients": list(clients), "listening": list(listening)}
    if history is not None:
        out["history"] = history
    return out


def kinds(cov: Coverage) -> list[tuple[str, str]]:
    return [(f.kind, f.message) for f in cov.findings()]


def test_a_client_that_never_connected_names_the_address(tmp_path):
    cov = Coverage(model(tmp_path, 'client c -> "127.0.0.1:7001": "x\\n"\n'
                                   'client d -> "127.0.0.1:7000": "y\\n"\n'))
    c = {"name": "c", "address": "127.0.0.1:7001", "connected": False}
    d = {"name": "d", "address": "127.0.0.1:7000", "connected": False}
    cov.world(view(clients=[c, d], listening=["127.0.0.1:7000"]), 1)
    cov.world(view(clients=[c, dict(d, connected=True)], listening=["127.0.0.1:7000"]), 2)
    assert kinds(cov) == [("client-never-connected", "client c never connected: nothing "
                           "listens at 127.0.0.1:7001 in any world")]
    refused = Coverage(model(tmp_path, 'client c -> "127.0.0.1:7001": "x\\n"\n'))
    refused.world(view(clients=[c], listening=["127.0.0.1:7001"]), 1)
    assert kinds(refused) == [("client-never-connected", "client c never connected: every "
                               "connection to 127.0.0.1:7001 was refused or never delivered")]


def test_a_node_whose_state_is_read_but_never_written(tmp_path):
    for prop in ("node[0] == null or node[1] == null", "all i in [0, 1]: node[i] == null"):
        cov = Coverage(model(tmp_path, f"invariant p: {prop}\n"))
        cov.world(view(), 1)
        cov.world(view(node=({"n": 1}, None)), 2)
        assert kinds(cov) == [("state-never-written", "node b never wrote its state (fd 3 "
                               "or fd 193), though the model reads node[...]")]
    # only node a's state is read: b need not write any (a client program, say)
    only_a = Coverage(model(tmp_path, "invariant p: node[0] == null or node[0].n >= 0\n"))
    only_a.world(view(), 1)
    only_a.world(view(node=({"n": 1}, None)), 2)
    assert kinds(only_a) == []
    unread = Coverage(model(tmp_path, "invariant p: len(replies) >= 0\n"))
    unread.world(view(), 1)
    assert kinds(unread) == []


def test_a_reply_regex_that_never_matched(tmp_path):
    text = 'client c -> "127.0.0.1:7000": "x\\n"\nreply /OK (?P<v>\\d+)/\n'
    cov = Coverage(model(tmp_path, text))
    c = {"name": "c", "address": "127.0.0.1:7000", "connected": True}
    cov.world(view(clients=[c], replies=[{"client": "c", "raw": "ok 1"}]), 2)
    assert kinds(cov) == [("reply-never-matched", "reply /OK (?P<v>\\d+)/ never matched a "
                           "reply: none of the 1 reply line that came matched (the first: "
                           "'ok 1')")]
    cov.world(view(clients=[c], replies=[{"client": "c", "raw": "OK 1"}]), 3)
    assert kinds(cov) == []
    silent = Coverage(model(tmp_path, text))
    silent.world(view(clients=[c]), 1)
    assert kinds(silent) == [("reply-never-matched", "reply /OK (?P<v>\\d+)/ never matched "
                              "a reply: no reply came in any world")]


def test_an_op_line_that_matched_no_request_and_an_empty_history(tmp_path):
    text = ('client c -> "127.0.0.1:7000": "PUT 1\\n"\nreply /(?P<val>\\d+)/\n'
            'op write /PUT (?P<val>\\d+)/\nop read /GET/\nlinearizable kv\n')
    cov = Coverage(model(tmp_path, text))
    put = {"client": "c", "index": 0, "req": "PUT 1", "invoke": 1, "invoked": 1,
           "complete": None, "completed": None, "reply": None}
    cov.world(view(history=[]), 1)
    assert kinds(cov)[-1] == ("vacuous", "linearizable kv held vacuously: its history had "
                              "no operation in any world")
    cov.world(view(history=[put]), 2)
    assert kinds(cov) == [("reply-never-matched", "reply /(?P<val>\\d+)/ never matched a "
                           "reply: no reply came in any world"),
                          ("op-never-matched", "op read /GET/ matched no request of any "
                           "world's history")]
    assert cov.data()["properties"] == [{"kind": "linearizable", "name": "kv", "checked": 2,
                                         "held_for_a_reason": 1}]


def test_an_invariant_whose_antecedent_is_never_true_held_vacuously(tmp_path):
    cov = Coverage(model(tmp_path, "invariant p: all r in replies: r.raw == \"A\" => "
                                   "r.node == 0\n"
                                   "invariant q: all i in [0, 1]: alive[i] => crashes[i] == 0\n"))
    cov.world(view(replies=[{"client": "c", "raw": "B", "node": 1}]), 1)
    cov.world(view(), 2)
    assert kinds(cov) == [("vacuous", 'invariant p held vacuously: the left side of => '
                           f'((r.raw == "A"), at {tmp_path}/m.model:3:45) was never true in '
                           "any world")]
    assert [(p["name"], p["checked"], p["held_for_a_reason"])
            for p in cov.data()["properties"]] == [("p", 2, 0), ("q", 2, 2)]
    cov.world(view(replies=[{"client": "c", "raw": "A", "node": 0}]), 3)
    assert kinds(cov) == []


def test_an_action_property_never_triggered(tmp_path):
    cov = Coverage(model(tmp_path, "action grows: all i in [0, 1]: crashes'[i] >= crashes[i]\n"
                                   "action gated: node[0] != null => node'[0] != null\n"))
    step = Action(("DELIVER", 1), ActionKind.DELIVER, "DELIVER x", {"dst": "a"})
    cov.step(step, view(), view())
    assert kinds(cov) == [("never-triggered", "action grows was never triggered: no step "
                           "changed crashes"),
                          ("never-triggered", "action gated was never triggered: the left "
                           f"side of => ((node[0] != null), at {tmp_path}/m.model:4:31) was "
                           "never true on any step")]
    after = view()
    after["crashes"] = [1, 0]
    cov.step(step, view(), after)
    assert [m for _, m in kinds(cov)] == [kinds(cov)[0][1]]     # gated: node[0] is null
    assert "action gated" in kinds(cov)[0][1]
    assert cov.steps_by_kind() == {"DELIVER": {"a": 2}}


def test_a_quiescent_property_no_world_was_quiescent_for(tmp_path):
    cov = Coverage(model(tmp_path, "quiescent done: len(replies) == 1\n"))
    cov.world(view(), 1)
    assert kinds(cov) == [("never-checked", "quiescent done was never checked: no world "
                           "was quiescent")]
    cov.quiescent(view(replies=[{"client": "c", "raw": "x"}]))
    assert kinds(cov) == []


def test_deepest_world_per_budget_spent(tmp_path):
    cov = Coverage(model(tmp_path, "budget crash 2\n"))
    for depth, spent in ((1, 0), (3, 1), (2, 0), (5, 1), (4, 2)):
        cov.world(view(spent={"crash": spent, "drop": 0}), depth)
    assert cov.data()["deepest"] == {"crash": {"0": 2, "1": 5, "2": 4}}
    assert "  Budget crash: deepest world with 0 spent at depth 2, 1 spent at depth 5, " \
           "2 spent at depth 4." in cov.lines()


# -- through the command line -------------------------------------------------------------

def test_a_client_sent_where_nothing_listens_warns_and_strict_fails(tmp_path):
    path = counter(tmp_path, 'client c -> "127.0.0.1:7001": "z\\n"\n')
    r = cmc(tmp_path, path, "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (34, 18, 6)
    assert "Warning: client c never connected: nothing listens at 127.0.0.1:7001 in any " \
           "world.\n" in r.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["verdict"] == "ok" and data["findings"] == [
        {"kind": "client-never-connected",
         "message": "client c never connected: nothing listens at 127.0.0.1:7001 in any world"}]
    r = cmc(tmp_path, path, "--strict", "--json", "-")
    assert r.returncode == 1, r.stdout + r.stderr
    data = json.loads(r.stdout)                       # the report alone on stdout
    assert (data["verdict"], data["exit_status"]) == ("vacuous", 1)
    assert data["coverage"]["steps"] == {"DELIVER": {"127.0.0.1:7001": 9, "counter": 24}}
    assert "Error: client c never connected: nothing listens at 127.0.0.1:7001 in any " \
           "world.\n" in r.stderr                     # the text on stderr


def test_junit_report_a_test_case_per_property(tmp_path):
    path = counter(tmp_path, "invariant at_most_one: node[0].count <= 1\n")
    r = cmc(tmp_path, path, "--junit", tmp_path / "r.xml")
    assert r.returncode == 1, r.stdout + r.stderr
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.tag == "testsuites"
    (suite,) = root
    for attr in ("name", "tests", "failures", "errors", "skipped", "time", "timestamp",
                 "hostname"):
        assert suite.get(attr) is not None, attr
    assert [c.tag for c in suite][0] == "properties"
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("counter.model", "invariant count_in_range"), ("counter.model", "invariant at_most_one")]
    assert [c[0].tag for c in cases] == ["skipped", "failure"]
    failure = cases[1].find("failure")
    assert failure.get("message") == "Error: Invariant at_most_one is violated."
    assert "State 1: <Initial predicate>" in failure.text
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("2", "1", "1")
    r = cmc(tmp_path, counter(tmp_path, name="ok.model"), "--junit", tmp_path / "ok.xml")
    (suite,) = ET.parse(tmp_path / "ok.xml").getroot()
    assert r.returncode == 0 and suite.get("failures") == "0"
    assert [c.get("name") for c in suite.findall("testcase")] == ["invariant count_in_range"]
    assert all(len(c) == 0 for c in suite.findall("testcase"))     # passed


def test_out_keeps_the_run_and_a_latest_link(tmp_path):
    path = counter(tmp_path, "invariant at_most_one: node[0].count <= 1\n")
    r = cmc(tmp_path, path, "--out", tmp_path / "store")
    assert r.returncode == 1, r.stdout + r.stderr
    base = tmp_path / "store" / "counter"
    (run,) = [p for p in base.iterdir() if p.name != "latest"]
    assert os.readlink(base / "latest") == run.name
    assert sorted(p.name for p in run.iterdir()) == ["counter.trace.json", "nodes",
                                                    "report.html", "report.json"]
    assert json.loads((run / "report.json").read_text())["verdict"] == "violated"
    assert sorted(p.name for p in (run / "nodes").iterdir()) == ["counter.stderr",
                                                                 "counter.stdout"]
    assert not (tmp_path / "counter.trace.json").exists()
    r = cmc(tmp_path, path, "--out", tmp_path / "store")
    assert r.returncode == 1, r.stdout + r.stderr
    runs = sorted(p.name for p in base.iterdir() if p.name != "latest")
    assert len(runs) == 2 and os.readlink(base / "latest") == runs[-1] != run.name


def test_a_closed_stdout_ends_quietly_with_the_verdicts_status(tmp_path):
    """`cmc --model-file models/durlog.model | head -1`: the first line, then the run goes
    on to its verdict (exit 0), with no traceback and no node left; a violation is still
    exit 1."""
    bad = counter(tmp_path, "invariant at_most_one: node[0].count <= 1\n")
    for args, expect in ((["--model-file", str(ROOT / "models" / "durlog.model")], 0),
                         (["--model-file", str(bad), "-D", BIN], 1)):
        p = subprocess.Popen([sys.executable, "-m", "cmc", *args], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first = p.stdout.readline()
        p.stdout.close()                         # `| head -1`
        err = p.stderr.read().decode()
        assert p.wait(timeout=300) == expect, err
        assert first.startswith(b"cmc ") and err == ""
    assert left_behind(f"{ROOT}/demo/build/durlog", at_start=True) == []
    assert left_behind(f"{PROGS}/counter", at_start=True) == []


def test_a_broken_pipe_is_dropped_from_then_on():
    """_PipeSafe over a real pipe whose reader is gone: the write that fails and every
    one after it are dropped, the descriptor now /dev/null."""
    r, w = os.pipe()
    os.close(r)
    stream = os.fdopen(w, "w")
    safe = _PipeSafe(stream)
    safe.write("x" * 10)
    safe.flush()                                 # EPIPE: SIGPIPE is ignored by Python
    assert safe.gone
    assert os.path.realpath(f"/proc/self/fd/{w}") == "/dev/null"
    assert safe.write("more") == 4
    safe.flush()
    stream.close()


def test_help_names_the_ci_options():
    r = run_cmc("--help")
    for option in ("--junit REPORT.xml", "--out DIR", "--coverage", "--strict"):
        assert option in r.stdout
    assert ROOT.exists()


def test_new_worlds_are_counted_by_what_produced_them(tmp_path):
    """The world found just after a step is that step's: by kind, node, channel and the
    depth stepped from; a step into a world already seen produces none."""
    cov = Coverage(model(tmp_path, ""))
    cov.world(view(), 1)                                       # the initial world
    deliver = Action(("D",), ActionKind.DELIVER, "DELIVER", {"src": "a", "dst": "b"})
    crash = Action(("C",), ActionKind.CRASH, "CRASH a", {"node": "a"})
    cov.step(deliver, view(), view())
    cov.world(view(), 2)
    cov.step(crash, view(), view())                            # back to a world seen
    cov.step(crash, view(), view())
    cov.world(view(), 3)
    assert cov.origins() == {"kind": {"DELIVER": 1, "CRASH": 1}, "node": {"a": 1, "b": 1},
                             "channel": {"a -> b": 1}, "depth": {"1": 1, "2": 1}}
    assert cov.steps_by_kind() == {"DELIVER": {"b": 1}, "CRASH": {"a": 2}}
    assert "  New worlds by channel: a -> b 1." in cov.lines(whole=True)


def test_coverage_is_the_same_with_two_workers(tmp_path):
    path = counter(tmp_path)
    one = cmc(tmp_path, path, "--json", tmp_path / "1.json", "--coverage")
    two = cmc(tmp_path, path, "--json", tmp_path / "2.json", "--coverage", "--workers", "2")
    assert one.returncode == two.returncode == 0, one.stdout + two.stdout
    first = json.loads((tmp_path / "1.json").read_text())["coverage"]
    assert first == json.loads((tmp_path / "2.json").read_text())["coverage"]
    assert first["new_worlds_from"] == {"kind": {"DELIVER": 8}, "node": {"counter": 8},
                                        "channel": {"b -> counter": 6, "a -> counter": 2},
                                        "depth": {"1": 2, "2": 3, "3": 2, "4": 1}}
