"""Load-time errors of the model-file language: every mistake a model file can hold is a
ModelError at FILE:LINE:COL that says what was expected (syntax, names, params and -D,
budgets, network, addresses, escapes, regexes, commands, unreadable files).

Fast: no process is started. Model files are written to tmp_path.
"""
from __future__ import annotations

import re

import pytest

from cmc.errors import ModelError
from cmc.lang import load_model
from langutil import assert_at, failure, load, write

# --- load-time errors ------------------------------------------------------------------------

def test_syntax_error_says_what_was_expected(tmp_path):
    assert_at(failure(tmp_path, 'node a "x"\n'), 1, 8,
              "unexpected string \"x\"; expected '='")
    assert_at(failure(tmp_path, 'node a =\n'), 1, 9,
              "unexpected end of line; expected a name or a string in double quotes")
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
              "unexpected string \"1.2.3.4:5\"; expected '->' or 'after'")


def test_syntax_error_unexpected_character(tmp_path):
    assert_at(failure(tmp_path, 'node a = "/x"\ninvariant p: 1 @ 2\n'), 2, 16,
              "unexpected character '@'; expected an operator or the end of the line")


def test_single_quotes_are_not_strings(tmp_path):
    assert_at(failure(tmp_path, "node a = '/x'\n"), 1, 10,
              "unexpected character \"'\"; expected a name or a string in double quotes "
              "(strings are written in double quotes)")


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
              "node, client, reply, network, disk, time, machine, budget, invariant, witness, quiescent, action, "
              "eventually, op, linearizable, transactional, service, peers (did you mean invariant?)")
    assert_at(failure(tmp_path, 'node a = "/x"\n= 3\n'), 2, 1,
              "unexpected '='; expected a statement (param, build, node, client, reply, "
              "network, disk, time, machine, budget, invariant, witness, quiescent, action, eventually, op, "
              "linearizable, transactional, service, peers)")


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
    ("budget crashes 1", 8, "unknown budget crashes: a budget is for crash, drop, dup, fire or "
                            "delay (did you mean crash?)"),
    ("budget time 1", 8, "unknown budget time: a budget is for crash, drop, dup, fire or delay"),
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
