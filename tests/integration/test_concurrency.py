"""Many minters on one subsystem, through the real handler, over a race-free DynamoDB.

8 client threads x 200 mints, served by 8 handler processes (as 8 Lambda execution
environments would) over dynalite and over local mode's SQLite tables: every IBI unique, dates strictly increasing in commit
order (each record names the date it replaced, and those links form one chain), every one
recorded.
"""

from __future__ import annotations

import itertools
import json
import threading
import urllib.request
from decimal import Decimal
from typing import Any

from functions.minting import wiring
from functions.minting.settings import Settings
from functions.minting.store import DynamoMintStore
from ibi_tools.local.gateway import LocalGateway
from tests.conftest import TABLES, minting_environment

THREADS = 8
MINTS_PER_THREAD = 200


def test_concurrent_mints_never_collide(race_free_store: Any) -> None:
    client = race_free_store.client()
    settings = Settings.from_environment(minting_environment())

    def handler() -> Any:  # in each worker process, as in an execution environment
        from functions.minting.handler import lambda_handler

        wiring.install(wiring.build(settings, dynamodb=race_free_store.client()))
        return lambda_handler

    gateway = LocalGateway("minting", handler, 0, workers=THREADS).start()
    minted: list[list[dict[str, str]]] = [[] for _ in range(THREADS)]
    failures: list[str] = []
    start = threading.Barrier(THREADS)

    def minter(index: int) -> None:
        start.wait()
        for _ in range(MINTS_PER_THREAD):
            request = urllib.request.Request(gateway.url + "/mint", data=b"{}", method="POST")
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    minted[index].extend(json.loads(response.read())["ibis"])
            except Exception as error:
                failures.append(repr(error))

    threads = [threading.Thread(target=minter, args=(i,)) for i in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        gateway.shutdown()

    assert not failures
    everything = [ibi for per_thread in minted for ibi in per_thread]
    assert len(everything) == THREADS * MINTS_PER_THREAD
    assert len({i["rep"] for i in everything}) == len(everything)
    assert len({i["ibip"] for i in everything}) == len(everything)
    for per_thread in minted:  # each client sees its own IBIs in increasing order
        dates = [Decimal(i["date"]) for i in per_thread]
        assert dates == sorted(dates)

    store = DynamoMintStore(
        client,
        state_table=TABLES["state"],
        record_table=TABLES["record"],
        idempotency_table=TABLES["idempotency"],
    )
    records, after = [], None
    while True:
        page, after = store.list_records("default", after=after, limit=500)
        records += page
        if after is None:
            break
    assert len(records) == THREADS * MINTS_PER_THREAD
    # Commit order: each record names the last date it replaced; the links make one chain.
    assert records[0].previous_date is None
    for before, after_record in itertools.pairwise(records):
        assert after_record.previous_date == before.dates[-1]
        assert after_record.first_date > before.dates[-1]
    recorded = {d for r in records for d in r.dates}
    assert recorded == {Decimal(i["date"]) for i in everything}
    assert store.last_date("default") == records[-1].dates[-1]
