"""The Archive's services over in-memory fakes: bootstrap, files, protocol, transfer, mapping."""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from xml.etree import ElementTree

import pytest

from functions.archive.content import ContentService
from functions.archive.errors import ProtocolError, Unavailable
from functions.archive.mapping import (
    deposit_body,
    item_from_mapping,
    item_to_mapping,
    transfer_body,
)
from functions.archive.model import Forms, Item, State
from functions.archive.protocol import ArchiveIdentity, ProtocolService
from functions.archive.service import ArchiveService
from functions.archive.transfer import TransferFailed, transfer
from functions.archive.views import ArchiveViews, oai_dc
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryArchive, MemoryFileStore, MemoryItemStore, MemoryMinter

BASE = "https://archive.example.org"
ITEM = "8JMKD3MGP8W/35MME4E"
OWN = ("8JMKD3MGP8W", "sid.inpe.br/mtc-m18")  # the prefixes of the Archive's own subsystems
HELLO = b"hello world"


@pytest.fixture
def store() -> MemoryItemStore:
    return MemoryItemStore()


@pytest.fixture
def service(store: MemoryItemStore) -> ArchiveService:
    return ArchiveService(
        store, clock=FakeClock(Decimal(1795473000)), mint=MemoryMinter(), own_prefixes=OWN
    )


def content(service: ArchiveService, files: MemoryFileStore, inline: int = 1024) -> ContentService:
    views = ArchiveViews(BASE)
    return ContentService(service, views=views, files=files, serve_inline_bytes=inline)


def with_file(service: ArchiveService, files: MemoryFileStore, data: bytes = HELLO) -> Item:
    service.create_original({"ibi": ITEM})
    files.upload(ITEM, "hello.txt", data)
    declared = {"path": "hello.txt", "sha256": hashlib.sha256(HELLO).hexdigest(), "size": 11}
    return content(service, files).commit_files(ITEM, {"files": [declared]})[0]


def test_four_concurrent_bootstraps_end_with_one_service_ibi_minted_once(
    store: MemoryItemStore,
) -> None:
    minter = MemoryMinter()
    services = [ArchiveService(store, clock=FakeClock(), mint=minter, name="t") for _ in range(4)]
    with ThreadPoolExecutor(4) as pool:
        items = list(pool.map(lambda s: s.bootstrap(BASE), services))
    assert len({item.key for item in items}) == 1
    assert len(minter.minted) == 1 and store.service == items[0].ibi
    assert items[0].service and not items[0].transferable
    assert items[0].external_url == f"{BASE}/{items[0].key}"


def test_concurrent_bootstraps_mint_with_the_archives_own_idempotency_key(
    store: MemoryItemStore,
) -> None:
    asked: list[str | None] = []

    def mint(subsystem: str | None, key: str | None) -> Forms:
        asked.append(key)
        return Forms(ibip="8JMKD3MGP8W/3FSUP4L")  # the minting service's idempotent answer

    for _ in range(2):
        ArchiveService(MemoryItemStore(), clock=FakeClock(), mint=mint, name="tbl").bootstrap(BASE)
    assert asked == ["archive-service:tbl", "archive-service:tbl"]


def test_bootstrap_without_a_minter_is_unavailable(store: MemoryItemStore) -> None:
    with pytest.raises(Unavailable):
        ArchiveService(store, clock=FakeClock()).bootstrap(BASE)


def test_serve_file_answers(service: ArchiveService) -> None:
    files = MemoryFileStore()
    with_file(service, files)
    served = content(service, files).serve_file(ITEM, "", None)
    assert served.status == 200 and served.page is not None and served.page.body == HELLO
    etag = served.headers["ETag"]
    assert content(service, files).serve_file(ITEM, "", etag).status == 304
    large = content(service, files, inline=4).serve_file(ITEM, "hello.txt", None)
    assert large.status == 302 and large.headers["Location"].startswith("memory://")
    files.put(ITEM, "hello.txt", b"hello w0rld")  # bit rot
    damaged = content(service, files).serve_file(ITEM, "", None)
    assert damaged.status == 500 and damaged.damaged and damaged.path == "hello.txt"
    service.delete(ITEM)
    assert content(service, files).serve_file(ITEM, "", None).status == 410


def test_serve_file_redirects_to_an_external_url(service: ArchiveService) -> None:
    service.create_original({"ibi": ITEM, "url": "https://example.org/a"})
    answer = content(service, MemoryFileStore()).serve_file(ITEM, "", None)
    assert answer.status == 302 and answer.headers == {"Location": "https://example.org/a"}


def test_verify_reports_a_damaged_file(service: ArchiveService) -> None:
    files = MemoryFileStore()
    with_file(service, files)
    assert content(service, files).verify(None, None).problems == []
    files.put(ITEM, "hello.txt", b"hello w0rld")
    [problem] = content(service, files).verify(ITEM, None).problems
    assert problem["problem"] == "sha256"


def protocol(store: MemoryItemStore, service: ArchiveService) -> ProtocolService:
    identity = ArchiveIdentity("archive.example.org", service.bootstrap(BASE).ibi)
    clock = FakeClock(Decimal(1795473000))
    return ProtocolService(
        store, identity=identity, views=ArchiveViews(BASE), clock=clock, urlkey_ttl_seconds=600
    )


def test_url_request_then_one_acknowledgment(
    store: MemoryItemStore, service: ArchiveService
) -> None:
    service.create_original({"ibi": ITEM, "url": "https://example.org/a"})
    answers = protocol(store, service)
    assert answers.answer("servicesubject=inclusionConfirmationRequest").pairs.word(
        "confirmation"
    ) == ("yes")
    asked = answers.answer(
        f"servicesubject=urlRequest&parsedibiurl.ibi={ITEM}&clientinformation.ipaddress=1.2.3.4"
    )
    assert asked.pairs.word("url") == "https://example.org/a"
    assert asked.metric == "UrlRequestsHeld" and asked.details["held"] is True
    urlkey = asked.pairs.word("urlkey")
    ack = {"urlkey": str(urlkey), "ibi": f"ibip {ITEM}", "url": "https://example.org/a"}
    ack["clientinformation.ipaddress"] = "1.2.3.4"  # as the urlRequest declared (issue 35)
    acknowledged = answers.acknowledge(ack)
    assert acknowledged.details == {"ibi": ITEM, "accesses": 1}
    spent = answers.acknowledge(ack)  # the constant notice, no count
    assert spent.pairs == acknowledged.pairs and spent.metric == "AcknowledgmentsIgnored"
    assert service.accesses(service.get(ITEM)) == 1
    with pytest.raises(ProtocolError):
        answers.answer("servicesubject=somethingElse")
    with pytest.raises(ProtocolError):
        answers.answer(f"servicesubject=urlRequest&parsedibiurl.ibi={ITEM}")


def test_transfer_sends_one_mapping_and_rolls_back_when_refused(service: ArchiveService) -> None:
    service.create_original({"ibi": ITEM, "url": "https://example.org/a", "language": "pt"})
    refusing = MemoryArchive()
    refusing.fail["receive"] = OSError("no")
    with pytest.raises(TransferFailed) as failed:
        transfer(service, None, refusing, ITEM, leave="copy")
    assert failed.value.refused and service.get(ITEM).state is State.ORIGINAL
    assert transfer_body(service.get(ITEM)) == {
        "ibi": {"ibip": ITEM},
        "content_type": "Data",
        "language": "pt",
        "url": "https://example.org/a",
        "listable": True,
        "dc": {},
    }
    receiver = MemoryArchive()
    moved = transfer(service, None, receiver, ITEM, leave="tombstone")
    held = receiver.held(ITEM)
    assert held is not None and held.state is State.ORIGINAL and held.transferable
    assert held.external_url == "https://example.org/a" and not held.pending
    assert moved.here.deleted and deposit_body(moved.here)["transferable"] is True


def test_one_mapping_round_trips_and_reads_items_stored_by_earlier_versions(
    service: ArchiveService,
) -> None:
    item = service.create_original({"ibi": ITEM, "url": "https://example.org/a", "language": "pt"})
    mapping = item_to_mapping(item)
    assert mapping["url"] == "https://example.org/a" and "external_url" not in mapping
    assert item_from_mapping(json.loads(json.dumps(mapping)), item.version) == item
    earlier = {k: v for k, v in mapping.items() if k not in {"url", "date"}}
    earlier |= {"external_url": "https://example.org/a", "timestamp": "1795473000.25"}
    loaded = item_from_mapping(earlier, 3)
    assert loaded.external_url == "https://example.org/a"
    assert loaded.timestamp == Decimal("1795473000.25") and loaded.version == 3


def test_oai_dc_is_well_formed_with_its_namespaces_and_schema(service: ArchiveService) -> None:
    item = service.create_original({"ibi": ITEM, "dc": {"title": ["A & <b>"]}})
    record = ElementTree.fromstring(oai_dc(item).encode())
    assert record.tag == "{http://www.openarchives.org/OAI/2.0/oai_dc/}dc"
    schema = record.get("{http://www.w3.org/2001/XMLSchema-instance}schemaLocation")
    assert schema == (
        "http://www.openarchives.org/OAI/2.0/oai_dc/ http://www.openarchives.org/OAI/2.0/oai_dc.xsd"
    )
    dc = "{http://purl.org/dc/elements/1.1/}"
    assert record.findtext(f"{dc}title") == "A & <b>"
    assert record.findtext(f"{dc}identifier") == ITEM
