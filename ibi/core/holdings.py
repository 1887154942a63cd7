"""The holdings extension of the Archive service protocol: what an Archive holds of an item.

A ``urlRequest`` that also carries ``extension.holdings=yes`` asks an Archive that knows this
extension to add ``holdings.…`` pairs to its ordinary answer (docs/decisions.md, "Holdings").
An Archive that does not know it ignores the pair, as it ignores any pair it does not know,
and answers as always; the resolver then shows what the ordinary pairs say.

Every value here is one a reader can already fetch from the Archive: the state and timestamp
(the protocol), the language, the links and the Dublin Core elements (the protocol and the
metadata pages), the usage figures (the metadata page), and, only for a listable item, the
file list with each file's SHA-256 and size (the file-list page). Nothing for an item on its
way in; for a tombstone, what its 410 pages show: its Dublin Core, language, and when and why
it was deleted.

Wire format (each path, URL and metadata value written with :func:`encode_value`)::

    holdings.version 1
    holdings.state Original                    (Original | Copy | Deleted)
    holdings.timestamp 2024-05-01T12:00:00Z
    holdings.language pt-BR                    (only when the item has one)
    holdings.listable yes                      (no: the files are not listed)
    holdings.files {report.pdf <sha256> 1234 sub/b.txt <sha256> 5}
    holdings.filecount 2                       (all of them, even when the list is cut)
    holdings.defaultfile report.pdf
    holdings.metadataformats {free oai_dc}
    holdings.metadata {rep R ibip P}           (a free-format metadata item, linked)
    holdings.metadata(oai_dc) {ibip P}         (an oai_dc metadata item, linked)
    holdings.translation(pt-BR) {ibip P}       (or {url http://…})
    holdings.dc.title {A%20report}
    holdings.damaged {report.pdf}              (files whose bytes failed their SHA-256)
    holdings.damagedcount 1                    (the count alone when the item is not listable)
    holdings.truncated yes                     (files or metadata left out: over the budget)
    holdings.deleted 2024-06-01T09:00:00Z      (a tombstone: when the item was deleted)
    holdings.deletedreason {Retracted%20…}     (and why, when its Archive was told)
    holdings.accesses 12                       (accesses counted here, in all: usage.py)
    holdings.accessesbymonth {2026-10 5 2026-11 7}   (YYYY-MM count, UTC months with accesses)
    holdings.link broken                       (ok | broken: the item's external URL, as the
    holdings.linkchecked 2026-11-02T03:00:00Z   Archive's last link check found it)
    holdings.linkbrokensince 2026-11-01T03:00:00Z
    holdings.linkreason {HTTP%20404}

The next edition is the protocol's own ``ibi.nextedition``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, Value, decode_value, encode_value, parse_forms
from ibi.core.usage import MONTH, Usage

REQUEST_PAIR = ("extension.holdings", "yes")
PREFIX = "holdings."
VERSION = "1"
# The holdings pairs of one answer stay under this many characters: with the ordinary pairs,
# far below the resolver's 256 KiB cap on an answer. Files first, then metadata.
BUDGET = 128 * 1024
_TRANSLATION = re.compile(r"holdings\.translation\(([A-Za-z]{2}(?:-[A-Za-z]{2})?)\)")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_COUNT = re.compile(r"\d{1,18}")  # an access count (a transfer carries at most 10**15)


@dataclass(frozen=True, slots=True)
class HeldFile:
    path: str
    sha256: str
    size: int

    def to_mapping(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "size": self.size}


@dataclass(frozen=True, slots=True)
class Link:
    """A related item: its IBI forms (``{"rep": …, "ibip": …}``), or a URL."""

    ibi: dict[str, str] | None = None
    url: str | None = None

    def to_mapping(self) -> dict[str, Any]:
        return {"ibi": self.ibi, "url": self.url}


@dataclass(frozen=True, slots=True)
class Report:
    """What one Archive holds of one item (a held item, or a tombstone: ``deleted_at``)."""

    state: str
    timestamp: str
    language: str | None = None
    listable: bool = True
    files: tuple[HeldFile, ...] = ()
    file_count: int = 0
    default_file: str | None = None
    metadata_formats: tuple[str, ...] = ()
    metadata: Link | None = None
    metadata_oai_dc: Link | None = None
    translations: dict[str, Link] = field(default_factory=dict)
    dc: dict[str, tuple[str, ...]] = field(default_factory=dict)
    damaged: tuple[str, ...] = ()  # paths, listed only for a listable item
    damaged_count: int = 0
    truncated: bool = False
    deleted_at: str | None = None  # a tombstone: when the item was deleted (ISO 8601)
    deleted_reason: str = ""
    usage: Usage | None = None  # None: the Archive does not report its accesses
    # The item's external URL as the Archive's last link check found it (ok | broken; None:
    # not checked, or no external URL), when, since when broken, and why.
    link: str | None = None
    link_checked: str | None = None
    link_broken_since: str | None = None
    link_reason: str = ""


def _forms_words(forms: dict[str, str]) -> tuple[str, ...]:
    return tuple(word for form in ("rep", "ibip") if form in forms for word in (form, forms[form]))


def _link_value(link: Link) -> tuple[str, ...]:
    if link.ibi:
        return _forms_words(link.ibi)
    return ("url", encode_value(link.url or ""))


def _size(name: str, value: Value) -> int:
    words = (value,) if isinstance(value, str) else value
    return len(name) + 4 + sum(len(word) + 1 for word in words)


def to_pairs(report: Report, *, budget: int = BUDGET) -> list[tuple[str, Value]]:
    """The ``holdings.…`` pairs of ``report``, within ``budget`` characters."""
    pairs: list[tuple[str, Value]] = [
        ("holdings.version", VERSION),
        ("holdings.state", report.state),
        ("holdings.timestamp", report.timestamp),
        ("holdings.listable", "yes" if report.listable else "no"),
    ]
    if report.language:
        pairs.append(("holdings.language", report.language))
    if report.metadata_formats:
        pairs.append(("holdings.metadataformats", tuple(report.metadata_formats)))
    for name, link in (
        ("holdings.metadata", report.metadata),
        ("holdings.metadata(oai_dc)", report.metadata_oai_dc),
    ):
        if link is not None:
            pairs.append((name, _link_value(link)))
    for language, link in sorted(report.translations.items()):
        pairs.append((f"holdings.translation({language})", _link_value(link)))
    if report.deleted_at:
        pairs.append(("holdings.deleted", report.deleted_at))
        if report.deleted_reason:
            pairs.append(("holdings.deletedreason", encode_value(report.deleted_reason)))
    pairs += _usage_pairs(report.usage)
    pairs += _link_pairs(report)
    used = sum(_size(name, value) for name, value in pairs)
    files, used, cut = _file_pairs(report, used, budget)
    dc, used, cut_dc = _dc_pairs(report, used, budget)
    pairs += files + dc
    if report.truncated or cut or cut_dc:
        pairs.append(("holdings.truncated", "yes"))
    return pairs


def _usage_pairs(usage: Usage | None) -> list[tuple[str, Value]]:
    if usage is None:
        return []
    pairs: list[tuple[str, Value]] = [("holdings.accesses", str(usage.total))]
    if usage.months:
        by_month = tuple(word for month, count in usage.months for word in (month, str(count)))
        pairs.append(("holdings.accessesbymonth", by_month))
    return pairs


def _link_pairs(report: Report) -> list[tuple[str, Value]]:
    if report.link is None:
        return []
    pairs: list[tuple[str, Value]] = [("holdings.link", report.link)]
    if report.link_checked:
        pairs.append(("holdings.linkchecked", report.link_checked))
    if report.link_broken_since:
        pairs.append(("holdings.linkbrokensince", report.link_broken_since))
    if report.link_reason:
        pairs.append(("holdings.linkreason", encode_value(report.link_reason[:200])))
    return pairs


Budgeted = tuple[list[tuple[str, Value]], int, bool]  # pairs, characters used, something cut


def _file_pairs(report: Report, used: int, budget: int) -> Budgeted:
    """The file list (a listable item's only), as many files as fit, and the damaged ones."""
    pairs: list[tuple[str, Value]] = []
    cut = False
    if report.listable:
        words: list[str] = []
        for held in report.files:
            entry = [encode_value(held.path), held.sha256, str(held.size)]
            cost = sum(len(word) + 1 for word in entry)
            if used + cost > budget:
                cut = True
                break
            words += entry
            used += cost
        pairs.append(("holdings.files", tuple(words)))
        pairs.append(("holdings.filecount", str(report.file_count or len(report.files))))
        if report.default_file:
            pairs.append(("holdings.defaultfile", encode_value(report.default_file)))
        if report.damaged:
            pairs.append(("holdings.damaged", tuple(encode_value(p) for p in report.damaged)))
    if report.damaged_count:
        pairs.append(("holdings.damagedcount", str(report.damaged_count)))
    return pairs, used, cut


def _dc_pairs(report: Report, used: int, budget: int) -> Budgeted:
    """The Dublin Core elements, each whole or left out when over the budget."""
    pairs: list[tuple[str, Value]] = []
    cut = False
    for element, values in sorted(report.dc.items()):
        value = tuple(encode_value(v) for v in values if v)
        cost = _size(f"holdings.dc.{element}", value)
        if not value or used + cost > budget:
            cut = cut or bool(value)
            continue
        pairs.append((f"holdings.dc.{element}", value))
        used += cost
    return pairs, used, cut


# ---------------------------------------------------------------------------- reading


def _words(pairs: PairList, name: str) -> tuple[str, ...]:
    return pairs.words(name)


def _link(words: Sequence[str]) -> Link | None:
    if len(words) == 2 and words[0] == "url":
        return Link(url=decode_value(words[1], plus_as_space=False))
    try:
        forms = parse_forms(words)
    except InvalidInput:
        return None
    return Link(ibi=forms) if forms else None


def _files(words: Sequence[str]) -> tuple[HeldFile, ...]:
    if len(words) % 3:
        raise InvalidInput("holdings.files", "not path, SHA-256, size triples")
    files = []
    for at in range(0, len(words), 3):
        path, sha256, size = words[at : at + 3]
        if not _SHA256.fullmatch(sha256) or not size.isdigit():
            raise InvalidInput("holdings.files", f"{path!r}: not a SHA-256 and a size")
        files.append(HeldFile(decode_value(path, plus_as_space=False), sha256, int(size)))
    return tuple(files)


def _usage(pairs: PairList) -> Usage | None:
    total = pairs.word("holdings.accesses")
    if total is None:
        return None
    if not _COUNT.fullmatch(total):
        raise InvalidInput("holdings.accesses", f"{total[:20]!r} is not a count")
    words = _words(pairs, "holdings.accessesbymonth")
    if len(words) % 2:
        raise InvalidInput("holdings.accessesbymonth", "not month, count pairs")
    months: dict[str, int] = {}
    for at in range(0, len(words), 2):
        month, count = words[at : at + 2]
        if not MONTH.fullmatch(month) or not _COUNT.fullmatch(count):
            raise InvalidInput("holdings.accessesbymonth", f"{month[:20]!r}: not YYYY-MM, a count")
        months[month] = int(count)
    return Usage.of(int(total), months)


def from_pairs(pairs: PairList) -> Report | None:
    """The report in an answer, or None when the Archive did not answer the extension.

    A malformed report is :class:`InvalidInput` (the answer is then shown without it).
    """
    state = pairs.word("holdings.state") if "holdings.state" in pairs else None
    if state is None:
        return None
    translations: dict[str, Link] = {}
    dc: dict[str, tuple[str, ...]] = {}
    for name in pairs.names():
        match = _TRANSLATION.fullmatch(name)
        if match:
            link = _link(_words(pairs, name))
            if link is not None:
                translations[match.group(1)] = link
        elif name.startswith("holdings.dc."):
            values = _words(pairs, name)
            dc[name.removeprefix("holdings.dc.")] = tuple(
                decode_value(v, plus_as_space=False) for v in values
            )
    listable = pairs.word("holdings.listable") != "no"
    files = _files(_words(pairs, "holdings.files")) if listable else ()
    count = pairs.word("holdings.filecount") or ""
    default = pairs.word("holdings.defaultfile")
    damaged = tuple(decode_value(p, plus_as_space=False) for p in _words(pairs, "holdings.damaged"))
    damaged_count = pairs.word("holdings.damagedcount") or ""
    return Report(
        state=state,
        timestamp=pairs.word("holdings.timestamp") or "",
        language=pairs.word("holdings.language"),
        listable=listable,
        files=files,
        file_count=int(count) if count.isdigit() else len(files),
        default_file=decode_value(default, plus_as_space=False) if default else None,
        metadata_formats=_words(pairs, "holdings.metadataformats"),
        metadata=_link(_words(pairs, "holdings.metadata")),
        metadata_oai_dc=_link(_words(pairs, "holdings.metadata(oai_dc)")),
        translations=translations,
        dc=dc,
        damaged=damaged,
        damaged_count=int(damaged_count) if damaged_count.isdigit() else len(damaged),
        truncated=pairs.word("holdings.truncated") == "yes",
        deleted_at=pairs.word("holdings.deleted"),
        deleted_reason=decode_value(
            pairs.word("holdings.deletedreason") or "", plus_as_space=False
        ),
        usage=_usage(pairs),
        link=pairs.word("holdings.link"),
        link_checked=pairs.word("holdings.linkchecked"),
        link_broken_since=pairs.word("holdings.linkbrokensince"),
        link_reason=decode_value(pairs.word("holdings.linkreason") or "", plus_as_space=False),
    )
