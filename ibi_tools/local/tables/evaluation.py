"""Expressions evaluated against items: conditions, updates, projections.

A :class:`Scope` holds a call's ``ExpressionAttributeNames`` and ``ExpressionAttributeValues``
and notes which of them the expressions used: DynamoDB refuses a name or value undefined, and
one defined and not used (:func:`scope_ready`, before anything is read).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from ibi_tools.local.tables.expressions import parse_condition, parse_projection
from ibi_tools.local.tables.values import (
    ARITHMETIC,
    Invalid,
    Record,
    canonical,
    checked,
    equal,
    fail,
    in_range,
    number,
    order,
)


class Scope:
    """An expression's names and values, and which of them it used (DynamoDB refuses unused
    ones)."""

    def __init__(self, names: dict[str, str] | None, values: dict[str, Any] | None) -> None:
        self.names = names or {}
        self.values = {k: checked(v, k) for k, v in (values or {}).items()}
        self.used: set[str] = set()

    def name(self, token: str) -> str:
        if token.startswith("#"):
            if token not in self.names:
                raise Invalid(f"an expression attribute name is not defined: {token}")
            self.used.add(token)
            return self.names[token]
        return token

    def value(self, token: str) -> Any:
        if token not in self.values:
            raise Invalid(f"an expression attribute value is not defined: {token}")
        self.used.add(token)
        return self.values[token]

    def operand(self, node: tuple[str, str], item: Record) -> Any:
        kind, token = node
        if kind == "value":
            return self.value(token)
        return item.get(self.name(token))

    def check_all_used(self) -> None:
        unused = (set(self.names) | set(self.values)) - self.used
        if unused:
            raise Invalid(f"expression attribute names or values not used: {sorted(unused)}")


def holds(node: tuple[Any, ...], item: Record, scope: Scope) -> bool:
    """Whether a condition's tree holds for ``item`` ({}: a missing item)."""
    kind = node[0]
    if kind == "or":
        return holds(node[1], item, scope) or holds(node[2], item, scope)
    if kind == "and":
        return holds(node[1], item, scope) and holds(node[2], item, scope)
    if kind == "call":  # attribute_exists, attribute_not_exists
        present = scope.name(node[2][1]) in item
        return present if node[1] == "attribute_exists" else not present
    if kind == "between":  # low <= value <= high, all of one scalar type
        value, low, high = (scope.operand(n, item) for n in node[1:])
        if value is None or low is None or high is None:
            return False
        below, above = order(low, value), order(value, high)
        return below is not None and above is not None and below <= 0 and above <= 0
    left, right = scope.operand(node[2], item), scope.operand(node[3], item)
    if left is None or right is None:  # a missing attribute equals nothing, orders nothing
        return bool(node[1] == "<>")
    if node[1] == "=":
        return equal(left, right)
    if node[1] == "<>":
        return not equal(left, right)
    ranked = order(left, right)
    if ranked is None:
        return False
    return {"<": ranked < 0, "<=": ranked <= 0, ">": ranked > 0, ">=": ranked >= 0}[node[1]]


def _evaluate(node: tuple[Any, ...], item: Record, scope: Scope) -> Any:
    """A SET action's value: a value, an attribute, or ``if_not_exists``."""
    if node[0] == "if_not_exists":
        present = item.get(scope.name(node[1][1]))
        return present if present is not None else _evaluate(node[2], item, scope)
    found = scope.operand(node, item)
    if found is None:
        raise Invalid(f"the attribute in an update expression is missing: {node[1]}")
    return found


def apply_update(
    actions: Iterable[tuple[Any, ...]], item: Record, scope: Scope
) -> tuple[Record, set[str]]:
    """The item after the update, and the names of the attributes it touched."""
    new = dict(item)
    touched: set[str] = set()
    for kind, token, operand in actions:
        name = scope.name(token)
        if name in touched:
            raise Invalid(f"two actions in one update expression touch {name}")
        touched.add(name)
        if kind == "set":
            new[name] = _evaluate(operand, item, scope)
            continue
        if kind == "remove":
            new.pop(name, None)
            continue
        ((type_, data),) = scope.operand(operand, item).items()  # ADD: to a number or a set
        present = item.get(name)
        if type_ == "N":
            start = number(present["N"]) if present and "N" in present else None
            if present is not None and start is None:
                raise Invalid("ADD: the attribute is not a number")
            total = ARITHMETIC.add(start or Decimal(0), number(data))
            new[name] = {"N": canonical(in_range(total))}
        elif type_ in ("SS", "NS"):
            if present is not None and type_ not in present:
                raise Invalid("ADD: the attribute is not a set of that type")
            members = list(present[type_]) if present else []
            members += [m for m in data if m not in members]
            new[name] = {type_: members}
        else:
            raise Invalid("ADD takes a number or a set")
    return new, touched


def condition_holds(
    expression: str,
    item: Record,
    *,
    names: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> bool:
    """Whether a ConditionExpression holds for ``item`` ({}: a missing item), as a write
    under it would decide (ValidationException: an expression DynamoDB refuses, or a form no
    store sends)."""
    try:
        scope = Scope(names, values)
        scope_ready(scope, expression)
        return holds(parse_condition(expression), item, scope)
    except Invalid as error:
        raise fail("ValidationException", str(error), "ConditionExpression") from None


def scope_ready(
    scope: Scope, condition: str | None, actions: Iterable[tuple[Any, ...]] = ()
) -> None:
    """Refuse, before anything is read, names or values an expression does not define or
    does not use (as DynamoDB does)."""
    if condition is not None:
        _mark(parse_condition(condition), scope)
    for action in actions:
        scope.name(action[1])
        _mark(action[2:], scope)
    scope.check_all_used()


def _mark(node: Any, scope: Scope) -> None:
    """Note every name and value an expression's tree uses (and refuse undefined ones)."""
    if not isinstance(node, tuple | list):
        return
    if isinstance(node, tuple) and node and node[0] in ("path", "value"):
        if node[0] == "value":
            scope.value(node[1])
        else:
            scope.name(node[1])
        return
    for child in node:
        _mark(child, scope)


def projected(expression: str | None, names: dict[str, str] | None) -> set[str] | None:
    """The attributes a ProjectionExpression names (None: every attribute), refused as
    DynamoDB refuses it: a reserved word, a name not defined, a name defined and not used."""
    scope = Scope(names, None)
    wanted = None if expression is None else {scope.name(t) for t in parse_projection(expression)}
    scope.check_all_used()
    return wanted
