"""The kinds of property are one enum, cmc/engine/model.py's PropertyKind: each carries
when it is checked, whether a world must reach it (a witness), TLC's words for its
violation and TLC's exit status for it. Nothing else in cmc keys a table by the model
file's words; trace files and the JSON report still carry those words, so traces
written before load and replay as they did."""
from __future__ import annotations

import ast
import json
import pathlib
from types import SimpleNamespace

import pytest

from cmc.cli import EXIT_VIOLATION, tlc_status
from cmc.engine.model import Checked, Outcome, Property, PropertyKind, Stats, Step
from cmc.report.json import report
from cmc.report.tlc import violation_lines
from cmc.report.trace import conflicts, read_trace, write_trace

ROOT = pathlib.Path(__file__).resolve().parent.parent

# What the four tables said before the enum (cli.TLC_VIOLATION, model.INVARIANT_KINDS,
# search.py's sorting, report/tlc.KIND_WORDING): word, when checked, reached, wording,
# TLC status.
KINDS = [
    ("invariant", Checked.STATE, False, "Error: Invariant p is violated.", 12),
    ("linearizable", Checked.STATE, False, "Error: Linearizability property p is violated.", 12),
    ("transactional", Checked.STATE, False, "Error: Transactional property p is violated.", 12),
    ("witness", Checked.STATE, True, "Error: Witness p was never reached.", 255),
    ("action", Checked.TRANSITION, False, "Error: Action property p is violated.", 13),
    ("quiescent", Checked.QUIESCENCE, False, "Error: Quiescent property p is violated.", 12),
    ("eventually", Checked.LIVENESS, False, "Error: Temporal property p was violated.", 13),
]


@pytest.mark.parametrize("word, checked, reached, wording, status", KINDS,
                         ids=[k[0] for k in KINDS])
def test_each_kind_carries_what_the_tables_said(word, checked, reached, wording, status):
    kind = PropertyKind(word)
    assert (kind.value, str(kind), kind.checked, kind.reached) == (word, word, checked, reached)
    assert kind.violated("p") == wording
    assert tlc_status(EXIT_VIOLATION, kind) == status
    assert f"{kind} p" == f"{word} p"          # as the reports print it


def test_every_kind_is_listed_once():
    assert [k[0] for k in KINDS] == [k.value for k in PropertyKind]


def test_a_property_takes_the_model_files_word_and_no_other():
    assert Property("witness", "w", None).kind is PropertyKind.WITNESS
    assert Property(PropertyKind.ACTION, "a", None).kind is PropertyKind.ACTION
    with pytest.raises(ValueError):
        Property("safety", "s", None)


def test_tlc_status_without_a_violation():
    assert tlc_status(0) == 0
    assert tlc_status(EXIT_VIOLATION) == 255


def test_no_table_keyed_by_the_kinds_words_outside_the_enum():
    """The model file's words (but `action`, which is also an action's field in a report)
    stand only in the enum and in the language that parses them."""
    words = {k.value for k in PropertyKind} - {"action"}
    found = []
    for path in sorted((ROOT / "cmc").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] in ("lang", "kernel") or rel == pathlib.Path("cmc/engine/model.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in words:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert found == []


def world(log: list) -> dict:
    """A world's view as the kernel gives it (what the reporters render)."""
    return {"node": [{"log": log}], "volatile": [None], "durable": [None], "alive": [True],
            "crashes": [0], "replies": [], "network": [], "node_names": ["n1"], "params": {}}


def violated(kind: str) -> Outcome:
    prop = Property(kind, "p", lambda v, n: False)
    step = SimpleNamespace(key=("DELIVER", 1), label="DELIVER a", fields=None)
    trace = [Step(None, world([]), b"a"), Step(step, world([1]), b"b")]
    return Outcome("violated", Stats(generated=2, distinct=2, depth=2), prop, trace,
                   suffix_from=1 if kind == "eventually" else None)


MODEL = SimpleNamespace(path="/m.model", params={}, budgets={}, network="fifo",
                        properties=[SimpleNamespace(kind="eventually", name="p")])


def test_a_trace_file_carries_the_word_and_reads_back(tmp_path):
    path = tmp_path / "t.json"
    write_trace(str(path), MODEL, violated("eventually"), "bfs", 100, 64)
    data = json.loads(path.read_text())
    assert data["property"] == {"kind": "eventually", "name": "p"}
    trace = read_trace(str(path))
    assert conflicts(trace, MODEL, 100, None) == []
    assert conflicts(trace, MODEL, 50, None) == [
        "the trace was written with --live-steps 100, not 50"]


def test_a_trace_written_before_the_enum_loads(tmp_path):
    """A trace as cmc wrote it before: its kind is the word, read as it was."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({
        "cmc_trace": 1, "model": "/m.model", "params": {}, "budgets": {},
        "network": "fifo", "live_steps": 100, "channel_cap": 64, "mode": "bfs",
        "property": {"kind": "invariant", "name": "p"}, "suffix_from": None,
        "loop_to": None, "why": None, "walk_seed": None,
        "actions": [{"key": ["DELIVER", 1], "label": "DELIVER a"}]}))
    trace = read_trace(str(path))
    assert trace["property"] == {"kind": "invariant", "name": "p"}
    assert trace["keys"] == [("DELIVER", 1)]
    model = SimpleNamespace(**{**vars(MODEL), "properties": [
        SimpleNamespace(kind="invariant", name="p")]})
    assert conflicts(trace, model, None, None) == []


def test_a_trace_of_an_unknown_kind_is_refused(tmp_path):
    path = tmp_path / "t.json"
    write_trace(str(path), MODEL, violated("eventually"), "bfs", 100, 64)
    data = json.loads(path.read_text())
    data["property"]["kind"] = "safety"
    path.write_text(json.dumps(data))
    with pytest.raises(Exception, match="property kind 'safety' is none of cmc's"):
        read_trace(str(path))


@pytest.mark.parametrize("word", [k[0] for k in KINDS])
def test_the_reports_say_the_word_and_tlcs_wording(word):
    outcome = violated(word)
    lines = violation_lines(outcome, 100)
    assert lines[0] == PropertyKind(word).violated("p")
    live = word == "eventually"
    assert lines[1] == ("Error: The following behavior constitutes a counter-example:"
                        if live else "Error: The behavior up to this point is:")
    data = report(mode="bfs", exit_status=EXIT_VIOLATION, elapsed=1.0, outcome=outcome)
    assert data["property"] == {"kind": word, "name": "p"}
    assert data["message"] == PropertyKind(word).violated("p")
    json.dumps(data)
