"""Usage figures worth publishing (issue 35): requests counted as COUNTER Release 5 counts them.

Each reproduction of the issue, replayed over the in-memory federation (the Archive's protocol
and the resolver's resolution and acknowledgment): double-clicks counted once, robots never,
total and unique, what a direct caller can and cannot do; the store's claim over local mode's
tables and moto; the DynamoDB calls an acknowledgment costs; the holdings view's sum.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.archive.holdings import Requests
from functions.archive.protocol import DOUBLE_CLICK_SECONDS, SESSION_SECONDS
from functions.archive.store import DynamoItemStore, ensure_table
from functions.resolver.acknowledgments import Acknowledgments, acknowledgment_pairs
from functions.resolver.holdings import HoldingsView, holding_of
from functions.resolver.pages import holdings_page
from ibi.core.pairlist import encode_query, parse_pair_list
from ibi.core.usage import Usage
from ibi_tools.local.tables import LocalTables
from tests.fakes_archive import ArchiveNode, MemoryFederation
from tests.unit.test_archive_federation import BYTES, REPORT, found
from tests.unit.test_usage_figures import FORMS, ITEM

BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
READER = "203.0.113.9"
NOTICE = "notice {acknowledgment received}"


@pytest.fixture
def federation() -> MemoryFederation:
    federation = MemoryFederation("a")
    federation["a"].original(REPORT.ibip, BYTES)
    return federation


def get(federation: MemoryFederation, agent: str | None, client: str = READER) -> str:
    """One anonymous GET of the persistent URL through the resolution (for READER), then its
    acknowledgment as the resolver sends it, declaring ``client`` and the User-Agent."""
    persistent = f"/{REPORT.ibip}"
    went = found(federation.resolve(persistent))
    pairs = acknowledgment_pairs(went, persistent, client, agent)  # (resolved for READER)
    return str(federation["a"].protocol.answer(encode_query(pairs)).pairs)


def figures(node: ArchiveNode) -> tuple[int, int]:
    """(total requests, unique requests) the Archive counts for the item."""
    usage = node.service.get(REPORT.ibip).usage
    return usage.total, usage.unique.total if isinstance(usage, Requests) else 0


# ---------------------------------------------------------------------------- reproductions


def test_thirty_gets_from_one_client_within_30_seconds_count_once(
    federation: MemoryFederation,
) -> None:
    a = federation["a"]
    for _ in range(30):
        assert get(federation, BROWSER) == NOTICE
        a.clock.sleep(0.9)  # 30 GETs in 27 s
    assert figures(a) == (1, 1)
    a.clock.sleep(DOUBLE_CLICK_SECONDS + 1 - 0.9 * 30)  # 31 s after the one counted
    get(federation, BROWSER)
    assert figures(a) == (2, 1)  # a second request of the same session: not unique


def test_a_request_30_seconds_after_the_counted_one_is_still_a_double_click(
    federation: MemoryFederation,
) -> None:
    a = federation["a"]
    get(federation, BROWSER)
    a.clock.sleep(DOUBLE_CLICK_SECONDS)
    get(federation, BROWSER)
    assert figures(a) == (1, 1)
    a.clock.sleep(1)
    get(federation, BROWSER)
    assert figures(a) == (2, 1)


@pytest.mark.parametrize("agent", [GOOGLEBOT, "python-requests/2.31", "curl/8.0", "", "-"])
def test_thirty_gets_from_a_robot_or_a_machine_count_nothing(
    federation: MemoryFederation, agent: str
) -> None:
    a = federation["a"]
    for _ in range(30):
        assert get(federation, agent) == NOTICE
        a.clock.sleep(60)
    assert a.store.accesses == {} and a.store.urlkeys == {}  # nothing written at all
    assert a.protocol.acknowledge({"clientinformation.useragent": agent}).metric == (
        "AcknowledgmentsRobots"
    )


def test_the_resolver_acknowledges_no_robots_resolution(federation: MemoryFederation) -> None:
    """The resolver does not even queue it (a crawler costs the Archive nothing)."""
    sent: list[str] = []

    class Queue:
        def send(self, body: str) -> None:
            sent.append(body)

    class Directory:
        def find(self, service_ibi: str) -> Any:
            return type("Archive", (), {"service_ibi": service_ibi})()

    acknowledgments = Acknowledgments(Queue(), Directory())  # type: ignore[arg-type]
    went = found(federation.resolve(f"/{REPORT.ibip}"))
    acknowledgments.send(went, "https://r/x", READER, "c", GOOGLEBOT)
    assert sent == []
    acknowledgments.send(went, "https://r/x", READER, "c", BROWSER)
    assert len(sent) == 1 and f'["clientinformation.useragent","{BROWSER}"]' in sent[0]
    acknowledgments.send(went, "https://r/x", READER, "c", None)  # not known: acknowledged
    assert len(sent) == 2 and "useragent" not in sent[1]


def test_an_acknowledgment_without_a_user_agent_is_counted_as_an_older_resolvers(
    federation: MemoryFederation,
) -> None:
    for _ in range(5):
        get(federation, None)
    assert figures(federation["a"]) == (1, 1)  # the double-click rule still holds


def direct_pair(node: ArchiveNode, client: str, agent: str = BROWSER) -> str:
    """A urlRequest and its acknowledgment sent straight to the Archive, not by a resolver."""
    asked = [
        ("servicesubject", "urlRequest"),
        ("clientinformation.ipaddress", client),
        ("parsedibiurl.ibi", REPORT.ibip),
    ]
    answer = node.protocol.answer(encode_query(asked)).pairs
    ack = [
        ("servicesubject", "acknowledgment"),
        ("clientinformation.ipaddress", client),
        ("clientinformation.useragent", agent),
        ("ibi", f"ibip {REPORT.ibip}"),
        ("url", str(answer.word("url"))),
        ("urlkey", str(answer.word("urlkey"))),
    ]
    return str(node.protocol.answer(encode_query(ack)).pairs)


def test_200_direct_pairs_from_one_declared_client_count_once(
    federation: MemoryFederation,
) -> None:
    a = federation["a"]
    for _ in range(200):
        assert direct_pair(a, "198.51.100.7") == NOTICE
        a.clock.sleep(0.1)  # 200 pairs in 20 s
    assert figures(a) == (1, 1)


def test_200_direct_pairs_inventing_200_clients_count_200_the_stated_limit(
    federation: MemoryFederation,
) -> None:
    """What the figures cannot resist (docs/archive.md, "Usage figures"): a caller that
    invents the client addresses it declares is 200 clients."""
    a = federation["a"]
    for n in range(200):
        direct_pair(a, f"198.51.{n // 250}.{n % 250 + 1}")
    assert figures(a) == (200, 200)


def test_a_urlkey_acknowledged_under_another_client_counts_nothing(
    federation: MemoryFederation,
) -> None:
    """The urlkey covers the client its urlRequest declared: one urlRequest cannot be spent as
    another client's request (nor the double-click rule dodged by changing the address)."""
    a = federation["a"]
    for other in ("198.51.100.8", f"{READER} 10.0.0.1", ""):
        get(federation, BROWSER, client=other)
        assert a.store.accesses == {} and a.store.urlkeys == {}
    get(federation, BROWSER)
    assert figures(a) == (1, 1)


def test_a_changed_user_agent_is_another_client_but_a_replay_is_still_spent(
    federation: MemoryFederation,
) -> None:
    a = federation["a"]
    persistent = f"/{REPORT.ibip}"
    pairs = acknowledgment_pairs(found(federation.resolve(persistent)), persistent, READER, BROWSER)
    a.protocol.answer(encode_query(pairs))
    a.clock.sleep(DOUBLE_CLICK_SECONDS + 1)
    a.protocol.answer(encode_query(pairs))  # the same urlkey again: spent
    assert figures(a) == (1, 1)
    get(federation, BROWSER + " Other")  # the same address, another User-Agent: another client
    assert figures(a) == (2, 2)


def test_unique_requests_are_one_per_client_per_utc_hour(federation: MemoryFederation) -> None:
    a = federation["a"]
    start = int(a.clock.now)
    a.clock.now -= start % SESSION_SECONDS  # at the start of an hour
    for _ in range(3):  # three requests of one session
        get(federation, BROWSER)
        a.clock.sleep(DOUBLE_CLICK_SECONDS + 1)
    get(federation, GOOGLEBOT)
    assert figures(a) == (3, 1)
    a.clock.sleep(SESSION_SECONDS)  # the next hour: a new session
    get(federation, BROWSER)
    assert figures(a) == (4, 2)
    direct_pair(a, "198.51.100.8")  # another reader (no double-click)
    assert figures(a) == (5, 3)


def test_the_holdings_pairs_carry_the_unique_requests(federation: MemoryFederation) -> None:
    a = federation["a"]
    get(federation, BROWSER)
    asked = [
        ("servicesubject", "urlRequest"),
        ("clientinformation.ipaddress", READER),
        ("parsedibiurl.ibi", REPORT.ibip),
        ("extension.holdings", "yes"),
    ]
    pairs = a.protocol.answer(encode_query(asked)).pairs
    assert pairs.word("holdings.accesses") == "1"
    assert pairs.word("holdings.uniqueaccesses") == "1"
    assert pairs.words("holdings.uniqueaccessesbymonth") == ("2026-11", "1")


# ---------------------------------------------------------------------------- the holdings view


def answer(archive: str, state: str, total: int, unique: int, sha256: str, trust: Any) -> Any:
    from functions.resolver.authority import ArchiveAnswer

    pairs = parse_pair_list(
        f"state {state}\r\nibi {{ibip X}}\r\nurl https://{archive}.example.org/\r\n"
        f"holdings.state {state}\r\nholdings.timestamp 2026-11-01T00:00:00Z\r\n"
        f"holdings.listable yes\r\nholdings.files {{r.txt {sha256} 4}}\r\n"
        f"holdings.filecount 1\r\nholdings.accesses {total}\r\n"
        f"holdings.accessesbymonth {{2026-11 {total}}}\r\n"
        f"holdings.uniqueaccesses {unique}\r\nholdings.uniqueaccessesbymonth {{2026-11 {unique}}}"
    )
    return ArchiveAnswer(archive, f"{archive}.example.org", pairs, trust=trust, owner="A")


def test_a_lying_copys_figures_are_never_summed_total_nor_unique() -> None:
    from functions.resolver.authority import Trust

    good, bad, lie = "a" * 64, "b" * 64, 999999999999999999
    view = HoldingsView(
        "X",
        [
            holding_of(answer("A", "Original", 3, 2, good, Trust.OWNER)),
            holding_of(answer("B", "Copy", 2, 1, good, Trust.UNTRUSTED)),  # verified: summed
            holding_of(answer("L", "Copy", lie, lie, bad, Trust.UNTRUSTED)),
            holding_of(answer("M", "Original", lie, lie, good, Trust.UNTRUSTED)),
        ],
    )
    shown = view.to_mapping()
    assert shown["usage"] == {"total": 5, "months": {"2026-11": 5}}
    assert shown["unique_usage"] == {"total": 3, "months": {"2026-11": 3}}
    page = holdings_page(shown)
    assert "COUNTER Release 5" in page and "within 30 seconds once" in page
    assert "robot" in page and '<p id="unique-usage">Unique requests: 3</p>' in page
    assert str(lie) not in page.split("<h2>Archives</h2>")[0]


@pytest.mark.parametrize("unique", ["-1", "x", "1" * 16, "{2026-11}"])
def test_malformed_unique_figures_are_not_reported(unique: str) -> None:
    from functions.resolver.authority import Trust

    holding = holding_of(answer("A", "Original", 3, 0, "a" * 64, Trust.OWNER))
    assert holding.unique == Usage(0, ())
    bad = answer("A", "Original", 3, 0, "a" * 64, Trust.OWNER)
    text = str(bad.pairs).replace("holdings.uniqueaccesses 0", f"holdings.uniqueaccesses {unique}")
    assert holding_of(type(bad)(bad.archive, bad.address, parse_pair_list(text))).unique is None


# ---------------------------------------------------------------------------- the store


@pytest.fixture(params=["local tables", "moto"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DynamoItemStore]:
    if request.param == "moto":
        with mock_aws():
            client: Any = boto3.client("dynamodb", region_name="us-east-1")
            ensure_table(client, "items")
            yield DynamoItemStore(client, "items")
    else:
        client = LocalTables(tmp_path / "tables.sqlite3").client()
        ensure_table(client, "items")
        yield DynamoItemStore(client, "items")


def claim(store: DynamoItemStore, at: int, client: str = "c1") -> bool | None:
    return store.claim_request(
        FORMS.key, client, at=at, window=DOUBLE_CLICK_SECONDS, session_seconds=SESSION_SECONDS
    )


def test_the_store_claims_a_request_once_per_window_and_says_when_it_is_unique(
    store: DynamoItemStore,
) -> None:
    hour = int(time.time()) // 3600 * 3600  # now: local mode's tables honour the TTL
    assert claim(store, hour) is True
    assert claim(store, hour + 30) is None  # a double-click
    assert claim(store, hour + 31) is False  # counted, same session
    assert claim(store, hour + 31, client="c2") is True
    assert claim(store, hour + 3600) is True  # the next hour: a new session
    store.create(ITEM)
    store.count_access(FORMS.key, month="2026-11", unique=True)
    store.count_access(FORMS.key, month="2026-11")
    store.count_access(FORMS.key, month="2026-12", unique=True)
    held = store.get(FORMS.key)
    assert held is not None and held.usage == Requests(
        3, (("2026-11", 2), ("2026-12", 1)), unique=Usage(2, (("2026-11", 1), ("2026-12", 1)))
    )
    assert store.scan(after=None, limit=100)[0] == [store.get(FORMS.key)]  # no claim listed


def test_concurrent_claims_of_one_client_and_item_count_once(tmp_path: Path) -> None:
    client = LocalTables(tmp_path / "tables.sqlite3").client()
    ensure_table(client, "items")
    store = DynamoItemStore(client, "items")
    barrier = threading.Barrier(12)

    def race(_: int) -> bool | None:
        barrier.wait()
        return claim(store, int(time.time()))

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(race, range(12)))
    assert results.count(True) == 1 and results.count(None) == 11


def test_what_an_acknowledgment_costs_in_dynamodb_calls() -> None:
    """Measured (docs/archive.md, "Usage figures"): a counted request, 3 writes (the urlkey
    spent, the claim, the count: one more than before issue 35); a double-click, 2 (the
    second refused by its condition); a robot's, none."""
    from decimal import Decimal

    from functions.archive.model import Forms
    from functions.archive.protocol import ArchiveIdentity, ProtocolService
    from functions.archive.views import ArchiveViews
    from ibi.core.labels import IBI
    from tests.fakes import FakeClock

    label = IBI.build(Decimal(1700000000), host="a.example.org", ip="192.0.2.20")
    with mock_aws():
        client: Any = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(client, "items")
        store = DynamoItemStore(client, "items")
        store.create(ITEM)
        protocol = ProtocolService(
            store,
            identity=ArchiveIdentity("a.example.org", Forms(rep=label.rep, ibip=label.ibip)),
            views=ArchiveViews("https://a.example.org"),
            clock=FakeClock(Decimal(1795473000)),
            urlkey_ttl_seconds=600,
        )
        asked = [
            ("servicesubject", "urlRequest"),
            ("clientinformation.ipaddress", READER),
            ("parsedibiurl.ibi", FORMS.ibip),
        ]
        calls: list[str] = []
        client.meta.events.register(
            "before-call.dynamodb", lambda model, **_: calls.append(model.name)
        )

        def acknowledged(agent: str) -> list[str]:
            answer = protocol.answer(encode_query(asked)).pairs
            assert answer.word("urlkey")
            ack = [
                ("servicesubject", "acknowledgment"),
                ("clientinformation.ipaddress", READER),
                ("clientinformation.useragent", agent),
                ("ibi", f"ibip {FORMS.ibip}"),
                ("url", str(answer.word("url"))),
                ("urlkey", str(answer.word("urlkey"))),
            ]
            calls.clear()
            protocol.answer(encode_query(ack))
            return list(calls)

        assert acknowledged(BROWSER) == ["PutItem", "UpdateItem", "UpdateItem"]
        assert acknowledged(BROWSER) == ["PutItem", "UpdateItem"]  # a double-click
        assert acknowledged(GOOGLEBOT) == []
        held = store.get(FORMS.key)
        assert held is not None and held.usage.total == 1
