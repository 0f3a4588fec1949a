"""Histories: `op` lines and `linearizable` properties, their load-time errors, and the
history of a world checked for linearizability.

Fast: no process is started. Model files are written to tmp_path.
"""
from __future__ import annotations

import re

import pytest

from cmc.lang.history import history_rows, history_violations
from langutil import HISTORY_EXAMPLE, assert_at, failure, load

# --- histories: op lines and linearizable (docs/model-file.md, "Histories") ---------------

def test_op_lines_and_linearizable(tmp_path):
    model = load(tmp_path, HISTORY_EXAMPLE)
    lines = HISTORY_EXAMPLE.split("\n")
    assert [(op.kind, op.regex.pattern, op.loc.line, op.loc.col) for op in model.ops] == [
        ("write", r"SET (?P<key>\S+) (?P<val>\S+)", 5, 4), ("read", r"GET (?P<key>\S+)", 6, 4)]
    assert model.ops[0].loc.source_line == lines[4]
    (prop,) = model.properties
    assert (prop.kind, prop.name, prop.expr, prop.loc.line, prop.loc.col) == \
        ("linearizable", "kv_is_linearizable", None, 7, 14)


def test_op_and_linearizable_are_names_elsewhere(tmp_path):
    model = load(tmp_path, 'node op = "/x"\nnode linearizable = "/y"\nop read /GET/\n'
                 'invariant read: len(replies) >= 0\n')
    assert model.node_names == ("op", "linearizable") and model.ops[0].kind == "read"


def test_op_lines_without_linearizable_are_allowed(tmp_path):
    assert load(tmp_path, 'node a = "/x"\nop write /SET (?P<val>.)/\n').properties == ()


@pytest.mark.parametrize("text, line, col, message", [
    ('op delete /DEL/\n', 2, 4, "unknown op kind delete: an op line is  op read /REGEX/  or  "
                                "op write /REGEX/"),
    ('op writ /SET (?P<val>.)/\n', 2, 4, re.compile(r"^unknown op kind writ \(did you mean "
                                                    r"write\?\)")),
    ('op write /SET (?P<key>\\S+)/\n', 2, 10, "a write's regex needs a group named val, the "
     r"value written, as in /SET (?P<key>\S+) (?P<val>\S+)/"),
    ('reply /V (?P<val>.)/\nop read /GET (?P<val>.)/\n', 3, 14, "a read's value is the val "
     "field of its reply (the reply line's group val), not a group of its request: rename "
     "this group"),
    ('op read GET\n', 2, 9, "unexpected name GET; expected a regex between slashes (/.../)"),
    ('op read /GET\n', 2, 9, "unterminated regex: it needs a closing / (write a / inside it as \\/)"),
    ('op read /GET (/\n', 2, 14, "bad regex: missing ), unterminated subpattern"),
    ('op\n', 2, 3, "unexpected end of line; expected a name"),
    ('op read\n', 2, 8, "unexpected end of line; expected a regex between slashes (/.../)"),
    ('op read /GET/ x\n', 2, 15, "unexpected name x; expected the end of the line"),
    ('linearizable\n', 2, 13, "unexpected end of line; expected a name"),
    ('linearizable lin: true\n', 2, 17, "unexpected ':'; expected the end of the line"),
    ('linearizable lin\n', 2, 14, "linearizable lin checks the history of the requests that op "
     "lines classify, and this model has none: add lines like  op write /SET (?P<key>\\S+) "
     "(?P<val>\\S+)/  and  op read /GET (?P<key>\\S+)/"),
    ('op read /GET/\nlinearizable lin\n', 2, 4, "a read's value is the val field of its reply "
     "record, and this model has no reply line: add one, as in  reply /VALUE (?P<val>\\S+)/"),
    ('reply /OK/\nop read /GET/\nlinearizable lin\n', 3, 4, "a read's value is the val field "
     "of its reply record, and the reply line's regex has no group val: add one, as in  reply "
     "/VALUE (?P<val>\\S+)/"),
    ('reply /V (?P<val>.)/\nop read /GET/\nlinearizable lin\nwitness lin: true\n', 5, 9,
     "property lin is declared twice (the first is at line 4)"),
])
def test_op_and_linearizable_errors(tmp_path, text, line, col, message):
    assert_at(failure(tmp_path, 'node a = "/x"\n' + text), line, col, message)


def _view(history, replies):
    return {"history": history, "replies": replies}


def _entry(client, req, invoke, complete=None, reply=None):
    return {"client": client, "index": 0, "req": req, "invoke": invoke,
            "invoked": invoke, "complete": complete, "completed": complete, "reply": reply}


def _reply(raw):
    return {"client": "?", "node": 0, "index": 0, "req": "?", "raw": raw}


def test_history_of_a_world(tmp_path):
    model = load(tmp_path, HISTORY_EXAMPLE + "op write /CAS (?P<key>\\S+) (?P<val>\\S+)/\n")
    replies = [_reply("OK"), _reply("VALUE 007"), _reply("VALUE 2"), _reply("junk")]
    history = [_entry("alice", "SET x 007", 1, 3, 0),    # values are text: 007 is not 7
               _entry("bob", "SET y 2", 2),              # pending
               _entry("alice", "GET x", 4, 5, 1),
               _entry("carol", "PING", 6, 7, 3),         # no op line: not in the history
               _entry("bob", "GET y", 8, 9, 2),
               _entry("carol", "GET z", 10, 11, 3)]      # a reply without val reads null
    assert history_violations(model, _view(history, replies)) == ()
    rows = history_rows(model, _view(history, replies))
    assert [(r["client"], r["kind"], r["key"], r["value"], r["reply"], r["violating"])
            for r in rows] == [
        ("alice", "write", "x", "007", "OK", False), ("bob", "write", "y", "2", None, False),
        ("alice", "read", "x", "007", "VALUE 007", False),
        ("bob", "read", "y", "2", "VALUE 2", False), ("carol", "read", "z", None, "junk", False)]
    stale = [_entry("alice", "SET x 1", 1, 2, 0), _entry("bob", "GET x", 3, 4, 1),
             _entry("bob", "GET y", 5, 6, 2)]
    view = _view(stale, [_reply("OK"), _reply("NONE"), _reply("VALUE 2")])
    assert history_violations(model, view) == ("x", "y")
    assert [r["violating"] for r in history_rows(model, view)] == [True, True, True]
    # the first op line that matches decides: a CAS is a write here
    assert history_violations(model, _view([_entry("a", "CAS x 1", 1, 2, 0),
                                            _entry("b", "GET x", 3, 4, 1)],
                                           [_reply("OK"), _reply("VALUE 1")])) == ()


def test_history_of_one_register(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nreply /OK|V (?P<val>\\d+)|EMPTY/\n'
                 'op write /SET (?P<val>\\d+)/\nop read /GET/\nlinearizable one\n')
    lost = [_entry("w", "SET 1", 1, 2, 0), _entry("r", "GET", 3, 4, 1)]
    assert history_violations(model, _view(lost, [_reply("OK"), _reply("EMPTY")])) == (None,)
    pending = [_entry("w", "SET 1", 1), _entry("r", "GET", 3, 4, 0)]
    assert history_violations(model, _view(pending, [_reply("EMPTY")])) == ()
    assert history_violations(model, _view(pending, [_reply("V 1")])) == ()
    assert history_violations(model, _view(pending, [_reply("V 2")])) == (None,)
    assert history_violations(model, {"replies": []}) == ()     # no history in the view
