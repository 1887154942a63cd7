"""Public usage figures: an item's accesses, in all and by calendar month (issue 28).

An access is what an Archive counts when the resolver acknowledges a resolution that went to
it (spec §6, Algorithm 1: a genuine, fresh urlkey, spent once). The figures are counts only,
no reader's data, so they are public: on the Archive's item pages and, through the holdings
extension (``ibi/core/holdings.py``), in the resolver's holdings view. By month as COUNTER
reports give them: calendar months in UTC, named ``YYYY-MM``.

``total`` may exceed the sum of the months: accesses counted before months were kept, and
the count a transfer carries from the sending Archive, are in the total only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ibi.core.dates import utc_parts

MONTH = re.compile(r"(\d{4})-(0[1-9]|1[0-2])")


@dataclass(frozen=True, slots=True)
class Usage:
    """Accesses in all, and per month (``(YYYY-MM, count)``, oldest first)."""

    total: int = 0
    months: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, total: int, months: Mapping[str, int]) -> Usage:
        """From a total and counts by month (months with no access left out)."""
        return cls(total, tuple(sorted((m, n) for m, n in months.items() if n > 0)))

    def to_mapping(self) -> dict[str, Any]:
        """``{"total": n, "months": {"2026-11": n, …}}``, as the holdings JSON shows it."""
        return {"total": self.total, "months": dict(self.months)}


NO_USAGE = Usage()


def month_of(date: Decimal) -> str:
    """The calendar month (UTC) of an epoch date, ``YYYY-MM``."""
    return utc_parts(date).strftime("%Y-%m")


def combined(usages: Iterable[Usage]) -> Usage:
    """The sum of several Archives' figures for one item (each counts its own accesses)."""
    total = 0
    months: dict[str, int] = {}
    for usage in usages:
        total += usage.total
        for month, count in usage.months:
            months[month] = months.get(month, 0) + count
    return Usage.of(total, months)
