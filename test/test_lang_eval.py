"""Evaluating expressions and properties on a world: every operator and function, the
values without coercion, navigation into nothing, the evaluation errors and where they
point, bindings, and check_property's own checks.

Fast: no process is started. Model files are written to tmp_path.
"""
from __future__ import annotations

import re

import pytest

from cmc.errors import ModelError
from cmc.lang import EvaluationError, check_property, evaluate
from langutil import NEXT, WORLD, assert_at, load

# --- evaluation -----------------------------------------------------------------------------

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
