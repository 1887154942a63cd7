"""OAI-PMH's read budget (issue 26, point 2): a list request reads at most ``scan_pages`` Scan
pages of ``page_size`` items, eventually consistent; the token carries where the scan stopped,
so a harvest still returns every record exactly once."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from lxml import etree

from functions.archive.model import Item
from functions.archive.oai import Repository, archive_repository
from functions.archive.service import ArchiveService
from functions.archive.store import DynamoItemStore
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryItemStore, MemoryMinter

BASE = "https://archive.example.org"
START = Decimal(1795473000)  # 2026-11-23T22:30:00Z
NS = {"o": "http://www.openarchives.org/OAI/2.0/"}
PAGE_SIZE = 3
SCAN_PAGES = 2
BUDGET = PAGE_SIZE * SCAN_PAGES


class CountingItems:
    """The item store, counting what the repository reads through ``scan``."""

    def __init__(self, store: MemoryItemStore) -> None:
        self._store = store
        self.read = 0
        self.consistent: list[bool] = []

    def get(self, label: str) -> Item | None:
        return self._store.get(label)

    def scan(
        self, *, after: str | None, limit: int, consistent: bool = True
    ) -> tuple[list[Item], str | None]:
        items, more = self._store.scan(after=after, limit=limit, consistent=consistent)
        self.read += len(items)
        self.consistent.append(consistent)
        return items, more


class Archive:
    """An Archive of 40 items, one a day, read through a counting store."""

    def __init__(self) -> None:
        store = MemoryItemStore()
        clock = FakeClock(START)
        service = ArchiveService(store, clock=clock, mint=MemoryMinter())
        service_item = service.bootstrap(BASE)
        self.items = []
        for day in range(40):  # one item a day: a `from` selects the later ones
            clock.now = START + day * 86400
            self.items.append(service.create_original({"dc": {"title": [f"t{day}"]}}))
        self.counting = CountingItems(store)
        self.repository: Repository = archive_repository(
            self.counting,
            address="archive.example.org",
            service_ibi=service_item.key,
            base_url=BASE,
            admin_email="ibi-admin@example.org",
            clock=clock,
            page_size=PAGE_SIZE,
            scan_pages=SCAN_PAGES,
        )

    def ask(self, **arguments: str) -> etree._Element:
        # Not validated against OAI-PMH.xsd: a page the budget ended before any record is an
        # empty list with a token, which the schema's minOccurs does not allow (decisions.md).
        return etree.fromstring(self.repository.answer(urlencode(arguments)))

    def harvest(self, **arguments: str) -> tuple[list[str], int]:
        """Every identifier of a ListIdentifiers, following its tokens; and how many requests."""
        answers = [self.ask(verb="ListIdentifiers", metadataPrefix="oai_dc", **arguments)]
        while (resume := answers[-1].find(".//o:resumptionToken", NS)) is not None and resume.text:
            answers.append(self.ask(verb="ListIdentifiers", resumptionToken=resume.text))
            assert len(answers) < 100, "the harvest does not end"
        found = [e.text for a in answers for e in a.iterfind(".//o:header/o:identifier", NS)]
        return found, len(answers)


def test_a_request_whose_selection_matches_nothing_reads_at_most_its_budget() -> None:
    archive = Archive()
    answer = archive.ask(verb="ListRecords", metadataPrefix="oai_dc", **{"from": "2030-01-01"})
    assert 0 < archive.counting.read <= BUDGET
    assert answer.findall(".//o:record", NS) == []
    resume = answer.find(".//o:ListRecords/o:resumptionToken", NS)
    assert resume is not None and resume.text  # where the scan stopped: the harvest goes on
    assert resume.get("cursor") == "0"


def test_each_request_of_a_harvest_that_matches_nothing_reads_at_most_its_budget() -> None:
    archive = Archive()
    found, requests = archive.harvest(**{"from": "2030-01-01"})
    assert found == []
    assert archive.counting.read <= requests * BUDGET
    assert requests > 1  # 41 items cannot be read in one request of budget 6


def test_a_selection_matching_nothing_in_a_table_read_to_its_end_is_no_records_match() -> None:
    archive = Archive()
    archive.repository = archive_repository(
        archive.counting,
        address="archive.example.org",
        service_ibi=archive.items[0].key,
        base_url=BASE,
        admin_email="ibi-admin@example.org",
        clock=FakeClock(START),
        page_size=PAGE_SIZE,
        scan_pages=100,  # enough to read all 41 items
    )
    answer = archive.ask(verb="ListRecords", metadataPrefix="oai_dc", set="Metadata")
    assert [e.get("code") for e in answer.findall("o:error", NS)] == ["noRecordsMatch"]


def test_a_harvest_following_tokens_returns_every_record_exactly_once() -> None:
    archive = Archive()
    found, _ = archive.harvest()
    assert sorted(found) == sorted(f"oai:urlib.net:{item.key}" for item in archive.items)


def test_a_selective_harvest_returns_its_records_exactly_once_within_the_budget() -> None:
    archive = Archive()
    found, requests = archive.harvest(**{"from": "2026-12-23"})  # the last ten days
    assert sorted(found) == sorted(f"oai:urlib.net:{item.key}" for item in archive.items[30:])
    assert archive.counting.read <= requests * BUDGET


def test_the_harvest_reads_eventually_consistent() -> None:
    archive = Archive()
    archive.harvest()
    assert archive.counting.consistent and not any(archive.counting.consistent)


def test_the_store_scans_eventually_consistent_when_asked() -> None:
    calls: list[dict[str, Any]] = []

    class Client:
        def scan(self, **request: Any) -> dict[str, Any]:
            calls.append(request)
            return {"Items": []}

    store = DynamoItemStore(Client(), "items")  # type: ignore[arg-type]
    store.scan(after=None, limit=5, consistent=False)
    store.scan(after=None, limit=5)
    assert [call["ConsistentRead"] for call in calls] == [False, True]
