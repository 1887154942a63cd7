"""An item's citation in the formats citation managers and harvesters ask for (issue 16).

Built from the item's Dublin Core as its Archive holds it (the holdings extension's
``holdings.dc.*`` pairs, ``ibi/core/holdings.py``) and the persistent URL that names it:

- CSL-JSON (``application/vnd.citationstyles.csl+json``), what Zotero, Mendeley and
  citeproc read;
- BibTeX (``application/x-bibtex``);
- schema.org JSON-LD (``application/ld+json``);
- OAI Dublin Core XML (``application/xml``), the record OAI-PMH harvesters read.

Pure: the standard library only (``json``, ``xml.etree``), so that the resolver's cold start
and bundle stay as they are; the tests check every output with a real consumer (citeproc-py,
bibtexparser and pybtex, pyld, ElementTree).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from xml.etree import ElementTree

CSL_JSON = "application/vnd.citationstyles.csl+json"
BIBTEX = "application/x-bibtex"
JSON_LD = "application/ld+json"
OAI_DC_XML = "application/xml"

OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC = "http://purl.org/dc/elements/1.1/"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
OAI_DC_SCHEMA = f"{OAI_DC} http://www.openarchives.org/OAI/2.0/oai_dc.xsd"
DC_ELEMENTS = (
    "title",
    "creator",
    "subject",
    "description",
    "publisher",
    "contributor",
    "date",
    "type",
    "format",
    "identifier",
    "source",
    "language",
    "relation",
    "coverage",
    "rights",
)
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
class Record:
    """What a citation is made of: the persistent URL, the IBI and the Dublin Core."""

    persistent_url: str
    ibi: str
    dc: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    language: str | None = None

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
    flat = _CONTROL.sub("\ufffd", " ".join(value.split()))
    return "".join(_BIBTEX_SPECIAL.get(c, c) for c in flat)


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
    fields.append(("note", bibtex_text(f"IBI: {record.ibi}")))
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
    return f"@misc{{{key},\n{body}\n}}\n"


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
    return json.dumps(node, ensure_ascii=False, indent=2) + "\n"


def oai_dc(record: Record) -> str:
    """The OAI Dublin Core record, the persistent URL its first identifier."""
    root = ElementTree.Element(f"{{{OAI_DC}}}dc", {f"{{{XSI}}}schemaLocation": OAI_DC_SCHEMA})
    given = record.all("identifier")
    identifiers = [record.persistent_url, *(i for i in given if i != record.persistent_url)]
    for element in DC_ELEMENTS:
        for value in identifiers if element == "identifier" else record.all(element):
            ElementTree.SubElement(root, f"{{{DC}}}{element}").text = _XML_UNSAFE.sub(
                "\ufffd", value
            )
    ElementTree.indent(root)
    body = ElementTree.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


RENDERERS: dict[str, Callable[[Record], str]] = {
    CSL_JSON: csl_json,
    BIBTEX: bibtex,
    JSON_LD: schema_org,
    OAI_DC_XML: oai_dc,
}
