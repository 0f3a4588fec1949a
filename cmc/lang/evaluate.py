"""Evaluating properties on a world (SPEC §4, §8 Expressions).

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
from cmc.lang.ast import (PER_NODE_NAMES, WORLD_NAMES, Binary, Call, Expr, Field, Index,
                          ListExpr, Literal, Name, Property, Quantifier, Unary, error_at)
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


def evaluate(expr: Expr, world: dict, next_world: dict | None = None,
             bindings: dict | None = None) -> object:
    """The value of ``expr``. ``bindings`` give values to free variables."""
    return _eval(expr, _Env(world, next_world, dict(bindings or {})))


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


def _eval(expr: Expr, env: _Env) -> object:
    return _DISPATCH[type(expr)](expr, env)


def _literal(expr: Literal, env: _Env) -> object:
    return expr.value


def _list(expr: ListExpr, env: _Env) -> object:
    return [_eval(item, env) for item in expr.items]


def _name(expr: Name, env: _Env) -> object:
    if expr.primed:
        if env.next_world is None:
            raise _fail(expr, f"{expr.name}' is the world after a transition, and there is "
                        "none here (primed names belong in action properties)")
        return env.next_world.get(expr.name)
    if expr.name in env.bindings:
        return env.bindings[expr.name]
    if expr.name in WORLD_NAMES:
        return env.world.get(expr.name)
    params = env.world.get("params") or {}
    if expr.name in params:
        return params[expr.name]
    raise _fail(expr, f"{expr.name} has no value in this world (not a bound variable, a "
                "world name or one of world[\"params\"])")


def _field(expr: Field, env: _Env) -> object:
    base = _eval(expr.base, env)
    if base is None:
        return None
    if isinstance(base, dict):
        return base.get(expr.name)
    raise _fail(expr, f"cannot take field .{expr.name} of {_shown(base)}: only an object "
                "has fields")


def _index(expr: Index, env: _Env) -> object:
    base = _eval(expr.base, env)
    key = _eval(expr.key, env)
    if base is None or key is None:
        return None
    if isinstance(base, (list, tuple, str)):
        if isinstance(key, str) and isinstance(expr.base, Name) and \
                expr.base.name in PER_NODE_NAMES and not isinstance(base, str):
            key = _node_index(key, env.next_world if expr.base.primed else env.world)
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


def _node_index(name: str, world: dict | None) -> int | None:
    names = list((world or {}).get("node_names") or ())
    return names.index(name) if name in names else None


def _unary(expr: Unary, env: _Env) -> object:
    value = _eval(expr.operand, env)
    if expr.op == "not":
        return not _boolean(value, expr.operand, "not")
    if not is_number(value):
        raise _fail(expr, f"cannot negate {_shown(value)}")
    return -value


def _boolean(value: object, where: Expr, op: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, f"'{op}' needs true or false, but this is {_shown(value)}")
    return value


def _binary(expr: Binary, env: _Env) -> object:
    op = expr.op
    if op in ("and", "or", "=>"):
        left = _boolean(_eval(expr.left, env), expr.left, op)
        if op == "and" and not left or op == "or" and left:
            return left
        if op == "=>" and not left:
            return True
        return _boolean(_eval(expr.right, env), expr.right, op)
    left = _eval(expr.left, env)
    right = _eval(expr.right, env)
    if op == "==":
        return equal(left, right)
    if op == "!=":
        return not equal(left, right)
    if op in ("in", "not in"):
        return _member(expr, left, right) == (op == "in")
    if op in _ORDER:
        try:
            return _ORDER[op](compare(left, right))
        except OrderError as err:
            raise _fail(expr, _order_message(err, left, right, op)) from None
    return _arithmetic(expr, left, right)


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


def _quantifier(expr: Quantifier, env: _Env) -> bool:
    domain = _eval(expr.domain, env)
    elements = _elements(domain)
    if elements is None:
        raise _fail(expr.domain, f"{expr.kind} {expr.var} in ...: cannot go through "
                    f"{_shown(domain)}; it takes a list, a set, an object (its keys) or null")
    bindings = env.bindings
    missing = object()
    saved = bindings.get(expr.var, missing)
    want = expr.kind == "some"  # `some` stops at the first true, `all` at the first false
    try:
        for element in elements:
            bindings[expr.var] = element
            if _boolean(_eval(expr.body, env), expr.body, expr.kind) == want:
                return want
        return not want
    finally:
        if saved is missing:
            bindings.pop(expr.var, None)
        else:
            bindings[expr.var] = saved


def _elements(value: object):
    """What a quantifier or a function goes through; None if it cannot."""
    if value is None:
        return ()
    if isinstance(value, (list, tuple, SetValue)):
        return value
    if isinstance(value, dict):
        return list(value)
    return None


def _call(expr: Call, env: _Env) -> object:
    args = [_eval(arg, env) for arg in expr.args]
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


_DISPATCH = {Literal: _literal, ListExpr: _list, Name: _name, Field: _field, Index: _index,
             Unary: _unary, Binary: _binary, Quantifier: _quantifier, Call: _call}
