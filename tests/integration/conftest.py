"""DynamoDB for integration tests: moto in-process, or dynalite on loopback (race-free)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.minting.store import ensure_tables
from tests.conftest import TABLES


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    """In-process moto: fine for one thread at a time (not atomic under threads)."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
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
