"""FAIR Signposting ``Link`` headers for an item's pages (issue 16, docs/resolver.md).

The item's file, file-list and metadata pages say, in one ``Link`` header (RFC 8288):

- ``cite-as``: the item's persistent URL at the resolver (``<resolver>/<IBI>``);
- ``describedby``: the metadata page (``text/html``) and the oai_dc record
  (``application/xml``), when the item has Dublin Core;
- ``item``: each file of a listable item, with its content type, up to :data:`MAX_ITEMS` files
  and :data:`MAX_FILE_LINKS` characters; past either, the file-list page as ``collection``
  instead, with the item's linkset (RFC 9264, ``application/linkset+json``, every link above
  and up to :data:`MAX_LINKSET_ITEMS` files, at ``/linkset/<ibi>``), since proxies drop
  headers past ~8 KiB; the external URL of an item without files;
- ``type``: the schema.org type, from ``dc:type`` (``CreativeWork`` when it says none);
- ``license``: ``dc:rights`` when it is an http(s) URL.

A harvester finds the persistent URL, the metadata and the files from the headers alone.
"""

from __future__ import annotations

import json
from typing import Any

from functions.archive.model import Item
from functions.archive.views import ArchiveViews
from functions.shared.headers import link_target

MAX_ITEMS = 32  # more files: the file list is linked instead (the header stays under ~8 KiB)
LINKSET = "application/linkset+json"
MAX_LINKSET_ITEMS = 5000  # files in one linkset document (each href at most ~3 KiB: < 6 MB)
MAX_FILE_LINKS = 6000  # characters of item links; past them, the file list instead
_KINDS = (
    ("dataset", "Dataset"),
    ("software", "SoftwareSourceCode"),
    ("thesis", "Thesis"),
    ("report", "Report"),
    ("article", "ScholarlyArticle"),
    ("book", "Book"),
)


def _quoted(value: str) -> str:
    """A media type as a quoted parameter value: only token characters kept."""
    kept = "".join(c for c in value if c.isascii() and (c.isalnum() or c in "/+-.=;_ "))
    words = kept.replace(";", " ").split()
    return words[0] if words else "application/octet-stream"


def schema_type(item: Item) -> str:
    said = " ".join(item.dc.get("type", ())).lower()
    return next((kind for word, kind in _KINDS if word in said), "CreativeWork")


def links(item: Item, views: ArchiveViews, resolver_url: str) -> str:
    """The ``Link`` header value for any public page of ``item``."""
    persistent_url = resolver_url.rstrip("/") + "/" + item.key
    found = [f'<{link_target(persistent_url)}>; rel="cite-as"']
    if item.dc:
        found.append(
            f'<{link_target(views.metadata_url(item, None))}>; rel="describedby"; type="text/html"'
        )
        oai = link_target(views.metadata_url(item, "oai_dc"))
        found.append(f'<{oai}>; rel="describedby"; type="application/xml"')
    files = [
        f'<{link_target(views.file_url(item, f.path))}>; rel="item"; '
        f'type="{_quoted(f.content_type)}"'
        for f in item.files[: MAX_ITEMS + 1]
    ]
    if not item.listable:
        files = []
    elif len(files) > MAX_ITEMS or sum(len(f) + 2 for f in files) > MAX_FILE_LINKS:
        files = [
            f'<{link_target(views.linkset_url(item))}>; rel="linkset"; type="{LINKSET}"',
            f'<{link_target(views.file_list_url(item))}>; rel="collection"; type="text/html"',
        ]
    if not item.files and item.external_url:
        files = [f'<{link_target(item.external_url)}>; rel="item"']
    found += files
    found.append(f'<https://schema.org/{schema_type(item)}>; rel="type"')
    rights = next(iter(item.dc.get("rights", ())), "")
    if rights.startswith(("https://", "http://")) and len(rights) <= 1024:
        found.append(f'<{link_target(rights)}>; rel="license"')
    return ", ".join(found)


def linkset(item: Item, views: ArchiveViews, resolver_url: str) -> dict[str, Any]:
    """The item's linkset (RFC 9264 JSON): the same links, every file (up to a cap) listed."""
    context: dict[str, Any] = {
        "anchor": views.file_list_url(item),
        "cite-as": [{"href": resolver_url.rstrip("/") + "/" + item.key}],
    }
    if item.dc:
        context["describedby"] = [
            {"href": views.metadata_url(item, None), "type": "text/html"},
            {"href": views.metadata_url(item, "oai_dc"), "type": "application/xml"},
        ]
    if item.listable:
        context["item"] = [
            {"href": views.file_url(item, f.path), "type": _quoted(f.content_type)}
            for f in item.files[:MAX_LINKSET_ITEMS]
        ]
    context["type"] = [{"href": f"https://schema.org/{schema_type(item)}"}]
    rights = next(iter(item.dc.get("rights", ())), "")
    if rights.startswith(("https://", "http://")) and len(rights) <= 1024:
        context["license"] = [{"href": rights}]
    return {"linkset": [context]}


def linkset_json(item: Item, views: ArchiveViews, resolver_url: str) -> str:
    return json.dumps(linkset(item, views, resolver_url), ensure_ascii=False, indent=1) + "\n"
