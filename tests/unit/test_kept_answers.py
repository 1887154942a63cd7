"""What each authority last said (functions/resolver/kept.py): a table shared by every
execution environment, a memory in front, a write only when the answer changed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from functions.resolver.kept import (
    MISS_SECONDS,
    REFRESH_SECONDS,
    TTL_SECONDS,
    MemoryKept,
    TableKept,
    ensure_table,
)
from functions.resolver.resolution import kept_key
from ibi.core.pairlist import parse_pair_list

TABLE = "resolver-kept"
ANSWER = parse_pair_list("ibi {ibip 8JMKD3MGP8W/35MME4E}\nstate Original\nurl http://a/x\n")
KEY = kept_key("8JMKD3MGP8W/35MME4E", "GetLastEdition", "")


class Clock:
    def __init__(self) -> None:
        self.now = 1_796_000_000.0

    def __call__(self) -> float:
        return self.now


class Counting:
    """A DynamoDB client that counts its calls (and can be told to fail)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[str] = []
        self.failing = False

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            self.calls.append(name)
            if self.failing:
                raise ClientError({"Error": {"Code": "InternalServerError"}}, name)
            return getattr(self.client, name)(**kwargs)

        return call


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(client, TABLE)
        yield client


def test_the_key_names_the_ibi_the_verbs_and_the_path() -> None:
    assert kept_key("8jmkd3mgp8w/35mme4e", "GetLastEdition GetMetadata", "/a b.txt") == (
        "8JMKD3MGP8W/35MME4E GetLastEdition+GetMetadata /a b.txt"
    )
    assert kept_key("8JMKD3MGP8W/35MME4E", "", "") == "8JMKD3MGP8W/35MME4E"
    long = kept_key("8JMKD3MGP8W/35MME4E", "", "/" + "é" * 2000)  # a key DynamoDB takes
    assert long.startswith("8JMKD3MGP8W/35MME4E sha256:") and len(long.encode()) < 2048
    assert long != kept_key("8JMKD3MGP8W/35MME4E", "", "/" + "é" * 2001)


def test_every_environment_reads_what_one_kept(dynamodb: Any) -> None:
    clock = Clock()
    TableKept(dynamodb, TABLE, clock=clock).keep(KEY, "A", "a.example:443", ANSWER)
    other = TableKept(dynamodb, TABLE, clock=clock)  # another execution environment
    kept = other.get(KEY)
    assert kept is not None and (kept.archive, kept.address, kept.pairs) == (
        "A",
        "a.example:443",
        ANSWER,
    )
    assert kept.at == "2026-11-30T00:53:20Z"
    item = dynamodb.get_item(TableName=TABLE, Key={"request": {"S": KEY}})["Item"]
    assert int(item["expires_at"]["N"]) == int(clock.now) + TTL_SECONDS


def test_an_unchanged_answer_is_written_once_a_day(dynamodb: Any) -> None:
    clock, client = Clock(), Counting(dynamodb)
    kept = TableKept(client, TABLE, clock=clock)
    for _ in range(50):
        kept.keep(KEY, "A", "a.example:443", ANSWER)
    assert client.calls == ["put_item"]
    kept.keep(
        KEY, "A", "a.example:443", ANSWER.with_pair("ibi.nextedition", ("ibip", "D7N2UA7W/35MMLL8"))
    )
    assert client.calls == ["put_item"] * 2  # changed: written at once
    clock.now += REFRESH_SECONDS
    kept.keep(
        KEY, "A", "a.example:443", ANSWER.with_pair("ibi.nextedition", ("ibip", "D7N2UA7W/35MMLL8"))
    )
    assert client.calls == ["put_item"] * 3  # a day later: written again (its TTL renewed)


def test_a_request_nothing_is_kept_for_is_read_once_a_minute(dynamodb: Any) -> None:
    clock, client = Clock(), Counting(dynamodb)
    kept = TableKept(client, TABLE, clock=clock)
    assert [kept.get(KEY) for _ in range(20)] == [None] * 20
    assert client.calls == ["get_item"]
    clock.now += MISS_SECONDS
    assert kept.get(KEY) is None and client.calls == ["get_item"] * 2
    kept.keep(KEY, "A", "a.example:443", ANSWER)  # kept here: found at once
    assert kept.get(KEY) is not None and client.calls.count("get_item") == 2


def test_a_failing_table_costs_the_resolution_nothing(dynamodb: Any) -> None:
    client = Counting(dynamodb)
    client.failing = True
    kept = TableKept(client, TABLE, clock=Clock())
    kept.keep(KEY, "A", "a.example:443", ANSWER)  # logged, not raised
    assert kept.get("another request") is None
    assert client.calls == ["put_item", "get_item"]


def test_a_table_item_that_does_not_read_is_nothing_kept(dynamodb: Any) -> None:
    item = {"request": {"S": KEY}, "archive": {"S": "A"}, "pairs": {"S": "{{{ not pairs"}}
    dynamodb.put_item(TableName=TABLE, Item=item)
    assert TableKept(dynamodb, TABLE, clock=Clock()).get(KEY) is None


def test_the_memory_is_bounded() -> None:
    memory = MemoryKept(capacity=3)
    for n in range(5):
        memory.keep(f"k{n}", "A", "", ANSWER)
    assert [memory.get(f"k{n}") is not None for n in range(5)] == [False, False, True, True, True]


def test_a_browsers_and_a_citation_managers_requests_keep_one_answer(dynamodb: Any) -> None:
    """The holdings pairs a negotiated request adds are not kept: alternating requests write
    the kept answer once, not once each."""
    from functions.resolver.acknowledgments import Acknowledgments
    from functions.resolver.directory import ArchiveDirectory
    from functions.resolver.fanout import FanOut
    from functions.resolver.resolving import Lookup, Redirect, ResolvingService
    from ibi.core.persistent_url import parse_persistent_url
    from tests.fakes_resolver import MemoryRegistry
    from tests.unit.test_negotiation import DC, Archives, answer, holdings_text
    from tests.unit.test_owner_first import Queue

    owner, item = "8JMKD3MGP8W/3FSUP4A", "8JMKD3MGP8W/35MME4E"  # it owns the item's prefix
    registry = MemoryRegistry()
    registry.add(owner, "a.example.org:443")
    script = {(owner, item): (answer(item, "Original", "https://a.example.org/x"), "")}
    script[(owner, item)] = (script[(owner, item)][0], holdings_text("Original", DC))
    fanout = FanOut(Archives(script), ArchiveDirectory(registry), timeout=1.0, deadline=3.0)
    client = Counting(dynamodb)
    service = ResolvingService(
        fanout, Acknowledgments(Queue(), fanout.directory), TableKept(client, TABLE)
    )
    url = parse_persistent_url(f"/{item}")
    for holdings in (False, True, False, True, False):
        found = service.resolve(Lookup(url, f"https://r/{item}", "1.2.3.4", "c", holdings=holdings))
        assert isinstance(found, Redirect) and found.url == "https://a.example.org/x"
    assert client.calls.count("put_item") == 1
