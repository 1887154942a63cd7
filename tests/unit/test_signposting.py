"""FAIR Signposting on the Archive's item pages (issue 16), read by ``signposting``, the FAIR
Signposting authors' library: from the ``Link`` headers alone it finds the item's persistent
URL, its metadata and every one of its files."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal

from signposting.linkheader import find_signposting_http_link

from functions.archive.content import ContentService
from functions.archive.model import Item
from functions.archive.service import ArchiveService
from functions.archive.signposting import MAX_ITEMS, links
from functions.archive.views import RESOLVER_URL, ArchiveViews
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore, MemoryItemStore, MemoryMinter

BASE = "https://archive.example.org"
RESOLVER = "https://resolver.example.org"
ITEM = "8JMKD3MGP8W/35MME4E"
OWN = ("8JMKD3MGP8W",)
LICENSE = "https://creativecommons.org/licenses/by/4.0/"
TYPES = {"pdf": "application/pdf", "csv": "text/csv; charset=utf-8"}
FILES = {"report.pdf": b"%PDF-1.7 ...", "data/a b,c;d.csv": b"x,y\n1,2\n"}


def deposit(files: dict[str, bytes], **dc: list[str]) -> tuple[ContentService, Item]:
    service = ArchiveService(
        MemoryItemStore(),
        clock=FakeClock(Decimal(1795473000)),
        mint=MemoryMinter(),
        own_prefixes=OWN,
    )
    store = MemoryFileStore()
    content = ContentService(
        service, views=ArchiveViews(BASE, RESOLVER), files=store, serve_inline_bytes=1024
    )
    service.create_original({"ibi": ITEM, "dc": dc} if dc else {"ibi": ITEM})
    declared = []
    for path, data in files.items():
        store.upload(ITEM, path, data)
        declared.append(
            {
                "path": path,
                "sha256": hashlib.sha256(data).hexdigest(),
                "size": len(data),
                "content_type": TYPES.get(path.rsplit(".", 1)[-1], "application/octet-stream"),
            }
        )
    item = content.commit_files(ITEM, {"files": declared})[0] if declared else service.get(ITEM)
    return content, item


def read(header: str, page: str):  # type: ignore[no-untyped-def]
    return find_signposting_http_link([header], page)


def test_every_page_of_an_item_signposts_its_persistent_url_metadata_and_files() -> None:
    content, _ = deposit(FILES, title=["A report"], type=["Dataset"], rights=[LICENSE])
    pages = {
        "file": content.serve_file(ITEM, "report.pdf", None).headers["Link"],
        "list": content.file_list(ITEM).headers["Link"],
        "metadata": content.metadata(ITEM, None).headers["Link"],
        "oai_dc": content.metadata(ITEM, "oai_dc").headers["Link"],
    }
    for page, header in pages.items():
        signposts = read(header, f"{BASE}/{page}")
        assert str(signposts.citeAs.target) == f"{RESOLVER}/{ITEM}", page
        described = {str(s.type): str(s.target) for s in signposts.describedBy}
        assert described == {
            "text/html": f"{BASE}/metadata/{ITEM}",
            "application/xml": f"{BASE}/metadata/{ITEM}?format=oai_dc",
        }
        items = {str(s.target): str(s.type) for s in signposts.items}
        assert items == {
            f"{BASE}/col/{ITEM}/report.pdf": "application/pdf",
            f"{BASE}/col/{ITEM}/data/a%20b%2Cc%3Bd.csv": "text/csv",
        }
        assert {str(t.target) for t in signposts.types} == {"https://schema.org/Dataset"}
        assert str(signposts.license.target) == LICENSE


def test_a_large_file_redirect_also_signposts() -> None:
    content, _ = deposit({"big.bin": b"\0" * 2048})
    answer = content.serve_file(ITEM, "big.bin", None)
    assert answer.status == 302
    signposts = read(answer.headers["Link"], f"{BASE}/col/{ITEM}/big.bin")
    assert str(signposts.citeAs.target) == f"{RESOLVER}/{ITEM}"
    assert signposts.license is None and not signposts.describedBy  # no Dublin Core, no rights
    assert {str(t.target) for t in signposts.types} == {"https://schema.org/CreativeWork"}


def test_many_files_signpost_the_file_list_instead() -> None:
    many = {f"f{n:03}.txt": str(n).encode() for n in range(MAX_ITEMS + 1)}
    content, item = deposit(many, title=["Many"])
    header = content.file_list(ITEM).headers["Link"]
    assert len(header) < 8000
    assert f'<{BASE}/list/{ITEM}>; rel="collection"; type="text/html"' in header
    signposts = read(header, f"{BASE}/list/{ITEM}")
    assert not signposts.items
    assert [(str(s.target), str(s.type)) for s in signposts.linksets] == [
        (f"{BASE}/linkset/{ITEM}", "application/linkset+json")
    ]
    page = content.linkset(ITEM)
    assert page.content_type == "application/linkset+json"
    (context,) = json.loads(str(page.body))["linkset"]
    assert context["cite-as"] == [{"href": f"{RESOLVER}/{ITEM}"}]
    assert [i["href"] for i in context["item"]] == [
        f"{BASE}/col/{ITEM}/{path}" for path in sorted(many)
    ]
    few = {f"f{n:03}.txt": b"x" for n in range(MAX_ITEMS)}
    assert len(read(links(deposit(few)[1], ArchiveViews(BASE), RESOLVER), BASE).items) == MAX_ITEMS
    assert item.key == ITEM


def test_without_a_configured_resolver_the_persistent_url_is_urlib_nets() -> None:
    _, item = deposit({"a.txt": b"a"})
    header = links(item, ArchiveViews(BASE), ArchiveViews(BASE).resolver_url)
    assert str(read(header, BASE).citeAs.target) == f"{RESOLVER_URL}/{ITEM}"


def test_link_targets_are_ascii_and_cannot_end_a_link() -> None:
    odd = 'https://licenses.example/é?a=1, <x>; rel="cite-as"\r\n'
    _, item = deposit({"a.txt": b"a"}, rights=[odd])
    header = links(item, ArchiveViews(BASE), RESOLVER)
    assert header.isascii() and "\r" not in header and "\n" not in header
    signposts = read(header, BASE)
    assert str(signposts.citeAs.target) == f"{RESOLVER}/{ITEM}"  # not the injected one
    assert str(signposts.license.target).startswith(
        "https://licenses.example/%C3%A9?a=1%2C%20%3Cx%3E"
    )
