"""The temporal distributor (seed 002 §6, Algorithm 4), in exact decimal arithmetic.

Given the request date and the subsystem's last date, it answers the date from which the
label is made: the *shortest* date (minute, then second, then tenths, ...) later than the
previous one, so labels stay short and strictly increase.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from ibi.core.errors import InvalidGranularity

MINUTE = Decimal(60)
TEN = Decimal(10)
MAX_FRACTION_DIGITS = 9


def _int(dividend: Decimal, divisor: Decimal) -> Decimal:
    """INT(dividend/divisor) for non-negative dates, computed exactly.

    ``dividend // divisor`` is the integer part of the exact quotient; ``dividend / divisor``
    would first round to the context's 28 digits, and INT of 1287587646.999999999999999999999
    would come out as 1287587647.
    """
    return dividend // divisor


class Granularity:
    """A granularity r in {60, 1, 0.1, 0.01, ...} seconds."""

    __slots__ = ("value",)

    def __init__(self, value: Decimal | str | int) -> None:
        try:
            r = Decimal(str(value))
        except ArithmeticError:
            raise InvalidGranularity(f"{value!r} is not a number") from None
        if not r.is_finite() or r <= 0:
            raise InvalidGranularity(f"{value!r} must be 60, 1, 0.1, 0.01, ... seconds")
        _sign, digits, exponent = r.normalize().as_tuple()
        assert isinstance(exponent, int)
        is_power_of_ten = digits == (1,) and -MAX_FRACTION_DIGITS <= exponent <= 0
        if r != MINUTE and not is_power_of_ten:
            raise InvalidGranularity(
                f"{value!r} must be 60 (minute), 1 (second) or 0.1, 0.01, ... down to 1e-9"
            )
        self.value = r.normalize() if r != MINUTE else MINUTE

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Granularity) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Granularity({format(self.value, 'f')!r})"

    def __str__(self) -> str:
        return format(self.value, "f")


@dataclass(frozen=True, slots=True)
class Distribution:
    """One run of Algorithm 4: when the label may be issued and the date it carries."""

    creation_date: Decimal
    date_for_suffix: Decimal

    def delay(self, current_date: Decimal) -> Decimal:
        """How long to WAIT before the label may be issued (line 6); never negative."""
        return max(self.creation_date - current_date, Decimal(0))


def next_date_for_suffix(
    current_date: Decimal, last_date: Decimal | None, granularity: Granularity
) -> Distribution:
    """Algorithm 4, lines 1-17, without the WAIT (the caller waits ``delay``)."""
    r = granularity.value
    rounded = r * _int(current_date, r)  # 1
    last = rounded - r if last_date is None else last_date  # 2-3
    last = r * _int(last, r)  # 4
    creation = max(last + r, rounded)  # 5
    short = creation  # 8
    s = r  # 9
    t = creation
    while last < short:  # 10
        s = TEN * s  # 11
        if s == TEN:  # 12
            s = MINUTE
        t = short  # 13
        if s > MINUTE:  # 14
            break
        short = s * _int(creation, s)  # 15
    return Distribution(creation_date=creation, date_for_suffix=t)  # 16-17


class TemporalDistributor:
    """The state of one identification subsystem: ``last-date-for-suffix`` and ``r``."""

    def __init__(self, granularity: Granularity, last_date: Decimal | None = None) -> None:
        self.granularity = granularity
        self.last_date = last_date

    def distribute(self, current_date: Decimal) -> Distribution:
        distribution = next_date_for_suffix(current_date, self.last_date, self.granularity)
        self.last_date = distribution.date_for_suffix
        return distribution

    def reserve(self, current_date: Decimal, count: int) -> list[Distribution]:
        """``count`` successive runs at the same request date (a batch)."""
        return [self.distribute(current_date) for _ in range(count)]

    def replay(
        self, requests: Iterable[tuple[Decimal, Granularity | None]]
    ) -> Iterator[tuple[Decimal, Distribution]]:
        """Run a sequence of requests, each optionally changing the granularity first."""
        for current_date, granularity in requests:
            if granularity is not None:
                self.granularity = granularity
            yield current_date, self.distribute(current_date)
