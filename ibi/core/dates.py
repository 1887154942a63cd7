"""Dates as exact decimal numbers of seconds since 1970-01-01T00:00:00Z (UTC).

Dates are never floats: they are :class:`decimal.Decimal` inside and decimal strings
outside, written with no exponent and no trailing zeros (``"1287588115.047"``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal

from ibi.core.errors import InvalidInput

_DATE_TEXT = re.compile(r"\d+(\.\d+)?")
# The last second datetime can hold; later dates cannot be written as IBIs.
MAX_DATE = Decimal(253402300799)


def parse_date(text: str, part: str = "date") -> Decimal:
    """Read an epoch date written as a plain decimal number (``1287588115.047``)."""
    if not isinstance(text, str) or not _DATE_TEXT.fullmatch(text):
        raise InvalidInput(
            part, f"{text!r} is not a date: write seconds since 1970 as digits, e.g. 1287588115.047"
        )
    date = Decimal(text)
    if date > MAX_DATE:
        raise InvalidInput(part, f"{text} is after the year 9999")
    return date


def format_date(date: Decimal) -> str:
    """Write a date as a decimal string with no exponent and no trailing zeros."""
    text = format(date, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def fraction_digits(date: Decimal) -> str:
    """The significant decimal digits of the fraction of a second ("" when none)."""
    text = format_date(date)
    return text.partition(".")[2]


def whole_seconds(date: Decimal) -> int:
    """INT(date): the whole seconds of a non-negative date."""
    return int(date)


def iso_date(date: Decimal) -> str:
    """ISO 8601 in UTC with ``Z``, keeping the fraction of a second exactly."""
    moment = datetime.fromtimestamp(whole_seconds(date), tz=UTC)
    fraction = fraction_digits(date)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if fraction:
        text += "." + fraction
    return text + "Z"


def utc_parts(date: Decimal) -> datetime:
    """The UTC calendar date and time of the whole seconds of ``date``."""
    return datetime.fromtimestamp(whole_seconds(date), tz=UTC)
