"""OAI-PMH lists read from the items table's datestamp index (issue 26, point 2), and records
that name their persistent URLs (issue 28, point 6).

A list request Queries the index: per set, one record more than a page, so a page is full or
the list's last, never empty; a selection that matches nothing reads no record. Over the
in-memory store (counting what the repository reads), then the store itself over local mode's
tables and moto.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from lxml import etree
from moto import mock_aws

from functions.archive.model import ContentType, Forms, Item, State
from functions.archive.oai import Position, archive_repository
from functions.archive.store import (
    DATESTAMP_INDEX,
    DynamoItemStore,
    ensure_table,
    index_all,
)
from ibi.core.labels import IBI
from ibi_tools import oai_index
from ibi_tools.local.tables import LocalTables
from tests.fakes_archive import MemoryItemStore
from tests.unit.test_archive_oai import (
    BASE,
    DAY,
    NS,
    START,
    Archive,
    error_codes,
    harvest,
    identifiers,
    token,
)

PAGE = 3


class CountingItems:
    """The item store, counting the index Queries the repository makes and the records read."""

    def __init__(self, store: MemoryItemStore) -> None:
        self._store = store
        self.queries: list[str] = []
        self.read = 0

    def get(self, label: str) -> Item | None:
        return self._store.get(label)

    def query_datestamps(
        self,
        set_spec: str,
        *,
        first: int | None,
        last: int | None,
        after: Position | None,
        limit: int,
    ) -> list[Item]:
        found = self._store.query_datestamps(
            set_spec, first=first, last=last, after=after, limit=limit
        )
        self.queries.append(set_spec)
        self.read += len(found)
        return found


class Counted(Archive):
    """40 items, one a day, every third a Metadata item; pages of three; reads counted."""

    def __init__(self, count: int = 40, *, resolver_url: str | None = None) -> None:
        super().__init__(page_size=PAGE)
        self.items = []
        for day in range(count):
            kind = ContentType.METADATA if day % 3 == 2 else ContentType.DATA
            self.items.append(
                self.deposit(f"t{day}", at=START + day * DAY, content_type=kind.value)
            )
        self.counting = CountingItems(self.store)
        extra = {"resolver_url": resolver_url} if resolver_url else {}
        self.repository = archive_repository(
            self.counting,
            address="archive.example.org",
            service_ibi=self.service_item.key,
            base_url=BASE,
            admin_email="ibi-admin@example.org",
            clock=self.clock,
            page_size=PAGE,
            **extra,
        )

    def change(self, item: Item, **fields: Any) -> Item:
        """``item`` changed now (a later timestamp), as the service's writes change it."""
        self.clock.now += 1
        current = self.store.get(item.key)
        assert current is not None
        changed = replace(current, timestamp=self.clock.now, version=current.version + 1, **fields)
        self.store.replace(changed, expected_version=current.version)
        return changed


def oai(item: Item) -> str:
    return f"oai:urlib.net:{item.key}"


# -- reading the index -------------------------------------------------------------------------


def test_a_selection_that_matches_nothing_reads_no_record_and_is_no_records_match() -> None:
    archive = Counted()
    answer = archive.ask(verb="ListRecords", metadataPrefix="oai_dc", **{"from": "2030-01-01"})
    assert error_codes(answer) == ["noRecordsMatch"]
    assert archive.counting.read == 0
    assert sorted(archive.counting.queries) == ["Data", "Metadata"]  # one Query per set


def test_a_set_is_one_query_of_its_partition() -> None:
    archive = Counted()
    answer = archive.ask(
        verb="ListIdentifiers", metadataPrefix="oai_dc", set="Metadata", until="2026-11-20"
    )
    assert error_codes(answer) == ["noRecordsMatch"]
    assert archive.counting.queries == ["Metadata"]


def test_an_unknown_set_reads_nothing_and_is_no_records_match() -> None:
    archive = Counted()
    answer = archive.ask(verb="ListIdentifiers", metadataPrefix="oai_dc", set="Software")
    assert error_codes(answer) == ["noRecordsMatch"]
    assert archive.counting.queries == []


def test_a_harvest_sends_every_record_once_in_datestamp_order_in_full_pages() -> None:
    archive = Counted()
    found, answers = harvest(archive, "ListIdentifiers", metadataPrefix="oai_dc")
    assert found == [oai(item) for item in archive.items]  # one a day: datestamp order
    sizes = [len(identifiers(answer)) for answer in answers]
    assert sizes == [PAGE] * 13 + [1]  # full pages, then the last: never an empty one
    assert token(answers[-1]) is not None and not token(answers[-1]).text
    assert [token(a).get("cursor") for a in answers] == [str(PAGE * n) for n in range(14)]


def test_each_request_reads_at_most_a_page_and_one_record_more_per_set() -> None:
    archive = Counted()
    _, answers = harvest(archive, "ListRecords", metadataPrefix="oai_dc")
    assert archive.counting.read <= len(answers) * 2 * (PAGE + 1)


def test_a_selective_harvest_reads_about_what_it_sends() -> None:
    archive = Counted()
    found, answers = harvest(
        archive, "ListIdentifiers", metadataPrefix="oai_dc", **{"from": "2026-12-23"}
    )
    assert found == [oai(item) for item in archive.items[30:]]  # the last ten days
    assert archive.counting.read <= len(found) + len(answers) * 2


def test_a_set_harvest_by_from_and_until_sends_that_set_s_records_only() -> None:
    archive = Counted()
    arguments = {"from": "2026-11-28", "until": "2026-12-10", "set": "Metadata"}
    found, _ = harvest(archive, "ListRecords", metadataPrefix="oai_dc", **arguments)
    expected = [i for n, i in enumerate(archive.items) if n % 3 == 2 and 5 <= n <= 17]
    assert found == [oai(item) for item in expected]
    assert set(archive.counting.queries) == {"Metadata"}


def test_a_token_of_the_table_scanning_version_is_a_bad_resumption_token() -> None:
    archive = Counted()
    old = {
        "verb": "ListIdentifiers",
        "metadata_prefix": "oai_dc",
        "after": "LK47B6/4GR",
        "cursor": 3,
    }
    text = base64.urlsafe_b64encode(json.dumps(old).encode()).decode().rstrip("=")
    answer = archive.ask(verb="ListIdentifiers", resumptionToken=text)
    assert error_codes(answer) == ["badResumptionToken"]


def test_a_record_changed_between_pages_is_sent_once_or_again_later_never_lost() -> None:
    """Between the pages: a record not yet sent changes (and one of them changes set), one
    already sent changes, one is deleted, one is deposited. Every record is sent; those that
    did not change exactly once; the changed ones at their new datestamps, later."""
    archive = Counted(count=12)
    answers = [archive.ask(verb="ListIdentifiers", metadataPrefix="oai_dc")]
    sent_first = identifiers(answers[0])
    ahead, behind = archive.items[7], archive.items[1]
    assert oai(ahead) not in sent_first and oai(behind) in sent_first
    archive.change(ahead)
    archive.change(archive.items[9], content_type=ContentType.METADATA)  # Data -> Metadata
    archive.change(archive.items[8], content_type=ContentType.DATA)  # Metadata -> Data
    archive.change(behind)
    archive.service.delete(archive.items[4].key)
    new = archive.deposit("late", at=archive.clock.now + 1)
    while (resume := token(answers[-1])) is not None and resume.text:
        answers.append(archive.ask(verb="ListIdentifiers", resumptionToken=resume.text))
        if len(answers) == 2:  # and again between later pages
            archive.change(archive.items[11])
    found = [i for answer in answers for i in identifiers(answer)]
    changed = {oai(archive.items[n]) for n in (1, 4, 7, 8, 9, 11)}
    assert set(found) == {oai(item) for item in [*archive.items, new]}
    assert all(found.count(i) == 1 for i in set(found) - changed)
    assert all(1 <= found.count(i) <= 2 for i in changed)
    assert found.count(oai(behind)) == 2  # sent, then sent again at its new datestamp
    assert all(identifiers(answer) for answer in answers)  # no empty page


def test_a_record_changed_past_until_ends_the_list_with_an_empty_page() -> None:
    """The one race that leaves a resumed request nothing: the records left all changed past
    ``until``. The list ends (an empty token), as the protocol's incomplete-list rule says."""
    archive = Counted(count=4)
    until = "2026-11-26"  # the first four days
    first = archive.ask(verb="ListIdentifiers", metadataPrefix="oai_dc", until=until)
    assert identifiers(first) == [oai(item) for item in archive.items[:PAGE]]
    archive.clock.now = START + 4 * DAY
    archive.change(archive.items[3])  # now: past `until`
    answer = etree.fromstring(
        archive.repository.answer(f"verb=ListIdentifiers&resumptionToken={token(first).text}")
    )
    assert identifiers(answer) == []
    assert token(answer) is not None and not token(answer).text


# -- persistent URLs (issue 28, point 6) -------------------------------------------------------


def test_a_record_names_its_persistent_url_first_then_its_ibi() -> None:
    archive = Counted(count=1, resolver_url="https://resolver.example.org/")
    item = archive.items[0]
    answer = archive.ask(verb="GetRecord", identifier=oai(item), metadataPrefix="oai_dc")
    dc = answer.find(".//{http://www.openarchives.org/OAI/2.0/oai_dc/}dc")
    found = [e.text for e in dc.iterfind("{http://purl.org/dc/elements/1.1/}identifier")]
    assert found == [f"https://resolver.example.org/{item.key}", *item.ibi.labels]
    listed = archive.ask(verb="ListRecords", metadataPrefix="oai_dc")
    assert listed.findtext(".//{http://purl.org/dc/elements/1.1/}identifier") == found[0]


def test_a_tombstone_has_no_metadata_and_so_no_persistent_url() -> None:
    archive = Counted(count=1)
    archive.service.delete(archive.items[0].key)
    answer = archive.ask(verb="ListRecords", metadataPrefix="oai_dc")
    assert answer.find(".//o:record/o:metadata", NS) is None
    assert answer.find(".//o:record/o:header", NS).get("status") == "deleted"


# -- the store: the index over local mode's tables and moto -------------------------------------


def _item(n: int, *, kind: ContentType = ContentType.DATA, **fields: Any) -> Item:
    ibi = IBI.build(START + n, host="ibi.example.org", ip="192.0.2.10")
    return Item(
        ibi=Forms(rep=ibi.rep, ibip=ibi.ibip),
        state=State.ORIGINAL,
        timestamp=START + Decimal(n * 60) + Decimal("0.25"),
        content_type=kind,
        dc={"title": (f"t{n}",)},
        **fields,
    )


@pytest.fixture(params=["local", "moto"])
def dynamodb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "local":
        yield LocalTables(tmp_path / "tables.sqlite3").client()
        return
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def _keys(items: list[Item]) -> list[str]:
    return [item.key for item in items]


def test_the_store_queries_records_by_set_and_datestamp_in_order(dynamodb: Any) -> None:
    ensure_table(dynamodb, "items")
    store = DynamoItemStore(dynamodb, "items")
    items = [
        _item(n, kind=ContentType.METADATA if n % 4 == 0 else ContentType.DATA) for n in range(20)
    ]
    for item in reversed(items):
        store.create(item)
    store.create(replace(_item(30), pending=True))  # on its way in: not a record
    store.claim_service_item(Forms.of(_item(31).ibi.rep or ""))
    data = [i for i in items if i.content_type is ContentType.DATA]
    query = store.query_datestamps
    assert _keys(query("Data", first=None, last=None, after=None, limit=100)) == _keys(data)
    first, last = int(items[5].timestamp), int(items[9].timestamp)
    assert _keys(query("Data", first=first, last=last, after=None, limit=100)) == _keys(
        [i for i in data if first <= i.timestamp <= last + 1]
    )
    later = [i for i in data if i.timestamp >= first]
    assert _keys(query("Data", first=first, last=None, after=None, limit=2)) == _keys(later[:2])
    assert _keys(query("Metadata", first=None, last=last, after=None, limit=100)) == _keys(
        items[0:9:4]
    )
    after = (int(data[3].timestamp), data[3].key)
    assert _keys(query("Data", first=None, last=None, after=after, limit=3)) == _keys(data[4:7])


def test_a_replaced_item_moves_in_the_index_and_leaves_it_when_not_a_record(dynamodb: Any) -> None:
    ensure_table(dynamodb, "items")
    store = DynamoItemStore(dynamodb, "items")
    first, second = _item(1), _item(2)
    store.create(first)
    store.create(second)
    moved = replace(first, timestamp=START + 9999, version=1, content_type=ContentType.METADATA)
    store.replace(moved, expected_version=0)
    everything = {"first": None, "last": None, "after": None, "limit": 10}
    assert _keys(store.query_datestamps("Data", **everything)) == [second.key]
    assert _keys(store.query_datestamps("Metadata", **everything)) == [first.key]
    store.replace(replace(second, pending=True, version=1), expected_version=0)
    assert store.query_datestamps("Data", **everything) == []


def test_records_written_before_the_index_are_put_into_it(dynamodb: Any) -> None:
    """A table made by the version before the index (no index, records without its keys):
    ``ensure_table`` adds the index and indexes them (``index_all``, as ``python -m
    ibi_tools.oai_index`` does in AWS)."""
    dynamodb.create_table(
        TableName="old",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "label", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "label", "AttributeType": "S"}],
    )
    store = DynamoItemStore(dynamodb, "old")
    items = [_item(n) for n in range(5)]
    for item in items:
        record = store._record(item)  # as the version before wrote it
        record.pop("oai_set")
        record.pop("oai_datestamp")
        dynamodb.put_item(TableName="old", Item=record)
    ensure_table(dynamodb, "old")
    described = dynamodb.describe_table(TableName="old")["Table"]
    assert [i["IndexName"] for i in described["GlobalSecondaryIndexes"]] == [DATESTAMP_INDEX]
    everything = {"first": None, "last": None, "after": None, "limit": 10}
    assert _keys(store.query_datestamps("Data", **everything)) == _keys(items)
    assert index_all(store, page=2) == 0  # nothing left to index


def test_the_operator_tool_indexes_the_records_a_deployed_table_held_before_its_index(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In AWS the stack adds the index to the table; ``python -m ibi_tools.oai_index`` then
    gives the records written before it their keys, once."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(client, "deployed")  # the table as the stack now declares it
        store = DynamoItemStore(client, "deployed")
        items = [_item(n) for n in range(3)]
        for item in items:
            record = store._record(item)
            del record["oai_set"], record["oai_datestamp"]  # written before the index
            client.put_item(TableName="deployed", Item=record)
        everything = {"first": None, "last": None, "after": None, "limit": 10}
        assert store.query_datestamps("Data", **everything) == []
        assert oai_index.main(["deployed", "--region", "us-east-1"]) == 0
        assert _keys(store.query_datestamps("Data", **everything)) == _keys(items)
        assert oai_index.main(["deployed", "--region", "us-east-1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "deployed: 3 records put into OAI-PMH's index",
        "deployed: 0 records put into OAI-PMH's index",
    ]
