"""An Archive's pages as documents: the resolver's look, links between an item's pages, the
integrity failure as a page of its own (issue 15, Pages)."""

from __future__ import annotations

import hashlib
import re
from decimal import Decimal

import pytest

from functions.archive import views
from functions.archive.content import DAMAGED, ContentService
from functions.archive.model import Item
from functions.archive.service import ArchiveService
from functions.archive.views import ArchiveViews
from functions.resolver import pages
from functions.shared import look
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore, MemoryItemStore, MemoryMinter

BASE = "https://archive.example.org"
RESOLVER = "https://resolver.example.org"
ITEM = "8JMKD3MGP8W/35MME4E"
OWN = ("8JMKD3MGP8W",)
HELLO = b"hello world"


@pytest.fixture
def service() -> ArchiveService:
    clock = FakeClock(Decimal(1795473000))
    return ArchiveService(MemoryItemStore(), clock=clock, mint=MemoryMinter(), own_prefixes=OWN)


def deposited(
    service: ArchiveService, files: MemoryFileStore, *, listable: bool = True, resolver: bool = True
) -> tuple[Item, ContentService]:
    """An original with metadata and one file, and the Archive's content under its views."""
    views_ = ArchiveViews(BASE, RESOLVER if resolver else None)
    content = ContentService(service, views=views_, files=files, serve_inline_bytes=1024)
    service.create_original(
        {"ibi": ITEM, "listable": listable, "dc": {"title": ["A report"], "creator": ["Ana"]}}
    )
    files.upload(ITEM, "hello.txt", HELLO)
    declared = {"path": "hello.txt", "sha256": hashlib.sha256(HELLO).hexdigest(), "size": 11}
    item, _ = content.commit_files(ITEM, {"files": [declared], "default_file": "hello.txt"})
    return item, content


def links(page: str) -> dict[str, str]:
    """The page's links between an item's pages, by their ids."""
    return dict(re.findall(r'<a id="([a-z-]+)-link" href="([^"]+)"', page))


def test_archive_and_resolver_pages_share_one_stylesheet_allowed_by_its_hash() -> None:
    archive_page = views.error_page(404, "no item")
    resolver_page = pages.alert_page(404, "Not found", "no item")
    for page in (archive_page, resolver_page):
        assert f"<style>{look.STYLE}</style>" in page
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert look.STYLE_SOURCE in views.CONTENT_SECURITY_POLICY
    assert look.STYLE_SOURCE in pages.CONTENT_SECURITY_POLICY
    assert "script-src" not in views.CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in views.CONTENT_SECURITY_POLICY


def test_the_file_list_links_the_item_its_metadata_and_its_persistent_url(
    service: ArchiveService,
) -> None:
    _, content = deposited(service, MemoryFileStore())
    page = str(content.file_list(ITEM).body)
    assert links(page) == {
        "item": f"{BASE}/col/{ITEM}",
        "metadata": f"{BASE}/metadata/{ITEM}",
        "persistent": f"{RESOLVER}/{ITEM}",
    }
    assert '<strong aria-current="page">Files</strong>' in page
    assert f'href="{BASE}/col/{ITEM}/hello.txt"' in page and "(default)" in page


def test_the_metadata_page_links_the_item_its_files_its_record_and_its_persistent_url(
    service: ArchiveService,
) -> None:
    _, content = deposited(service, MemoryFileStore())
    page = str(content.metadata(ITEM, None).body)
    assert links(page) == {
        "item": f"{BASE}/col/{ITEM}",
        "files": f"{BASE}/list/{ITEM}",
        "oai-dc": f"{BASE}/metadata/{ITEM}?format=oai_dc",
        "persistent": f"{RESOLVER}/{ITEM}",
    }
    assert '<th scope="row">creator</th><td>Ana</td>' in page


def test_without_a_resolver_the_pages_link_what_the_archive_serves(
    service: ArchiveService,
) -> None:
    _, content = deposited(service, MemoryFileStore(), resolver=False)
    page = str(content.metadata(ITEM, None).body)
    assert set(links(page)) == {"item", "files", "oai-dc"}
    assert "urlib.net" not in page and "IBI resolver" not in page


def test_an_unlisted_item_links_no_file_list_and_names_no_file(service: ArchiveService) -> None:
    _, content = deposited(service, MemoryFileStore(), listable=False)
    listing = content.file_list(ITEM)
    assert listing.status == 403 and "hello.txt" not in str(listing.body)
    assert "files" not in links(str(content.metadata(ITEM, None).body))


def test_the_integrity_failure_is_a_styled_page_that_leads_on(service: ArchiveService) -> None:
    files = MemoryFileStore()
    deposited(service, files)
    files.put(ITEM, "hello.txt", b"hello w0rld")  # bit rot
    answer = ContentService(
        service, views=ArchiveViews(BASE, RESOLVER), files=files, serve_inline_bytes=1024
    ).serve_file(ITEM, "", None)
    assert answer.status == 500 and answer.damaged and answer.page is not None
    assert answer.page.status == 500 and answer.page.content_type == "html"
    page = str(answer.page.body)
    assert page.startswith("<!doctype html>") and f"<style>{look.STYLE}</style>" in page
    assert "A file failed its integrity check" in page and "<code>hello.txt</code>" in page
    assert DAMAGED in page and 'role="alert"' in page
    # The reader goes on to the other pages and to a good copy through the persistent URL;
    # never back to the damaged bytes.
    assert links(page) == {
        "files": f"{BASE}/list/{ITEM}",
        "metadata": f"{BASE}/metadata/{ITEM}",
        "persistent": f"{RESOLVER}/{ITEM}",
    }


def test_a_link_is_never_a_script(service: ArchiveService) -> None:
    service.create_original({"ibi": ITEM, "dc": {"title": ["x"]}})
    item = service.get(ITEM)
    hostile = ArchiveViews(BASE, "javascript:alert(1)//")
    page = views.metadata_page(item, hostile)
    assert "javascript:" not in page


def test_an_error_page_names_its_status_and_escapes_the_message() -> None:
    page = views.error_page(404, "no page '<b>x</b>'")
    assert "<h1" in page and "404 Not Found" in page
    assert "<b>x" not in page and "&lt;b&gt;x" in page
    assert "HTTP 404 · IBI Archive" in page


def test_a_deleted_item_links_only_its_metadata_and_persistent_url(
    service: ArchiveService,
) -> None:
    _, content = deposited(service, MemoryFileStore())
    service.delete(ITEM)
    answer = content.serve_file(ITEM, "", None)
    assert answer.status == 410 and answer.page is not None
    page = str(answer.page.body)
    assert "This item was deleted." in page and "hello.txt" not in page
    assert set(links(page)) == {"metadata", "persistent"}
