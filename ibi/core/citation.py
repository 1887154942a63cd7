"""An item's citation in the formats citation managers and harvesters ask for (issue 16).

Built from the item's Dublin Core as its Archive holds it (the holdings extension's
``holdings.dc.*`` pairs, ``ibi/core/holdings.py``) and the persistent URL that names it:

- CSL-JSON (``application/vnd.citationstyles.csl+json``), what Zotero, Mendeley and
  citeproc read;
- BibTeX (``application/x-bibtex``);
- RIS (``application/x-research-info-systems``), what reference managers import;
- schema.org JSON-LD (``application/ld+json``);
- OAI Dublin Core XML (``application/xml``), the record OAI-PMH harvesters read.

Pure: the standard library only (``json``, ``xml.etree``), so that the resolver's cold start
and bundle stay as they are; the tests check every output with a real consumer (citeproc-py,
bibtexparser and pybtex, rispy, pyld, ElementTree).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from xml.etree import ElementTree

from ibi.core.dublin_core import DC_ELEMENTS

CSL_JSON = "application/vnd.citationstyles.csl+json"
BIBTEX = "application/x-bibtex"
RIS = "application/x-research-info-systems"
JSON_LD = "application/ld+json"
OAI_DC_XML = "application/xml"

OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC = "http://purl.org/dc/elements/1.1/"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
OAI_DC_SCHEMA = f"{OAI_DC} http://www.openarchives.org/OAI/2.0/oai_dc.xsd"
for _prefix, _uri in (("oai_dc", OAI_DC), ("dc", DC), ("xsi", XSI)):
    ElementTree.register_namespace(_prefix, _uri)
_DATE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")
_XML_UNSAFE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# (a word in dc:type, CSL type, schema.org type); the first that matches; else the last row's
_TYPES = (
    ("dataset", "dataset", "Dataset"),
    ("software", "software", "SoftwareSourceCode"),
    ("thesis", "thesis", "Thesis"),
    ("dissertation", "thesis", "Thesis"),
    ("report", "report", "Report"),
    ("article", "article", "ScholarlyArticle"),
    ("book", "book", "Book"),
    ("image", "graphic", "ImageObject"),
    ("", "document", "CreativeWork"),
)


@dataclass(frozen=True, slots=True)
class Withdrawal:
    """When a deleted item was withdrawn from its Archive (ISO 8601) and, if said, why."""

    at: str
    reason: str = ""

    def note(self) -> str:
        """``Withdrawn on 2024-05-01: <reason>``, the note every format carries."""
        why = one_line(self.reason)
        return f"Withdrawn on {self.at[:10]}" + (f": {why}" if why else "")


@dataclass(frozen=True, slots=True)
class Record:
    """What a citation is made of: the persistent URL, the IBI and the Dublin Core; and, for
    a deleted item (a tombstone), its :class:`Withdrawal`."""

    persistent_url: str
    ibi: str
    dc: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    language: str | None = None
    withdrawn: Withdrawal | None = None

    def first(self, element: str) -> str | None:
        return next((v for v in self.dc.get(element, ()) if v.strip()), None)

    def all(self, element: str) -> list[str]:
        return [v for v in self.dc.get(element, ()) if v.strip()]

    def kinds(self) -> tuple[str, str]:
        """(CSL type, schema.org type), from the first ``dc:type`` word that says one."""
        said = " ".join(self.all("type")).lower()
        return next((csl, org) for word, csl, org in _TYPES if word in said)

    def date_parts(self) -> list[int] | None:
        match = _DATE.match(self.first("date") or "")
        if match is None:
            return None
        return [int(part) for part in match.groups() if part is not None]


def _person(name: str) -> dict[str, str]:
    """``Family, Given`` as CSL's family/given; any other form as a literal name."""
    family, comma, given = name.partition(",")
    if comma and family.strip() and given.strip():
        return {"family": family.strip(), "given": given.strip()}
    return {"literal": name.strip()}


def csl_json(record: Record) -> str:
    """One CSL-JSON item (a list of one, as citeproc-js and doi.org answer)."""
    item: dict[str, object] = {
        "id": record.ibi,
        "type": record.kinds()[0],
        "URL": record.persistent_url,
    }
    texts = {"title": "title", "publisher": "publisher", "abstract": "description"}
    for key, element in texts.items():
        value = record.first(element)
        if value is not None:
            item[key] = value
    if record.all("creator"):
        item["author"] = [_person(name) for name in record.all("creator")]
    if parts := record.date_parts():
        item["issued"] = {"date-parts": [parts]}
    if language := record.first("language") or record.language:
        item["language"] = language
    if subjects := record.all("subject"):
        item["keyword"] = ", ".join(subjects)
    item["note"] = f"IBI: {record.ibi}"
    if record.withdrawn is not None:  # CSL's ``status`` variable, as "forthcoming" is one
        item["status"] = "withdrawn"
        item["note"] = f"IBI: {record.ibi}. {record.withdrawn.note()}"
    return json.dumps([item], ensure_ascii=False, indent=2) + "\n"


# BibTeX's escaping (docs/resolver.md): LaTeX's special characters as commands, and no brace
# of the metadata ever written as a brace. BibTeX and pybtex count every brace, escaped or not,
# while bibtexparser 2 skips ``\{`` and ``\}``: with no such pair written and every ``{`` ours
# and closed, all three see the same fields. ``@``, ``"`` and ``#`` mean nothing inside braces;
# in ``author``, ``and`` and ``,`` do (:func:`_bibtex_name_part`).
_BIBTEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\textbraceleft{}",
    "}": r"\textbraceright{}",
    "%": r"\%",
    "&": r"\&",
    "#": r"\#",
    "$": r"\$",
    "_": r"\_",
    "^": r"\textasciicircum{}",
    "~": r"\textasciitilde{}",
}
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def bibtex_text(value: str) -> str:
    """A value as BibTeX/LaTeX text: one line, LaTeX's specials (braces and backslash
    included) as commands, control characters as U+FFFD; every brace written is balanced."""
    return "".join(_BIBTEX_SPECIAL.get(c, c) for c in one_line(value))


def _bibtex_name_part(text: str) -> str:
    """Family or given names, kept one part of one name: a word ``and`` (BibTeX's separator
    of names, in any case) and a comma (its separator of parts) braced."""
    words = bibtex_text(text).split(" ")
    kept = " ".join("{" + word + "}" if word.lower() == "and" else word for word in words)
    return kept.replace(",", "{,}")


def _bibtex_name(creator: str) -> str:
    """One creator in ``author``: ``Family, Given`` as BibTeX's ``Last, First`` (as CSL-JSON's
    family and given, :func:`_person`); any other form braced whole, a literal name."""
    person = _person(creator)
    if "literal" in person:
        return "{" + bibtex_text(person["literal"]) + "}"
    return f"{_bibtex_name_part(person['family'])}, {_bibtex_name_part(person['given'])}"


def _bibtex_url(url: str) -> str:
    """A URL in a ``url`` field: kept as it is, but for what would unbalance the braces."""
    return "".join(f"%{ord(c):02X}" if c in "{}\\" or c.isspace() else c for c in url)


def bibtex(record: Record) -> str:
    """One ``@misc`` entry keyed by the IBI (letters, digits and ``_`` only)."""
    key = "ibi_" + re.sub(r"[^A-Za-z0-9]", "_", record.ibi)
    fields: list[tuple[str, str]] = []
    if title := record.first("title"):
        fields.append(("title", bibtex_text(title)))
    if creators := record.all("creator"):
        fields.append(("author", " and ".join(_bibtex_name(c) for c in creators)))
    if parts := record.date_parts():
        fields.append(("year", str(parts[0])))
        if len(parts) > 1:
            fields.append(("month", str(parts[1])))
    if publisher := record.first("publisher"):
        fields.append(("publisher", bibtex_text(publisher)))
    fields.append(("howpublished", bibtex_text(record.persistent_url)))
    fields.append(("url", _bibtex_url(record.persistent_url)))
    withdrawn = f". {record.withdrawn.note()}" if record.withdrawn is not None else ""
    fields.append(("note", bibtex_text(f"IBI: {record.ibi}{withdrawn}")))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@misc{{{key},\n{body}\n}}\n"


# RIS's reference type from the record's CSL type (:meth:`Record.kinds`); GEN for any other.
_RIS_TYPES = {
    "dataset": "DATA",
    "software": "COMP",
    "thesis": "THES",
    "report": "RPRT",
    "article": "JOUR",
    "book": "BOOK",
    "graphic": "FIGURE",
}
_DOI = re.compile(r"(?:doi:|https?://(?:dx\.)?doi\.org/)?(10\.\d{4,9}/\S+)", re.IGNORECASE)


def one_line(value: str) -> str:
    """``value`` on one line: every run of whitespace (line breaks included) one space,
    control characters U+FFFD."""
    return _CONTROL.sub("\ufffd", " ".join(value.split()))


def doi_of(record: Record) -> str | None:
    """The DOI among the record's ``dc:identifier`` values (``10.…``, ``doi:10.…`` or a
    doi.org URL), as ``10.…``; None when it gives none."""
    for identifier in record.all("identifier"):
        if match := _DOI.fullmatch(identifier.strip()):
            return match.group(1)
    return None


def ris(record: Record, *, note: str | None = None) -> str:
    """One RIS reference: ``TAG  - value`` lines ended by CRLF, as the RIS specification
    writes them, from ``TY`` to ``ER``; every value on one line. ``note``: one more ``N1``
    (a withdrawn item's, say), after the IBI's; a withdrawn record's own note otherwise."""
    if note is None and record.withdrawn is not None:
        note = record.withdrawn.note()
    fields: list[tuple[str, str]] = [("TY", _RIS_TYPES.get(record.kinds()[0], "GEN"))]
    fields += [("AU", creator) for creator in record.all("creator")]
    if title := record.first("title"):
        fields.append(("TI", title))
    if parts := record.date_parts():
        year, *rest = parts
        month, day = ([f"{part:02d}" for part in rest] + ["", ""])[:2]
        fields += [("PY", f"{year:04d}"), ("DA", f"{year:04d}/{month}/{day}/")]
    if publisher := record.first("publisher"):
        fields.append(("PB", publisher))
    if doi := doi_of(record):
        fields.append(("DO", doi))
    if description := record.first("description"):
        fields.append(("AB", description))
    fields += [("KW", subject) for subject in record.all("subject")]
    if language := record.first("language") or record.language:
        fields.append(("LA", language))
    fields += [("UR", record.persistent_url), ("ID", record.ibi), ("N1", f"IBI: {record.ibi}")]
    if note and note.strip():
        fields.append(("N1", note))
    lines = [f"{tag}  - {one_line(value)}" for tag, value in fields]
    return "\r\n".join([*lines, "ER  - ", ""])


def schema_org(record: Record) -> str:
    """A schema.org JSON-LD description; ``@id`` is the persistent URL."""
    node: dict[str, object] = {
        "@context": "https://schema.org",
        "@type": record.kinds()[1],
        "@id": record.persistent_url,
        "identifier": record.persistent_url,
        "url": record.persistent_url,
    }
    optional = {
        "name": record.first("title"),
        "description": record.first("description"),
        "datePublished": record.first("date"),
        "inLanguage": record.first("language") or record.language,
        "license": record.first("rights"),
    }
    node.update({k: v for k, v in optional.items() if v is not None})
    if creators := record.all("creator"):
        node["author"] = [{"@type": "Person", "name": name} for name in creators]
    if publisher := record.first("publisher"):
        node["publisher"] = {"@type": "Organization", "name": publisher}
    if subjects := record.all("subject"):
        node["keywords"] = subjects
    if record.withdrawn is not None:
        node["creativeWorkStatus"] = "Withdrawn"
    return json.dumps(node, ensure_ascii=False, indent=2) + "\n"


def scholar_date(record: Record) -> str | None:
    """The date as Google Scholar reads ``citation_publication_date``: ``2024/05/01``,
    ``2024/05`` or ``2024``; None when the record gives none."""
    parts = record.date_parts()
    if not parts:
        return None
    return "/".join(f"{part:02d}" if at else f"{part:04d}" for at, part in enumerate(parts))


# The institution Google Scholar reads for a thesis or a report: the record's publisher.
_INSTITUTIONS = {
    "thesis": "citation_dissertation_institution",
    "report": "citation_technical_report_institution",
}


def meta_tags(record: Record, *, pdf_url: str | None = None) -> list[tuple[str, str]]:
    """A landing page's ``<meta name=… content=…>`` pairs, each value on one line: the
    Highwire Press tags Google Scholar reads first (one ``citation_author`` per creator,
    ``citation_pdf_url`` when the item has a PDF), then the Dublin Core ones other harvesters
    read, the persistent URL the ``DC.identifier``."""
    tags: list[tuple[str, str]] = []
    if title := record.first("title"):
        tags.append(("citation_title", title))
    tags += [("citation_author", creator) for creator in record.all("creator")]
    if date := scholar_date(record):
        tags.append(("citation_publication_date", date))
    if publisher := record.first("publisher"):
        tags.append(("citation_publisher", publisher))
        if institution := _INSTITUTIONS.get(record.kinds()[0]):
            tags.append((institution, publisher))
    language = record.first("language") or record.language
    if language:
        tags.append(("citation_language", language))
    tags += [("citation_keywords", subject) for subject in record.all("subject")]
    if pdf_url:
        tags.append(("citation_pdf_url", pdf_url))
    tags.append(("DC.identifier", record.persistent_url))
    for element in ("title", "creator", "date", "type", "publisher"):
        tags += [(f"DC.{element}", value) for value in record.all(element)]
    if language:
        tags.append(("DC.language", language))
    return [(name, one_line(value)) for name, value in tags]


def oai_dc(record: Record) -> str:
    """The OAI Dublin Core record, the persistent URL its first identifier; a withdrawn
    item's note its last ``dc:description``."""
    root = ElementTree.Element(f"{{{OAI_DC}}}dc", {f"{{{XSI}}}schemaLocation": OAI_DC_SCHEMA})
    given = record.all("identifier")
    values = {
        "identifier": [record.persistent_url, *(i for i in given if i != record.persistent_url)],
        "description": [
            *record.all("description"),
            *([record.withdrawn.note()] if record.withdrawn is not None else []),
        ],
    }
    for element in DC_ELEMENTS:
        for value in values.get(element) or record.all(element):
            ElementTree.SubElement(root, f"{{{DC}}}{element}").text = _XML_UNSAFE.sub(
                "\ufffd", value
            )
    ElementTree.indent(root)
    body = ElementTree.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


RENDERERS: dict[str, Callable[[Record], str]] = {
    CSL_JSON: csl_json,
    BIBTEX: bibtex,
    RIS: ris,
    JSON_LD: schema_org,
    OAI_DC_XML: oai_dc,
}
