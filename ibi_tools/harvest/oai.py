"""Reading a repository's OAI-PMH 2.0 answers: a ``ListRecords`` page, its records' Dublin Core,
and its errors (no DOCTYPE, hence no entity, is ever read)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.etree import ElementTree

from functions.archive.parsing import UNSAFE_TEXT
from ibi.client import page_text
from ibi.core.dublin_core import DC_ELEMENTS

OAI = "{http://www.openarchives.org/OAI/2.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"


class HarvestError(Exception):
    """The import cannot go on: what the repository answered, or the state file, said plainly."""


class OaiError(HarvestError):
    """An OAI-PMH ``<error code="…">`` answer."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"the repository answered {code}" + (f": {message}" if message else ""))
        self.code = code


@dataclass(frozen=True, slots=True)
class OaiRecord:
    identifier: str
    datestamp: str
    deleted: bool
    sets: tuple[str, ...] = ()
    dc: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OaiPage:
    records: tuple[OaiRecord, ...]
    token: str | None  # None: the list is complete


def parse_page(body: bytes) -> OaiPage:
    """One ``ListRecords`` answer: its records and the token of the next page (None: the last).

    An ``<error>`` answer raises :class:`OaiError` (``noRecordsMatch`` included: the caller
    decides it means nothing to do); anything else that is not a ``ListRecords`` answer raises
    :class:`HarvestError` saying what it is.
    """
    root = _oai_root(body)
    error = root.find(f"{OAI}error")
    if error is not None:
        raise OaiError(error.get("code") or "an error", " ".join((error.text or "").split()))
    listing = root.find(f"{OAI}ListRecords")
    if listing is None:
        found = ", ".join(f"<{_local(child.tag)}>" for child in root) or "nothing"
        raise HarvestError(f"the answer holds no <ListRecords> (it holds {found})")
    records = tuple(_record(element) for element in listing.findall(f"{OAI}record"))
    token = listing.find(f"{OAI}resumptionToken")
    text = (token.text or "").strip() if token is not None else ""
    return OaiPage(records, text or None)


def _oai_root(body: bytes) -> ElementTree.Element:
    start = re.search(rb"<[A-Za-z_]", body)  # the root element's start tag
    if start is not None and b"<!DOCTYPE" in body[: start.start()]:
        raise HarvestError("the answer declares a DOCTYPE, which no OAI-PMH answer does: refused")
    try:
        # No DOCTYPE (checked above), so no entity can be declared, nor expanded.
        root = ElementTree.fromstring(body)  # noqa: S314
    except ElementTree.ParseError as error:
        raise HarvestError(
            f"the answer is not well-formed XML ({error}): {page_text(body_text(body), 200)!r}"
        ) from None
    if root.tag != f"{OAI}OAI-PMH":
        raise HarvestError(
            f"the answer is not OAI-PMH 2.0 (its root element is <{_local(root.tag)}>): give "
            "the repository's OAI-PMH base URL (e.g. https://zenodo.org/oai2d)"
        )
    return root


def body_text(body: bytes) -> str:
    """The start of an answer's body, as text (for saying what was received)."""
    return body[:2000].decode("utf-8", "replace")


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _record(element: ElementTree.Element) -> OaiRecord:
    header = element.find(f"{OAI}header")
    if header is None:
        return OaiRecord(identifier="", datestamp="", deleted=False)
    deleted = header.get("status") == "deleted"
    metadata = element.find(f"{OAI}metadata")
    return OaiRecord(
        identifier=(header.findtext(f"{OAI}identifier") or "").strip(),
        datestamp=(header.findtext(f"{OAI}datestamp") or "").strip(),
        deleted=deleted,
        sets=tuple((s.text or "").strip() for s in header.findall(f"{OAI}setSpec")),
        dc=dublin_core(metadata) if metadata is not None and not deleted else {},
    )


def dublin_core(metadata: ElementTree.Element) -> dict[str, tuple[str, ...]]:
    """The Dublin Core elements under a record's ``<metadata>``, wherever they sit (an
    ``oai_dc:dc`` wrapper, or one a harvester re-serialised): values stripped, in order, each
    once; a character the Archive refuses (a control, U+FFFE, U+FFFF) shown as U+FFFD."""
    found: dict[str, list[str]] = {}
    for element in metadata.iter():
        name = element.tag[len(DC) :] if element.tag.startswith(DC) else ""
        if name not in DC_ELEMENTS:
            continue
        value = UNSAFE_TEXT.sub("\ufffd", "".join(element.itertext()).strip())
        values = found.setdefault(name, [])
        if value and value not in values:
            values.append(value)
    return {name: tuple(values) for name, values in found.items() if values}
