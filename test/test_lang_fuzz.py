"""Robustness of the model-file language, by property-based tests: any text or bytes
loads or is a ModelError, evaluation gives a value or an EvaluationError, deep nesting
is a model error, sets ignore order and duplicates, and equality never coerces.

Fast: no process is started. Model files are written to temporary folders.
"""
from __future__ import annotations

import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmc.errors import ModelError
from cmc.lang import EvaluationError, Model, check_property, load_model
from langutil import HISTORY_EXAMPLE, SPEC_EXAMPLE, WORLD, failure, load

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
