"""Parsing the model-file language: the syntax of lines, strings, regexes, addresses,
params and commands; the defaults; where programs are found; operator precedence and
the locations of operators.

Fast: no process is started. Model files are written to tmp_path.
"""
from __future__ import annotations

import os
import shutil

import pytest

from cmc.lang import evaluate, load_model, unparse
from langutil import load, write

# --- syntax -----------------------------------------------------------------------------

def test_comment_characters_inside_strings_and_regexes(tmp_path):
    model = load(tmp_path, 'node a = "/bin/x #1"  # a comment\n'
                           'client c -> "10.0.0.1:80": "GET #x\\n"\n'
                           'reply /OK #(?P<n>\\d+)/ # comment\n')
    assert model.nodes[0].argv == ("/bin/x", "#1")
    assert model.clients[0].requests == (b"GET #x\n",)
    assert model.reply.regex.pattern == r"OK #(?P<n>\d+)"


def test_continuation_lines_blank_lines_and_comments(tmp_path):
    model = load(tmp_path, '\n\n   # leading comment\nnode a = "/x"\n\n'
                           'invariant p:\n'
                           '    # a comment inside the expression\n'
                           '\n'
                           '    1 == 1\n'
                           '      and\n'
                           '\t2 == 2   # trailing\n'
                           '# between\n'
                           'witness q: true')  # no newline at the end of the file
    assert [unparse(p.expr) for p in model.properties] == ["((1 == 1) and (2 == 2))", "true"]


def test_continuation_applies_to_any_statement(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nclient c -> "10.0.0.1:80":\n  "A\\n",\n  "B\\n"\n')
    assert model.clients[0].requests == (b"A\n", b"B\n")


def test_crlf_line_endings(tmp_path):
    model = load(tmp_path, 'node a = "/x"\r\ninvariant p:\r\n  true\r\n\r\nwitness q: false\r\n')
    assert [p.name for p in model.properties] == ["p", "q"]
    assert model.properties[1].loc.source_line == "witness q: false"


def test_keywords_are_names_where_a_name_is_expected(tmp_path):
    model = load(tmp_path, 'node node = "/x"\nnode network = "/y"\n'
                           'invariant all: all r in replies: r.node in r.all and network == []\n')
    assert model.node_names == ("node", "network")
    assert model.properties[0].name == "all"
    assert unparse(model.properties[0].expr) == \
        "(all r in replies: ((r.node in r.all) and (network == [])))"


def test_string_escapes_to_text_and_bytes(tmp_path):
    model = load(tmp_path, 'node a = "/x a\\tb"\n'
                           'client c -> "10.0.0.1:80": "\\x00\\xff\\r\\n\\\\\\"é"\n'
                           'invariant p: "\\x41\\n" == "A\\n"\n')
    assert model.nodes[0].argv == ("/x", "a", "b")
    assert model.clients[0].requests == (b'\x00\xff\r\n\\"' + "é".encode(),)
    assert evaluate(model.properties[0].expr, {}) is True


def test_regex_slash_escape(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nreply /a\\/b (?P<x>.*)/\n')
    assert model.reply.regex.pattern == "a/b (?P<x>.*)"


def test_client_addresses(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nclient v6 -> "[::1]:65535": "x"\n'
                           'client v4 -> "10.1.2.3:1": "y", "z"\n')
    assert [(c.host, c.port) for c in model.clients] == [("::1", 65535), ("10.1.2.3", 1)]


def test_defaults(tmp_path):
    model = load(tmp_path, 'node a = "/x"\n')
    assert model.build is None and model.reply is None and model.clients == ()
    assert model.network == "fifo" and model.properties == () and model.params == {}
    assert model.budgets == {"crash": 0, "drop": 0, "dup": 0, "fire": None}


def test_network_bag_and_every_budget(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nnetwork bag\nbudget dup 2\nbudget fire 0\n'
                           'budget crash 3\nbudget drop 4\n')
    assert model.network == "bag"
    assert model.budgets == {"crash": 3, "drop": 4, "dup": 2, "fire": 0}


def test_param_types_and_substitution(tmp_path):
    model = load(tmp_path, 'param n = 3\nparam m = -2\nparam on = true\nparam s = "a b"\n'
                           'node a = "/x {n} {m} {on} {s} {{n}} }}"\n'
                           'build "make N={n}"\n')
    assert model.params == {"n": 3, "m": -2, "on": True, "s": "a b"}
    assert model.nodes[0].argv == ("/x", "3", "-2", "true", "a", "b", "{n}", "}")
    assert model.build.command == "make N=3"


def test_params_may_be_declared_after_use(tmp_path):
    model = load(tmp_path, 'node a = "{p}"\ninvariant q: p == "/x"\nparam p = "/x"\n')
    assert model.nodes[0].argv == ("/x",)


def test_program_resolution(tmp_path):
    sh = shutil.which("sh")
    model = load(tmp_path, 'node rel = "./bin/../bin/n ./arg"\nnode up = "../n"\n'
                           'node abs = "/opt/n rel/x"\nnode path = "sh -c true"\n'
                           'node missing = "no-such-program-cmc x"\n'
                           "node quoted = \"'./my prog' 'a b'\"\n")
    argv = {node.name: node.argv for node in model.nodes}
    assert argv["rel"] == (str(tmp_path / "bin" / "n"), "./arg")
    assert argv["up"] == (os.path.normpath(str(tmp_path / ".." / "n")),)
    assert argv["abs"] == ("/opt/n", "rel/x")
    assert argv["path"] == (os.path.abspath(sh), "-c", "true")
    assert argv["missing"] == ("no-such-program-cmc", "x")
    assert argv["quoted"] == (str(tmp_path / "my prog"), "a b")
    assert [node.index for node in model.nodes] == list(range(6))


def test_relative_model_path(tmp_path, monkeypatch):
    write(tmp_path, 'node a = "./n"\n')
    monkeypatch.chdir(tmp_path)
    model = load_model("m.cmc", {})
    assert model.path == str(tmp_path / "m.cmc")
    assert model.folder == str(tmp_path)
    assert model.nodes[0].argv == (str(tmp_path / "n"),)
    assert model.nodes[0].loc.file == "m.cmc"  # messages show the path as the user gave it


# --- precedence ---------------------------------------------------------------------------

def parse_expr(tmp_path, text: str) -> str:
    model = load(tmp_path, 'node a = "/x"\nparam a = 1\nparam b = 2\nparam c = 3\n'
                           f'param S = 4\naction p: {text}\n')
    return unparse(model.properties[0].expr)


@pytest.mark.parametrize("text, tree", [
    ("a => b => c", "(a => (b => c))"),
    ("a or b => c or a", "((a or b) => (c or a))"),
    ("a or b and c", "(a or (b and c))"),
    ("a and b or c", "((a and b) or c)"),
    ("not a and b", "((not a) and b)"),
    ("not a == b", "(not (a == b))"),
    ("not not a", "(not (not a))"),
    ("a == b + c", "(a == (b + c))"),
    ("a in b + c", "(a in (b + c))"),
    ("a not in b", "(a not in b)"),
    ("a + b * c", "(a + (b * c))"),
    ("a - b - c", "((a - b) - c)"),
    ("a / b % c", "((a / b) % c)"),
    ("-a * b", "((-a) * b)"),
    ("- -a", "(-(-a))"),
    ("-a.b[c]", "(-a.b[c])"),
    ("len(a)[0].b", "len(a)[0].b"),
    ("(a + b) * c", "((a + b) * c)"),
    ("[a, b,]", "[a, b]"),
    ("[]", "[]"),
    ("node'[a]", "node'[a]"),
    ("all x in S: x or a", "(all x in S: (x or a))"),
    ("all x in S: some y in S: x == y", "(all x in S: (some y in S: (x == y)))"),
    ("a => all x in S: x and b", "(a => (all x in S: (x and b)))"),
    ("a or some x in S: x => b", "(a or (some x in S: (x => b)))"),
    ("a and not all x in S: x", "(a and (not (all x in S: x)))"),
    ("(all x in S: x) and a", "((all x in S: x) and a)"),
    ("all x in a + b: x", "(all x in (a + b): x)"),
    ("min(a, b, c) == max([a])", "(min(a, b, c) == max([a]))"),
])
def test_precedence(tmp_path, text, tree):
    assert parse_expr(tmp_path, text) == tree


def test_operator_locations(tmp_path):
    model = load(tmp_path, 'node a = "/x"\ninvariant p: 1 + 2 >= [3][0] and not true\n')
    expr = model.properties[0].expr
    assert expr.loc.col == 30  # 'and'
    assert expr.left.loc.col == 20  # '>='
    assert expr.left.left.loc.col == 16  # '+'
    assert expr.left.right.loc.col == 26  # '[' of the index
    assert expr.right.loc.col == 34  # 'not'
