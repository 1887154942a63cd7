"""The Archive's side of the holdings extension (``ibi/core/holdings.py``; docs/decisions.md).

A ``urlRequest`` carrying ``extension.holdings=yes`` gets, besides its ordinary pairs, what
this Archive holds of the item: only what a reader could already fetch here (the file list
only for a listable item); for a tombstone, what its 410 pages show (its Dublin Core, and when
and why it was deleted); nothing for an item on its way in (the protocol answers nothing about
it). The usage figures are COUNTER Release 5's (``protocol.py``): ``holdings.accesses`` its
Total_Item_Requests, and this module adds ``holdings.uniqueaccesses`` (and by month) for its
Unique_Item_Requests; an Archive that does not count them says neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from functions.archive.model import Forms, Item
from ibi.core.dates import iso_date
from ibi.core.holdings import REQUEST_PAIR, HeldFile, Link, Report, to_pairs
from ibi.core.pairlist import PairList, Value
from ibi.core.usage import NO_USAGE, Usage

UNIQUE_PAIR = "holdings.uniqueaccesses"  # Unique_Item_Requests in all
UNIQUE_MONTHS_PAIR = "holdings.uniqueaccessesbymonth"  # {YYYY-MM count …}, as accessesbymonth


@dataclass(frozen=True, slots=True)
class Requests(Usage):
    """An item's figures here as COUNTER Release 5 counts them: Total_Item_Requests (the
    accesses: ``total``, ``months``) and Unique_Item_Requests (``unique``)."""

    unique: Usage = NO_USAGE

    @classmethod
    def of(cls, total: int, months: Mapping[str, int], *, unique: Usage = NO_USAGE) -> Requests:
        counted = Usage.of(total, months)
        return cls(counted.total, counted.months, unique)


def unique_pairs(usage: Usage) -> list[tuple[str, Value]]:
    """``holdings.uniqueaccesses`` and its months, for figures that count them."""
    if not isinstance(usage, Requests):
        return []
    unique = usage.unique
    pairs: list[tuple[str, Value]] = [(UNIQUE_PAIR, str(unique.total))]
    if unique.months:
        words = tuple(word for month, count in unique.months for word in (month, str(count)))
        pairs.append((UNIQUE_MONTHS_PAIR, words))
    return pairs


def _link(forms: Forms | None) -> Link | None:
    return Link(ibi=forms.to_mapping()) if forms is not None else None


def report_of(item: Item) -> Report:
    """What a reader may see of ``item`` here, as the extension reports it."""
    withdrawal = item.withdrawal
    formats = []
    if item.metadata is not None or item.dc:
        formats.append("free")
    if item.metadata_oai_dc is not None or item.dc:
        formats.append("oai_dc")
    return Report(
        state=item.state.value,
        timestamp=item.iso_timestamp,
        language=item.language,
        listable=item.listable,
        files=tuple(HeldFile(f.path, f.sha256, f.size) for f in item.files)
        if item.listable
        else (),
        file_count=len(item.files) if item.listable else 0,
        default_file=item.default_file if item.listable else None,
        metadata_formats=tuple(formats),
        metadata=_link(item.metadata),
        metadata_oai_dc=_link(item.metadata_oai_dc),
        translations={
            t.language: Link(ibi=t.ibi.to_mapping()) if t.ibi else Link(url=t.url)
            for t in item.translations
        },
        dc=dict(item.dc),
        damaged=tuple(item.damaged) if item.listable else (),
        damaged_count=len(item.damaged),
        deleted_at=iso_date(Decimal(int(withdrawal[0]))) if withdrawal else None,
        deleted_reason=withdrawal[1] if withdrawal else "",
        usage=item.usage,  # the accesses counted here (public: the metadata page shows them)
        **_link_report(item),
    )


def _link_report(item: Item) -> dict[str, Any]:
    """What the last check of the item's external URL found (links.py): anyone can check it."""
    check = item.link
    if check is None:
        return {}
    shown = check.to_mapping()
    return {
        "link": check.status.value,
        "link_checked": shown["checked"],
        "link_broken_since": shown["broken_since"],
        "link_reason": (check.reason or "") if check.broken else "",
    }


def with_holdings(pairs: PairList, item: Item | None, query: Mapping[str, str]) -> PairList:
    """``pairs`` and, when the request asks for the extension, the item's ``holdings.…``.

    An item with a damaged file gets an empty ordinary answer (no URL, so that no resolution
    selects it); asked for its holdings, it still says what it holds and which files failed
    their SHA-256, under its ``ibi``, so that its owner sees where the damage is. A tombstone
    reports what its 410 pages show: its Dublin Core, and when and why it was deleted.
    """
    name, value = REQUEST_PAIR
    if item is None or item.pending or query.get(name) != value:
        return pairs
    named = pairs if "ibi" in pairs else [("ibi", tuple(item.ibi.words()))]
    return PairList([*named, *to_pairs(report_of(item)), *unique_pairs(item.usage)])
