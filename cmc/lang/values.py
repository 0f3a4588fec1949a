"""Values of the expression language: equality, ordering, sets and printing.

Values are JSON data (None, bool, int, float, str, list, dict) plus ``SetValue``.
Python's own ``==`` would say ``True == 1`` and ``[1] == [True]``; the language has no
coercion, so equality here compares types first, all the way down.
"""
from __future__ import annotations

import functools

_RENDER_LIMIT = 80  # characters of a value shown in a message; the world is shown whole elsewhere


class OrderError(Exception):
    """Two values that cannot be ordered; ``left``/``right`` are the pair that decided."""

    def __init__(self, left: object, right: object):
        super().__init__(left, right)
        self.left = left
        self.right = right


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """Integers, and JSON numbers with a fraction that a node may write on fd 3."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, SetValue):
        return "set"
    return type(value).__name__


def _kind(value: object) -> str:
    """The equality class: like type_name, but ints and floats are both numbers."""
    return "number" if is_number(value) else type_name(value)


def freeze(value: object) -> object:
    """A hashable key such that freeze(a) == freeze(b) exactly when equal(a, b)."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if is_number(value):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(freeze(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, freeze(item)) for key, item in value.items()))
    if isinstance(value, SetValue):
        return ("set", value.keys)
    raise TypeError(f"not a value of the language: {value!r}")


class SetValue:
    """What ``set(x)`` returns: equal to any set with the same elements, whatever the
    order and duplicates. Elements may be lists or objects, so membership goes through
    ``freeze`` rather than Python's hashing of the elements themselves."""

    __slots__ = ("items", "keys")

    def __init__(self, elements):
        items = []
        keys = set()
        for element in elements:
            key = freeze(element)
            if key not in keys:
                keys.add(key)
                items.append(element)
        self.items = tuple(items)
        self.keys = frozenset(keys)

    def __contains__(self, value: object) -> bool:
        return freeze(value) in self.keys

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SetValue) and self.keys == other.keys

    def __hash__(self) -> int:
        return hash(self.keys)

    def __repr__(self) -> str:
        return f"SetValue({list(self.items)!r})"


_PLAIN = frozenset((int, str, bool, float, type(None)))   # equal to their own type by ==


def equal(a: object, b: object) -> bool:
    """Deep equality without coercion: ``1 == "1"`` and ``true == 1`` are false."""
    if type(a) is type(b) and type(a) in _PLAIN:
        return a == b
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "list":
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if kind == "object":
        return a.keys() == b.keys() and all(equal(a[key], b[key]) for key in a)
    return a == b


def compare(a: object, b: object) -> int:
    """-1, 0 or 1. Numbers order with numbers, strings with strings, lists
    lexicographically by the same rule; anything else raises OrderError."""
    if type(a) is type(b) and (type(a) is int or type(a) is str):
        return (a > b) - (a < b)
    if is_number(a) and is_number(b) or isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for x, y in zip(a, b):
            order = compare(x, y)
            if order:
                return order
        return (len(a) > len(b)) - (len(a) < len(b))
    raise OrderError(a, b)


def sort_values(values) -> list:
    return sorted(values, key=functools.cmp_to_key(compare))


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _render_string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _render(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _render_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_render(item) for item in value) + "]"
    if isinstance(value, dict):
        fields = (f"{_render_string(str(key))}: {_render(item)}" for key, item in value.items())
        return "{" + ", ".join(fields) + "}"
    if isinstance(value, SetValue):
        return "set(" + _render(list(value.items)) + ")"
    try:
        return repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return "<a very large int>"


def render(value: object, limit: int | None = _RENDER_LIMIT) -> str:
    """The value as the language would write it, shortened to ``limit`` characters."""
    text = _render(value)
    if limit is not None and len(text) > limit:
        text = text[:limit - 1] + "…"
    return text
