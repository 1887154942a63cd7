"""Many minters on one subsystem, through the real handler, over local mode's tables.

8 client threads, each on a kept-alive connection as ``ibi local``'s clients are, served by 8
handler processes (as 8 Lambda execution environments would) over local mode's SQLite tables,
whose conditional writes are atomic across processes (BEGIN IMMEDIATE). Requests ask for
1 to 1000 IBIs, without blocks of dates (the deployed default) and with local mode's blocks:
every IBI answered is unique, the record holds each of them exactly once and nothing else, and
dates increase in commit order (without blocks each record names the date it replaced, and
those links form one chain), and ``GET /mints/verify`` finds the record whole: every date up
to the state's is in one reservation, issued once or shown unused. ``make mutants`` checks that this test, among others, fails when
a condition of the minting store is weakened.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import urllib.parse
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.minting import wiring
from functions.minting.settings import Settings
from functions.minting.store import DynamoMintStore, MintRecord, ensure_tables
from ibi.core.dates import format_date
from ibi_tools.local.federation import LOCAL_MINT_BLOCK_SECONDS
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.tables import LocalTables
from tests.conftest import TABLES, minting_environment

THREADS = 8
REQUESTS_PER_THREAD = 64
# Each thread walks this cycle from its own place: mostly single IBIs, some batches, up to
# the largest a request may ask for, so that batches of every size meet.
SIZES = (1, 1, 2, 1000, 1, 3, 1, 40, 1, 7, 250, 1, 1, 13, 1, 100)
# A granularity of 10 µs: 8 x 64 requests of these sizes are about 0.4 s of dates.
SUBSYSTEM = {"name": "default", "host": "ibi.example.org", "ip": "192.0.2.10"}
GRANULARITY = "0.00001"
MODES = {"without-blocks": "0", "with-blocks": LOCAL_MINT_BLOCK_SECONDS}


@pytest.fixture
def tables(tmp_path: Path) -> Iterator[LocalTables]:
    """Local mode's tables: each worker process opens its own client on the same file."""
    tables = LocalTables(tmp_path / "tables.sqlite3")
    ensure_tables(tables.client(), TABLES)
    yield tables


@pytest.mark.parametrize("block_seconds", MODES.values(), ids=MODES.keys())
def test_concurrent_mints_never_collide(tables: LocalTables, block_seconds: str) -> None:
    settings = Settings.from_environment(
        {
            **minting_environment(),
            "IBI_SUBSYSTEMS": json.dumps([{**SUBSYSTEM, "granularity": GRANULARITY}]),
            "IBI_MINT_BLOCK_SECONDS": block_seconds,
        }
    )
    assert settings.block_seconds == Decimal(block_seconds)

    def handler() -> Any:  # in each worker process, as in an execution environment
        from functions.minting.handler import lambda_handler

        wiring.install(wiring.build(settings, dynamodb=tables.client()))
        return lambda_handler

    gateway = LocalGateway("minting", handler, 0, workers=THREADS).start()
    try:
        answered, failures = mint_from_threads(gateway.url)
        verified = verify_through(gateway.url)
    finally:
        gateway.shutdown()

    assert not failures
    assert [len(per_thread) for per_thread in answered] == [REQUESTS_PER_THREAD] * THREADS
    everything = [ibi for per_thread in answered for ibis in per_thread for ibi in ibis]
    assert len(everything) == THREADS * sum(SIZES) * REQUESTS_PER_THREAD // len(SIZES)
    assert len({i["rep"] for i in everything}) == len(everything)
    assert len({i["ibip"] for i in everything}) == len(everything)
    for per_thread in answered:  # each client sees its own IBIs in increasing order
        dates = [Decimal(i["date"]) for ibis in per_thread for i in ibis]
        assert dates == sorted(dates)

    store = DynamoMintStore(
        tables.client(),
        state_table=TABLES["state"],
        record_table=TABLES["record"],
        idempotency_table=TABLES["idempotency"],
    )
    records = every_record(store)
    assert len(records) == THREADS * REQUESTS_PER_THREAD
    recorded = [date for record in records for date in record.dates]
    assert len(set(recorded)) == len(recorded)  # no date recorded twice
    assert set(recorded) == {Decimal(i["date"]) for i in everything}  # every answer, no other
    # Commit order: each record names the last date before its own (without blocks, the
    # state it replaced: the links make one chain; with blocks, at least the date before).
    assert records[0].previous_date is None
    for before, after in itertools.pairwise(records):
        assert after.previous_date is not None
        assert before.dates[-1] <= after.previous_date < after.first_date
        if block_seconds == "0":
            assert after.previous_date == before.dates[-1]
    last = store.last_date("default")
    assert last is not None and last >= recorded[-1]
    assert_verified(verified, records=len(records), ibis=len(recorded), last=last)
    if block_seconds == "0":  # each request reserved its own dates: nothing unused
        assert verified["reservations"] == len(records) and verified["unused"] == []


def verify_through(url: str) -> dict[str, Any]:
    """``GET /mints/verify``'s answer for the default subsystem."""
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
    try:
        connection.request("GET", "/mints/verify?subsystem=default")
        response = connection.getresponse()
        assert response.status == 200
        answer: dict[str, Any] = json.loads(response.read())
        return answer
    finally:
        connection.close()


def assert_verified(
    verified: dict[str, Any], *, records: int, ibis: int, last: Decimal | None
) -> None:
    """The verification found no problem, and walked the whole record up to ``last``."""
    assert verified["problems"] == [] and verified["ok"] is True
    assert (verified["records"], verified["ibis"]) == (records, ibis)
    assert verified["last_date"] == (None if last is None else format_date(last))


def mint_from_threads(url: str) -> tuple[list[list[list[dict[str, str]]]], list[str]]:
    """Every thread's answers (the IBIs of each request, in order) and every failure."""
    address = urllib.parse.urlsplit(url)
    answered: list[list[list[dict[str, str]]]] = [[] for _ in range(THREADS)]
    failures: list[str] = []
    start = threading.Barrier(THREADS)

    def minter(index: int) -> None:
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        sizes = itertools.islice(itertools.cycle(SIZES), 2 * index, None)
        start.wait()
        try:
            for count in itertools.islice(sizes, REQUESTS_PER_THREAD):
                connection.request("POST", "/mint", body=json.dumps({"count": count}))
                response = connection.getresponse()
                body = response.read()
                if response.status != 200:  # the first failure ends the thread's requests
                    failures.append(f"{response.status} {body[:200]!r}")
                    return
                ibis = json.loads(body)["ibis"]
                if len(ibis) != count:
                    failures.append(f"asked for {count} IBIs, answered {len(ibis)}")
                answered[index].append(ibis)
        except Exception as error:
            failures.append(repr(error))
        finally:
            connection.close()

    threads = [threading.Thread(target=minter, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answered, failures


def every_record(store: DynamoMintStore) -> list[MintRecord]:
    """The subsystem's whole record, in the order of first dates."""
    records: list[MintRecord] = []
    after: Decimal | None = None
    while True:
        page, after = store.list_records("default", after=after, limit=500)
        records += page
        if after is None:
            return records
