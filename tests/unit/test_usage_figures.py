"""Public usage figures (issue 28, point 7): accesses in all and by calendar month (UTC).

The Archive counts each acknowledged access in its total and its month with one update; its
metadata page shows the figures, its holdings pairs carry them, and the resolver's holdings
view (JSON and page) shows each Archive's and their sum. The store is checked over local
mode's tables and moto (DynamoDB's semantics), the rest over the in-memory federation.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from functions.archive.model import Forms, Item, State
from functions.archive.store import DynamoItemStore, ensure_table, month_attribute
from functions.archive.views import metadata_page
from functions.resolver.holdings import HoldingsView, holding_of
from functions.resolver.pages import holdings_page
from ibi.core.errors import InvalidInput
from ibi.core.holdings import REQUEST_PAIR, Report, from_pairs, to_pairs
from ibi.core.labels import IBI
from ibi.core.pairlist import PairList, format_pair_list, parse_pair_list
from ibi.core.usage import NO_USAGE, Usage, combined, month_of
from ibi_tools.local.tables import LocalTables
from tests.fakes_archive import MemoryFederation

NOVEMBER = Decimal(1795473000)  # 2026-11-23T22:30:00Z
DECEMBER = Decimal(1796083200)  # 2026-12-01T00:00:00Z
LABEL = IBI.build(Decimal(1795000000), host="example.org", ip="192.0.2.10")
FORMS = Forms(rep=LABEL.rep, ibip=LABEL.ibip)
ITEM = Item(ibi=FORMS, state=State.ORIGINAL, timestamp=Decimal(1795000000), dc={"title": ("T",)})


# ---------------------------------------------------------------------------- the figures


@pytest.mark.parametrize(
    ("date", "month"),
    [
        (Decimal("1796083199.999"), "2026-11"),  # 2026-11-30T23:59:59.999Z
        (DECEMBER, "2026-12"),  # 2026-12-01T00:00:00Z: months are UTC's
        (NOVEMBER, "2026-11"),
    ],
)
def test_an_access_falls_in_the_utc_calendar_month_of_its_acknowledgment(
    date: Decimal, month: str
) -> None:
    assert month_of(date) == month


def test_figures_of_several_archives_add_up_month_by_month() -> None:
    a = Usage.of(5, {"2026-10": 2, "2026-11": 3})
    b = Usage.of(4, {"2026-11": 1, "2026-12": 1})  # and 2 from before months were kept
    assert combined([a, b]) == Usage(9, (("2026-10", 2), ("2026-11", 4), ("2026-12", 1)))
    assert combined([]) == NO_USAGE
    assert a.to_mapping() == {"total": 5, "months": {"2026-10": 2, "2026-11": 3}}


def test_a_month_attribute_is_named_by_its_month_and_nothing_else() -> None:
    assert month_attribute("2026-11") == "accesses_2026_11"
    with pytest.raises(ValueError, match="not a month"):
        month_attribute("2026-13")


# ---------------------------------------------------------------------------- the holdings pairs


def test_the_holdings_pairs_carry_the_figures_and_read_back() -> None:
    usage = Usage.of(12, {"2026-10": 5, "2026-11": 7})
    report = Report(state="Original", timestamp="2026-11-22T00:00:00Z", usage=usage)
    text = format_pair_list(to_pairs(report))
    assert "holdings.accesses 12" in text
    assert "holdings.accessesbymonth {2026-10 5 2026-11 7}" in text
    read = from_pairs(parse_pair_list(text))
    assert read is not None and read.usage == usage


def test_an_archive_that_reports_no_figures_has_none() -> None:
    report = Report(state="Original", timestamp="2026-11-22T00:00:00Z")
    read = from_pairs(parse_pair_list(format_pair_list(to_pairs(report))))
    assert read is not None and read.usage is None


@pytest.mark.parametrize(
    "pairs",
    [
        [("holdings.accesses", "-1")],
        [("holdings.accesses", "9" * 19)],
        [("holdings.accesses", "3"), ("holdings.accessesbymonth", ("2026-11",))],
        [("holdings.accesses", "3"), ("holdings.accessesbymonth", ("2026-13", "3"))],
        [("holdings.accesses", "3"), ("holdings.accessesbymonth", ("2026-11", "x"))],
    ],
)
def test_malformed_figures_are_a_malformed_report(pairs: list[tuple[str, object]]) -> None:
    base = [("holdings.state", "Original"), ("holdings.timestamp", "2026-11-22T00:00:00Z")]
    with pytest.raises(InvalidInput, match=r"holdings\.accesses"):
        from_pairs(PairList([*base, *pairs]))  # type: ignore[list-item]


# ---------------------------------------------------------------------------- the store


@pytest.fixture(params=["local tables", "moto"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "moto":
        with mock_aws():
            yield boto3.client("dynamodb", region_name="us-east-1")
    else:
        yield LocalTables(tmp_path / "tables.sqlite3").client()


def test_one_update_counts_the_total_and_the_month(client: object) -> None:
    ensure_table(client, "items")  # type: ignore[arg-type]
    store = DynamoItemStore(client, "items")  # type: ignore[arg-type]
    store.create(ITEM, accesses=40)  # 40 carried by a transfer: in the total only
    assert store.get(FORMS.key) is not None
    assert store.get(FORMS.key).usage == Usage(40)  # type: ignore[union-attr]
    for month in ("2026-10", "2026-11", "2026-11"):
        store.count_access(FORMS.key, month=month)
    expected = Usage(43, (("2026-10", 1), ("2026-11", 2)))
    for label in FORMS.labels:  # by either form of its IBI
        held = store.get(label)
        assert held is not None and held.usage == expected
    assert store.access_count(FORMS.key) == 43


def test_an_item_never_accessed_has_no_figures(client: object) -> None:
    ensure_table(client, "items")  # type: ignore[arg-type]
    store = DynamoItemStore(client, "items")  # type: ignore[arg-type]
    store.create(ITEM)
    held = store.get(FORMS.key)
    assert held is not None and held.usage == NO_USAGE and held == ITEM


def test_a_deleted_item_counts_nothing_more(client: object) -> None:
    ensure_table(client, "items")  # type: ignore[arg-type]
    store = DynamoItemStore(client, "items")  # type: ignore[arg-type]
    store.create(ITEM)
    store.count_access(FORMS.key, month="2026-11")
    deleted = Item(ibi=FORMS, state=State.DELETED, timestamp=ITEM.timestamp, version=1)
    store.replace(deleted, expected_version=0)
    assert store.count_access(FORMS.key, month="2026-11") == 0
    held = store.get(FORMS.key)
    assert held is not None and held.usage == Usage(1, (("2026-11", 1),))


def test_concurrent_accesses_are_all_counted_in_their_months(tmp_path: Path) -> None:
    tables = LocalTables(tmp_path / "tables.sqlite3")
    ensure_table(tables.client(), "items")
    DynamoItemStore(tables.client(), "items").create(ITEM)
    threads, each = 8, 40
    barrier = threading.Barrier(threads)

    def count(n: int) -> None:
        store = DynamoItemStore(tables.client(), "items")  # a worker's own client
        barrier.wait()
        for i in range(each):
            store.count_access(FORMS.key, month="2026-11" if (n + i) % 2 else "2026-12")

    workers = [threading.Thread(target=count, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    held = DynamoItemStore(tables.client(), "items").get(FORMS.key)
    assert held is not None
    half = threads * each // 2
    assert held.usage == Usage(threads * each, (("2026-11", half), ("2026-12", half)))


# ---------------------------------------------------------------------------- end to end, in memory


def resolve_and_acknowledge(federation: MemoryFederation, persistent: str, when: Decimal) -> None:
    for node in federation.nodes.values():
        node.clock.now = when
    found = federation.resolve(persistent)
    assert federation.acknowledge(found, persistent) == "notice {acknowledgment received}"


@pytest.fixture
def federation() -> MemoryFederation:
    federation = MemoryFederation("a", "b")
    a, b = federation["a"], federation["b"]
    dc = {"title": "A report", "creator": ["Câmara, Gilberto"]}
    a.original({"rep": LABEL.rep, "ibip": LABEL.ibip}, {"report.txt": b"The report.\n"}, dc=dc)
    b.copy(
        {"rep": LABEL.rep, "ibip": LABEL.ibip},
        {"report.txt": b"The report.\n"},
        dc=dc,
        original_files=a.public_files(FORMS.key),
    )
    for when in (NOVEMBER, NOVEMBER + 60, DECEMBER):
        resolve_and_acknowledge(federation, f"/{LABEL.ibip}", when)
    return federation


def test_the_metadata_page_shows_the_accesses_by_month_and_in_all(
    federation: MemoryFederation,
) -> None:
    a = federation["a"]
    page = a.content.metadata(FORMS.key, None)
    assert page.status == 200
    assert (
        '<table id="usage"><thead><tr><th>month (UTC)</th><th>accesses</th></tr></thead>'
        "<tbody><tr><td>2026-12</td><td>1</td></tr><tr><td>2026-11</td><td>2</td></tr>"
        '<tr><th scope="row">total</th><td>3</td></tr></tbody></table>'
    ) in str(page.body)


def test_a_page_shows_a_zero_total_for_an_item_never_accessed() -> None:
    views = MemoryFederation("a")["a"].views
    page = metadata_page(ITEM, views)
    assert '<tbody><tr><th scope="row">total</th><td>0</td></tr></tbody>' in page


def test_the_holdings_view_shows_each_archives_figures_and_their_sum(
    federation: MemoryFederation,
) -> None:
    federation["b"].clock.now = DECEMBER + 60
    federation["b"].store.count_access(FORMS.key, month="2026-12")  # one reader went to b
    answers = federation.ask_all(
        FORMS.key, [("clientinformation.ipaddress", "203.0.113.9"), REQUEST_PAIR]
    )
    view = HoldingsView(FORMS.key, [holding_of(answer) for answer in answers])
    shown = view.to_mapping()
    by_archive = {h["state"]: h["usage"] for h in shown["archives"]}
    assert by_archive == {
        "Original": {"total": 3, "months": {"2026-11": 2, "2026-12": 1}},
        "Copy": {"total": 1, "months": {"2026-12": 1}},
    }
    assert shown["usage"] == {"total": 4, "months": {"2026-11": 2, "2026-12": 2}}
    page = holdings_page(shown)
    assert "<tr><td>2026-12</td><td>2</td></tr><tr><td>2026-11</td><td>2</td></tr>" in page
    assert '<tr><th scope="row">total</th><td>4</td></tr>' in page
    assert "<dt>accesses</dt><dd>3</dd>" in page and "<dt>accesses</dt><dd>1</dd>" in page


def test_an_archive_that_does_not_report_figures_adds_nothing() -> None:
    pairs = parse_pair_list("state Original\r\nibi {ibip X}\r\nurl https://x.example.org/\r\n")
    from functions.resolver.authority import ArchiveAnswer

    view = HoldingsView("X", [holding_of(ArchiveAnswer("A", "x.example.org", pairs))])
    assert view.to_mapping()["usage"] == {"total": 0, "months": {}}
    assert "usage" not in view.to_mapping()["archives"][0]  # no extension: no report at all


def test_an_untrusted_claim_of_the_original_adds_nothing_to_the_sum() -> None:
    from functions.resolver.authority import ArchiveAnswer, Trust

    def answer(archive: str, total: int, trust: Trust) -> ArchiveAnswer:
        pairs = parse_pair_list(
            "state Original\r\nibi {ibip X}\r\nurl https://x.example.org/\r\n"
            f"holdings.state Original\r\nholdings.accesses {total}\r\n"
            f"holdings.accessesbymonth {{2026-11 {total}}}\r\n"
        )
        return ArchiveAnswer(archive, f"{archive}.example.org", pairs, trust=trust, owner="A")

    view = HoldingsView(
        "X",
        [holding_of(answer("A", 3, Trust.OWNER)), holding_of(answer("L", 10**6, Trust.UNTRUSTED))],
    )
    assert view.to_mapping()["usage"] == {"total": 3, "months": {"2026-11": 3}}


def test_only_the_authority_and_verified_copies_are_summed() -> None:
    """Issue 34: a stranger's copy reporting any number, with files that are not the
    authority's, adds nothing; a copy whose files are the authority's adds its figures."""
    from functions.resolver.authority import ArchiveAnswer, Trust

    good, bad = "a" * 64, "b" * 64

    def answer(archive: str, state: str, total: int, sha256: str, trust: Trust) -> ArchiveAnswer:
        pairs = parse_pair_list(
            f"state {state}\r\nibi {{ibip X}}\r\nurl https://{archive}.example.org/\r\n"
            f"holdings.state {state}\r\nholdings.timestamp 2026-11-01T00:00:00Z\r\n"
            f"holdings.listable yes\r\nholdings.files {{r.txt {sha256} 4}}\r\n"
            f"holdings.filecount 1\r\nholdings.accesses {total}\r\n"
            f"holdings.accessesbymonth {{2026-11 {total}}}\r\n"
        )
        return ArchiveAnswer(archive, f"{archive}.example.org", pairs, trust=trust, owner="A")

    view = HoldingsView(
        "X",
        [
            holding_of(answer("A", "Original", 3, good, Trust.OWNER)),
            holding_of(answer("B", "Copy", 2, good, Trust.UNTRUSTED)),
            holding_of(answer("L", "Copy", 999999999999999999, bad, Trust.UNTRUSTED)),
        ],
    )
    assert view.to_mapping()["usage"] == {"total": 5, "months": {"2026-11": 5}}
    assert view.to_mapping()["verdict"]["authority"] == "A"
