"""Formatted citations: ``Accept: text/x-bibliography; style=…; locale=…`` (issue 16).

As doi.org's content negotiation: the item's citation as one line of text in a CSL style
(default ``apa``) and locale (default: the style's own, else ``en-US``), rendered by citeproc-py
from the CSL-JSON of ``ibi/core/citation.py``. The styles offered are the ``.csl`` files beside
this module (``styles/``); a style not among them is refused (406, with the list), a locale that
citeproc-py does not have falls back to its language's first locale, then to the style's own.

citeproc-py and lxml are imported only here, and this module only for such an answer: a cold
start that redirects never loads them.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ibi.core.citation import Record

MEDIA_TYPE = "text/x-bibliography"
STYLES_DIRECTORY = Path(__file__).with_name("styles")
STYLES = tuple(sorted(path.stem for path in STYLES_DIRECTORY.glob("*.csl")))
DEFAULT_STYLE = "apa"
_LOCALE = re.compile(r"([a-zA-Z]{2,3})(?:[-_]([a-zA-Z]{2}|\d{3}))?")


def style_path(style: str) -> Path:
    """The ``.csl`` file of a style this resolver offers (``style`` one of :data:`STYLES`)."""
    if style not in STYLES:
        raise KeyError(style)
    return STYLES_DIRECTORY / f"{style}.csl"


def normalize_locale(locale: str | None) -> str | None:
    """``pt_br`` → ``pt-BR``; None for what is not a language tag of that shape."""
    match = _LOCALE.fullmatch((locale or "").strip())
    if match is None:
        return None
    language, region = match.group(1).lower(), match.group(2)
    return f"{language}-{region.upper()}" if region else language


def _citeproc_locale(locale: str | None) -> str | None:
    """The locale citeproc-py has for ``locale``: itself, else its language's first; or None."""
    if locale is None:
        return None
    from citeproc.frontend import LOCALES_PATH

    available = sorted(
        path.stem.removeprefix("locales-") for path in Path(LOCALES_PATH).glob("locales-*.xml")
    )
    if locale in available:
        return locale
    language = locale.split("-")[0]
    return next((name for name in available if name.split("-")[0] == language), None)


@functools.lru_cache(maxsize=32)
def _style(style: str, locale: str | None) -> Any:
    """The parsed style and locale, kept per execution environment: parsing a CSL style and
    its locale is most of a formatted citation's time, and neither changes."""
    from citeproc import CitationStylesStyle

    return CitationStylesStyle(
        str(style_path(style)), locale=_citeproc_locale(locale), validate=False
    )


def render(record: Record, style: str, locale: str | None) -> str:
    """The record's citation in ``style`` (one of :data:`STYLES`), as one line of text."""
    from citeproc import Citation, CitationItem, CitationStylesBibliography, formatter
    from citeproc.source.json import CiteProcJSON

    from ibi.core.citation import csl_json

    (item,) = json.loads(csl_json(record))
    source = CiteProcJSON([item])
    bibliography = CitationStylesBibliography(_style(style, locale), source, formatter.plain)
    bibliography.register(Citation([CitationItem(item["id"])]))
    entries = [" ".join(str(entry).split()) for entry in bibliography.bibliography()]
    if (first := _first_field(bibliography)) and entries[0].startswith(first):
        entries[0] = f"{first} {entries[0][len(first) :].lstrip()}".rstrip()
    return "\n".join(entries) + "\n"


def _first_field(bibliography: Any) -> str | None:
    """The first field of a style with ``second-field-align`` (ieee's ``[1]``, nature's ``1.``).

    CSL sets that field apart from the rest of the entry (a column of its own, CSL 1.0.2
    "Whitespace"); citeproc-py's plain text writes the two together (``[1]G. Câmara``), so
    :func:`render` puts the space that stands for the column between them.
    """
    element = bibliography.style.root.bibliography
    if element is None or not element.get("second-field-align"):
        return None
    layout = element.layout
    layout.repressed = {}  # as citeproc-py's Layout sets it before rendering an entry
    text = layout.getchildren()[0].render(bibliography.items[0])
    return " ".join(str(text).split()) if text is not None else None
