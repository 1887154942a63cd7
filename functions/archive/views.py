"""What browsers get from an Archive: file URLs, the file-list page, metadata pages.

Pure: URLs and documents are built from items; the handler serves them. Every value from an
item or a request is HTML-escaped, and every page goes out under a Content-Security-Policy that
allows no script at all (``PAGE_HEADERS``); deposited files get ``file_headers``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from urllib.parse import quote
from xml.etree import ElementTree

from functions.archive.files import attachment
from functions.archive.model import DC_ELEMENTS, Item

RESOLVER_URL = "http://urlib.net"  # the persistent URLs' resolver when none is configured


class ArchiveViews:
    """The Archive's public URLs under ``base_url``; its items' persistent URLs at
    ``resolver_url`` (the resolver it joins, else urlib.net's: spec §3, ``http://`` resolver)."""

    def __init__(self, base_url: str, resolver_url: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.resolver_url = (resolver_url or RESOLVER_URL).rstrip("/")

    def item_url(self, item: Item) -> str | None:
        if item.external_url:
            return item.external_url
        main = item.main_file
        if main is not None:
            return self.file_url(item, main.path)
        if item.files:
            return self.file_list_url(item)
        return None

    def file_url(self, item: Item, path: str) -> str:
        return f"{self.base_url}/col/{item.key}/{quote(path)}"

    def file_list_url(self, item: Item) -> str:
        return f"{self.base_url}/list/{item.key}"

    def linkset_url(self, item: Item) -> str:
        return f"{self.base_url}/linkset/{item.key}"

    def metadata_url(self, item: Item, format: str | None) -> str:
        url = f"{self.base_url}/metadata/{item.key}"
        return url + "?format=oai_dc" if format == "oai_dc" else url


_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:50rem;margin:2rem auto;padding:0 1rem}"
    "table{border-collapse:collapse}td,th{padding:.25rem .75rem;text-align:left;"
    "border-bottom:1px solid #ddd}code{font-size:.9em}"
)
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
# The Archive's pages run no script and load nothing: only their own style, by its hash.
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src 'self'; "
    "form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

# Deposited files: shown inline only for types a browser displays without running anything
# of the file's; every other type (HTML, SVG, XML, scripts, unknown) is sent as an attachment.
# Every file answer also carries a sandboxing policy (no script, no plugin, an opaque origin)
# and ``nosniff``, so that bytes never become a page of the Archive's origin.
PASSIVE_TYPES = frozenset(
    {
        "text/plain",
        "text/csv",
        "application/pdf",
        "application/json",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/avif",
        "image/bmp",
    }
)
PASSIVE_FAMILIES = ("audio/", "video/")
FILE_POLICY = (
    "sandbox; default-src 'none'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'"
)


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_passive(content_type: str) -> bool:
    """Whether a browser shows this type without running code from it."""
    media = media_type(content_type)
    return media in PASSIVE_TYPES or media.startswith(PASSIVE_FAMILIES)


def file_headers(content_type: str, path: str) -> dict[str, str]:
    """The safety headers of a deposited file served from the Archive's origin.

    PDF keeps no ``sandbox`` (browsers' PDF viewers refuse sandboxed documents; a PDF's own
    scripts run in the viewer, never in the origin); every other type is sandboxed.
    """
    headers = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
    if media_type(content_type) != "application/pdf":
        headers["Content-Security-Policy"] = FILE_POLICY
    if not is_passive(content_type):
        headers["Content-Disposition"] = attachment(path.rsplit("/", 1)[-1] or "file")
    return headers


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_STYLE}</style></head><body>{body}</body></html>\n"
    )


def error_page(status: int, message: str) -> str:
    """An error as a page: every word of ``message`` (which may quote the URL) escaped."""
    return _page(str(status), f"<h1>{status}</h1><p>{html.escape(message)}</p>")


def file_list_page(item: Item, views: ArchiveViews) -> str:
    title = f"Files of {item.ibi.key}"
    heading = f"<h1>{html.escape(title)}</h1>"
    forms = " · ".join(f"<code>{html.escape(label)}</code>" for label in item.ibi.labels)
    if not item.listable:
        return _page(
            title,
            f"{heading}<p>{forms}</p><p><strong>Listing the files of this item is not "
            "allowed.</strong> The item itself can still be reached through its persistent "
            "URL.</p>",
        )
    if item.deleted:
        return _page(title, f"{heading}<p>{forms}</p><p>This item was deleted.</p>")
    rows = "".join(
        f'<tr><td><a href="{html.escape(views.file_url(item, f.path))}">{html.escape(f.path)}'
        f"</a>{' (default)' if f.path == item.default_file else ''}</td><td>{f.size}</td>"
        f"<td><code>{f.sha256}</code></td></tr>"
        for f in item.files
    )
    table = (
        "<table><thead><tr><th>file</th><th>bytes</th><th>SHA-256</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        if item.files
        else "<p>This item has no files in this Archive.</p>"
    )
    return _page(title, f"{heading}<p>{forms} — {item.state.value}</p>{table}")


OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC = "http://purl.org/dc/elements/1.1/"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
OAI_DC_SCHEMA = f"{OAI_DC} http://www.openarchives.org/OAI/2.0/oai_dc.xsd"
ElementTree.register_namespace("oai_dc", OAI_DC)
ElementTree.register_namespace("dc", DC)
ElementTree.register_namespace("xsi", XSI)


# What XML 1.0 cannot carry (its Char production): most C0 controls, lone surrogates, U+FFFE
# and U+FFFF. The deposit API refuses them; a record stored before that shows U+FFFD instead.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(value: str) -> str:
    """``value`` with each character XML 1.0 forbids replaced by U+FFFD."""
    return NOT_XML.sub("\ufffd", value)


def oai_dc(item: Item) -> str:
    """The item's metadata as an OAI Dublin Core record (built with ElementTree).

    Always well-formed XML: a value holding a character XML cannot carry (possible only in
    a record stored before the deposit API refused them) shows U+FFFD in its place.
    """
    given = item.dc.get("identifier", ())
    identifiers = [*given, *(label for label in item.ibi.labels if label not in given)]
    record = ElementTree.Element(f"{{{OAI_DC}}}dc", {f"{{{XSI}}}schemaLocation": OAI_DC_SCHEMA})
    for element in DC_ELEMENTS:
        for value in identifiers if element == "identifier" else item.dc.get(element, ()):
            ElementTree.SubElement(record, f"{{{DC}}}{element}").text = xml_text(value)
    ElementTree.indent(record)
    body = ElementTree.tostring(record, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


def metadata_page(item: Item, views: ArchiveViews) -> str:
    title = next(iter(item.dc.get("title", ())), item.ibi.key)
    rows = "".join(
        f"<tr><th>{element}</th><td>{'<br>'.join(map(html.escape, item.dc[element]))}</td></tr>"
        for element in DC_ELEMENTS
        if item.dc.get(element)
    )
    forms = "".join(
        f"<tr><th>IBI</th><td><code>{html.escape(x)}</code></td></tr>" for x in item.ibi.labels
    )
    link = html.escape(views.metadata_url(item, "oai_dc"))
    return _page(
        f"Metadata: {title}",
        f"<h1>{html.escape(title)}</h1><table>{forms}{rows}</table>"
        f'<p><a href="{link}">OAI Dublin Core (XML)</a></p>',
    )
