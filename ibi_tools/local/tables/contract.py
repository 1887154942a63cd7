"""The contract (issue 25): the shapes of the calls the stores make, and nothing else.

An item call is answered only in a shape some store makes (:func:`call_shape`: the
operation, the forms each expression uses, the choices and paging it asks for;
``ibi_tools/local/table_shapes.py``, recorded from the test suite by ``python -m
tests.dynamo_shapes``), or in a part of one; any other shape is refused with a
ValidationException naming it (:func:`check_shape`). ``tests/unit/test_local_tables_contract.py``
replays every recorded call on moto and on these tables and compares the answers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ibi_tools.local.table_shapes import STORE_SHAPES
from ibi_tools.local.tables.expressions import COMPARATORS, tokens
from ibi_tools.local.tables.values import Invalid, fail

_SHAPED = frozenset(
    {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "Query", "Scan"}
)
_EXPRESSIONS = (
    "ConditionExpression",
    "FilterExpression",
    "KeyConditionExpression",
    "ProjectionExpression",
    "UpdateExpression",
)
_CHOICES = ("ReturnValues", "ReturnValuesOnConditionCheckFailure", "ScanIndexForward")
_DEFAULTS = {"ReturnValues": "NONE", "ReturnValuesOnConditionCheckFailure": "NONE"}
# What a call names or carries rather than how it asks: not part of its shape.
_CONTENT = frozenset(
    {
        "TableName",
        "Key",
        "Keys",
        "Item",
        "RequestItems",
        "ExpressionAttributeNames",
        "ExpressionAttributeValues",
        "ConsistentRead",  # (every read here is consistent)
    }
)
_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"})
_SYMBOLS = frozenset({*COMPARATORS, "+", "-", ".", "["})


@lru_cache(maxsize=512)
def _features(expression: str) -> tuple[str, ...]:
    """The forms an expression uses: comparators, operators, keywords, functions and nested
    paths (``.``, ``[``); not the attributes it names nor the values it gives."""
    expression_tokens = tokens(expression)
    found: set[str] = set()
    for at, token in enumerate(expression_tokens):
        if token in _SYMBOLS:
            found.add(token)
        elif token.upper() in _KEYWORDS:
            found.add(token.upper())
        elif token[0].isalpha() and expression_tokens[at + 1 : at + 2] == ["("]:
            found.add(token)
    return tuple(sorted(found))


def call_shape(operation: str, parameters: dict[str, Any]) -> str:
    """An item call's shape: its operation, each expression it sends with the forms it uses,
    the choices it makes (``ReturnValues=ALL_NEW``), the paging it asks for and any other
    parameter, by name. Its tables, keys, items, names and values are not part of it.

    ``UpdateItem ConditionExpression(<,OR,attribute_not_exists) ReturnValues=ALL_OLD
    UpdateExpression(ADD,SET,if_not_exists)`` is the minting state's write."""
    shape: set[str] = set()
    batch = parameters.get("RequestItems") if operation == "BatchGetItem" else None
    requests = list(batch.values()) if isinstance(batch, dict) else [parameters]
    for request in requests:
        for name, value in request.items() if isinstance(request, dict) else ():
            if name in _EXPRESSIONS and isinstance(value, str):
                features = _features(value)
                if name == "UpdateExpression":  # (every SET has its "=")
                    features = tuple(f for f in features if f != "=")
                shape.add(f"{name}({','.join(features)})" if features else name)
            elif name in _CHOICES:
                if value != _DEFAULTS.get(name, True):
                    shape.add(f"{name}={value}")
            elif name not in _CONTENT:
                shape.add(name)
    return " ".join([operation, *sorted(shape)])


def _parts(shape: str) -> tuple[str, frozenset[str]]:
    """A shape's operation and what it uses: each part, and each form of each expression."""
    operation, *parts = shape.split(" ")
    used: set[str] = set()
    for part in parts:
        name, _, forms = part.partition("(")
        used.add(name)
        used.update(f"{name}:{form}" for form in forms.rstrip(")").split(",") if form)
    return operation, frozenset(used)


# A read's next page: a store that reads a table sends it whenever a page was cut (by Limit
# or at 1 MB), which the test suite's small tables may never show.
_PAGING = {"Query": "ExclusiveStartKey", "Scan": "ExclusiveStartKey"}


def _contract(shapes: Iterable[str]) -> dict[str, tuple[frozenset[str], ...]]:
    found: dict[str, list[frozenset[str]]] = {}
    for shape in shapes:
        operation, used = _parts(shape)
        if operation in _PAGING:
            used |= {_PAGING[operation]}
        found.setdefault(operation, []).append(used)
    return {operation: tuple(uses) for operation, uses in found.items()}


_CONTRACT = _contract(STORE_SHAPES)
# While ``python -m tests.dynamo_shapes`` records the stores' calls, every shape the evaluator
# can answer is answered: a new expression in a store is recorded, not refused before it is.
_RECORDING = bool(os.environ.get("IBI_RECORD_DYNAMO_SHAPES"))


@lru_cache(maxsize=1024)
def refused_shape(shape: str) -> bool:
    """Whether ``shape`` is outside the contract: not a shape a store makes, nor a part of one
    (a PutItem without the condition the stores send, a Scan without their filter: what the
    migration of an old data directory and the tests' own reads send)."""
    if _RECORDING:
        return False
    operation, used = _parts(shape)
    return not any(used <= recorded for recorded in _CONTRACT.get(operation, ()))


# (operation, parameter names, expressions and choices) -> "" if answered, else its shape
_SEEN_SHAPES: dict[tuple[Any, ...], str] = {}


def check_shape(operation: str, parameters: dict[str, Any]) -> None:
    """Refuse an item call outside the contract, naming its shape (ValidationException)."""
    if operation not in _SHAPED:
        return
    seen: tuple[Any, ...] | None = None
    refused: str | None = None
    try:  # one dictionary look-up per call: the shape of these parameters, decided once
        if "RequestItems" not in parameters:  # (a batch's shape is inside it)
            seen = (operation, tuple(parameters), *map(parameters.get, _EXPRESSIONS + _CHOICES))
            refused = _SEEN_SHAPES.get(seen)
    except TypeError:  # (an unhashable expression: refused below as malformed)
        seen = None
    if refused is None:
        try:
            shape = call_shape(operation, parameters)
        except Invalid as error:
            raise fail("ValidationException", str(error), operation) from None
        refused = shape if refused_shape(shape) else ""
        if seen is not None and len(_SEEN_SHAPES) < 4096:
            _SEEN_SHAPES[seen] = refused
    if refused:
        raise fail(
            "ValidationException",
            f"local mode's tables answer the calls the stores make, not this one: {refused}"
            " (ibi_tools/local/table_shapes.py lists them; python -m tests.dynamo_shapes"
            " records them)",
            operation,
        )
