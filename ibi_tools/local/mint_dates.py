"""The minting service's tables in a data directory of ``ibi local``, and its dates across data
directories: a subsystem minted under in another directory carries on after its last date
there (spec §1.3, ``subsystems.py``)."""

from __future__ import annotations

import contextlib
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ibi_tools.local.datadir import TABLES_FILE
from ibi_tools.local.tables import LocalTablesClient

if TYPE_CHECKING:
    from functions.minting.store import DynamoMintStore

MINTING_TABLES = {
    "state": "ibi-mint-state",
    "record": "ibi-mint-record",
    "idempotency": "ibi-mint-idempotency",
}


# Blocks of dates in local mode (docs/decisions.md, "Blocks of dates"): its few workers each
# keep the kept-alive connections of their clients, so a client's requests meet the block its
# worker claimed; 5 ms takes 4 and 16 clients from about 1.9 to about 0.2 state writes per
# request at the same throughput (bench/history.md). Lambda, one environment per request in
# flight, has no such affinity: off there (the default).
LOCAL_MINT_BLOCK_SECONDS = "0.005"


def mint_store(client: Any) -> DynamoMintStore:
    """The minting store over a data directory's tables (``client``)."""
    from functions.minting.store import DynamoMintStore

    return DynamoMintStore(
        client,
        state_table=MINTING_TABLES["state"],
        record_table=MINTING_TABLES["record"],
        idempotency_table=MINTING_TABLES["idempotency"],
    )


def last_date_in(data_dir: Path, subsystem: str) -> Decimal | None:
    """The last date ``subsystem`` handed out in ``data_dir``'s tables (None: none there)."""
    from functions.minting.store import StoreError

    path = data_dir / TABLES_FILE
    if not path.is_file():
        return None
    client = LocalTablesClient(path)
    try:
        date: Decimal | None = mint_store(client).last_date(subsystem)
        return date
    except (StoreError, sqlite3.Error):  # no minting tables there, or no tables at all
        return None
    finally:
        client.close()


def carry_on_after(store: DynamoMintStore, subsystem: str, date: Decimal, granularity: str) -> None:
    """Advance ``subsystem``'s state to ``date`` unless it is there or later already: every
    date the temporal distributor hands out from now on comes after ``date``."""
    from functions.minting.store import StateConflict, StateWrite

    write = StateWrite(
        subsystem,
        None,
        date,
        granularity,
        count=0,
        first=date,
        # (on the record as the reservation of the dates the other directory handed out)
        requester="ibi local: the prefix's dates in another data directory",
    )
    with contextlib.suppress(StateConflict):  # its own last date is as late or later
        store.advance(write)
