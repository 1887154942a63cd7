"""The Archive item made of an OAI-PMH record: its body for ``POST /api/items`` (Dublin Core,
language, source, landing page), its deposit's ``Idempotency-Key``, and the URLs ``--fetch``
tries."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ibi_tools.harvest.oai import OaiRecord

HANDLE_HOSTS = frozenset({"hdl.handle.net", "handle.net"})
DOI_HOSTS = frozenset({"doi.org", "dx.doi.org", "www.doi.org"})
_DOI = re.compile(r"(?:doi:|info:doi/)?(10\.[0-9]{4,9}/\S+)", re.IGNORECASE)
HTTP_URL = re.compile(r"https?://\S+", re.IGNORECASE)
_LANGUAGE = re.compile(r"([a-z]{2})(?:[-_]([a-z]{2}))?", re.IGNORECASE)
_FILE_SUFFIX = re.compile(r"\.([A-Za-z0-9]{1,5})$")
_PAGE_SUFFIXES = frozenset({"htm", "html", "xhtml", "shtml", "php", "jsp", "asp", "aspx", "cgi"})
DATESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)?")


def doi_url(value: str) -> str | None:
    """``https://doi.org/<doi>`` for a DOI given bare, as ``doi:…``, or as a doi.org URL."""
    text = value.strip()
    if HTTP_URL.fullmatch(text):
        split = urlsplit(text)
        if (split.hostname or "").lower() not in DOI_HOSTS:
            return None
        text = unquote(split.path.lstrip("/"))
    match = _DOI.fullmatch(text)
    return f"https://doi.org/{quote(match.group(1), safe='/:;()._-')}" if match else None


def _http_urls(values: Sequence[str]) -> list[str]:
    return [v for v in values if HTTP_URL.fullmatch(v) and urlsplit(v).hostname]


def is_file_url(url: str) -> bool:
    """Whether a URL names a file by its look: a last segment with a suffix that is not a
    web page's (``…/1/T35886.pdf``, not ``…/28974/`` nor ``…/view.php``)."""
    segment = urlsplit(url).path.rpartition("/")[2]
    suffix = _FILE_SUFFIX.search(segment)
    return suffix is not None and suffix.group(1).lower() not in _PAGE_SUFFIXES


def landing_page(dc: dict[str, tuple[str, ...]]) -> str | None:
    """Where an imported item points (``url``): the record's DOI (``https://doi.org/…``), else
    its handle URL, else the first http(s) ``dc:identifier``, then ``dc:relation``, that does not
    look like a file, else the first that does; None when the record has no such URL."""
    identifiers = dc.get("identifier", ())
    for value in identifiers:
        doi = doi_url(value)
        if doi is not None:
            return doi
    candidates = _http_urls(identifiers)
    for url in candidates:
        if (urlsplit(url).hostname or "").lower() in HANDLE_HOSTS:
            return url
    candidates += _http_urls(dc.get("relation", ()))
    pages = [url for url in candidates if not is_file_url(url)]
    files = [url for url in candidates if is_file_url(url)]
    chosen = pages or files
    return chosen[0] if chosen else None


def language(dc: dict[str, tuple[str, ...]]) -> str | None:
    """The item's language: the first ``dc:language`` that is ``ll`` or ``ll-CC`` (``_`` too)."""
    for value in dc.get("language", ()):
        match = _LANGUAGE.fullmatch(value.strip())
        if match:
            tag, country = match.groups()
            return tag.lower() + (f"-{country.upper()}" if country else "")
    return None


def item_body(record: OaiRecord, repository: str) -> dict[str, Any]:
    """The ``POST /api/items`` body of a record (its ``url`` left out by a ``--fetch`` that
    found files)."""
    source = {"repository": repository, "identifier": record.identifier}
    if DATESTAMP.fullmatch(record.datestamp):
        source["datestamp"] = record.datestamp
    body: dict[str, Any] = {"dc": {k: list(v) for k, v in record.dc.items()}, "oai_source": source}
    url = landing_page(record.dc)
    if url is not None:
        body["url"] = url
    tag = language(record.dc)
    if tag is not None:
        body["language"] = tag
    return body


def idempotency_key(archive: str, repository: str, identifier: str) -> str:
    """The deposit's ``Idempotency-Key``: the same for the same record into the same Archive."""
    digest = hashlib.sha256(f"{archive}\n{repository}\n{identifier}".encode()).hexdigest()
    return f"ibi-import-{digest[:48]}"


def file_urls(dc: dict[str, tuple[str, ...]]) -> list[str]:
    """What ``--fetch`` tries: every http(s) ``dc:identifier`` and ``dc:relation``, once."""
    urls = _http_urls(dc.get("identifier", ())) + _http_urls(dc.get("relation", ()))
    return list(dict.fromkeys(urls))
