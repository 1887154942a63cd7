"""Typed attribute values as DynamoDB keeps them: numbers, types, sizes, comparison.

Numbers have at most 38 significant digits and a magnitude from 1E-130 to 9.99…E+125
("Naming rules and data types", Number); an item is at most 400 KB, counted as DynamoDB
counts it (:func:`item_size`). What DynamoDB refuses is refused here as :class:`Invalid`,
which the client answers as a ValidationException (:func:`fail`).
"""

from __future__ import annotations

from decimal import Context, Decimal, InvalidOperation
from typing import Any

from botocore.exceptions import ClientError

# Arithmetic is done wider than a Number holds and its result checked as input is.
NUMBERS = Context(prec=38)
ARITHMETIC = Context(prec=80, Emax=999, Emin=-999)
SMALLEST, LARGEST = -130, 125  # the adjusted exponents allowed
ITEM_LIMIT = 400 * 1024  # bytes, counted as DynamoDB counts them (:func:`item_size`)

Record = dict[str, Any]  # an item: attribute names to typed values


class Invalid(Exception):
    """A request DynamoDB would refuse (ValidationException)."""


def fail(code: str, message: str, operation: str, **more: Any) -> ClientError:
    """DynamoDB's answer to a refused call, as botocore raises it."""
    response: Any = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        **more,
    }
    return ClientError(response, operation)


def number(text: str) -> Decimal:
    """A Number's value, refused as DynamoDB refuses it: not a number, more than 38
    significant digits (never rounded), or a magnitude out of range."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise Invalid(f"not a number: {text!r}") from None
    if not value.is_finite():
        raise Invalid(f"not a number: {text!r}")
    return in_range(value)


def in_range(value: Decimal) -> Decimal:
    if value.is_zero():
        return value
    digits = value.as_tuple().digits  # (no leading zeros; trailing ones are not significant)
    if len(digits) > 38 and len("".join(map(str, digits)).rstrip("0")) > 38:
        raise Invalid("Attempting to store more than 38 significant digits in a Number")
    adjusted = value.adjusted()
    if adjusted > LARGEST:
        raise Invalid(
            "Number overflow. Attempting to store a number with magnitude larger than "
            "supported range"
        )
    if adjusted < SMALLEST:
        raise Invalid(
            "Number underflow. Attempting to store a number with magnitude smaller than "
            "supported range"
        )
    return value


def canonical(value: Decimal) -> str:
    """A number as DynamoDB gives it back: no exponent, no trailing zeros."""
    if value.is_zero():
        return "0"
    return format(value.normalize(NUMBERS), "f")


def sortable_number(value: Decimal) -> str:
    """A text that sorts as the number does (sort keys of type N)."""
    if value.is_zero():
        return "1"
    digits = "".join(map(str, value.normalize(NUMBERS).as_tuple().digits)).rstrip("0") or "0"
    exponent = value.adjusted() + 500
    if value > 0:
        return f"2{exponent:04d}{digits}"
    complement = "".join(str(9 - int(d)) for d in digits)
    return f"0{9999 - exponent:04d}{complement}~"


def checked(value: Any, where: str) -> Any:
    """A typed attribute value, validated and with its numbers canonical."""
    if not isinstance(value, dict) or len(value) != 1:
        raise Invalid(f"{where}: not one typed attribute value")
    ((kind, data),) = value.items()
    if kind == "S" and isinstance(data, str):
        return value
    if kind == "N" and isinstance(data, str):
        return {"N": canonical(number(data))}
    if kind == "BOOL" and isinstance(data, bool):
        return value
    if kind == "NULL" and data is True:
        return value
    if kind in ("SS", "NS") and isinstance(data, list) and data:
        if kind == "NS":
            data = [canonical(number(n)) for n in data]
        if len(set(data)) != len(data):
            raise Invalid(f"{where}: a set holds duplicates")
        return {kind: list(data)}
    if kind == "L" and isinstance(data, list):
        return {"L": [checked(v, where) for v in data]}
    if kind == "M" and isinstance(data, dict):
        return {"M": {str(k): checked(v, where) for k, v in data.items()}}
    if kind in ("B", "BS"):
        raise Invalid(f"{where}: binary values are not kept by local mode's tables")
    raise Invalid(f"{where}: {kind} is not an attribute type (or its value is malformed)")


def checked_item(item: Any) -> Record:
    if not isinstance(item, dict):
        raise Invalid("an item is a map of attribute names to typed values")
    return {str(name): checked(value, str(name)) for name, value in item.items()}


def equal(a: Any, b: Any) -> bool:
    (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
    if ka != kb:
        return False
    if ka == "N":
        return bool(number(va) == number(vb))
    if ka in ("SS", "NS"):
        return {canonical(number(x)) if ka == "NS" else x for x in va} == set(
            canonical(number(x)) if ka == "NS" else x for x in vb
        )
    return bool(va == vb)


def order(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 comparing two scalars of one type (S by code point, N by value); None if
    they do not compare (different types, or not scalars)."""
    (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
    if ka != kb or ka not in ("S", "N"):
        return None
    if ka == "N":
        va, vb = number(va), number(vb)
    return int(va > vb) - int(va < vb)


def item_size(item: Record) -> int:
    """An item's size as DynamoDB counts it against its 400 KB ("Item sizes and formats"):
    each attribute's name in UTF-8 bytes plus its value."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: Any) -> int:
    """A string: its UTF-8 bytes; a number: one byte per two significant digits, plus one;
    a boolean or null: one byte; a list or map: 3 bytes, plus each element and one byte for
    it (and a map's names); a set: its members."""
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode())
    if kind == "N":
        digits = "".join(map(str, Decimal(data).as_tuple().digits)).strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS"):
        return sum(_value_size({kind[0]: member}) for member in data)
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in data)
    return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in data.items())  # M
