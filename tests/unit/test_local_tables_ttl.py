"""TTL in local mode's tables: enabled as the stack declares it, expired items removed."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from functions.archive.store import ensure_table as ensure_items_table
from functions.shared.dynamo import ensure_table
from ibi_tools.local.tables import LocalTables, LocalTablesClient

SCHEMA = {
    "KeySchema": [{"AttributeName": "label", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "label", "AttributeType": "S"}],
}


@pytest.fixture(params=["moto", "local-tables"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "moto":
        with mock_aws():
            yield boto3.client("dynamodb", region_name="us-east-1")
    else:
        yield LocalTables(tmp_path / "t.sqlite3").client()


def test_ensure_table_turns_the_ttl_on_once_even_on_a_table_made_without_it(client: Any) -> None:
    ensure_table(client, "items", SCHEMA)  # as an earlier version made it: no TTL
    assert client.describe_time_to_live(TableName="items")["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "DISABLED"
    }
    ensure_items_table(client, "items")
    ensure_items_table(client, "items")  # again: nothing to change, no error
    described = client.describe_time_to_live(TableName="items")["TimeToLiveDescription"]
    assert described == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    if not isinstance(client, LocalTablesClient):
        return  # moto accepts enabling it twice; DynamoDB answers "TimeToLive is already enabled"
    with pytest.raises(ClientError) as refused:
        client.update_time_to_live(
            TableName="items",
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"


def _labels(client: Any) -> list[str]:
    return sorted(item["label"]["S"] for item in client.scan(TableName="items")["Items"])


def _put(client: Any, label: str, expires_at: dict[str, str] | None) -> None:
    item: dict[str, Any] = {"label": {"S": label}}
    if expires_at is not None:
        item["expires_at"] = expires_at
    client.put_item(TableName="items", Item=item)


def test_expired_items_are_removed_after_a_write_and_the_rest_kept(tmp_path: Path) -> None:
    tables = LocalTables(tmp_path / "t.sqlite3")
    ensure_items_table(tables.client(), "items")
    client = LocalTablesClient(tables.path, sweep_seconds=0)
    now = int(time.time())
    _put(client, "expired", {"N": str(now - 5)})
    _put(client, "later", {"N": str(now + 3600)})
    _put(client, "no-ttl", None)
    _put(client, "not-a-number", {"S": str(now - 5)})  # DynamoDB ignores a TTL of another type
    assert _labels(client) == ["later", "no-ttl", "not-a-number"]


def test_expired_items_stay_readable_until_the_next_sweep(tmp_path: Path) -> None:
    """As in DynamoDB, an expired item may still be read until it is removed: the stores check
    the times themselves (a urlkey's window, a throttle window, an idempotency lease)."""
    tables = LocalTables(tmp_path / "t.sqlite3")
    ensure_items_table(tables.client(), "items")
    client = LocalTablesClient(tables.path, sweep_seconds=3600)
    _put(client, "first", None)  # this write sweeps: the next one waits an hour
    _put(client, "expired", {"N": str(int(time.time()) - 5)})
    _put(client, "another", None)
    assert _labels(client) == ["another", "expired", "first"]
    assert "Item" in client.get_item(TableName="items", Key={"label": {"S": "expired"}})
    LocalTablesClient(tables.path, sweep_seconds=0).put_item(
        TableName="items", Item={"label": {"S": "swept"}}
    )  # another process's client, due to sweep
    assert _labels(client) == ["another", "first", "swept"]


def test_a_table_without_ttl_keeps_every_item(tmp_path: Path) -> None:
    tables = LocalTables(tmp_path / "t.sqlite3")
    client = LocalTablesClient(tables.path, sweep_seconds=0)
    ensure_table(client, "items", SCHEMA)
    _put(client, "expired", {"N": str(int(time.time()) - 5)})
    _put(client, "other", None)
    assert _labels(client) == ["expired", "other"]


def test_turning_the_ttl_on_covers_the_items_already_there(tmp_path: Path) -> None:
    tables = LocalTables(tmp_path / "t.sqlite3")
    client = LocalTablesClient(tables.path, sweep_seconds=0)
    ensure_table(client, "items", SCHEMA)  # no TTL yet
    _put(client, "expired", {"N": str(int(time.time()) - 5)})
    ensure_items_table(client, "items")  # the TTL, as a later start turns it on
    _put(client, "next", None)
    assert _labels(client) == ["next"]


def test_a_file_from_before_the_expiry_column_gets_it_filled(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    with sqlite3.connect(path) as old:  # the layout of this morning's files
        old.executescript(
            "CREATE TABLE tables (name TEXT PRIMARY KEY, schema TEXT NOT NULL);"
            "CREATE TABLE items (tbl TEXT NOT NULL, pk TEXT NOT NULL, sk TEXT NOT NULL,"
            " item TEXT NOT NULL, PRIMARY KEY (tbl, pk, sk)) WITHOUT ROWID;"
        )
        schema = {**SCHEMA, "TimeToLive": "expires_at"}
        old.execute("INSERT INTO tables VALUES ('items', ?)", (json.dumps(schema),))
        expired = {"label": {"S": "expired"}, "expires_at": {"N": str(int(time.time()) - 5)}}
        old.execute("INSERT INTO items VALUES ('items', 'expired', '', ?)", (json.dumps(expired),))
    old.close()
    client = LocalTablesClient(LocalTables(path).path, sweep_seconds=0)
    assert _labels(client) == ["expired"]  # readable until a sweep, as before
    _put(client, "next", None)
    assert _labels(client) == ["next"]
