"""Content negotiation and FAIR Signposting at the resolver (issue 16, docs/resolver.md).

``GET /<ibi>`` with an ``Accept`` that prefers a metadata type to a page answers 200 with the
item's citation in that type (``ibi/core/citation.py``), made from the Dublin Core that the
Archive which answered the resolution gives in its holdings pairs. The resolution is the
ordinary one (modifiers keep their meaning: ``!`` cites the last edition); its requests only
also carry ``extension.holdings=yes``, so a negotiated answer costs no extra round.

``text/x-bibliography`` (a formatted citation, ``style`` and ``locale`` parameters as doi.org's)
is chosen here as ``text/x-bibliography; style=<style>[; locale=<locale>]`` and rendered by
``bibliography.py``; a style it does not offer is 406.

A browser (``text/html`` or ``*/*`` at least as wanted), a client with no ``Accept``, and any
type this module does not know keep the 302: a file's own type (``application/pdf``) is the
redirect's business. A metadata type of the DOI world that is not offered here (RDF, DataCite
XML, JATS) answers 406 with the list of what is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from functions.shared.headers import accept_ranges
from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList

if TYPE_CHECKING:
    from ibi.core.citation import Record

# As ibi/core/citation.py names them (a test checks): that module, ElementTree and the holdings
# parser are imported only for a negotiated answer, never by a cold start that redirects.
CSL_JSON = "application/vnd.citationstyles.csl+json"
BIBTEX = "application/x-bibtex"
RIS = "application/x-research-info-systems"
JSON_LD = "application/ld+json"
OAI_DC_XML = "application/xml"
OFFERED = (CSL_JSON, BIBTEX, RIS, JSON_LD, OAI_DC_XML)
BIBLIOGRAPHY = "text/x-bibliography"  # formatted: bibliography.py, with style and locale
STYLE_ALIASES = {
    "mla": "modern-language-association",
    "chicago": "chicago-author-date",
    "harvard": "harvard-cite-them-right",
    "harvard1": "harvard-cite-them-right",
    "abnt": "associacao-brasileira-de-normas-tecnicas",
}
ALIASES = {
    "application/citeproc+json": CSL_JSON,
    "application/vnd.schemaorg.ld+json": JSON_LD,
    "text/xml": OAI_DC_XML,
}
NOT_OFFERED = frozenset(
    {
        "application/rdf+xml",
        "text/turtle",
        "application/vnd.datacite.datacite+xml",
        "application/vnd.datacite.datacite+json",
        "application/vnd.crossref.unixref+xml",
        "application/vnd.jats+xml",
        "application/x-bibtex-text-utf8",
    }
)
PAGES = frozenset({"text/html", "application/xhtml+xml", "*/*", "text/*"})
DESCRIBED_BY = (CSL_JSON, BIBTEX, RIS, JSON_LD, OAI_DC_XML)


@dataclass(frozen=True, slots=True)
class NotAcceptable:
    """A metadata type asked for that is not offered: 406 with :data:`OFFERED`."""

    asked: str


def formatted(parameters: dict[str, str]) -> str | NotAcceptable:
    """``text/x-bibliography; style=…[; locale=…]`` for the style asked (default apa)."""
    from functions.resolver import bibliography

    asked = parameters.get("style", "").strip().lower() or bibliography.DEFAULT_STYLE
    style = STYLE_ALIASES.get(asked, asked)
    if style not in bibliography.STYLES:
        return NotAcceptable(f"{BIBLIOGRAPHY}; style={asked[:60]}")
    chosen = f"{BIBLIOGRAPHY}; style={style}"
    locale = bibliography.normalize_locale(parameters.get("locale"))
    return chosen + (f"; locale={locale}" if locale else "")


def choose(accept: str | None) -> str | NotAcceptable | None:
    """The metadata type to answer, :class:`NotAcceptable`, or None: the 302 as always.

    A metadata type wins only when wanted more than a page (``text/html``, ``*/*``); among
    offered types the highest q, then the first named.
    """
    ranges = accept_ranges(accept)
    page = max((q for kind, q, _ in ranges if kind in PAGES), default=0.0)
    best: tuple[float, str, dict[str, str]] | None = None
    refused: tuple[float, str] | None = None
    for kind, q, parameters in ranges:
        offered = ALIASES.get(kind, kind)
        if q <= page:
            continue
        if (offered in OFFERED or offered == BIBLIOGRAPHY) and (best is None or q > best[0]):
            best = (q, offered, parameters)
        elif kind in NOT_OFFERED and (refused is None or q > refused[0]):
            refused = (q, kind)
    if best is not None:
        return formatted(best[2]) if best[1] == BIBLIOGRAPHY else best[1]
    return NotAcceptable(refused[1]) if refused is not None else None


def record_of(pairs: PairList | None, *, persistent_url: str, ibi: str) -> Record | None:
    """The citation's record from an Archive's answer, if it gave Dublin Core; a tombstone's
    (``holdings.state Deleted``) with its withdrawal, even with no Dublin Core."""
    if pairs is None:
        return None
    from ibi.core.citation import Record, Withdrawal
    from ibi.core.holdings import from_pairs

    try:
        report = from_pairs(pairs)
    except InvalidInput:
        return None
    deleted = report is not None and report.state == "Deleted"
    if report is None or not (report.dc or deleted):
        return None
    withdrawn = Withdrawal(report.deleted_at or report.timestamp, report.deleted_reason)
    return Record(
        persistent_url=persistent_url,
        ibi=ibi,
        dc=report.dc,
        language=report.language,
        withdrawn=withdrawn if deleted else None,
    )


def render(media_type: str, record: Record) -> str:
    """The record in the chosen type (as :func:`choose` names it)."""
    if media_type.startswith(BIBLIOGRAPHY):
        from functions.resolver import bibliography

        parameters = dict(accept_ranges(media_type)[0][2])
        text = bibliography.render(record, parameters["style"], parameters.get("locale"))
        withdrawn = record.withdrawn
        return text if withdrawn is None else f"{text.rstrip()} [{withdrawn.note()}]\n"
    from ibi.core.citation import RENDERERS

    return RENDERERS[media_type](record)


def content_type(media_type: str) -> str:
    return f"{media_type.split(';', maxsplit=1)[0]}; charset=utf-8"


def signposting_links(cite_as: str, *, canonical: str) -> str:
    """The resolver's Link header: ``cite-as`` and a ``describedby`` per metadata type.

    The metadata is had from the persistent URL itself, by content negotiation, as doi.org's
    (each ``describedby`` says the type to ask for in ``Accept``).
    """
    links = [f'<{cite_as}>; rel="cite-as"']
    links += [f'<{canonical}>; rel="describedby"; type="{kind}"' for kind in DESCRIBED_BY]
    return ", ".join(links)


def not_acceptable_text(asked: str) -> str:
    from functions.resolver.bibliography import STYLES

    offered = "\n".join(f"  {kind}" for kind in OFFERED)
    styles = ", ".join(STYLES)
    return (
        f"406 Not Acceptable: {asked[:100]} is not offered for this persistent URL.\n"
        f"Available (Accept):\n{offered}\n"
        f"  {BIBLIOGRAPHY}; style=<style>; locale=<locale> (styles: {styles})\n"
        "Without one of them (or with text/html or */*) the persistent URL redirects.\n"
    )
