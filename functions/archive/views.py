"""What browsers get from an Archive: file URLs, the file-list page, metadata pages.

Pure: URLs and documents are built from items; the handler serves them. Every value from an
item or a request is HTML-escaped, and every page goes out under a Content-Security-Policy that
allows no script at all (``PAGE_HEADERS``); deposited files get ``file_headers``. The pages look
like the resolver's (``functions/shared/look.py``: one stylesheet, one skeleton) and link to
each other: the item, its file list, its metadata and its persistent URL at the resolver.

An item's file-list and metadata pages are landing pages search engines and harvesters read
(``landing_head``): Highwire Press and Dublin Core ``<meta>`` tags, and the schema.org JSON-LD
content negotiation answers, as a data block (``application/ld+json``: never run, so the policy
allows it). A deleted item's pages answer 410 with what was there and when and why it was
withdrawn (``tombstone_page``), for no search engine to index.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from http import HTTPStatus
from urllib.parse import quote
from xml.etree import ElementTree

from functions.archive.files import attachment
from functions.archive.model import Item
from functions.shared import look
from ibi.core.citation import Record, Withdrawal, meta_tags, schema_org
from ibi.core.dates import iso_date
from ibi.core.dublin_core import DC_ELEMENTS

RESOLVER_URL = "http://urlib.net"  # the persistent URLs' resolver when none is configured


class ArchiveViews:
    """The Archive's public URLs under ``base_url``; its items' persistent URLs at
    ``resolver_url`` (the resolver it joins, else urlib.net's: spec §3, ``http://`` resolver)."""

    def __init__(self, base_url: str, resolver_url: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.resolver_url = (resolver_url or RESOLVER_URL).rstrip("/")
        self.resolver_known = bool(resolver_url)  # the resolver this Archive joins

    def persistent_url(self, item: Item) -> str | None:
        """The item's persistent URL at the resolver this Archive joins (None when it joins none:
        pages then link only what the Archive itself serves)."""
        return f"{self.resolver_url}/{item.key}" if self.resolver_known else None

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

    def default_file_url(self, item: Item) -> str:
        """``/col/<ibi>``: the item's default file, by the item's own URL."""
        return f"{self.base_url}/col/{item.key}"

    def file_list_url(self, item: Item) -> str:
        return f"{self.base_url}/list/{item.key}"

    def linkset_url(self, item: Item) -> str:
        return f"{self.base_url}/linkset/{item.key}"

    def metadata_url(self, item: Item, format: str | None) -> str:
        url = f"{self.base_url}/metadata/{item.key}"
        return url + "?format=oai_dc" if format == "oai_dc" else url


_STYLE = look.STYLE  # the resolver's stylesheet (functions/shared/look.py)
_STYLE_HASH = look.STYLE_HASH
# The Archive's pages run no script and load nothing: only the shared style, by its hash.
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; {look.STYLE_SOURCE}; img-src 'self'; "
    "form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, **look.COMMON_HEADERS}

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


_e = look.escape

# The pages of an item, in the order their links are shown (the one shown is named, not linked).
ITEM, FILES, METADATA = "item", "files", "metadata"


def _web(url: str | None) -> bool:
    """Whether ``url`` may be a link: http(s) only (never ``javascript:`` and the like)."""
    return bool(url) and str(url).isascii() and str(url).startswith(("http://", "https://"))


def _link(href: str, text: str, name: str, here: str | None) -> str:
    if name == here:
        return f'<strong aria-current="page">{_e(text)}</strong>'
    return f'<a id="{name}-link" href="{_e(href)}">{_e(text)}</a>'


def item_links(item: Item, views: ArchiveViews, here: str | None = None) -> list[str]:
    """The links between an item's pages: the item itself, its file list, its metadata and its
    persistent URL at the resolver; only those this Archive can answer with something."""
    links = []
    # The item as its persistent URL leads to it; its default file by the item's own URL, so
    # that the link names no file of an item whose files are not listed.
    url = item.external_url or (views.default_file_url(item) if item.main_file else None)
    if here == ITEM or (_web(url) and not item.deleted):
        links.append(_link(str(url), "Item", ITEM, here))
    if here == FILES or (item.listable and item.files and not item.deleted):
        links.append(_link(views.file_list_url(item), "Files", FILES, here))
    if item.dc:
        links.append(_link(views.metadata_url(item, None), "Metadata", METADATA, here))
    persistent = views.persistent_url(item)
    if persistent is not None and _web(persistent):
        links.append(_link(persistent, "Persistent URL", "persistent", here))
    return links


def _forms(item: Item) -> str:
    """The item's IBI in each of its forms, and its state here."""
    labels = " · ".join(f"<code>{_e(label)}</code>" for label in item.ibi.labels)
    return f'<p class="muted wrap">IBI {labels} — {_e(item.state.value)}</p>'


def _footer(status: int | None, views: ArchiveViews | None = None) -> str:
    """The pages' last line, as the resolver's alerts end: the status of an error, whose page
    this is, and the resolver the Archive joins."""
    resolver = (
        f' · <a href="{_e(views.resolver_url)}/">IBI resolver</a>'
        if views is not None and views.resolver_known and _web(views.resolver_url)
        else ""
    )
    answered = f"HTTP {status} · " if status is not None else ""
    return f'<p class="muted">{answered}IBI Archive{resolver}</p>'


def _item_page(
    title: str, item: Item, views: ArchiveViews, here: str, content: str, *, head: str = ""
) -> str:
    """A page of an item: its heading, its IBI, the links between its pages, ``content``;
    ``head`` (already HTML) in its ``<head>``."""
    links = look.link_line(item_links(item, views, here), element_id="links")
    heading = f'<h1 class="wrap">{_e(title)}</h1>'
    body = f"{heading}{_forms(item)}{links}{content}{_footer(None, views)}"
    return look.document(title, body, head=head)


def _to_second(date: Decimal) -> str:
    """ISO 8601 UTC to the second, as the protocol's ``timestamp`` (``Item.iso_timestamp``)."""
    return iso_date(Decimal(int(date)))


def citation_record(item: Item, views: ArchiveViews) -> Record:
    """The item's citation record (``ibi/core/citation.py``), as the resolver's content
    negotiation makes it: named by its persistent URL (its metadata page's URL when this
    Archive joins no resolver, or one not http(s)); a tombstone's with its withdrawal."""
    withdrawal = item.withdrawal
    persistent = views.persistent_url(item)
    return Record(
        persistent_url=persistent
        if persistent is not None and _web(persistent)
        else views.metadata_url(item, None),
        ibi=item.key,
        dc=item.dc,
        language=item.language,
        withdrawn=Withdrawal(_to_second(withdrawal[0]), withdrawal[1]) if withdrawal else None,
    )


def json_ld_script(record: Record) -> str:
    """The record's schema.org JSON-LD (what content negotiation answers) as a data block;
    ``<``, ``>`` and ``&`` written as JSON escapes, so that no value ends the script."""
    data = schema_org(record)
    for char in "<>&":
        data = data.replace(char, f"\\u{ord(char):04x}")
    return f'<script type="application/ld+json">{data}</script>'


def pdf_url(item: Item, views: ArchiveViews) -> str | None:
    """The item's PDF, for ``citation_pdf_url``: its main file when that is a PDF (by the
    item's own URL when its files are not listed), else the first PDF of a listable item."""
    main = item.main_file
    intact = [f for f in item.files if f.path not in item.damaged]
    if main is not None and main in intact and media_type(main.content_type) == "application/pdf":
        return views.file_url(item, main.path) if item.listable else views.default_file_url(item)
    pdfs = [f for f in intact if media_type(f.content_type) == "application/pdf"]
    return views.file_url(item, pdfs[0].path) if pdfs and item.listable else None


def landing_head(item: Item, views: ArchiveViews) -> str:
    """What search engines and harvesters read in an item's pages (as Zenodo, DSpace and
    Dataverse write it): the Highwire Press and Dublin Core ``<meta>`` tags, every value
    escaped, and the schema.org JSON-LD. Nothing for an item with no metadata, or deleted."""
    if not item.dc or item.deleted:
        return ""
    record = citation_record(item, views)
    tags = "".join(
        f'<meta name="{_e(name)}" content="{_e(value)}">'
        for name, value in meta_tags(record, pdf_url=pdf_url(item, views))
    )
    schema = '<link rel="schema.DC" href="http://purl.org/dc/elements/1.1/">'
    return f"{schema}{tags}{json_ld_script(record)}"


def tombstone_page(item: Item, views: ArchiveViews, here: str) -> str:
    """A deleted item's page (its answer is a 410), as DataCite's and Zenodo's tombstones:
    what was there (title, creators, date) and when and why it was withdrawn; ``noindex``,
    so that search engines drop it, and the links to its metadata and persistent URL."""
    record = citation_record(item, views)
    title = record.first("title") or item.key
    withdrawal = item.withdrawal
    rows = [
        ("Title", record.first("title")),
        ("Creators", "; ".join(record.all("creator")) or None),
        ("Date", record.first("date")),
        ("Deleted", _to_second(withdrawal[0]) if withdrawal else None),
        ("Reason", withdrawal[1] if withdrawal and withdrawal[1] else None),
    ]
    listed = "".join(f"<dt>{name}</dt><dd>{_e(value)}</dd>" for name, value in rows if value)
    moved = withdrawal is None  # a transfer left it: the original lives on elsewhere
    said = (
        "This Archive released the original in a transfer: its persistent URL leads to it."
        if moved
        else "Its IBI stays known and is never reused."
    )
    content = (
        f'<p role="alert"><strong>This item was deleted.</strong> {said}</p>'
        f'<dl id="tombstone">{listed}</dl>'
    )
    if here == METADATA:
        content += _metadata_table(item)
    head = '<meta name="robots" content="noindex">'
    return _item_page(f"Deleted: {title}", item, views, here, content, head=head)


def _title(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def error_page(status: int, message: str, *, links: Sequence[str] = ()) -> str:
    """An error as a page: every word of ``message`` (which may quote the URL) escaped;
    ``links`` (already HTML, from ``item_links``) lead on from it."""
    title = _title(status)
    body = (
        f'<h1 class="wrap">{_e(title)}</h1><p class="wrap" role="alert">{_e(message)}</p>'
        f"{look.link_line(links, element_id='links')}{_footer(status)}"
    )
    return look.document(title, body)


def integrity_page(item: Item, path: str, message: str, views: ArchiveViews) -> str:
    """A file whose bytes failed their SHA-256 here (the answer is a 500): what happened, and
    where a reader goes on from it (the persistent URL leads to a good copy if there is one)."""
    title = "A file failed its integrity check"
    body = (
        f'<h1 class="wrap">{_e(title)}</h1>{_forms(item)}'
        f'<p class="wrap">File: <code>{_e(path)}</code></p>'
        f'<p class="error wrap" role="alert">{_e(message)}</p>'
        f"{look.link_line(item_links(item, views, ITEM), element_id='links')}{_footer(500, views)}"
    )
    return look.document(title, body)


def file_list_page(item: Item, views: ArchiveViews) -> str:
    title = f"Files of {item.ibi.key}"
    if not item.listable:
        return _item_page(
            title,
            item,
            views,
            FILES,
            "<p><strong>Listing the files of this item is not allowed.</strong> The item itself "
            "can still be reached through its persistent URL.</p>",
        )
    if item.deleted:
        return tombstone_page(item, views, FILES)
    rows = "".join(
        f'<tr><td><a href="{_e(views.file_url(item, f.path))}"><code>{_e(f.path)}</code></a>'
        f"{' (default)' if f.path == item.default_file else ''}</td><td>{f.size}</td>"
        f"<td><code>{_e(f.sha256)}</code></td></tr>"
        for f in item.files
    )
    table = (
        '<table id="files"><thead><tr><th>file</th><th>bytes</th><th>SHA-256</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
        if item.files
        else "<p>This item has no files in this Archive.</p>"
    )
    return _item_page(title, item, views, FILES, table, head=landing_head(item, views))


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


def oai_dc_element(item: Item, *, persistent_url: str | None = None) -> ElementTree.Element:
    """The item's metadata as an ``oai_dc:dc`` element: what ``GET /metadata/<ibi>?format=oai_dc``
    answers and what OAI-PMH records carry (``oai.py``). ``persistent_url`` (OAI-PMH's records:
    the item's URL at the resolver) comes first among the ``dc:identifier``s, before those
    the depositor gave and the bare IBI in each of its forms.

    Always well-formed XML: a value holding a character XML cannot carry (possible only in
    a record stored before the deposit API refused them) shows U+FFFD in its place.
    """
    given = item.dc.get("identifier", ())
    identifiers = [*given, *(label for label in item.ibi.labels if label not in given)]
    if persistent_url is not None:
        identifiers = [persistent_url, *(i for i in identifiers if i != persistent_url)]
    record = ElementTree.Element(f"{{{OAI_DC}}}dc", {f"{{{XSI}}}schemaLocation": OAI_DC_SCHEMA})
    for element in DC_ELEMENTS:
        for value in identifiers if element == "identifier" else item.dc.get(element, ()):
            ElementTree.SubElement(record, f"{{{DC}}}{element}").text = xml_text(value)
    return record


def oai_dc(item: Item) -> str:
    """The item's metadata as an OAI Dublin Core record (built with ElementTree)."""
    record = oai_dc_element(item)
    ElementTree.indent(record)
    body = ElementTree.tostring(record, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


def _metadata_table(item: Item) -> str:
    rows = "".join(
        f'<tr><th scope="row">{element}</th><td>{"<br>".join(map(_e, item.dc[element]))}</td></tr>'
        for element in DC_ELEMENTS
        if item.dc.get(element)
    )
    return f'<table id="metadata"><tbody>{rows}</tbody></table>'


def metadata_page(item: Item, views: ArchiveViews) -> str:
    """The item's metadata page (a tombstone's when it is deleted: its answer is a 410)."""
    if item.deleted:
        return tombstone_page(item, views, METADATA)
    title = next(iter(item.dc.get("title", ())), item.ibi.key)
    record = _e(views.metadata_url(item, "oai_dc"))
    content = (
        f"{_metadata_table(item)}"
        f'<p><a id="oai-dc-link" href="{record}">OAI Dublin Core (XML)</a></p>'
        f"{usage_section(item)}"
    )
    head = landing_head(item, views)
    return _item_page(f"Metadata: {title}", item, views, METADATA, content, head=head)


def usage_section(item: Item) -> str:
    """The item's public usage figures (``ibi/core/usage.py``): accesses through its persistent
    URL that this Archive counted, by month (UTC) and in all."""
    return (
        "<h2>Usage</h2>"
        '<p class="muted">Accesses through the persistent URL that the resolver acknowledged '
        "to this Archive, by calendar month (UTC), as COUNTER reports count them.</p>"
        f"{look.usage_table(item.usage, element_id='usage')}"
    )
