"""When a property holds for a reason (docs/cmc.md, "Coverage and vacuity").

A property can hold in every world and still say nothing: `all r in replies: ...` over
worlds with no reply, `A => B` where `A` is never true, an action property over steps
that never change what it reads. TLC prints coverage so that such a spec is seen; cmc
says it outright. Here, from a property's expression alone, is its *trigger*: an
expression that is true exactly where the property holds for a reason.

- `all v in D: BODY` is triggered where some `v` in `D` triggers BODY, or, when BODY
  has no trigger of its own, where `D` is not empty;
- `A => B` is triggered where `A` is true;
- any other expression is triggered wherever it is checked (it has no way to hold
  vacuously), and has no trigger (None).

An action property with no implication is triggered by a step that changes a world
name it reads primed (`durable'`): over steps that change none, it compares a world
with itself. A `linearizable` property is triggered where its history has an operation.
"""
from __future__ import annotations

from dataclasses import dataclass

from cmc.lang.ast import (Binary, Expr, Index, Literal, Loc, Name, Property, Quantifier,
                          subexpressions)


@dataclass(frozen=True)
class Trigger:
    """What makes a property hold for a reason: `expr` (evaluated like a property on the
    same world, or step). For a message: `shown`, the part of the property it tests (an
    implication's left side, or a quantifier's domain: `domain`), at `loc`."""

    expr: Expr
    shown: Expr
    domain: str | None      # the variable of the `all` whose domain it is, or None
    loc: Loc


def trigger(prop: Property) -> Trigger | None:
    """The trigger of `prop`'s expression, or None when it cannot hold vacuously."""
    if prop.expr is None:
        return None
    return _trigger(prop.expr)


def _trigger(expr: Expr) -> Trigger | None:
    if isinstance(expr, Binary) and expr.op == "=>":
        return Trigger(expr.left, expr.left, None, expr.loc)
    if isinstance(expr, Quantifier) and expr.kind == "all":
        inner = _trigger(expr.body)
        if inner is None:
            return Trigger(Quantifier("some", expr.var, expr.domain,
                                      Literal(True, expr.loc), expr.loc),
                           expr.domain, expr.var, expr.loc)
        return Trigger(Quantifier("some", expr.var, expr.domain, inner.expr, expr.loc),
                       inner.shown, inner.domain, inner.loc)
    return None


def primed_names(expr: Expr | None) -> tuple[str, ...]:
    """The world names `expr` reads after a step (`node'`), sorted."""
    return tuple(sorted({e.name for e in subexpressions(expr)
                         if isinstance(e, Name) and e.primed}))


def indices_read(expr: Expr | None, name: str) -> frozenset[int] | None:
    """The nodes world name `name` (node, durable) is read of in `expr`, when every read
    is `name[K]` with K a number; None when some read is of another kind (`name[i]`,
    `all n in name`): then any node's may be."""
    subs = list(subexpressions(expr))
    uses = sum(1 for e in subs if isinstance(e, Name) and e.name == name)
    found = [e.key.value for e in subs if isinstance(e, Index) and isinstance(e.base, Name)
             and e.base.name == name and isinstance(e.key, Literal)
             and isinstance(e.key.value, int) and not isinstance(e.key.value, bool)]
    return frozenset(found) if len(found) == uses else None


def names_read(expr: Expr | None) -> frozenset[str]:
    """Every name `expr` reads, primed or not (world names, params, variables)."""
    return frozenset(e.name for e in subexpressions(expr) if isinstance(e, Name))
