"""DynamoDB for integration tests: moto in-process, and local mode's tables (SQLite), in process
or shared by the worker processes of servers on loopback, as ``ibi local`` runs them (their
conditional writes are atomic across processes: tests/integration/test_concurrency.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.minting.store import ensure_tables
from ibi_tools.local.tables import LocalTables
from tests.conftest import TABLES, dynamodb_client


@pytest.fixture(params=["moto", "local-tables"])
def dynamodb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """In-process moto (fine for one thread at a time: not atomic under threads), and the
    SQLite tables ``ibi local`` gives the stores: every test using it runs on both."""
    with dynamodb_client(request.param, tmp_path) as client:
        ensure_tables(client, TABLES)
        yield client


@pytest.fixture
def local_tables(tmp_path: Path) -> tuple[LocalTables, Any]:
    """Local mode's tables in a file of their own, for servers whose worker processes each
    take a client (``tables.client()``), and one client for the test, the minting tables made."""
    tables = LocalTables(tmp_path / "tables.sqlite3")
    client = tables.client()
    ensure_tables(client, TABLES)
    return tables, client
