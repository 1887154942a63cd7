"""Landing pages search engines and harvesters understand (issue 28, point 3).

An item's metadata and file-list pages carry the Highwire Press and Dublin Core ``<meta>`` tags
Google Scholar reads, and the schema.org JSON-LD that content negotiation at the resolver
answers (one builder: ``ibi.core.citation.schema_org``), as a data block no value can leave.
Each page is read back by a parser (``html.parser``), and the JSON-LD is expanded by pyld over
schema.org's own context, served offline from ``tests/fixtures/schemaorg-context.jsonld``:
release 30.0's ``data/releases/30.0/schemaorgcontext.jsonld`` (schemaorg/schemaorg), trimmed
to its prefixes and the terms ``schema_org`` writes (the whole file is 211 KB).
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from pyld import jsonld

from functions.archive import views
from functions.archive.content import ContentService
from functions.archive.model import Item
from functions.archive.service import ArchiveService
from functions.archive.views import ArchiveViews
from ibi.core import citation
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore, MemoryItemStore, MemoryMinter

BASE = "https://archive.example.org"
RESOLVER = "https://resolver.example.org"
ITEM = "8JMKD3MGP8W/35MME4E"
OWN = ("8JMKD3MGP8W",)
CONTEXT = Path(__file__).resolve().parents[1] / "fixtures" / "schemaorg-context.jsonld"
DC = {
    "title": ['Mapping "deforestation" <fast> & well'],
    "creator": ["Câmara, Gilberto", "Banon, Gerald"],
    "date": ["2024-05-01"],
    "type": ["Technical report"],
    "publisher": ["INPE"],
    "language": ["pt-BR"],
    "subject": ["remote sensing"],
}
PDF = b"%PDF-1.4 a report"


class Head(HTMLParser):
    """What a crawler reads of a page: its ``<meta name>`` tags, ``<link>`` tags and scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.meta: list[tuple[str, str]] = []
        self.links: list[dict[str, str | None]] = []
        self.scripts: list[tuple[str | None, str]] = []
        self._script: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "meta" and found.get("name"):
            self.meta.append((str(found["name"]), str(found.get("content"))))
        elif tag == "link":
            self.links.append(found)
        elif tag == "script":
            self._script = found.get("type") or ""
            self.scripts.append((self._script, ""))

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            kind, text = self.scripts[-1]
            self.scripts[-1] = (kind, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.meta if key == name]

    def json_ld(self) -> Any:
        (data,) = [text for kind, text in self.scripts if kind == "application/ld+json"]
        return json.loads(data)


def read(page: str) -> Head:
    head = Head()
    head.feed(page)
    head.close()
    return head


@pytest.fixture
def service() -> ArchiveService:
    clock = FakeClock(Decimal(1795473000))
    return ArchiveService(MemoryItemStore(), clock=clock, mint=MemoryMinter(), own_prefixes=OWN)


def deposited(
    service: ArchiveService,
    *,
    dc: dict[str, list[str]] | None = None,
    files: tuple[tuple[str, bytes, str], ...] = (("report.pdf", PDF, "application/pdf"),),
    listable: bool = True,
) -> tuple[Item, ContentService]:
    store = MemoryFileStore()
    content = ContentService(
        service, views=ArchiveViews(BASE, RESOLVER), files=store, serve_inline_bytes=1024
    )
    service.create_original({"ibi": ITEM, "listable": listable, "dc": DC if dc is None else dc})
    declared = []
    for path, data, kind in files:
        store.upload(ITEM, path, data)
        sha256 = hashlib.sha256(data).hexdigest()
        declared.append({"path": path, "sha256": sha256, "size": len(data), "content_type": kind})
    default = files[0][0] if files else None
    item, _ = content.commit_files(ITEM, {"files": declared, "default_file": default})
    return item, content


def negotiated(item: Item) -> Any:
    """What the resolver's content negotiation answers for the item (``application/ld+json``)."""
    record = citation.Record(
        persistent_url=f"{RESOLVER}/{ITEM}", ibi=ITEM, dc=item.dc, language=item.language
    )
    return json.loads(citation.schema_org(record))


def offline(url: str, options: Any = None) -> dict[str, Any]:
    assert url.rstrip("/") in {"https://schema.org", "http://schema.org"}, url
    document = json.loads(CONTEXT.read_text(encoding="utf-8"))
    return {"contextUrl": None, "documentUrl": url, "document": document}


def test_the_metadata_page_embeds_the_json_ld_content_negotiation_answers(
    service: ArchiveService,
) -> None:
    item, content = deposited(service)
    answer = content.metadata(ITEM, None)
    assert answer.status == 200
    head = read(str(answer.body))
    assert head.json_ld() == negotiated(item)


def test_the_file_list_page_embeds_the_same_json_ld_and_tags(service: ArchiveService) -> None:
    item, content = deposited(service)
    head = read(str(content.file_list(ITEM).body))
    assert head.json_ld() == negotiated(item)
    assert head.values("citation_title") == DC["title"]
    assert head.values("DC.identifier") == [f"{RESOLVER}/{ITEM}"]


def test_pyld_expands_the_embedded_json_ld_over_schema_orgs_context(
    service: ArchiveService,
) -> None:
    _, content = deposited(service)
    document = read(str(content.metadata(ITEM, None).body)).json_ld()
    (node,) = jsonld.expand(document, {"documentLoader": offline})
    assert node["@id"] == f"{RESOLVER}/{ITEM}"
    assert node["@type"] == ["http://schema.org/Report"]
    assert node["http://schema.org/name"] == [{"@value": DC["title"][0]}]
    assert node["http://schema.org/url"] == [{"@id": f"{RESOLVER}/{ITEM}"}]
    assert node["http://schema.org/datePublished"] == [
        {"@type": "http://schema.org/Date", "@value": "2024-05-01"}
    ]
    authors = node["http://schema.org/author"]
    assert [a["http://schema.org/name"][0]["@value"] for a in authors] == DC["creator"]
    assert all(a["@type"] == ["http://schema.org/Person"] for a in authors)
    assert node["http://schema.org/inLanguage"] == [{"@value": "pt-BR"}]


def test_a_title_that_closes_the_script_cannot_leave_the_json_ld(
    service: ArchiveService,
) -> None:
    hostile = '</script><script>alert(1)</script><!-- & "'
    _, content = deposited(service, dc={"title": [hostile], "creator": ["</SCRIPT >x"]})
    page = str(content.metadata(ITEM, None).body)
    head = read(page)
    assert [kind for kind, _ in head.scripts] == ["application/ld+json"]  # one, ours
    assert head.json_ld()["name"] == hostile
    assert head.json_ld()["author"] == [{"@type": "Person", "name": "</SCRIPT >x"}]
    data = page.split('<script type="application/ld+json">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data


def test_highwire_tags_name_the_title_each_author_the_date_and_the_pdf(
    service: ArchiveService,
) -> None:
    _, content = deposited(service)
    head = read(str(content.metadata(ITEM, None).body))
    assert head.values("citation_title") == ['Mapping "deforestation" <fast> & well']
    assert head.values("citation_author") == DC["creator"]
    assert head.values("citation_publication_date") == ["2024/05/01"]
    assert head.values("citation_publisher") == ["INPE"]
    assert head.values("citation_technical_report_institution") == ["INPE"]  # a report
    assert head.values("citation_language") == ["pt-BR"]
    assert head.values("citation_pdf_url") == [f"{BASE}/col/{ITEM}/report.pdf"]
    assert head.values("DC.identifier") == [f"{RESOLVER}/{ITEM}"]
    assert head.values("DC.title") == DC["title"]
    assert head.values("DC.creator") == DC["creator"]
    assert head.values("DC.date") == ["2024-05-01"]
    assert head.values("DC.type") == ["Technical report"]
    assert head.values("DC.language") == ["pt-BR"]
    assert {"rel": "schema.DC", "href": "http://purl.org/dc/elements/1.1/"} in head.links


def test_every_tag_value_is_escaped_in_its_attribute(service: ArchiveService) -> None:
    _, content = deposited(service)
    page = str(content.metadata(ITEM, None).body)
    assert 'content="Mapping &quot;deforestation&quot; &lt;fast&gt; &amp; well"' in page
    assert "<fast>" not in page  # nowhere raw: not in a tag, the title, the JSON-LD, the body


def test_google_scholar_reads_a_year_alone_or_a_year_and_month() -> None:
    def date(value: str) -> str | None:
        return citation.scholar_date(citation.Record("u", ITEM, {"date": (value,)}))

    assert date("2009") == "2009"
    assert date("2009-07") == "2009/07"
    assert date("2009-07-21T13:23:00Z") == "2009/07/21"
    assert date("around 2009") is None


def test_a_pdf_among_other_files_is_the_pdf_url_and_none_without_one(
    service: ArchiveService,
) -> None:
    files = (("data.csv", b"a,b\n", "text/csv"), ("paper.pdf", PDF, "application/pdf"))
    _, content = deposited(service, files=files)
    head = read(str(content.metadata(ITEM, None).body))
    assert head.values("citation_pdf_url") == [f"{BASE}/col/{ITEM}/paper.pdf"]


def test_an_item_with_no_pdf_names_none(service: ArchiveService) -> None:
    _, content = deposited(service, files=(("data.csv", b"a,b\n", "text/csv"),))
    assert read(str(content.metadata(ITEM, None).body)).values("citation_pdf_url") == []


def test_an_unlisted_items_pdf_is_named_by_the_items_own_url(service: ArchiveService) -> None:
    _, content = deposited(service, listable=False)
    head = read(str(content.metadata(ITEM, None).body))
    assert head.values("citation_pdf_url") == [f"{BASE}/col/{ITEM}"]  # no path revealed


def test_an_item_without_metadata_has_no_landing_tags(service: ArchiveService) -> None:
    item, content = deposited(service, dc={})
    head = read(str(content.file_list(ITEM).body))
    assert head.meta == [
        ("viewport", "width=device-width, initial-scale=1"),
        ("referrer", "no-referrer"),
    ]
    assert head.scripts == []
    assert views.landing_head(item, ArchiveViews(BASE, RESOLVER)) == ""


def test_the_pages_policy_still_runs_no_script() -> None:
    policy = views.PAGE_HEADERS["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy
