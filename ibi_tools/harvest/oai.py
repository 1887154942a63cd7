"""Reading a repository's OAI-PMH 2.0 answers: a ``ListRecords`` page, its records' Dublin Core,
and its errors — with defusedxml (no DTD, no entity, whatever the encoding), a record at a time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from xml.etree import ElementTree

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from functions.archive.parsing import UNSAFE_TEXT
from ibi.client import page_text
from ibi.core.dublin_core import DC_ELEMENTS
from ibi_tools.harvest.outbound import plain

OAI = "{http://www.openarchives.org/OAI/2.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"
MAX_RECORD_BYTES = 1 << 20  # of the answer, from <record> to </record>: larger ones are skipped
_RECORD_DEPTH = 3  # <OAI-PMH><ListRecords><record>
_REFUSED = {
    "DTDForbidden": "a DOCTYPE (a DTD, where entities are declared)",
    "EntitiesForbidden": "an entity",
    "ExternalReferenceForbidden": "an external entity",
}


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
    unusable: str | None = None  # why the record is skipped (too large), None: it is not


@dataclass(frozen=True, slots=True)
class OaiPage:
    records: tuple[OaiRecord, ...]
    token: str | None  # None: the list is complete


def parse_page(body: bytes, *, max_record_bytes: int = MAX_RECORD_BYTES) -> OaiPage:
    """One ``ListRecords`` answer: its records and the token of the next page (None: the last).

    Read by defusedxml: a DTD (hence any entity) is refused whatever the encoding. Each record
    is read as it ends and dropped from the tree, so a page holds one record's tree at a time;
    one over ``max_record_bytes`` of the answer is dropped as it grows and comes back
    ``unusable``, with its identifier when its header came first. An ``<error>`` answer
    raises :class:`OaiError` (``noRecordsMatch`` included: the caller decides it means nothing
    to do); anything else that is not a ``ListRecords`` answer raises :class:`HarvestError`
    saying what it is.
    """
    reader = _Reader(max_record_bytes)
    parser = DefusedXMLParser(target=reader, forbid_dtd=True)
    reader.position = lambda: int(parser.parser.CurrentByteIndex)
    try:
        parser.feed(body)
        root = parser.close()
    except DefusedXmlException as refused:
        what = _REFUSED.get(type(refused).__name__, "a DTD or an entity")
        raise HarvestError(
            f"the answer declares {what}, which no OAI-PMH answer does: refused, nothing of it "
            "read (no entity is ever expanded)"
        ) from None
    except ElementTree.ParseError as error:
        received = plain(page_text(body_text(body), 200))
        raise HarvestError(f"the answer is not well-formed XML ({error}): {received!r}") from None
    if root.tag != f"{OAI}OAI-PMH":
        raise HarvestError(
            f"the answer is not OAI-PMH 2.0 (its root element is <{plain(_local(root.tag))}>): "
            "give the repository's OAI-PMH base URL (e.g. https://zenodo.org/oai2d)"
        )
    answered = root.find(f"{OAI}error")
    if answered is not None:
        message = " ".join((answered.text or "").split())
        raise OaiError(answered.get("code") or "an error", message)
    listing = root.find(f"{OAI}ListRecords")
    if listing is None:
        found = ", ".join(f"<{plain(_local(child.tag))}>" for child in root) or "nothing"
        raise HarvestError(f"the answer holds no <ListRecords> (it holds {found})")
    token = listing.find(f"{OAI}resumptionToken")
    text = (token.text or "").strip() if token is not None else ""
    return OaiPage(tuple(reader.records), text or None)


class _Reader:
    """The parser's target: the answer's tree without its records, each ``<record>`` made an
    :class:`OaiRecord` as it ends (then dropped), one over ``max_bytes`` no longer built once it
    is over (its header, read first, kept)."""

    def __init__(self, max_bytes: int) -> None:
        self._tree = ElementTree.TreeBuilder()
        self._depth = 0  # of the elements built and open
        self._max = max_bytes
        self._start = -1  # where the record being read starts in the answer (-1: none)
        self._over = False  # the record being read is over max_bytes
        self._skipped = 0  # its open elements not built
        self._listing: ElementTree.Element | None = None
        self.records: list[OaiRecord] = []
        self.position: Callable[[], int] = lambda: 0

    def _too_large(self) -> bool:
        self._over = self._over or (self._start >= 0 and self.position() - self._start > self._max)
        return self._over

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        if self._too_large():
            self._skipped += 1
            return
        element = self._tree.start(tag, attributes)
        self._depth += 1
        if self._depth == _RECORD_DEPTH - 1:
            self._listing = element
        elif self._depth == _RECORD_DEPTH and tag == f"{OAI}record":
            self._start = self.position()

    def data(self, text: str) -> None:
        if not self._too_large():
            self._tree.data(text)

    def end(self, tag: str) -> None:
        if self._skipped:
            self._skipped -= 1
            return
        element = self._tree.end(tag)
        self._depth -= 1
        if self._start < 0 or self._depth != _RECORD_DEPTH - 1 or self._listing is None:
            return
        size = self.position() - self._start
        oversized = self._too_large()
        self.records.append(_record(element, size if oversized else None, self._max))
        del self._listing[-1]  # the record: one held at a time
        self._start, self._over = -1, False

    def close(self) -> ElementTree.Element:
        return self._tree.close()


def body_text(body: bytes) -> str:
    """The start of an answer's body, as text (for saying what was received)."""
    return body[:2000].decode("utf-8", "replace")


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _record(element: ElementTree.Element, oversized: int | None, limit: int) -> OaiRecord:
    header = element.find(f"{OAI}header")
    if header is None:
        return OaiRecord(identifier="", datestamp="", deleted=False)
    deleted = header.get("status") == "deleted"
    identifier = (header.findtext(f"{OAI}identifier") or "").strip()
    datestamp = (header.findtext(f"{OAI}datestamp") or "").strip()
    if oversized is not None:
        why = f"over {limit} bytes (the most a record may hold), at {oversized} bytes or more"
        return OaiRecord(identifier, datestamp, deleted, unusable=why)
    metadata = element.find(f"{OAI}metadata")
    return OaiRecord(
        identifier=identifier,
        datestamp=datestamp,
        deleted=deleted,
        sets=tuple((s.text or "").strip() for s in header.findall(f"{OAI}setSpec")),
        dc=dublin_core(metadata) if metadata is not None and not deleted else {},
    )


def dublin_core(metadata: ElementTree.Element) -> dict[str, tuple[str, ...]]:
    """The Dublin Core elements under a record's ``<metadata>``, wherever they sit (an
    ``oai_dc:dc`` wrapper, or one a harvester re-serialised): values stripped, in order, each
    once; a character the Archive refuses (a control, U+FFFE, U+FFFF) shown as U+FFFD."""
    found: dict[str, dict[str, None]] = {}  # (a dict: kept in order, each value once, in O(1))
    for element in metadata.iter():
        name = element.tag[len(DC) :] if element.tag.startswith(DC) else ""
        if name not in DC_ELEMENTS:
            continue
        value = UNSAFE_TEXT.sub("\ufffd", "".join(element.itertext()).strip())
        if value:
            found.setdefault(name, {})[value] = None
    return {name: tuple(values) for name, values in found.items() if values}
