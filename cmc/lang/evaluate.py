"""Evaluating properties on a world (docs/model-file.md, "Expressions").

A world is plain data made by the kernel::

    {"node": [...], "volatile": [...], "durable": [...], "alive": [...],
     "crashes": [...], "replies": [...], "network": [...], "params": {...},
     "node_names": [...]}

The rules, in short: no coercion (``true == 1`` is false); navigating into nothing
gives null (``null.f``, ``x[null]``, a missing key, an index out of range); everything
else that does not fit its operator is an EvaluationError located at the
sub-expression, which ``check_property`` prefixes with the property's name.
"""
from __future__ import annotations

from cmc.errors import ModelError
from cmc.lang.ast import (KNOWN_EXPRESSIONS, PER_NODE_NAMES, WORLD_NAMES, Binary, Call, Expr,
                          Field, Index, ListExpr, Literal, Name, Property, Quantifier, Unary,
                          error_at, subexpressions)
from cmc.lang.values import (OrderError, SetValue, compare, equal, is_int, is_number,
                             render, sort_values, type_name)


class EvaluationError(ModelError):
    """A property could not be evaluated on a world: a type error, an ordering of
    values of different types, a division by zero, a primed name without a transition."""


def check_property(prop: Property, world: dict, next_world: dict | None = None) -> bool:
    """Whether ``prop`` holds on ``world`` (and, for an action property, on the
    transition to ``next_world``). Raises EvaluationError naming the property."""
    try:
        value = evaluate(prop.expr, world, next_world)
    except EvaluationError as err:
        raise EvaluationError(f"in property {prop.name}: {err.message}", err.file, err.line,
                              err.col, err.source_line) from None
    except RecursionError:
        raise error_at(prop.loc, f"in property {prop.name}: the expression is nested too "
                       "deeply to evaluate", EvaluationError) from None
    if not isinstance(value, bool):
        raise error_at(prop.expr.loc, f"in property {prop.name}: the property is "
                       f"{_shown(value)}, but it must be true or false", EvaluationError)
    return value


def world_names_read(expr: Expr) -> tuple[str, ...] | None:
    """The names of a world ``expr`` reads, sorted: those of WORLD_NAMES it names, and
    "params" when it names anything else (a param, or a bound variable: reading too
    much only costs a miss). None when it reads the world after a transition (a
    primed name)."""
    names: set[str] = set()
    for e in subexpressions(expr):
        if isinstance(e, Name):
            if e.primed:
                return None
            names.add(e.name if e.name in WORLD_NAMES else "params")
        elif not isinstance(e, KNOWN_EXPRESSIONS):
            return None                   # a kind of expression this does not know
    return tuple(sorted(names))


class StateChecks:
    """check_property on the worlds of one run, remembering each property's value by
    what it reads of a world: two worlds that agree on the world names a property
    reads (node states, say, with different messages in flight) give it the same
    value, so it is evaluated once. Exact: the key is the whole text (repr) of those
    values, hashed to 128 bits like a world's fingerprint; action properties (which
    read the world after) are evaluated every time. At most LIMIT values are kept
    per property; then the memory starts again (the values, not the verdicts, are
    what is forgotten)."""

    LIMIT = 1 << 16

    def __init__(self, hasher):
        self._hash = hasher               # bytes -> a short digest (cmc passes xxh3-128)
        self._props: dict[int, tuple] = {}  # id -> (the property, names read, its values)
        self._view = None                 # the last world seen, kept alive so that no
        self._texts: dict = {}            # other takes its id; its keys by names read

    def check(self, prop: Property, world: dict, next_world: dict | None = None) -> bool:
        known = self._props.get(id(prop))
        if known is None or known[0] is not prop:
            known = self._props[id(prop)] = (prop, world_names_read(prop.expr), {})
        _, reads, memo = known
        if reads is None or next_world is not None:
            return check_property(prop, world, next_world)
        if world is not self._view:
            self._view, self._texts = world, {}
        key = self._texts.get(reads)
        if key is None:
            key = self._texts[reads] = self._hash(
                repr([world.get(name) for name in reads]).encode())
        value = memo.get(key)
        if value is None:
            value = check_property(prop, world, None)
            if len(memo) >= self.LIMIT:
                memo.clear()
            memo[key] = value
        return value


def evaluate(expr: Expr, world: dict, next_world: dict | None = None,
             bindings: dict | None = None) -> object:
    """The value of ``expr``. ``bindings`` give values to free variables."""
    return compiled(expr)(_Env(world, next_world, dict(bindings or {})))


class _Env:
    __slots__ = ("world", "next_world", "bindings")

    def __init__(self, world: dict, next_world: dict | None, bindings: dict):
        self.world = world
        self.next_world = next_world
        self.bindings = bindings


def _fail(expr: Expr, message: str) -> EvaluationError:
    return error_at(expr.loc, message, EvaluationError)


def _shown(value: object) -> str:
    """``int 3``, ``null``: a value introduced by its type."""
    return "null" if value is None else f"{type_name(value)} {render(value)}"


# An expression is evaluated by a tree of closures made from it once (`compiled`),
# not by walking the tree at every world: a property is checked at every world a
# search finds, and walking cost more than the rest of a state of some models
# (docs/performance.md).
_COMPILED: dict[int, tuple[Expr, object]] = {}


def compiled(expr: Expr):
    """The function of an _Env that evaluates ``expr``."""
    hit = _COMPILED.get(id(expr))
    if hit is not None and hit[0] is expr:
        return hit[1]
    fn = _MAKE[type(expr)](expr)
    _COMPILED[id(expr)] = (expr, fn)
    return fn


def _literal(expr: Literal):
    value = expr.value
    return lambda env: value


def _list(expr: ListExpr):
    items = [compiled(item) for item in expr.items]
    return lambda env: [f(env) for f in items]


def _name(expr: Name):
    name = expr.name
    if expr.primed:
        def primed(env):
            if env.next_world is None:
                raise _fail(expr, f"{name}' is the world after a transition, and there is "
                            "none here (primed names belong in action properties)")
            return env.next_world.get(name)
        return primed
    in_world = name in WORLD_NAMES

    def plain(env):
        bindings = env.bindings
        if name in bindings:
            return bindings[name]
        if in_world:
            return env.world.get(name)
        params = env.world.get("params") or {}
        if name in params:
            return params[name]
        raise _fail(expr, f"{name} has no value in this world (not a bound variable, a "
                    "world name or one of world[\"params\"])")
    return plain


def _field(expr: Field):
    base_of, name = compiled(expr.base), expr.name

    def field(env):
        base = base_of(env)
        if base is None:
            return None
        if isinstance(base, dict):
            return base.get(name)
        raise _fail(expr, f"cannot take field .{name} of {_shown(base)}: only an object "
                    "has fields")
    return field


def _index(expr: Index):
    base_of, key_of = compiled(expr.base), compiled(expr.key)
    by_name = isinstance(expr.base, Name) and expr.base.name in PER_NODE_NAMES
    primed = by_name and expr.base.primed

    def index(env):
        base = base_of(env)
        key = key_of(env)
        if base is None or key is None:
            return None
        if isinstance(base, (list, tuple, str)):
            if by_name and isinstance(key, str) and not isinstance(base, str):
                key = _node_index(key, env.next_world if primed else env.world)
                if key is None:
                    return None
            if not is_int(key):
                raise _fail(expr, f"cannot index a {type_name(base)} with {_shown(key)}: an "
                            "index is an int")
            return base[key] if -len(base) <= key < len(base) else None
        if isinstance(base, dict):
            if not isinstance(key, str):
                raise _fail(expr, f"cannot look up {_shown(key)} in an object: its keys are "
                            "strings")
            return base.get(key)
        raise _fail(expr, f"cannot index {_shown(base)}: only a list, a string or an object "
                    "can be indexed")
    return index


def _node_index(name: str, world: dict | None) -> int | None:
    names = list((world or {}).get("node_names") or ())
    return names.index(name) if name in names else None


def _unary(expr: Unary):
    operand_of, operand = compiled(expr.operand), expr.operand
    if expr.op == "not":
        return lambda env: not _boolean(operand_of(env), operand, "not")

    def negate(env):
        value = operand_of(env)
        if not is_number(value):
            raise _fail(expr, f"cannot negate {_shown(value)}")
        return -value
    return negate


def _boolean(value: object, where: Expr, op: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, f"'{op}' needs true or false, but this is {_shown(value)}")
    return value


def _binary(expr: Binary):
    op, left_of, right_of = expr.op, compiled(expr.left), compiled(expr.right)
    lhs, rhs = expr.left, expr.right
    if op == "and":
        return lambda env: _boolean(left_of(env), lhs, op) and _boolean(right_of(env), rhs, op)
    if op == "or":
        return lambda env: _boolean(left_of(env), lhs, op) or _boolean(right_of(env), rhs, op)
    if op == "=>":
        return lambda env: not _boolean(left_of(env), lhs, op) or \
            _boolean(right_of(env), rhs, op)
    if op == "==":
        return lambda env: equal(left_of(env), right_of(env))
    if op == "!=":
        return lambda env: not equal(left_of(env), right_of(env))
    if op in ("in", "not in"):
        want = op == "in"
        return lambda env: _member(expr, left_of(env), right_of(env)) == want
    if op in _ORDER:
        holds = _ORDER[op]

        def order(env):
            left, right = left_of(env), right_of(env)
            try:
                return holds(compare(left, right))
            except OrderError as err:
                raise _fail(expr, _order_message(err, left, right, op)) from None
        return order
    return lambda env: _arithmetic(expr, left_of(env), right_of(env))


_ORDER = {"<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0,
          ">=": lambda c: c >= 0}


def _order_message(err: OrderError, left: object, right: object, op: str) -> str:
    pair = f"{type_name(err.left)} and {type_name(err.right)}"
    shown = f"{render(left)} {op} {render(right)}"
    if err.left is left and err.right is right:
        return f"cannot order {pair} ({shown})"
    return f"cannot order {pair} inside these lists ({shown})"


def _member(expr: Binary, item: object, collection: object) -> bool:
    if collection is None:
        return False
    if isinstance(collection, (list, tuple)):
        return any(equal(item, element) for element in collection)
    if isinstance(collection, SetValue):
        return item in collection
    if isinstance(collection, dict):
        return isinstance(item, str) and item in collection
    if isinstance(collection, str):
        if not isinstance(item, str):
            raise _fail(expr, f"cannot look for {_shown(item)} in a string: only a string "
                        "can be part of a string")
        return item in collection
    raise _fail(expr, f"cannot look for a value in {_shown(collection)}: 'in' needs a "
                "list, a set, an object, a string or null")


def _arithmetic(expr: Binary, left: object, right: object) -> object:
    op = expr.op
    shown = f"({render(left)} {op} {render(right)})"
    if op == "+":
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        if isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
            return list(left) + list(right)
    if not (is_number(left) and is_number(right)):
        if op == "+":
            allowed = "two numbers, two strings or two lists"
        else:
            allowed = "two numbers"
        raise _fail(expr, f"cannot apply {op} to {type_name(left)} and {type_name(right)} "
                    f"{shown}: it takes {allowed}")
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if right == 0:
        raise _fail(expr, f"division by zero {shown}")
    return left // right if op == "/" else left % right


_MISSING = object()


def _quantifier(expr: Quantifier):
    domain_of, body_of = compiled(expr.domain), compiled(expr.body)
    var, kind, body = expr.var, expr.kind, expr.body
    want = kind == "some"   # `some` stops at the first true, `all` at the first false

    def quantifier(env):
        domain = domain_of(env)
        elements = _elements(domain)
        if elements is None:
            raise _fail(expr.domain, f"{kind} {var} in ...: cannot go through "
                        f"{_shown(domain)}; it takes a list, a set, an object (its keys) "
                        "or null")
        bindings = env.bindings
        saved = bindings.get(var, _MISSING)
        try:
            for element in elements:
                bindings[var] = element
                value = body_of(env)
                if value is not True and value is not False:
                    _boolean(value, body, kind)
                if value == want:
                    return want
            return not want
        finally:
            if saved is _MISSING:
                bindings.pop(var, None)
            else:
                bindings[var] = saved
    return quantifier


def _elements(value: object):
    """What a quantifier or a function goes through; None if it cannot."""
    if value is None:
        return ()
    if isinstance(value, (list, tuple, SetValue)):
        return value
    if isinstance(value, dict):
        return list(value)
    return None


def _call(expr: Call):
    args_of = [compiled(arg) for arg in expr.args]
    return lambda env: _apply(expr, [f(env) for f in args_of])


def _apply(expr: Call, args: list) -> object:
    func = expr.func
    if func == "len":
        value = args[0]
        if isinstance(value, str):
            return len(value)
        elements = _elements(value)
        if elements is None:
            raise _fail(expr.args[0], f"len of {_shown(value)}: it takes a string, a list, "
                        "a set, an object or null")
        return len(elements)
    if func in ("min", "max") and len(args) > 1:
        elements = args
    else:
        elements = _elements(args[0])
        if elements is None:
            raise _fail(expr.args[0], f"{func} of {_shown(args[0])}: it takes a list, a set, "
                        "an object (its keys) or null")
    if func == "set":
        return elements if isinstance(elements, SetValue) else SetValue(elements)
    if func == "sum":
        for element in elements:
            if not is_number(element):
                raise _fail(expr.args[0], f"sum of a list holding {_shown(element)}: it "
                            "adds numbers")
        return sum(elements)
    try:
        ordered = sort_values(elements)
    except OrderError as err:
        raise _fail(expr, f"{func}: cannot order {type_name(err.left)} and "
                    f"{type_name(err.right)} ({render(err.left)}, {render(err.right)})") \
            from None
    if func == "sorted":
        return ordered
    if not ordered:
        return None
    return ordered[0] if func == "min" else ordered[-1]


_MAKE = {Literal: _literal, ListExpr: _list, Name: _name, Field: _field, Index: _index,
         Unary: _unary, Binary: _binary, Quantifier: _quantifier, Call: _call}
