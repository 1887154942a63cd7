"""Tombstones that keep the citation (issue 28, point 4).

A deleted item keeps its Dublin Core; its deletion is its last revision (when, by whom, why).
Its Archive's pages answer 410 with what was there and when and why it was withdrawn, and tell
the resolver the same through the holdings extension; the resolver's 410 page shows it, and
content negotiation on the deleted IBI still answers the citation, with a withdrawn note, as
a 410. Every citation is read back by a real consumer (bibtexparser, citeproc-py, rispy, pyld,
ElementTree).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import bibtexparser
import boto3
import pytest
import rispy
from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle
from citeproc import formatter as citeproc_formatter
from citeproc.source.json import CiteProcJSON
from moto import mock_aws
from pyld import jsonld

from functions.archive.content import ContentService
from functions.archive.errors import BadRequest
from functions.archive.holdings import with_holdings
from functions.archive.service import ArchiveService
from functions.archive.views import ArchiveViews
from functions.resolver import bibliography, handler, wiring
from functions.resolver.authority import ArchiveAnswer, Trust
from functions.resolver.network import Outcome, Request
from functions.resolver.resolution import Resolver
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.core import citation
from ibi.core.holdings import Report, from_pairs, to_pairs
from ibi.core.pairlist import PairList, format_pair_list, parse_pair_list
from ibi.core.persistent_url import parse_persistent_url
from ibi.defaults import RESOLVER_SERVICE_IBI
from ibi_tools.local.gateway import LocalContext
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore, MemoryItemStore, MemoryMinter
from tests.fakes_resolver import ScriptedTransport
from tests.fuzzing import event

BASE = "https://archive.example.org"
RESOLVER = "https://resolver.example.org"
ITEM = "8JMKD3MGP8W/35MME4E"
OWN = ("8JMKD3MGP8W",)
REASON = "Retracted by the authors: 100% of the figures were wrong"
DELETED_AT = "2027-01-15T08:00:00Z"
DC = {
    "title": ["Mapping deforestation"],
    "creator": ["Câmara, Gilberto", "Banon, Gerald"],
    "date": ["2024-05-01"],
    "type": ["Technical report"],
}
CONTEXT = Path(__file__).resolve().parents[1] / "fixtures" / "schemaorg-context.jsonld"
WITHDRAWN = citation.Withdrawal(DELETED_AT, REASON)
RECORD = citation.Record(
    persistent_url=f"{RESOLVER}/{ITEM}",
    ibi=ITEM,
    dc={k: tuple(v) for k, v in DC.items()},
    withdrawn=WITHDRAWN,
)
NOTE = f"Withdrawn on 2027-01-15: {REASON}"


# ---------------------------------------------------------------------------- the formats


def test_the_bibtex_of_a_withdrawn_item_says_when_and_why_in_its_note() -> None:
    (entry,) = bibtexparser.parse_string(citation.bibtex(RECORD)).entries
    assert entry["title"] == "Mapping deforestation"
    assert entry["note"] == citation.bibtex_text(f"IBI: {ITEM}. {NOTE}")
    assert r"100\%" in entry["note"]


def test_the_csl_json_of_a_withdrawn_item_has_status_withdrawn_and_citeproc_reads_it() -> None:
    (item,) = json.loads(citation.csl_json(RECORD))
    assert item["status"] == "withdrawn"
    assert item["note"] == f"IBI: {ITEM}. {NOTE}"
    style = CitationStylesStyle(str(bibliography.style_path("apa")), validate=False)
    cited = CitationStylesBibliography(style, CiteProcJSON([item]), citeproc_formatter.plain)
    cited.register(Citation([CitationItem(item["id"])]))
    (entry,) = [str(e) for e in cited.bibliography()]
    assert "Mapping deforestation" in entry


def test_the_schema_org_of_a_withdrawn_item_expands_to_its_creative_work_status() -> None:
    def offline(url: str, options: Any = None) -> dict[str, Any]:
        document = json.loads(CONTEXT.read_text(encoding="utf-8"))
        return {"contextUrl": None, "documentUrl": url, "document": document}

    (node,) = jsonld.expand(json.loads(citation.schema_org(RECORD)), {"documentLoader": offline})
    assert node["http://schema.org/creativeWorkStatus"] == [{"@value": "Withdrawn"}]
    assert node["http://schema.org/name"] == [{"@value": "Mapping deforestation"}]


def test_the_ris_of_a_withdrawn_item_carries_the_note() -> None:
    (entry,) = rispy.loads(citation.ris(RECORD))
    assert entry["title"] == "Mapping deforestation"
    assert entry["notes"] == [f"IBI: {ITEM}", NOTE]


def test_the_oai_dc_of_a_withdrawn_item_ends_with_the_note() -> None:
    root = ElementTree.fromstring(citation.oai_dc(RECORD).encode())
    described = [e.text for e in root.findall(f"{{{citation.DC}}}description")]
    assert described == [NOTE]


def test_a_live_items_citation_says_nothing_of_a_withdrawal() -> None:
    live = citation.Record(persistent_url=RECORD.persistent_url, ibi=ITEM, dc=RECORD.dc)
    for render in citation.RENDERERS.values():
        assert "Withdrawn" not in render(live) and "withdrawn" not in render(live)


# ---------------------------------------------------------------------------- the Archive


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(Decimal(1795473000))


@pytest.fixture
def service(clock: FakeClock) -> ArchiveService:
    return ArchiveService(MemoryItemStore(), clock=clock, mint=MemoryMinter(), own_prefixes=OWN)


def deleted(
    service: ArchiveService, clock: FakeClock, reason: str | None = REASON
) -> ContentService:
    """The item deposited with a PDF, then deleted at DELETED_AT."""
    files = MemoryFileStore()
    content = ContentService(
        service, views=ArchiveViews(BASE, RESOLVER), files=files, serve_inline_bytes=1024
    )
    service.create_original({"ibi": ITEM, "dc": DC})
    files.upload(ITEM, "report.pdf", b"%PDF")
    declared = {"path": "report.pdf", "sha256": hashlib.sha256(b"%PDF").hexdigest(), "size": 4}
    content.commit_files(ITEM, {"files": [declared], "default_file": "report.pdf"})
    clock.now = Decimal(1800000000)
    service.delete(ITEM, reason=reason, principal="arn:aws:iam::1:user/curator")
    return content


def test_a_deletion_keeps_the_metadata_and_records_when_who_and_why(
    service: ArchiveService, clock: FakeClock
) -> None:
    deleted(service, clock)
    item = service.get(ITEM)
    assert item.deleted and item.files == ()
    assert item.dc["title"] == ("Mapping deforestation",)
    last = item.history[-1]
    assert (last.action, last.reason, last.by) == ("deleted", REASON, "arn:aws:iam::1:user/curator")
    assert item.withdrawal == (item.timestamp, REASON)


def test_a_reason_longer_than_500_characters_is_refused_before_anything_changes(
    service: ArchiveService,
) -> None:
    service.create_original({"ibi": ITEM, "dc": DC})
    with pytest.raises(BadRequest, match="at most 500"):
        service.delete(ITEM, reason="x" * 501)
    assert not service.get(ITEM).deleted


def test_the_archives_410_page_shows_what_was_there_and_when_and_why(
    service: ArchiveService, clock: FakeClock
) -> None:
    answer = deleted(service, clock).serve_file(ITEM, "", None)
    assert answer.status == 410 and answer.page is not None
    page = str(answer.page.body)
    tombstone = page.split('<dl id="tombstone">', 1)[1].split("</dl>", 1)[0]
    assert "<dt>Title</dt><dd>Mapping deforestation</dd>" in tombstone
    assert "<dd>Câmara, Gilberto; Banon, Gerald</dd>" in tombstone
    assert "<dt>Date</dt><dd>2024-05-01</dd>" in tombstone
    assert f"<dt>Deleted</dt><dd>{DELETED_AT}</dd>" in tombstone
    assert "Retracted by the authors: 100% of the figures were wrong" in tombstone
    assert '<meta name="robots" content="noindex">' in page
    assert "citation_title" not in page and "ld+json" not in page  # not a landing page


def test_a_tombstones_file_list_and_metadata_pages_answer_410_too(
    service: ArchiveService, clock: FakeClock
) -> None:
    content = deleted(service, clock)
    files, metadata = content.file_list(ITEM), content.metadata(ITEM, None)
    assert (files.status, metadata.status) == (410, 410)
    assert "This item was deleted." in str(files.body)
    assert '<table id="metadata">' in str(metadata.body) and REASON in str(metadata.body)


def test_a_tombstone_deleted_without_a_reason_says_when_only(
    service: ArchiveService, clock: FakeClock
) -> None:
    page = str(deleted(service, clock, reason=None).serve_file(ITEM, "", None).page.body)  # type: ignore[union-attr]
    assert f"<dt>Deleted</dt><dd>{DELETED_AT}</dd>" in page and "<dt>Reason</dt>" not in page


def test_the_holdings_extension_tells_the_resolver_what_the_tombstone_keeps(
    service: ArchiveService, clock: FakeClock
) -> None:
    deleted(service, clock)
    asked = with_holdings(PairList(), service.get(ITEM), {"extension.holdings": "yes"})
    report = from_pairs(parse_pair_list(format_pair_list(asked)))  # through the wire
    assert report is not None and report.state == "Deleted"
    assert (report.deleted_at, report.deleted_reason) == (DELETED_AT, REASON)
    assert report.dc["creator"] == tuple(DC["creator"])
    assert with_holdings(PairList(), service.get(ITEM), {}) == PairList()  # only when asked


# ---------------------------------------------------------------------------- the resolver

A, B = "8JMKD3MGP8W/3FSUP4A", "8JMKD3MGP8W/3FSUP4B"
KEY = "1234567890-0987654321"
GONE = "8JMKD3MGP8W/35MME4F"  # deleted at A, which tells what was there; unknown to B
BARE = "8JMKD3MGP8W/35MME4G"  # deleted at B, which does not know the holdings extension
TOMBSTONE = f"ibi {{ibip {{}}}}\r\nstate Deleted\r\ntimestamp {DELETED_AT}\r\n"
REPORT = Report(
    state="Deleted",
    timestamp=DELETED_AT,
    dc={k: tuple(v) for k, v in DC.items()},
    deleted_at=DELETED_AT,
    deleted_reason=REASON,
)


class Archives(ScriptedTransport):
    """A tells what its tombstone keeps when asked for the holdings pairs; B never does."""

    SCRIPT = {
        (A, GONE): (TOMBSTONE.replace("{}", GONE, 1), format_pair_list(to_pairs(REPORT))),
        (B, BARE): (TOMBSTONE.replace("{}", BARE, 1), ""),
    }

    def __init__(self) -> None:
        super().__init__(answers={A: "", B: ""})
        self.asked: list[dict[str, str]] = []

    def _outcome(self, key: str, request: Request | None, settled: bool) -> Outcome:
        if request is None or settled:
            return super()._outcome(key, request, settled)
        pairs = dict(request.pairs)
        self.asked.append(pairs)
        ordinary, extension = self.SCRIPT.get((key, pairs.get("parsedibiurl.ibi", "")), ("", ""))
        if pairs.get("extension.holdings") == "yes" and ordinary:
            ordinary += "\r\n" + extension
        return Outcome.answered(key, parse_pair_list(ordinary), 0.0)


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archives]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, "resolver")
        pepper = tmp_path_factory.mktemp("resolver") / "pepper"
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(pepper)}
        )
        runtime = wiring.build(settings, dynamodb=client)
        scripted = Archives()
        for name in ("vet", "send", "ask_all"):  # the only network the resolver has
            setattr(runtime.transport, name, getattr(scripted, name))
        wiring.install(runtime)
        for archive in (A, B):
            register(archive)
        try:
            yield scripted
        finally:
            wiring.install(None)


def register(archive: str) -> None:
    body = json.dumps(  # the Archives here share a prefix: none of them owns it
        {"archiveserviceibi": archive, "registrationkey": KEY, "share_prefix": True}
    ).encode()
    assert invoke("/admin/archives", method="POST", body=body)["statusCode"] == 200
    host = archive[-1].lower() + ".example.org"
    query = (
        f"servicesubject=inclusionRequest&archiveaddress={host}&archiveserviceibi={archive}"
        "&archiveip=192.0.2.20&archiveprotocol=HTTPS&archiveplatformversion=ibi-0.1"
        f"&archiveadmemailaddress=admin%40example.org&registrationkey={KEY}"
    )
    included = invoke("/" + RESOLVER_SERVICE_IBI, query=query)
    assert included["body"].startswith("status.archive included"), included["body"]


def invoke(
    path: str, *, method: str = "GET", query: str = "", body: bytes = b"", **headers: str
) -> Any:
    request = event(method, path, query, body=body, headers=headers)
    context = LocalContext("tombstones", request["requestContext"]["requestId"])
    return handler.lambda_handler(request, context)


def content_type(answer: dict[str, Any]) -> str:
    found = {k.lower(): v for k, v in answer.get("headers", {}).items()}
    return str(found.get("content-type", ""))


def test_a_deleted_ibis_bibtex_is_still_answered_with_its_withdrawn_note_as_a_410(
    archives: Archives,
) -> None:
    got = invoke(f"/{GONE}", accept="application/x-bibtex")
    assert got["statusCode"] == 410, got["body"]
    assert content_type(got) == "application/x-bibtex; charset=utf-8"
    (entry,) = bibtexparser.parse_string(got["body"]).entries
    assert entry["title"] == "Mapping deforestation"
    assert entry["note"] == citation.bibtex_text(f"IBI: {GONE}. {NOTE}")
    assert entry["url"] == f"http://api.example.org/{GONE}"


@pytest.mark.parametrize(
    ("accept", "said"),
    [
        ("application/vnd.citationstyles.csl+json", '"status": "withdrawn"'),
        ("application/ld+json", '"creativeWorkStatus": "Withdrawn"'),
        ("application/x-research-info-systems", f"N1  - {NOTE}"),
        ("application/xml", f"<dc:description>{NOTE}</dc:description>"),
        ("text/x-bibliography; style=apa", f"[{NOTE}]"),
    ],
)
def test_every_negotiated_type_says_the_item_was_withdrawn(
    archives: Archives, accept: str, said: str
) -> None:
    got = invoke(f"/{GONE}", accept=accept)
    assert got["statusCode"] == 410, got["body"]
    assert said in got["body"]


def test_the_resolvers_410_page_shows_what_was_there_asking_once_more_for_it(
    archives: Archives,
) -> None:
    archives.asked.clear()
    got = invoke(f"/{GONE}", accept="text/html")
    assert got["statusCode"] == 410
    page = got["body"]
    tombstone = page.split('<dl id="tombstone">', 1)[1].split("</dl>", 1)[0]
    assert "<dt>Title</dt><dd>Mapping deforestation</dd>" in tombstone
    assert "<dt>Creators</dt><dd>Câmara, Gilberto; Banon, Gerald</dd>" in tombstone
    assert "<dt>Date</dt><dd>2024-05-01</dd>" in tombstone
    assert f"<dt>Deleted</dt><dd>{DELETED_AT}</dd>" in tombstone
    assert f"<dt>Reason</dt><dd>{REASON}</dd>" in tombstone
    rounds = [pairs.get("extension.holdings") for pairs in archives.asked]
    assert rounds == [None, None, "yes", "yes"]  # two Archives, then again with the pairs


def test_the_410_as_text_lists_what_was_there(archives: Archives) -> None:
    got = invoke(f"/{GONE}", accept="text/plain")
    assert got["statusCode"] == 410
    lines = got["body"].splitlines()
    assert "Title: Mapping deforestation" in lines and f"Reason: {REASON}" in lines


def test_an_archive_that_keeps_nothing_gets_the_plain_410_as_before(archives: Archives) -> None:
    page = invoke(f"/{BARE}", accept="text/html")
    assert page["statusCode"] == 410 and 'id="tombstone"' not in page["body"]
    cited = invoke(f"/{BARE}", accept="application/x-bibtex")
    assert cited["statusCode"] == 410 and "@misc" not in cited["body"]


def test_the_resolution_keeps_the_tombstone_that_says_most() -> None:
    described = parse_pair_list(
        TOMBSTONE.replace("{}", GONE, 1) + format_pair_list(to_pairs(REPORT))
    )
    bare = parse_pair_list(TOMBSTONE.replace("{}", GONE, 1))

    def ask_all(ibi: str, pairs: Any, wait: Any = None) -> list[ArchiveAnswer]:
        return [ArchiveAnswer("b", "b.example", bare), ArchiveAnswer("a", "a.example", described)]

    alert = Resolver(ask_all).resolve(parse_persistent_url(f"/{GONE}"), "192.0.2.1")
    assert alert.status == 410 and alert.tombstone is not None  # type: ignore[union-attr]
    assert alert.tombstone.pairs == described and alert.tombstone.ibi == GONE  # type: ignore[union-attr]


def test_an_untrusted_archives_tombstone_is_never_what_the_410_shows() -> None:
    """The owner deleted it and keeps nothing more; a hostile Archive that does not own the
    prefix answers a tombstone with a description of its own: the 410 shows none of it."""
    hostile = parse_pair_list(TOMBSTONE.replace("{}", GONE, 1) + format_pair_list(to_pairs(REPORT)))
    bare = parse_pair_list(TOMBSTONE.replace("{}", GONE, 1))

    def ask_all(ibi: str, pairs: Any, wait: Any = None) -> list[ArchiveAnswer]:
        return [
            ArchiveAnswer("liar", "liar.example", hostile, trust=Trust.UNTRUSTED, owner="a"),
            ArchiveAnswer("a", "a.example", bare, trust=Trust.OWNER, owner="a"),
        ]

    alert = Resolver(ask_all).resolve(parse_persistent_url(f"/{GONE}"), "192.0.2.1")
    assert alert.status == 410 and alert.tombstone is not None  # type: ignore[union-attr]
    assert alert.tombstone.pairs == bare  # type: ignore[union-attr]


def test_the_owners_tombstone_comes_before_another_trusted_one() -> None:
    described = parse_pair_list(
        TOMBSTONE.replace("{}", GONE, 1) + format_pair_list(to_pairs(REPORT))
    )
    owners = parse_pair_list(TOMBSTONE.replace("{}", GONE, 1) + "holdings.state Deleted ")

    def ask_all(ibi: str, pairs: Any, wait: Any = None) -> list[ArchiveAnswer]:
        return [
            ArchiveAnswer("b", "b.example", described, trust=Trust.NAMED, owner="a"),
            ArchiveAnswer("a", "a.example", owners, trust=Trust.OWNER, owner="a"),
        ]

    alert = Resolver(ask_all).resolve(parse_persistent_url(f"/{GONE}"), "192.0.2.1")
    assert alert.tombstone is not None and alert.tombstone.pairs == owners  # type: ignore[union-attr]
