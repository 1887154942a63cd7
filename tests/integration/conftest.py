"""DynamoDB for integration tests: moto in-process and local mode's tables (SQLite, in
process), or, race-free, dynalite on loopback (local mode's tables are race-free too, from many
processes: tests/integration/test_concurrency.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.minting.store import ensure_tables
from tests.conftest import TABLES, dynamodb_client


@pytest.fixture(params=["moto", "local-tables"])
def dynamodb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """In-process moto (fine for one thread at a time: not atomic under threads), and the
    SQLite tables ``ibi local`` gives the stores: every test using it runs on both."""
    with dynamodb_client(request.param, tmp_path) as client:
        ensure_tables(client, TABLES)
        yield client


@pytest.fixture
def dynalite_endpoint(tmp_path: Any) -> Iterator[tuple[Any, Any]]:
    """dynalite (npm) on loopback: one event loop, so conditional writes are atomic."""
    from ibi_tools.local.stores import Dynalite

    with Dynalite(tmp_path / "dynamodb") as server:
        client = server.client()
        ensure_tables(client, TABLES)
        yield server, client
