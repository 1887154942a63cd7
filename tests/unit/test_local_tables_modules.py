"""Local mode's tables as a package of modules (issue 29): the seams the tools reach through
(the contract the mutation runner lifts, the frames the shape recorder passes over) and the
write transaction every change runs in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from functions.minting.store import DynamoMintStore
from functions.shared.dynamo import ensure_table
from ibi_tools import mutants
from ibi_tools.local.tables import LocalTables, LocalTablesClient, contract
from tests import dynamo_shapes

STATE = {
    "KeySchema": [{"AttributeName": "subsystem", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "subsystem", "AttributeType": "S"}],
}
INDEXED = {
    "KeySchema": [{"AttributeName": "label", "KeyType": "HASH"}],
    "AttributeDefinitions": [
        {"AttributeName": "label", "AttributeType": "S"},
        {"AttributeName": "kind", "AttributeType": "S"},
    ],
    "GlobalSecondaryIndexes": [
        {
            "IndexName": "by-kind",
            "KeySchema": [{"AttributeName": "kind", "KeyType": "HASH"}],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }
    ],
}


@pytest.fixture
def client(tmp_path: Path) -> LocalTablesClient:
    return LocalTablesClient(LocalTables(tmp_path / "tables.sqlite3").path)


def _recording(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls handed to the shape recorder by the wrapper ``tests/aws_calls.py`` puts on the
    client for the whole session (tests/conftest.py), as ``python -m tests.dynamo_shapes``
    has them handed."""
    assert getattr(LocalTablesClient._make_api_call, "__module__", "") == "tests.aws_calls"
    monkeypatch.setenv(dynamo_shapes.LOG_VARIABLE, str(log))
    monkeypatch.setattr(dynamo_shapes, "_met", {})
    monkeypatch.setattr(dynamo_shapes, "_written", set())


def _shapes(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(line)["shape"] for line in lines]


def test_the_shape_recorder_records_a_stores_call_and_not_a_tests_own(
    client: LocalTablesClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_table(client, "state", STATE)
    log = tmp_path / "shapes.jsonl"
    _recording(log, monkeypatch)

    client.get_item(TableName="state", Key={"subsystem": {"S": "default"}})
    assert _shapes(log) == []  # (the test's own call, below the tables' modules)

    store = DynamoMintStore(
        client, state_table="state", record_table="record", idempotency_table="keys"
    )
    assert store.last_date("default") is None
    assert _shapes(log) == ["GetItem ProjectionExpression"]


def test_the_mutation_runner_lifts_the_contract_the_client_checks(
    client: LocalTablesClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_table(client, "state", STATE)
    monkeypatch.setattr(contract, "refused_shape", contract.refused_shape)  # (restored after)
    monkeypatch.setattr(contract, "_SEEN_SHAPES", {})
    item = {"subsystem": {"S": "default"}}
    with pytest.raises(ClientError, match="not this one: PutItem ReturnValues=ALL_OLD"):
        client.put_item(TableName="state", Item=item, ReturnValues="ALL_OLD")

    mutants.lift_contract()
    monkeypatch.setattr(contract, "_SEEN_SHAPES", {})

    assert client.put_item(TableName="state", Item=item, ReturnValues="ALL_OLD") == {}
    assert client.get_item(TableName="state", Key=item)["Item"] == item


def test_a_write_refused_inside_its_transaction_leaves_the_item_and_its_index_entry(
    client: LocalTablesClient,
) -> None:
    client.create_table(TableName="items", BillingMode="PAY_PER_REQUEST", **INDEXED)
    item = {"label": {"S": "a"}, "kind": {"S": "k"}}
    client.put_item(TableName="items", Item=item)

    # (its index entry is removed, then the new item found too large: all rolled back)
    with pytest.raises(ClientError, match="Item size has exceeded"):
        client.update_item(
            TableName="items",
            Key={"label": {"S": "a"}},
            UpdateExpression="SET body = :big",
            ExpressionAttributeValues={":big": {"S": "x" * (400 * 1024)}},
        )

    assert client.get_item(TableName="items", Key={"label": {"S": "a"}})["Item"] == item
    found = client.query(
        TableName="items",
        IndexName="by-kind",
        KeyConditionExpression="kind = :k",
        ExpressionAttributeValues={":k": {"S": "k"}},
        Limit=10,
    )
    assert found["Items"] == [{"label": {"S": "a"}, "kind": {"S": "k"}}]
    client.put_item(TableName="items", Item={**item, "more": {"S": "b"}})  # (no open transaction)
