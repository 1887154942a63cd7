"""Issue 11, findings 1 and 2, through the real handler and DynamoDB (moto): a flood of
refused switches writes nothing and never makes the registry be scanned; wrong keys are
counted, in the throttle table only, per source, each record with its expiry."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.resolver import handler, wiring
from functions.resolver.registry import Contact
from functions.resolver.settings import ResolverSettings
from functions.resolver.throttle import DynamoThrottle, Tally
from functions.resolver.wiring import ensure_tables
from ibi.core.labels import IBI
from ibi.core.pairlist import encode_query
from ibi_tools.local.gateway import LocalContext

EVENTS = Path(__file__).parents[2] / "events" / "resolver"
ARCHIVE = "8JMKD3MGP8W/3FSUP4L"
KEY = "1234567890-0987654321"
WRONG = "5555555555-6666666666"
TABLES = ("resolver", "resolver-throttle")


class CountingClient:
    """A DynamoDB client that counts its calls, by operation and table."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: Counter[tuple[str, str]] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def counted(**request: Any) -> Any:
            self.calls[(name, request.get("TableName", ""))] += 1
            return method(**request)

        return counted


def _event(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded


def switch_event(archive: str, key: str, source_ip: str, subject: str) -> dict[str, Any]:
    event = _event("exclusion_request.json")
    pairs = [
        ("servicesubject", subject),
        ("archiveaddress", "archive.example.org"),
        ("archiveserviceibi", archive),
        ("archiveip", "192.0.2.20"),
        ("archiveprotocol", "HTTPS"),
        ("archiveplatformversion", "ibi-0.1.0"),
        ("archiveadmemailaddress", "admin@example.org"),
        ("registrationkey", key),
    ]
    event["rawQueryString"] = encode_query(pairs)
    event["queryStringParameters"] = dict(pairs)
    event["requestContext"]["http"]["sourceIp"] = source_ip
    event["headers"]["x-forwarded-for"] = "192.0.2.99"  # written by the sender: never counted
    return event


@pytest.fixture
def stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[CountingClient, Callable[[dict[str, Any]], dict[str, Any]]]]:
    with mock_aws():
        raw = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(raw, "resolver")
        client = CountingClient(raw)
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(tmp_path / "pepper")}
        )
        runtime = wiring.build(settings, dynamodb=client)
        runtime.registration.register(ARCHIVE, KEY)
        contact = Contact(address="192.0.2.1:80", protocol="HTTP")  # not public: never called
        runtime.registry.include(ARCHIVE, contact, at="2026-01-01T00:00:00Z", confirmed=True)
        # The snapshot's clock stands still: every read the requests below cause is theirs.
        monkeypatch.setattr(runtime.directory, "_monotonic", lambda: 0.0)
        wiring.install(runtime)
        try:
            yield client, lambda event: handler.lambda_handler(event, LocalContext("resolver", "t"))
        finally:
            wiring.install(None)


def _items(client: CountingClient, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client._client.scan(TableName=table)["Items"]
    return items


def test_a_flood_of_refused_switches_writes_nothing_and_scans_nothing(
    stack: tuple[CountingClient, Callable[[dict[str, Any]], dict[str, Any]]],
) -> None:
    client, invoke = stack
    assert invoke(_event("status.json"))["statusCode"] == 200  # the snapshot, read once
    assert invoke(_event("resolve.json"))["statusCode"] == 504  # nobody reachable answers
    before = {table: _items(client, table) for table in TABLES}
    client.calls.clear()
    draw = random.Random(1)
    for n in range(150):
        unknown = IBI.build(Decimal(1_500_000_000 + n), ip="198.51.100.9").ibip or ""
        key = f"{draw.randrange(10**10, 10**11)}-{draw.randrange(10**10, 10**11)}"
        source = f"203.0.{draw.randrange(256)}.{draw.randrange(256)}"
        subject = ("inclusionRequest", "exclusionRequest")[n % 2]
        answer = invoke(switch_event(unknown, key, source, subject))
        assert (answer["statusCode"], answer["body"]) == (403, "status.archive refused\r\n")
        if n % 10 == 0:
            assert invoke(_event("resolve.json"))["statusCode"] == 504
            assert invoke(_event("status.json"))["statusCode"] == 200
    assert {table: _items(client, table) for table in TABLES} == before
    writes = {call for call in client.calls if call[0] not in {"get_item"}}
    assert writes == set()  # no UpdateItem, PutItem, Scan or Query at all
    # Per refused request for an unknown IBI: one keyed read of the registry, nothing else.
    assert client.calls[("get_item", "resolver")] == 150
    assert client.calls[("get_item", "resolver-throttle")] == 0


def test_wrong_keys_are_counted_per_source_in_the_throttle_table_only(
    stack: tuple[CountingClient, Callable[[dict[str, Any]], dict[str, Any]]],
) -> None:
    client, invoke = stack
    registry_before = _items(client, "resolver")
    statuses = [
        invoke(switch_event(ARCHIVE, WRONG, "203.0.113.66", "exclusionRequest"))["statusCode"]
        for _ in range(6)
    ]
    assert statuses == [403] * 5 + [429]
    blocked = invoke(switch_event(ARCHIVE, KEY, "203.0.113.66", "exclusionRequest"))
    assert blocked["statusCode"] == 429 and int(blocked["headers"]["Retry-After"]) > 0
    # The holder, elsewhere (the header X-Forwarded-For is the guesser's own: ignored).
    holder = invoke(switch_event(ARCHIVE, KEY, "2001:db8:7::1", "exclusionRequest"))
    assert (holder["statusCode"], holder["body"]) == (200, "status.archive excluded\r\n")
    counters = {item["counter"]["S"]: item for item in _items(client, "resolver-throttle")}
    assert set(counters) == {f"archive {ARCHIVE}", f"source {ARCHIVE} 203.0.113.66"}
    for item in counters.values():
        assert item["expires_at"] == item["window_ends"]  # every record expires (TTL)
    assert counters[f"source {ARCHIVE} 203.0.113.66"]["failures"] == {"N": "5"}
    registry_after = _items(client, "resolver")
    assert len(registry_after) == len(registry_before)  # the Archive and the generation
    assert all("throttle" not in item["service"]["S"] for item in registry_after)


def test_the_dynamo_throttle_counts_in_fixed_windows() -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, "resolver")
        throttle = DynamoThrottle(client, "resolver-throttle")
        assert throttle.tally("c", now=100) == Tally()
        assert throttle.count_failure("c", now=100, window=60) == Tally(1, 160)
        assert throttle.count_failure("c", now=150, window=60, weight=5) == Tally(6, 160)
        assert throttle.tally("c", now=159).current(159) == 6
        assert throttle.tally("c", now=160).current(160) == 0  # the window is over
        assert throttle.count_failure("c", now=170, window=60) == Tally(1, 230)  # a new one
        [item] = client.scan(TableName="resolver-throttle")["Items"]
        assert item["expires_at"] == {"N": "230"}


def test_the_generation_moves_with_every_change_and_only_then(tmp_path: Path) -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, "resolver")
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(tmp_path / "pepper")}
        )
        runtime = wiring.build(settings, dynamodb=client)
        registry = runtime.registry
        assert registry.generation() == 0
        runtime.registration.register(ARCHIVE, KEY)
        registry.include(ARCHIVE, Contact(address="a.example"), at="t", confirmed=False)
        registry.note_answer(ARCHIVE, at="t", outcome="answered")  # not a change of the list
        registry.exclude(ARCHIVE, at="t")
        assert registry.generation() == 3
        assert [a.service_ibi for a in registry.archives()] == [ARCHIVE]
        pairs = switch_event(ARCHIVE, WRONG, "203.0.113.1", "exclusionRequest")
        refused = runtime.registration.switch(
            pairs["queryStringParameters"], client_ip="203.0.113.1"
        )
        assert refused.status == 403 and registry.generation() == 3
