"""The mint record as an audit trail (issue 30) through the real handler and the real store,
over moto and over local mode's tables: ``GET /mints?ibi=``, ``order``, ``since``/``until``,
``GET /mints/verify``, and an execution environment killed between its state write and its
record."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, cast
from urllib.parse import urlencode

import pytest

from functions.minting import wiring
from functions.minting.handler import lambda_handler
from functions.minting.service import MintingService, MintRequest
from functions.minting.settings import Settings
from functions.minting.store import DynamoMintStore, MintRecord, StateWrite
from ibi.core.dates import format_date
from ibi_tools.cli import main
from ibi_tools.local.federation import LOCAL_MINT_BLOCK_SECONDS
from ibi_tools.local.gateway import LocalContext, LocalGateway
from ibi_tools.local.tables import LocalTables
from tests.conftest import TABLES, minting_environment
from tests.fakes import FakeClock
from tests.unit.test_mint_audit import Killed, Killing


@pytest.fixture(autouse=True)
def fresh_runtime() -> Iterator[None]:
    yield
    wiring.uninstall()


@pytest.fixture
def call(dynamodb: Any) -> Any:
    """``call(method, path, query, body)``: the handler's status and JSON answer."""
    settings = Settings.from_environment(minting_environment())
    wiring.install(wiring.build(settings, dynamodb=dynamodb))

    def send(
        method: str, path: str, query: dict[str, str] | None = None, body: Any = None
    ) -> tuple[int, Any]:
        raw = urlencode(query or {})
        event = {
            "version": "2.0",
            "routeKey": f"{method} {path}",
            "rawPath": path,
            "rawQueryString": raw,
            "headers": {"host": "ibi.test", "content-type": "application/json"},
            "requestContext": {
                "http": {"method": method, "path": path, "sourceIp": "198.51.100.7"},
                "requestId": f"req-{path}-{raw}",
                "stage": "$default",
            },
            "isBase64Encoded": False,
        }
        if query:
            event["queryStringParameters"] = query
        if body is not None:
            event["body"] = json.dumps(body)
        answer = lambda_handler(event, cast(Any, LocalContext("minting", "test")))
        return answer["statusCode"], json.loads(answer["body"])

    return send


def mint(call: Any, count: int) -> list[dict[str, str]]:
    status, answer = call("POST", "/mint", body={"count": count})
    assert status == 200, answer
    ibis: list[dict[str, str]] = answer["ibis"]
    return ibis


def test_an_ibi_in_either_form_finds_the_record_that_issued_it(call: Any) -> None:
    mint(call, 2)
    batch = mint(call, 3)
    mint(call, 1)
    for text in (batch[1]["rep"], batch[1]["ibip"], batch[1]["ibip"].lower(), batch[0]["rep"]):
        status, answer = call("GET", "/mints", {"ibi": text})
        assert status == 200
        [record] = answer["records"]
        assert [i["date"] for i in record["ibis"]] == [i["date"] for i in batch]
        assert record["requester"] == "anonymous:198.51.100.7"
        assert record["request_id"] and "idempotency_key" in record
    status, answer = call("GET", "/mints", {"ibi": batch[1]["ibip"], "order": "desc"})
    assert status == 200 and len(answer["records"]) == 1  # (order has no say on one record)
    before = str(Decimal(batch[0]["date"]) - Decimal("0.001"))
    for outside in ({"until": before}, {"subsystem": "classic"}):
        status, answer = call("GET", "/mints", {"ibi": batch[1]["ibip"], **outside})
        assert status == 200 and answer["records"] == []  # issued, but not in what was asked
    after = Decimal(batch[1]["date"]) + Decimal("0.0005")  # between two IBIs: never issued
    status, answer = call("GET", "/mints", {"ibi": ibi_at(call, after)})
    assert status == 404 and "no record issued" in answer["error"]["message"]


def ibi_at(call: Any, date: Decimal) -> str:
    """The default subsystem's IBIp at ``date``."""
    status, answer = call("GET", "/subsystems")
    assert status == 200
    from ibi.core.subsystem import Subsystem

    [default] = [s for s in answer["subsystems"] if s["name"] == "default"]
    subsystem = Subsystem.from_mapping(
        {k: default[k] for k in ("name", "host", "ip", "granularity", "rep_port", "ibip_port")}
    )
    return subsystem.ibi(date).ibip or ""


def test_the_record_newest_first_and_between_dates(call: Any) -> None:
    for count in (1, 2, 1, 3, 1):
        mint(call, count)
    status, oldest = call("GET", "/mints", {"limit": "100"})
    firsts = [r["ibis"][0]["date"] for r in oldest["records"]]
    assert status == 200 and firsts == sorted(firsts, key=Decimal) and len(firsts) == 5
    newest: list[str] = []
    query = {"order": "desc", "limit": "2"}
    while True:  # page by page, newest first
        status, page = call("GET", "/mints", query)
        assert status == 200
        newest += [r["ibis"][0]["date"] for r in page["records"]]
        if page["next"] is None:
            break
        query["after"] = page["next"]
    assert newest == firsts[::-1]
    status, between = call("GET", "/mints", {"since": firsts[1], "until": firsts[3]})
    assert [r["ibis"][0]["date"] for r in between["records"]] == firsts[1:4]
    status, between = call(
        "GET", "/mints", {"since": firsts[1], "until": firsts[3], "order": "desc"}
    )
    assert [r["ibis"][0]["date"] for r in between["records"]] == firsts[3:0:-1]
    status, iso = call("GET", "/mints", {"since": "2000-01-01T00:00:00Z", "until": "2000-01-02"})
    assert status == 200 and iso["records"] == []


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"order": "newest"}, "order must be asc (oldest first) or desc (newest first)"),
        ({"sort": "desc"}, "unknown query parameter(s) ['sort']"),
        ({"since": "yesterday"}, "since must be a date"),
        ({"until": "2026-13-40"}, "until must be a date"),
        ({"ibi": "not-an-ibi"}, "ibi:"),
        ({"limit": "0"}, "limit must be an integer from 1 to 100"),
    ],
)
def test_an_unknown_or_invalid_query_value_is_400_saying_what_to_send(
    call: Any, query: dict[str, str], says: str
) -> None:
    status, answer = call("GET", "/mints", query)
    assert status == 400 and says in answer["error"]["message"]


def test_verify_takes_only_a_subsystem(call: Any) -> None:
    status, answer = call("GET", "/mints/verify", {"subsystem": "default", "deep": "1"})
    assert status == 400 and "['deep']" in answer["error"]["message"]
    status, answer = call("GET", "/mints/verify", {"subsystem": "nope"})
    assert status == 404


def test_verify_walks_the_whole_record(call: Any) -> None:
    status, empty = call("GET", "/mints/verify")
    assert status == 200 and empty["ok"] and empty["records"] == 0 and empty["last_date"] is None
    minted = [i for count in (1, 5, 1, 1000, 2) for i in mint(call, count)]
    status, found = call("GET", "/mints/verify", {"subsystem": "default"})
    assert status == 200 and found["ok"] is True and found["problems"] == []
    assert (found["records"], found["ibis"]) == (5, len(minted))
    assert found["last_date"] == minted[-1]["date"]  # without blocks: nothing reserved unused
    assert found["unused"] == [] and found["reservations"] == 5


@pytest.mark.parametrize("point", ["after-state-write", "before-record", "after-note"])
@pytest.mark.parametrize("block", ["0", "0.05"], ids=["without-blocks", "with-blocks"])
def test_a_killed_environment_leaves_the_record_whole(
    dynamodb: Any, point: str, block: str
) -> None:
    """kill -9 between a request's state write and its record, over the real store: the
    reservation is on the record (the next write's record, or the state, names it)."""
    store = DynamoMintStore(
        dynamodb,
        state_table=TABLES["state"],
        record_table=TABLES["record"],
        idempotency_table=TABLES["idempotency"],
    )
    settings = Settings.from_environment(minting_environment())
    clock = FakeClock(Decimal("1795670498.441"))

    def environment(over: Any) -> MintingService:
        return MintingService(
            over,
            settings.subsystems,
            default_subsystem="default",
            clock=clock,
            sleep=clock.sleep,
            block_seconds=Decimal(block),
        )

    alive = environment(store)
    doomed = environment(Killing(store, point, at=2))
    killed = 0
    for n in range(12):
        clock.now += Decimal("0.003")
        key = f"key-{n}" if point == "after-note" else None
        chosen = doomed if n % 2 else alive
        try:
            chosen.mint(MintRequest("tester", f"r-{n}", count=1 + n % 3, idempotency_key=key))
        except Killed:
            killed += 1
            doomed = environment(store)  # the function starts a new environment
    assert killed == 1
    found = alive.verify("default")
    assert found.ok, found.problems
    assert found.last_date == store.last_date("default")
    assert found.ibis == sum(len(r.dates) for r in every_record(store))
    if point == "after-state-write":
        assert [(r.requester, r.request_id) for r in found.unrecorded] == [("tester", "r-5")]


def every_record(store: DynamoMintStore) -> list[Any]:
    records, _ = store.list_records("default", after=None, limit=100)
    return records


# ---------------------------------------------------------------------------- ibi mints


@pytest.fixture
def endpoint(local_tables: tuple[LocalTables, Any]) -> Iterator[str]:
    """The minting API on loopback over local mode's tables (blocks of dates on, as
    ``ibi local`` runs it), for the CLI."""
    tables, _ = local_tables
    settings = Settings.from_environment(
        {**minting_environment(), "IBI_MINT_BLOCK_SECONDS": LOCAL_MINT_BLOCK_SECONDS}
    )

    def handler() -> Any:
        wiring.install(wiring.build(settings, dynamodb=tables.client()))
        return lambda_handler

    gateway = LocalGateway("minting", handler, 0, workers=1).start()
    try:
        yield gateway.url
    finally:
        gateway.shutdown()


def ibi(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(list(args))
    return status, capsys.readouterr().out


def test_ibi_mints_verifies_searches_and_exports_the_record(
    endpoint: str, local_tables: tuple[LocalTables, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    for count in (1, 3, 2):
        assert ibi("mint", "--endpoint", endpoint, "--count", str(count), capsys=capsys)[0] == 0
    status, said = ibi("mints", "--endpoint", endpoint, "--verify", capsys=capsys)
    assert status == 0 and said.splitlines()[-1] == "ok: no gap, no overlap, no date issued twice"
    assert said.startswith("default: 3 records, 6 IBIs, ")
    status, exported = ibi("mints", "--endpoint", endpoint, "--jsonl", capsys=capsys)
    records = [json.loads(line) for line in exported.splitlines()]
    assert status == 0 and [len(r["ibis"]) for r in records] == [1, 3, 2]
    assert records[0]["reserved"] is True and records[0]["block"]
    status, newest = ibi(
        "mints", "--endpoint", endpoint, "--format", "jsonl", "--newest", capsys=capsys
    )
    assert [json.loads(line) for line in newest.splitlines()] == records[::-1]
    wanted = records[1]["ibis"][2]
    status, found = ibi("mints", "--endpoint", endpoint, "--ibi", wanted["rep"], capsys=capsys)
    assert status == 0 and found == (
        f"{wanted['iso']} {wanted['rep']} {wanted['ibip']} {records[1]['requester']} "
        f"request {records[1]['request_id']} key {records[1]['idempotency_key']}\n"
    )
    since = records[1]["ibis"][0]["date"]
    status, later = ibi("mints", "--endpoint", endpoint, "--since", since, "--json", capsys=capsys)
    assert [json.loads(line)["date"] for line in later.splitlines()] == [
        i["date"] for r in records[1:] for i in r["ibis"]
    ]
    # A record continuing from a date no reservation reaches: dates issued outside the record
    _, client = local_tables
    store = DynamoMintStore(
        client,
        state_table=TABLES["state"],
        record_table=TABLES["record"],
        idempotency_table=TABLES["idempotency"],
    )
    last = store.last_date("default")
    assert last is not None
    store.advance(StateWrite("default", last, last + 1, "0.001", 1, requester="x"))
    skipped = MintRecord(
        "default",
        "example.org/ibi",
        "D7N2U8HW",
        (last + 1,),
        last + Decimal("0.5"),
        "intruder",
        "r-x",
        last + 1,
        block_end=last + 1,
        claimed=True,
    )
    store.put_record(skipped)
    status, said = ibi("mints", "--endpoint", endpoint, "--verify", capsys=capsys)
    assert status == 1 and "ok:" not in said
    gap = f"gap after {format_date(last)} until {format_date(last + Decimal('0.5'))}: "
    assert gap + "no reservation holds the dates" in said
