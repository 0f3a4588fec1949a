"""The model-file language (cmc/lang): parsing, load-time checks, evaluation.

Fast: no process is started. Model files are written to tmp_path.
"""
from __future__ import annotations

import ast as python_ast
import os
import pathlib
import pickle
import re
import shutil
import stat
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmc.errors import ModelError
from cmc.lang import (BuildDecl, ClientDecl, EvaluationError, Loc, Model, NodeDecl,
                      Property, ReplyDecl, check_binaries, check_property, evaluate,
                      load_model, reply_record, unparse)
from cmc.lang.history import history_rows, history_violations

SPEC_EXAMPLE = r"""# durlog: a two-node replicated log. The primary must not acknowledge a write
# that one crash can lose.
param bin = "../demo/build/durlog"         # overridable: cmc -D bin=../demo/build/durlog-bug
build "make -C ../demo"                    # optional; run once (cwd = model folder) before checking

node primary = "{bin} 0 127.0.0.1:7000 127.0.0.1:7001"
node backup  = "{bin} 1 127.0.0.1:7000 127.0.0.1:7001"

client alice -> "127.0.0.1:7000": "PUT 7\n"          # one or more requests, sent in order,
client bob   -> "127.0.0.1:7000": "PUT 8\n", "GET\n" # each after the previous one's reply
reply /ACK (?P<val>\d+)/                             # how a reply line becomes a record

network fifo          # fifo (default) | bag
budget crash 1        # crash, drop, dup: default 0; fire: default unlimited
budget drop 1

invariant no_lost_commit:
    all r in replies: r.val in node[0].log or r.val in node[1].log
witness something_acked: len(replies) > 0
quiescent all_answered: len(replies) == 3
action durable_grows: all i in [0, 1]: len(durable'[i].log) >= len(durable[i].log)
eventually converges: node[0].log == node[1].log     # bounded liveness (--live-steps)
"""


def write(tmp_path: pathlib.Path, text: str, name: str = "m.cmc") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def load(tmp_path, text: str, defines=None) -> Model:
    return load_model(write(tmp_path, text), defines or {})


def failure(tmp_path, text: str, defines=None) -> ModelError:
    with pytest.raises(ModelError) as info:
        load(tmp_path, text, defines)
    return info.value


def assert_at(err: ModelError, line: int, col: int, message: str | re.Pattern) -> None:
    """The error renders as FILE:LINE:COL: message, the line, and a caret at COL."""
    assert (err.line, err.col) == (line, col), err.render()
    first, shown, caret = err.render().split("\n")
    prefix = f"{err.file}:{line}:{col}: "
    assert first.startswith(prefix)
    if isinstance(message, str):
        assert first[len(prefix):] == message, first
    else:
        assert message.search(first[len(prefix):]), first
    assert shown == "    " + err.source_line
    assert caret == "    " + " " * (col - 1) + "^"


# --- the SPEC §4 example ----------------------------------------------------------------

def test_spec_example_every_field(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    path = write(folder, SPEC_EXAMPLE, "durlog.cmc")
    model = load_model(path, {})
    lines = SPEC_EXAMPLE.split("\n")

    def at(line, col):
        return Loc(path, line, col, lines[line - 1])

    assert model.path == path and os.path.isabs(model.path)
    assert model.folder == str(folder)
    assert model.source == SPEC_EXAMPLE
    assert model.params == {"bin": "../demo/build/durlog"}
    assert model.build == BuildDecl("make -C ../demo", str(folder), at(4, 7))
    binary = str(tmp_path / "demo" / "build" / "durlog")
    assert model.nodes == (
        NodeDecl("primary", 0, (binary, "0", "127.0.0.1:7000", "127.0.0.1:7001"), at(6, 16)),
        NodeDecl("backup", 1, (binary, "1", "127.0.0.1:7000", "127.0.0.1:7001"), at(7, 16)),
    )
    assert model.node_names == ("primary", "backup")
    assert model.clients == (
        ClientDecl("alice", "127.0.0.1", 7000, (b"PUT 7\n",), at(9, 8)),
        ClientDecl("bob", "127.0.0.1", 7000, (b"PUT 8\n", b"GET\n"), at(10, 8)),
    )
    assert model.reply == ReplyDecl(re.compile(r"ACK (?P<val>\d+)"), at(11, 7))
    assert model.network == "fifo"
    assert model.budgets == {"crash": 1, "drop": 1, "dup": 0, "fire": None}
    kinds = [(p.kind, p.name, p.loc) for p in model.properties]
    assert kinds == [
        ("invariant", "no_lost_commit", at(17, 11)),
        ("witness", "something_acked", at(19, 9)),
        ("quiescent", "all_answered", at(20, 11)),
        ("action", "durable_grows", at(21, 8)),
        ("eventually", "converges", at(22, 12)),
    ]
    shown = [unparse(p.expr) for p in model.properties]
    assert shown == [
        "(all r in replies: ((r.val in node[0].log) or (r.val in node[1].log)))",
        "(len(replies) > 0)",
        "(len(replies) == 3)",
        "(all i in [0, 1]: (len(durable'[i].log) >= len(durable[i].log)))",
        "(node[0].log == node[1].log)",
    ]
    # the body of no_lost_commit is on the next, indented line
    assert model.properties[0].expr.loc == at(18, 5)


def spec_world(**changes):
    world = {
        "node": [{"log": [7]}, {"log": [7]}], "volatile": [{"log": [7]}, {"log": [7]}],
        "durable": [{"log": [7]}, {"log": [7]}], "alive": [True, True], "crashes": [0, 0],
        "replies": [{"client": "alice", "node": 0, "index": 0, "req": "PUT 7",
                     "raw": "ACK 7", "val": 7}],
        "network": [], "params": {"bin": "x"}, "node_names": ["primary", "backup"],
    }
    world.update(changes)
    return world


def test_spec_example_properties_evaluate(tmp_path):
    model = load(tmp_path, SPEC_EXAMPLE)
    world = spec_world()
    verdicts = [check_property(p, world, world) for p in model.properties]
    assert verdicts == [True, True, False, True, True]
    lost = spec_world(node=[{"log": []}, None])
    assert check_property(model.properties[0], lost) is False
    shrunk = spec_world(durable=[{"log": []}, {"log": [7]}])
    assert check_property(model.properties[3], world, shrunk) is False


def test_model_and_values_pickle(tmp_path):
    """Parallel workers receive the model (and may send values) through pickle."""
    model = load(tmp_path, SPEC_EXAMPLE)
    assert pickle.loads(pickle.dumps(model)) == model
    model = load(tmp_path, 'node a = "/x"\nwitness w: set([1, [2]]) == set([[2], 1, 1])\n')
    value = evaluate(model.properties[0].expr.left, {})
    assert pickle.loads(pickle.dumps(value)) == value


def test_minus_D_overrides_the_spec_param(tmp_path):
    model = load(tmp_path, SPEC_EXAMPLE, {"bin": "/opt/durlog-bug"})
    assert model.params == {"bin": "/opt/durlog-bug"}
    assert model.nodes[0].argv[0] == "/opt/durlog-bug"


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


# --- evaluation -----------------------------------------------------------------------------

WORLD = {
    "node": [{"log": [1, 2], "term": 3}, None],
    "volatile": [{"log": [1, 2], "term": 3}, None],
    "durable": [{"log": [1]}, {"log": []}],
    "alive": [True, False],
    "crashes": [0, 1],
    "replies": [{"client": "c", "node": 0, "index": 0, "req": "GET", "raw": "v 5", "v": 5},
                {"client": "c", "node": 0, "index": 1, "req": "GET", "raw": "nope"}],
    "network": [{"src": "primary", "dst": "backup", "data": "hello"}],
    "params": {"n": 3, "s": "abc", "flag": True},
    "node_names": ["primary", "backup"],
}
NEXT = dict(WORLD, durable=[{"log": [1, 2]}, {"log": []}], alive=[True, True])

EVAL_MODEL = 'param n = 3\nparam s = "abc"\nparam flag = true\nnode primary = "/x"\n' \
             'node backup = "/x"\naction p: {}\n'


@pytest.fixture
def ev(tmp_path):
    def run(text, world=WORLD, next_world=NEXT):
        model = load(tmp_path, EVAL_MODEL.format(text))
        return evaluate(model.properties[0].expr, world, next_world)
    return run


@pytest.fixture
def eval_error(tmp_path):
    def run(text, world=WORLD, next_world=NEXT) -> EvaluationError:
        model = load(tmp_path, EVAL_MODEL.format(text))
        with pytest.raises(EvaluationError) as info:
            evaluate(model.properties[0].expr, world, next_world)
        assert isinstance(info.value, ModelError)
        assert info.value.line == 6
        return info.value
    return run


@pytest.mark.parametrize("text, value", [
    # no coercion
    ('1 == "1"', False), ("true == 1", False), ("false == 0", False), ("1 != true", True),
    ("[1] == [true]", False), ("[1, [2]] == [1, [2]]", True), ("null == null", True),
    ("null == false", False), ('"a" == "a"', True), ("node[0] == volatile[0]", True),
    ("node[0] == durable[0]", False), ("set([1]) == [1]", False),
    # ordering
    ("1 < 2", True), ("2 <= 2", True), ("3 > 4", False), ("4 >= 4", True),
    ('"a" < "b"', True), ('"b" <= "a"', False), ("[1, 2] < [1, 3]", True),
    ("[1] < [1, 0]", True), ("[2] > [1, 9]", True),
    # navigation into nothing is null
    ("node[1].log", None), ("node[1].log.x", None), ("node[5]", None), ("node[null]", None),
    ("node[0].missing", None), ("node[0].log[7]", None), ("null.f", None), ("null[0]", None),
    ('null["k"]', None), ("[1, 2][-1]", 2), ("[1, 2][-3]", None), ('s[1]', "b"),
    ('node[0]["term"]', 3), ('node["primary"].term', 3), ('node["nobody"]', None),
    ('alive["backup"]', False), ('crashes["backup"]', 1), ('durable["primary"].log', [1]),
    ('volatile["primary"].term', 3), ("node[-2].term", 3),
    # world names and params
    ("len(replies)", 2), ("replies[0].v", 5), ("replies[1].v", None),
    ('network[0].src == "primary"', True), ("n", 3), ("s", "abc"), ("flag", True),
    ("alive", [True, False]),
    # primed names read the next world
    ("len(durable'[0].log)", 2), ("alive'[1]", True), ('durable\'["primary"].log', [1, 2]),
    ("node'[0].term", 3),
    # logic
    ("not true", False), ("true and false", False), ("false or true", True),
    ("false => false", True), ("true => false", False),
    ("false => false => false", True),  # right-assoc: false => (false => false)
    ('false and 1 < "a"', False), ('true or 1 < "a"', True), ('false => 1 < "a"', True),
    ("true and true and true", True),
    # arithmetic
    ("2 + 3 * 4", 14), ("7 / 2", 3), ("-7 / 2", -4), ("7 % 3", 1), ("-7 % 3", 2),
    ("10 - 2 - 3", 5), ("-n", -3), ('"ab" + "c"', "abc"), ("[1] + [2, 3]", [1, 2, 3]),
    ("n * n", 9),
    # membership
    ("2 in node[0].log", True), ("5 in node[0].log", False), ("true in [1]", False),
    ("1 in [true]", False), ('"b" in "abc"', True), ('"" in "abc"', True),
    ('"term" in node[0]', True), ("1 in node[0]", False), ("1 in null", False),
    ("1 not in null", True), ("[1] in [[1], 2]", True), ("node[0] in [node[0]]", True),
    ("3 not in [1, 2]", True), ("null in [null]", True), ('"x" in node[1]', False),
    # quantifiers
    ("all x in [1, 2]: x > 0", True), ("some x in [1, 2]: x > 1", True),
    ("some x in []: true", False), ("all x in []: false", True),
    ("all x in null: false", True), ('some k in node[0]: k == "log"', True),
    ('all x in [1, "a"]: x < 0', False), ('some x in [1, "a"]: x == 1', True),
    ("all i in [0, 1]: some j in [0, 1]: i == j", True),
    ("all r in replies: r.client == \"c\"", True),
    ("some x in set([1, 1, 2]): x == 2", True),
    # functions
    ('len("abc")', 3), ("len([1, 2])", 2), ("len(node[0])", 2), ("len(null)", 0),
    ("len(set([1, 1, 2]))", 2), ("set([1, 2, 2]) == set([2, 1])", True),
    ("set([1]) == set([true])", False), ("set([]) == set(null)", True),
    ("1 in set([1])", True), ("true in set([1])", False),
    ("len(set([node[0], volatile[0], durable[0]]))", 2), ("len(set([[1], [1]]))", 1),
    ("set(node[0]) == set([\"term\", \"log\"])", True),
    ("sorted(set([3, 1, 2]))", [1, 2, 3]), ("sorted([3, 1])", [1, 3]),
    ('sorted(["b", "a"])', ["a", "b"]), ("sorted(node[0])", ["log", "term"]),
    ("sorted(null)", []), ("sorted([[2], [1, 5]])", [[1, 5], [2]]),
    ("min([3, 1, 2])", 1), ("max([3, 1, 2])", 3), ("max(3, 5, 4)", 5), ('min("b", "a")', "a"),
    ("min([])", None), ("max(null)", None), ("sum([1, 2, 3])", 6), ("sum([])", 0),
    ("sum(null)", 0), ("sum(set([2, 2]))", 2),
])
def test_evaluate(ev, text, value):
    result = ev(text)
    assert result == value and type(result) is type(value), (result, value)


@pytest.mark.parametrize("text, message", [
    ("null >= 1", "cannot order null and int (null >= 1)"),
    ('1 < "a"', 'cannot order int and string (1 < "a")'),
    ("true < false", "cannot order bool and bool (true < false)"),
    ('[1] < ["a"]', 'cannot order int and string inside these lists ([1] < ["a"])'),
    ("node[0] < node[0]", re.compile(r"^cannot order object and object")),
    ("1 + \"a\"", 'cannot apply + to int and string (1 + "a"): it takes two numbers, two '
                  "strings or two lists"),
    ("true + 1", re.compile("^cannot apply \\+ to bool and int")),
    ('"a" * 2', re.compile("^cannot apply \\* to string and int")),
    ("1 / 0", "division by zero (1 / 0)"),
    ("1 % 0", "division by zero (1 % 0)"),
    ('-"a"', 'cannot negate string "a"'),
    ("-true", "cannot negate bool true"),
    ("not 1", "'not' needs true or false, but this is int 1"),
    ("1 and true", "'and' needs true or false, but this is int 1"),
    ("true and 1", "'and' needs true or false, but this is int 1"),
    ("null or true", "'or' needs true or false, but this is null"),
    ("true => 1", "'=>' needs true or false, but this is int 1"),
    ("all x in [1]: x", "'all' needs true or false, but this is int 1"),
    ("all x in 3: true", re.compile("^all x in ...: cannot go through int 3")),
    ('some x in "ab": true', re.compile("^some x in ...: cannot go through string")),
    ('1 in "abc"', re.compile("^cannot look for int 1 in a string")),
    ("1 in 2", re.compile("^cannot look for a value in int 2")),
    ("n.f", re.compile("^cannot take field .f of int 3")),
    ("node[0].log.f", re.compile(r"^cannot take field .f of list \[1, 2\]")),
    ("n[0]", re.compile("^cannot index int 3")),
    ('node[0].log["x"]', re.compile('^cannot index a list with string "x"')),
    ("node[true]", re.compile("^cannot index a list with bool true")),
    ("node[0][1]", re.compile("^cannot look up int 1 in an object")),
    ("len(1)", re.compile("^len of int 1")),
    ('set("ab")', re.compile("^set of string")),
    ('sorted([1, "a"])', re.compile("^sorted: cannot order")),
    ('max([1, null])', re.compile("^max: cannot order")),
    ('sum(["a"])', re.compile('^sum of a list holding string "a"')),
    ("sum([true])", re.compile("^sum of a list holding bool true")),
])
def test_evaluation_errors(eval_error, text, message):
    err = eval_error(text)
    if isinstance(message, str):
        assert err.message == message
    else:
        assert message.search(err.message), err.message


def test_evaluation_error_locations(eval_error):
    prefix = len("action p: ")
    assert eval_error("1 + 2 >= null").col == prefix + 7  # at '>='
    assert eval_error("true and 3").col == prefix + 10  # at the operand 3
    assert eval_error("[1, 2][0].x").col == prefix + 11  # at the field name
    assert eval_error("all x in 3: true").col == prefix + 10  # at the domain
    assert eval_error("len(7)").col == prefix + 5  # at the argument


def test_primed_name_without_a_transition(eval_error):
    err = eval_error("alive'[0]", next_world=None)
    assert err.message.startswith("alive' is the world after a transition")


def test_bindings_do_not_leak(tmp_path):
    model = load(tmp_path, 'node a = "/x"\ninvariant p: all x in [1]: x == 1\n')
    bindings = {"x": 7}
    assert evaluate(model.properties[0].expr, WORLD, None, bindings) is True
    assert bindings == {"x": 7}


def test_evaluate_with_bindings(tmp_path):
    model = load(tmp_path, 'node a = "/x"\ninvariant p: all y in [1]: y == 1\n')
    body = model.properties[0].expr.body
    assert evaluate(body, WORLD, None, {"y": 1}) is True
    assert evaluate(body, WORLD, None, {"y": True}) is False


def test_check_property_names_the_property(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nreply /v (?P<val>.*)/\n'
                           'invariant no_lost_commit:\n    all r in replies: r.val >= 1\n')
    world = dict(WORLD, replies=[{"client": "c", "node": 0, "index": 0, "req": "x",
                                  "raw": "other"}])
    with pytest.raises(EvaluationError) as info:
        check_property(model.properties[0], world)
    assert_at(info.value, 4, 29, "in property no_lost_commit: cannot order null and int "
                                 "(null >= 1)")
    ok = dict(WORLD, replies=[{"val": 2}])
    assert check_property(model.properties[0], ok) is True


def test_check_property_needs_a_bool(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nwitness w: len(replies)\ninvariant v: node[1]\n')
    with pytest.raises(EvaluationError) as info:
        check_property(model.properties[0], WORLD)
    assert_at(info.value, 2, 12, "in property w: the property is int 2, but it must be true "
                                 "or false")
    with pytest.raises(EvaluationError) as info:
        check_property(model.properties[1], WORLD)
    assert info.value.message == ("in property v: the property is null, but it must be true "
                                  "or false")


def test_check_property_action(tmp_path):
    model = load(tmp_path, "node a = \"/x\"\naction grows: len(durable'[0].log) >= "
                           "len(durable[0].log)\n")
    assert check_property(model.properties[0], WORLD, NEXT) is True
    assert check_property(model.properties[0], NEXT, WORLD) is False


# --- load-time errors ------------------------------------------------------------------------

def test_syntax_error_says_what_was_expected(tmp_path):
    assert_at(failure(tmp_path, 'node a "x"\n'), 1, 8,
              "unexpected string \"x\"; expected '='")
    assert_at(failure(tmp_path, 'node a =\n'), 1, 9,
              "unexpected end of line; expected a string in double quotes")
    assert_at(failure(tmp_path, 'node a = "/x"\ninvariant p: 1 +   # c\n'), 2, 17,
              "unexpected end of line; expected an expression")
    assert_at(failure(tmp_path, 'node a = "/x"\ninvariant p: 1 2\n'), 2, 16,
              "unexpected number 2; expected an operator or the end of the line")
    assert_at(failure(tmp_path, 'node a = "/x"\nparam n = x\n'), 2, 11,
              "unexpected name x; expected a number, a string in double quotes, true or "
              "false")
    assert_at(failure(tmp_path, 'node a = "/x"\nreply "x"\n'), 2, 7,
              'unexpected string "x"; expected a regex between slashes (/.../)')
    assert_at(failure(tmp_path, 'node a = "/x"\ninvariant p: all x [1]: true\n'), 2, 20,
              "unexpected '['; expected 'in'")
    assert_at(failure(tmp_path, 'node a = "/x"\nclient c "1.2.3.4:5": "x"\n'), 2, 10,
              "unexpected string \"1.2.3.4:5\"; expected '->'")


def test_syntax_error_unexpected_character(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\ninvariant p: 1 @ 2\n'), 2, 16,
              "unexpected character '@'; expected an operator or the end of the line")


def test_single_quotes_are_not_strings(tmp_path):
    assert_at(failure(tmp_path, "node a = '/x'\n"), 1, 10,
              "unexpected character \"'\"; expected a string in double quotes (strings are "
              "written in double quotes)")


def test_syntax_error_unterminated(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x\n'), 1, 10,
              "unterminated string: a string ends on the line where it starts (write a "
              "line break as \\n)")
    assert_at(failure(tmp_path, 'node a = "/x"\nreply /abc\n'), 2, 7,
              "unterminated regex: it needs a closing / (write a / inside it as \\/)")
    assert_at(failure(tmp_path, 'node a = "/x"\ninvariant p: (1 == 1'), 2, 21,
              "unexpected end of line; expected ')'")


def test_comparisons_do_not_chain(tmp_path):
    err = failure(tmp_path, 'node a = "/x"\ninvariant p: 1 < 2 < 3\n')
    assert_at(err, 2, 20, re.compile(r"comparisons do not chain"))


def test_indented_statement_is_a_continuation(tmp_path):
    err = failure(tmp_path, 'node a = "/x"\n  node b = "/y"\n')
    assert_at(err, 2, 3, "unexpected 'node'; expected the end of the line (an indented line "
                         "continues the statement above it; start each statement at the "
                         "beginning of its line)")


def test_unindented_continuation_ends_the_statement(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\ninvariant p:\ntrue\n'), 2, 13,
              "unexpected end of line; expected an expression")


def test_unknown_statement(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\n\ninvarient p: true\n'), 3, 1,
              "unknown statement 'invarient'; a statement starts with one of: param, build, "
              "node, client, reply, network, disk, budget, invariant, witness, quiescent, action, "
              "eventually, op, linearizable (did you mean invariant?)")
    assert_at(failure(tmp_path, 'node a = "/x"\n= 3\n'), 2, 1,
              "unexpected '='; expected a statement (param, build, node, client, reply, "
              "network, disk, budget, invariant, witness, quiescent, action, eventually, op, "
              "linearizable)")


@pytest.mark.parametrize("text, line, col, message", [
    ('node a = "/x"\nnode a = "/y"\n', 2, 6,
     "the name a is already used by a node or client (the first is at line 1)"),
    ('node a = "/x"\nclient c -> "1.2.3.4:5": "x"\nclient c -> "1.2.3.4:5": "y"\n', 3, 8,
     "the name c is already used by a node or client (the first is at line 2)"),
    ('node a = "/x"\nclient a -> "1.2.3.4:5": "x"\n', 2, 8,
     "the name a is already used by a node or client (the first is at line 1)"),
    ('param p = 1\nnode a = "/x"\nparam p = 2\n', 3, 7,
     "param p is declared twice (the first is at line 1)"),
    ('node a = "/x"\nwitness w: true\ninvariant w: true\n', 3, 11,
     "property w is declared twice (the first is at line 2)"),
])
def test_duplicate_names(tmp_path, text, line, col, message):
    assert_at(failure(tmp_path, text), line, col, message)


@pytest.mark.parametrize("expr, col, message", [
    ("foo == 1", 14, "unknown name foo; a property can use node, volatile, durable, alive, "
                     "crashes, replies, network, the params and quantifier variables"),
    ("reply == 1", 14, re.compile(r"^unknown name reply \(did you mean replies\?\)")),
    ("all x in [1]: y", 28, re.compile("^unknown name y")),
    ("(all x in [1]: true) and x", 39, re.compile("^unknown name x")),
    ("len", 14, "len is a function: call it, as in len(x)"),
    ("lenght(replies) > 0", 14, "unknown function lenght (did you mean len?); the "
                                "functions are len, set, sorted, min, max, sum"),
    ("len(1, 2) == 1", 14, "len takes one argument, not 2"),
    ("sorted() == []", 14, "sorted takes one argument, not 0"),
    ("max() == 1", 14, "max takes a list, or two or more values"),
    ("node'[0] == 1", 14, "node' is the world after a transition: it can only appear in an "
                          "action property, not in invariant"),
    ("all node in [1]: true", 14, "all node: node cannot be a variable's name: it already "
                                  "means something here"),
    ("all n in [1]: true", 14, re.compile("^all n: n cannot be a variable's name")),
    ("all x in [1]: some x in [2]: true", 28,
     "some x: x is already a variable here; choose another name"),
])
def test_name_errors(tmp_path, expr, col, message):
    err = failure(tmp_path, f'param n = 1\nnode a = "/x"\ninvariant p: {expr}\n')
    assert_at(err, 3, col, message)


def test_primed_names(tmp_path):
    err = failure(tmp_path, "param n = 1\nnode a = \"/x\"\naction p: n' == 1\n")
    assert_at(err, 3, 11, re.compile(r"^n' cannot be primed: only the world names are "
                                     r"\(node', volatile'"))
    for kind in ("witness", "quiescent", "eventually"):
        err = failure(tmp_path, f"node a = \"/x\"\n{kind} p: len(replies') > 0\n")
        assert err.message.endswith(f"not in {kind}")


def test_param_name_reserved(tmp_path):
    assert_at(failure(tmp_path, 'param replies = 1\nnode a = "/x"\n'), 1, 7,
              "replies cannot be a param's name: the expression language already uses it")
    assert_at(failure(tmp_path, 'param and = 1\nnode a = "/x"\n'), 1, 7,
              "and cannot be a param's name: the expression language already uses it")


def test_minus_D_unknown_param_names_the_file_only(tmp_path):
    path = write(tmp_path, 'param bin = "/x"\nnode a = "{bin}"\n')
    with pytest.raises(ModelError) as info:
        load_model(path, {"bni": "/y"})
    assert info.value.line is None
    assert info.value.render() == (f"{path}: -D bni: the model has no param bni (its params: "
                                   "bin) (did you mean bin?)")


@pytest.mark.parametrize("default, value, result", [
    ("3", "7", 7), ("3", "-7", -7), ("-3", "0", 0), ("true", "false", False),
    ("false", "true", True), ('"s"', "x y", "x y"), ('"s"', "3", "3"), ('"s"', "", ""),
])
def test_minus_D_takes_the_type_of_the_default(tmp_path, default, value, result):
    model = load(tmp_path, f'param p = {default}\nnode a = "/x"\n', {"p": value})
    assert model.params["p"] == result and type(model.params["p"]) is type(result)


@pytest.mark.parametrize("default, value, kind", [
    ("3", "x", "an int"), ("3", "3.5", "an int"), ("3", "", "an int"), ("3", " 3", "an int"),
    ("3", "+3", "an int"), ("3", "true", "an int"),
    ("true", "1", "a bool (true or false)"), ("true", "True", "a bool (true or false)"),
])
def test_minus_D_value_of_the_wrong_type(tmp_path, default, value, kind):
    err = failure(tmp_path, f'param n = {default}\nnode a = "/x"\n', {"n": value})
    assert_at(err, 1, 11, f"-D n={value}: param n is {kind}, the type of its default here")


def test_unknown_param_in_a_command(tmp_path):
    assert_at(failure(tmp_path, 'param bin = "/x"\nnode a = "{bin} {prot}"\n'), 2, 17,
              "unknown param {prot} in the command of node a (write {{ and }} for literal "
              "braces)")
    assert_at(failure(tmp_path, 'param port = 1\nnode a = "/x \\t{prot}"\n'), 2, 16,
              "unknown param {prot} in the command of node a (did you mean port?) (write {{ "
              "and }} for literal braces)")
    assert_at(failure(tmp_path, 'node a = "/x"\nbuild "make {target}"\n'), 2, 13,
              "unknown param {target} in the build command (write {{ and }} for literal "
              "braces)")


@pytest.mark.parametrize("line, col, message", [
    ("budget crashes 1", 8, "unknown budget crashes: a budget is for crash, drop, dup or "
                            "fire (did you mean crash?)"),
    ("budget time 1", 8, "unknown budget time: a budget is for crash, drop, dup or fire"),
    ("budget drop -1", 13, "a budget cannot be negative"),
    ("budget drop x", 13, "unexpected name x; expected a number"),
    ("network lifo", 9, "unknown network lifo: it is fifo (ordered connections, the "
                        "default) or bag (any message in flight may arrive next)"),
])
def test_budget_and_network_errors(tmp_path, line, col, message):
    assert_at(failure(tmp_path, f'node a = "/x"\n{line}\n'), 2, col, message)


def test_budget_given_twice(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\nbudget fire 3\nbudget fire 4\n'), 3, 8,
              "budget fire is given twice (the first is at line 2)")


@pytest.mark.parametrize("first, second", [
    ('network fifo', 'network bag'), ('reply /a/', 'reply /b/'),
    ('build "make"', 'build "make all"'),
])
def test_second_single_line(tmp_path, first, second):
    err = failure(tmp_path, f'node a = "/x"\n{first}\n\n{second}\n')
    keyword = first.split()[0]
    assert_at(err, 4, 1, f"a second {keyword} line; a model has at most one (the first is "
                         "at line 2)")


def test_no_node_declared(tmp_path):
    message = 'no node declared: a model needs at least one line like  node NAME = "COMMAND"'
    assert_at(failure(tmp_path, "# nothing\nparam x = 1\n"), 1, 1, message)
    assert_at(failure(tmp_path, ""), 1, 1, message)


@pytest.mark.parametrize("address, col, message", [
    ("127.0.0.1", 13, "bad address '127.0.0.1': an address is HOST:PORT, as in "
                      "127.0.0.1:7000"),
    ("localhost:7000", 14, "bad address: 'localhost' is not an IPv4 address (the network is "
                           "cmc's: use the address a node listens on, as in 127.0.0.1)"),
    ("1.2.3.4:0", 22, "bad address: port '0' is not a number from 1 to 65535"),
    ("1.2.3.4:65536", 22, "bad address: port '65536' is not a number from 1 to 65535"),
    ("1.2.3.4:", 22, "bad address: port '' is not a number from 1 to 65535"),
    ("1.2.3.4:http", 22, "bad address: port 'http' is not a number from 1 to 65535"),
    ("::1:7000", 13, "bad address '::1:7000': write an IPv6 address in brackets, as in "
                     "[::1]:7000"),
    ("[::1]7000", 13, "bad address '[::1]7000': write an IPv6 address as [ADDRESS]:PORT, as "
                      "in [::1]:7000"),
    ("[::g]:7000", 15, "bad address: '::g' is not an IPv6 address"),
    ("[::1]:x", 20, "bad address: port 'x' is not a number from 1 to 65535"),
])
def test_bad_addresses(tmp_path, address, col, message):
    err = failure(tmp_path, f'node a = "/x"\nclient c -> "{address}": "x"\n')
    assert_at(err, 2, col, message)


def test_bad_string_escapes(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x \\q"\n'), 1, 14,
              'unknown escape \\q in a string; the escapes are \\n \\r \\t \\\\ \\" and \\xNN')
    assert_at(failure(tmp_path, 'node a = "/x \\x4"\n'), 1, 14,
              "\\x needs two hex digits, as in \\x0a")
    assert_at(failure(tmp_path, 'node a = "/x \\x 1"\n'), 1, 14,
              "\\x needs two hex digits, as in \\x0a")


def test_bad_regexes(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\nreply /ab(c/\n'), 2, 10,
              "bad regex: missing ), unterminated subpattern")
    assert_at(failure(tmp_path, 'node a = "/x"\nreply /ACK (?P<raw>.*)/\n'), 2, 12,
              "the regex group raw would hide the record's own field raw (the fields are "
              "client, node, index, req, raw); rename it")


def test_bad_commands(tmp_path):
    assert_at(failure(tmp_path, 'node a = "\'/x"\n'), 1, 10,
              "node a: cannot split the command like a shell does: No closing quotation")
    assert_at(failure(tmp_path, 'node a = "  "\n'), 1, 10, "node a: the command is empty")
    assert_at(failure(tmp_path, 'node a = "/x \\x00"\n'), 1, 10,
              "node a: a command cannot contain a NUL character")


def test_empty_build_command(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\nbuild " "\n'), 2, 7,
              "the build command is empty or holds a NUL character")


def test_number_with_too_many_digits(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\ninvariant p: ' + "9" * 5000 + " > 0\n"), 2, 14,
              "this number has too many digits")


def test_unreadable_files(tmp_path):
    missing = str(tmp_path / "nope.cmc")
    with pytest.raises(ModelError) as info:
        load_model(missing, {})
    assert info.value.render() == f"{missing}: cannot read the model file: No such file or " \
                                  "directory"
    path = tmp_path / "latin1.cmc"
    path.write_bytes(b'node a = "/x"\n# caf\xe9\n')
    with pytest.raises(ModelError) as info:
        load_model(str(path), {})
    assert_at(info.value, 2, 6, "the model file is not UTF-8 text (byte 0xe9)")


# --- for the kernel: binaries and reply records ---------------------------------------------

def test_check_binaries(tmp_path):
    program = tmp_path / "bin" / "n"
    model = load(tmp_path, 'node a = "/bin/sh"\nnode b = "sh -c x"\nnode c = "./bin/n 1"\n')
    with pytest.raises(ModelError) as info:
        check_binaries(model)
    assert_at(info.value, 3, 10, f"node c: binary not found: {program} (run the build, or "
                                 "fix the path)")
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    with pytest.raises(ModelError) as info:
        check_binaries(model)
    assert_at(info.value, 3, 10, f"node c: binary is not executable: {program} (chmod +x it, "
                                 "or fix the path)")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    check_binaries(model)


def test_check_binaries_program_not_on_path(tmp_path):
    model = load(tmp_path, 'node a = "/bin/sh"\nnode b = "no-such-program-cmc"\n')
    with pytest.raises(ModelError) as info:
        check_binaries(model)
    assert_at(info.value, 2, 10, "node b: binary not found: no-such-program-cmc (run the "
                                 "build, or fix the path)")


def test_reply_record(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nreply /(?P<verb>[A-Z]+) (?P<n>\\S+)( (?P<opt>.*))?/\n')
    base = {"client": "c", "node": 1, "index": 4, "req": "PUT 7"}
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "ACK 7") == \
        dict(base, raw="ACK 7", verb="ACK", n=7, opt=None)
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "ACK -12 x") == \
        dict(base, raw="ACK -12 x", verb="ACK", n=-12, opt="x")
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "ACK 1.5 9") == \
        dict(base, raw="ACK 1.5 9", verb="ACK", n="1.5", opt=9)
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "ACK 007") == \
        dict(base, raw="ACK 007", verb="ACK", n=7, opt=None)
    # a full match is required: a line that only starts right has just the five fields
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "nope") == dict(base, raw="nope")
    assert reply_record(None, "c", 1, 4, "PUT 7", "ACK 7") == dict(base, raw="ACK 7")


def test_reply_regex_needs_a_full_match(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nreply /ACK (?P<v>\\d+)/\n')
    assert "v" not in reply_record(model.reply, "c", 0, 0, "x", "ACK 7 more")
    assert reply_record(model.reply, "c", 0, 0, "x", "ACK 7")["v"] == 7


# --- histories: op lines and linearizable (SPEC §9.4) --------------------------------------

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


# --- robustness ----------------------------------------------------------------------------

FUZZ_SETTINGS = settings(max_examples=300, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow])


def load_or_model_error(text: str | bytes) -> None:
    """load_model returns a Model or raises ModelError: never anything else."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "fuzz.cmc")
        with open(path, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        try:
            model = load_model(path, {})
        except ModelError as err:
            err.render()  # must render too
        else:
            assert isinstance(model, Model)


@FUZZ_SETTINGS
@given(st.text())
def test_arbitrary_text_loads_or_is_a_model_error(text):
    load_or_model_error(text)


_ALPHABET = st.sampled_from(list('\n\t "#/\\{}[](),:.=-><!+*%\'01234xyz') + [
    "node", "param", "all", "in", "not", "and", "or", "=>", "replies", "node'", "\\x",
    "invariant", "action", "client", "reply", "budget", "network", "\n    ", "op",
    "linearizable", "read", "write", "(?P<key>", "(?P<val>", "\nlinearizable x\n",
    "\nop read /GET/\n"])


HISTORY_EXAMPLE = r"""node kv = "/bin/kv 127.0.0.1:7000"
client alice -> "127.0.0.1:7000": "SET x 1\n", "GET x\n"
client bob   -> "127.0.0.1:7000": "SET x 2\n"
reply /OK|VALUE (?P<val>\S+)|NONE/
op write /SET (?P<key>\S+) (?P<val>\S+)/    # SPEC 9.4
op read  /GET (?P<key>\S+)/
linearizable kv_is_linearizable
"""


@st.composite
def mutated_model(draw):
    text = draw(st.sampled_from([SPEC_EXAMPLE, HISTORY_EXAMPLE]))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        end = min(len(text), at + draw(st.integers(0, 12)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "duplicate_line"]))
        if action == "insert":
            text = text[:at] + draw(_ALPHABET) + text[at:]
        elif action == "delete":
            text = text[:at] + text[end:]
        elif action == "replace":
            text = text[:at] + draw(_ALPHABET) + text[end:]
        else:
            lines = text.split("\n")
            i = draw(st.integers(0, len(lines) - 1))
            text = "\n".join(lines[:i] + [lines[i]] + lines[i:])
    return text


@FUZZ_SETTINGS
@given(mutated_model())
def test_mutated_spec_example_loads_or_is_a_model_error(text):
    load_or_model_error(text)


@FUZZ_SETTINGS
@given(st.binary())
def test_arbitrary_bytes_load_or_are_a_model_error(data):
    load_or_model_error(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner,
                                                                 max_size=3),
    max_leaves=8)


_ATOMS = ["1", "0", "-2", '"ab"', '""', "true", "false", "null", "[]", "[1, \"a\"]", "n", "s",
          "node", "node[0]", "node[1]", "node[0].log", 'node["primary"]', "durable'", "alive",
          "crashes", "replies", "replies[0]", "network", "x", "x.v"]
_BINARY = ["=>", "or", "and", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "+", "-",
           "*", "/", "%"]


def _expressions():
    def extend(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from(_BINARY), inner).map(" ".join),
            inner.map(lambda e: f"not {e}"), inner.map(lambda e: f"-{e}"),
            inner.map(lambda e: f"({e})"), inner.map(lambda e: f"{e}.log"),
            st.tuples(inner, inner).map(lambda p: f"{p[0]}[{p[1]}]"),
            st.tuples(st.sampled_from(["len", "set", "sorted", "min", "max", "sum"]),
                      inner).map(lambda p: f"{p[0]}({p[1]})"),
            st.tuples(inner, inner).map(lambda p: f"max({p[0]}, {p[1]})"),
            st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
            st.tuples(st.sampled_from(["all", "some"]), inner, inner).map(
                lambda p: f"{p[0]} x in {p[1]}: {p[2]}"))
    return st.recursive(st.sampled_from(_ATOMS), extend, max_leaves=6)


@FUZZ_SETTINGS
@given(_expressions(), json_values, json_values)
def test_evaluation_gives_a_value_or_an_evaluation_error(tmp_path_factory, text, a, b):
    try:
        model = load(tmp_path_factory.mktemp("eval"), 'param n = 3\nparam s = "abc"\n'
                     'node primary = "/x"\nnode backup = "/x"\n'
                     f"action p: all x in replies: {text}\n")
    except ModelError:
        return
    world = dict(WORLD, node=[a, b], replies=[{"v": a}, b])
    try:
        check_property(model.properties[0], world, dict(WORLD, durable=[b, a]))
    except EvaluationError as err:
        assert err.line == 5 and err.message.startswith("in property p: ")
        err.render()


def test_deep_nesting_is_a_model_error(tmp_path):
    err = failure(tmp_path, 'node a = "/x"\ninvariant p: ' + "(" * 5000 + "true" +
                  ")" * 5000 + "\n")
    assert err.line == 2
    err = failure(tmp_path, 'node a = "/x"\ninvariant p: 0' + " + 1" * 5000 + " > 0\n")
    assert err.line == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, max_size=5), st.randoms())
def test_sets_ignore_order_and_duplicates(tmp_path_factory, values, rng):
    model = load(tmp_path_factory.mktemp("sets"),
                 'node a = "/x"\ninvariant s: set(node) == set(durable)\n')
    shuffled = values + values[:2]
    rng.shuffle(shuffled)
    assert check_property(model.properties[0], {"node": values, "durable": shuffled})
    longer = values + ["not generated"]  # generated strings have at most 3 characters
    assert not check_property(model.properties[0], {"node": values, "durable": longer})


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
def test_equality_is_reflexive_and_never_coerces(tmp_path_factory, a, b):
    from cmc.lang.values import equal, freeze
    assert equal(a, a)
    assert equal(a, b) == (freeze(a) == freeze(b))
    if equal(a, b):
        assert type(a) is type(b)


# --- StateChecks: a state property evaluated once per value of what it reads ----------

def _counting(monkeypatch):
    module = sys.modules["cmc.lang.evaluate"]   # cmc.lang.evaluate is also a function
    calls = []
    real = module.check_property

    def counted(prop, world, next_world=None):
        calls.append(prop.name)
        return real(prop, world, next_world)
    monkeypatch.setattr(module, "check_property", counted)
    return calls


def _digest(data: bytes) -> bytes:
    import hashlib
    return hashlib.blake2b(data, digest_size=16).digest()


def test_state_checks_agree_with_check_property_and_skip_repeats(tmp_path, monkeypatch):
    from cmc.lang import StateChecks
    model = load(tmp_path, 'param k = 2\nnode a = "/x"\nnode b = "/y"\n'
                 "invariant logs: all i in [0, 1]: len(node[i].log) <= k\n"
                 "invariant alive_one: alive[0] or alive[1]\n"
                 "action grows: len(durable'[0].log) >= len(durable[0].log)\n")
    logs, alive_one, grows = model.properties
    checks, calls = StateChecks(_digest), _counting(monkeypatch)
    worlds = []
    for n in range(4):
        for up in ([True, False], [False, False]):
            for msg in ("m1", "m2"):             # not read by any property
                worlds.append(dict(WORLD, node=[{"log": list(range(n))}, {"log": []}],
                                   durable=[{"log": list(range(n))}, {"log": []}],
                                   alive=up, network=[{"data": msg}], params={"k": 2}))
    for world in worlds:
        for prop in (logs, alive_one):
            assert checks.check(prop, world) is check_property(prop, world)
    # 16 worlds: 4 values of node (with 1 of params) for logs, 2 of alive for alive_one
    assert calls.count("logs") == 4 and calls.count("alive_one") == 2
    # a param is part of what is read: another value is another evaluation
    assert checks.check(logs, dict(worlds[-1], params={"k": 5})) is True
    assert checks.check(logs, worlds[-1]) is False
    # an action property (and any check with a world after) is evaluated every time
    calls.clear()
    for _ in range(3):
        assert checks.check(grows, worlds[0], worlds[-1]) is True
        assert checks.check(logs, worlds[0], worlds[0]) is True
    assert calls == ["grows", "logs"] * 3


def test_state_checks_raise_every_time_and_forget_at_the_limit(tmp_path, monkeypatch):
    from cmc.lang import StateChecks
    model = load(tmp_path, 'node a = "/x"\ninvariant p: node[0].log < 1\n'
                 "invariant q: len(node[0].log) >= 0\n")
    p, q = model.properties
    checks = StateChecks(_digest)
    for _ in range(2):
        with pytest.raises(EvaluationError, match="in property p: cannot order list"):
            checks.check(p, dict(WORLD))
    monkeypatch.setattr(StateChecks, "LIMIT", 3)
    calls = _counting(monkeypatch)
    for n in range(5):
        assert checks.check(q, dict(WORLD, node=[{"log": [0] * n}])) is True
    assert checks.check(q, dict(WORLD, node=[{"log": [0] * 4}])) is True   # kept
    assert checks.check(q, dict(WORLD, node=[{"log": []}])) is True        # forgotten
    assert calls == ["q"] * 6


def test_world_names_read(tmp_path):
    from cmc.lang.evaluate import world_names_read
    model = load(tmp_path, 'param k = 1\nnode a = "/x"\n'
                 "invariant a1: len(replies) < k\ninvariant a2: network == [] and alive[0]\n"
                 "invariant a3: true\naction a4: alive'[0] == alive[0]\n")
    reads = [world_names_read(p.expr) for p in model.properties]
    assert reads == [("params", "replies"), ("alive", "network"), (), None]


# --- the layering rule ---------------------------------------------------------------------

def test_lang_imports_nothing_of_cmc_but_errors():
    package = pathlib.Path(__file__).resolve().parent.parent / "cmc" / "lang"
    for source in package.glob("*.py"):
        tree = python_ast.parse(source.read_text(), str(source))
        for node in python_ast.walk(tree):
            if isinstance(node, python_ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, python_ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "cmc" or name.startswith("cmc."):
                    assert name == "cmc.errors" or name.startswith("cmc.lang"), \
                        f"{source.name} imports {name}"


def test_public_interface():
    import cmc.lang
    for name in ("load_model", "check_property", "evaluate", "Model", "Property",
                 "check_binaries", "reply_record", "Loc", "NodeDecl", "ClientDecl",
                 "BuildDecl", "ReplyDecl"):
        assert hasattr(cmc.lang, name)
    assert Property.__dataclass_params__.frozen and Model.__dataclass_params__.frozen
    assert sys.modules["cmc.lang"] is cmc.lang
