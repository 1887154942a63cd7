"""The holdings extension of the Archive service protocol: what an Archive holds of an item.

A ``urlRequest`` that also carries ``extension.holdings=yes`` asks an Archive that knows this
extension to add ``holdings.…`` pairs to its ordinary answer (docs/decisions.md, "Holdings").
An Archive that does not know it ignores the pair, as it ignores any pair it does not know,
and answers as always; the resolver then shows what the ordinary pairs say.

Every value here is one a reader can already fetch from the Archive: the state and timestamp
(the protocol), the language, the links and the Dublin Core elements (the protocol and the
metadata pages), and, only for a listable item, the file list with each file's SHA-256 and
size (the file-list page). Nothing for an item on its way in, nothing but the state of a
tombstone.

Wire format (each path, URL and metadata value written with :func:`encode_value`)::

    holdings.version 1
    holdings.state Original                    (Original | Copy)
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

The next edition is the protocol's own ``ibi.nextedition``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, Value, decode_value, encode_value, parse_forms

REQUEST_PAIR = ("extension.holdings", "yes")
PREFIX = "holdings."
VERSION = "1"
# The holdings pairs of one answer stay under this many characters: with the ordinary pairs,
# far below the resolver's 256 KiB cap on an answer. Files first, then metadata.
BUDGET = 128 * 1024
_TRANSLATION = re.compile(r"holdings\.translation\(([A-Za-z]{2}(?:-[A-Za-z]{2})?)\)")
_SHA256 = re.compile(r"[0-9a-f]{64}")


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
    """What one Archive holds of one item (a held, live item)."""

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
    used = sum(_size(name, value) for name, value in pairs)
    files, used, cut = _file_pairs(report, used, budget)
    dc, used, cut_dc = _dc_pairs(report, used, budget)
    pairs += files + dc
    if report.truncated or cut or cut_dc:
        pairs.append(("holdings.truncated", "yes"))
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
    )
