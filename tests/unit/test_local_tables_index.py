"""Local mode's tables: global secondary indexes, answered as moto answers the same calls.

A table made with an index (or given one by UpdateTable, from the items it holds), kept by
every write; sparse (an item without the index's keys is not in it); Query of the index by
its partition key and a comparison or BETWEEN on its sort key, forwards or backwards, a page
at a time (LastEvaluatedKey: the table's key and the index's), each item as it projects.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from ibi_tools.local.tables import LocalTables, LocalTablesClient, contract

KEY_SCHEMA = [{"AttributeName": "label", "KeyType": "HASH"}]
DEFINITIONS = [
    {"AttributeName": "label", "AttributeType": "S"},
    {"AttributeName": "kind", "AttributeType": "S"},
    {"AttributeName": "stamp", "AttributeType": "N"},
]


def index(projection: dict[str, Any]) -> dict[str, Any]:
    return {
        "IndexName": "by-stamp",
        "KeySchema": [
            {"AttributeName": "kind", "KeyType": "HASH"},
            {"AttributeName": "stamp", "KeyType": "RANGE"},
        ],
        "Projection": projection,
    }


INCLUDE = {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["data"]}
_serial = itertools.count()


@pytest.fixture(scope="module")
def aws() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def local(tmp_path: Path) -> LocalTablesClient:
    return LocalTablesClient(LocalTables(tmp_path / "tables.sqlite3").path)


@pytest.fixture
def any_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls outside the contract answered too (a backward Query of the index: no store makes
    one yet, the tables answer it as DynamoDB does)."""
    monkeypatch.setattr(contract, "refused_shape", lambda shape: False)
    monkeypatch.setattr(contract, "_SEEN_SHAPES", {})


def _item(n: int, kind: str | None = "a", stamp: int | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "label": {"S": f"item-{n:03d}"},
        "data": {"S": f"d{n}"},
        "other": {"N": str(n)},
    }
    if kind is not None:
        item["kind"] = {"S": kind}
    if stamp is not None:
        item["stamp"] = {"N": str(stamp)}
    return item


# Ties on the sort key (three items at 100), two partitions, items without the index's keys.
ITEMS = [
    _item(0, "a", 300),
    _item(1, "a", 100),
    _item(2, "b", 100),
    _item(3, "a", 100),
    _item(4, "a", 200),
    _item(5, "a", 100),
    _item(6, None, 100),  # no partition key: not in the index
    _item(7, "a", None),  # no sort key: not in the index
    _item(8, "a", 50),
    _item(9, "a", 1000),
]


def _both(aws: Any, local: Any, projection: dict[str, Any] = INCLUDE) -> str:
    """A table of ITEMS with the index, on moto and on the local tables; its name."""
    name = f"indexed-{next(_serial)}"
    for client in (aws, local):
        client.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=KEY_SCHEMA,
            AttributeDefinitions=DEFINITIONS,
            GlobalSecondaryIndexes=[index(projection)],
        )
        for item in ITEMS:
            client.put_item(TableName=name, Item=item)
    return name


def pages(client: Any, **query: Any) -> list[list[dict[str, Any]]]:
    """Every page of a Query, following LastEvaluatedKey (a last empty page left out: DynamoDB
    gives a LastEvaluatedKey on a page ended by Limit even at the end, moto does not)."""
    found: list[list[dict[str, Any]]] = []
    while True:
        answer = client.query(IndexName="by-stamp", **query)
        if answer["Items"]:
            found.append(answer["Items"])
        if "LastEvaluatedKey" not in answer:
            return found
        last = answer["LastEvaluatedKey"]
        assert set(last) == {"label", "kind", "stamp"}  # the table's key and the index's
        query["ExclusiveStartKey"] = last


def labels(found: list[list[dict[str, Any]]]) -> list[list[str]]:
    return [[item["label"]["S"] for item in page] for page in found]


KIND_A = {"#k": "kind"}
A = {":k": {"S": "a"}}


@pytest.mark.parametrize(
    ("condition", "names", "values"),
    [
        ("#k = :k", KIND_A, A),
        (
            "#k = :k AND #s BETWEEN :low AND :high",
            {**KIND_A, "#s": "stamp"},
            {**A, ":low": {"N": "100"}, ":high": {"N": "250"}},
        ),
        ("#k = :k AND #s >= :low", {**KIND_A, "#s": "stamp"}, {**A, ":low": {"N": "100"}}),
        ("#k = :k AND #s <= :high", {**KIND_A, "#s": "stamp"}, {**A, ":high": {"N": "200"}}),
        (
            "#k = :k AND #s BETWEEN :low AND :high",
            {**KIND_A, "#s": "stamp"},
            {**A, ":low": {"N": "5000"}, ":high": {"N": "6000"}},
        ),
    ],
)
@pytest.mark.parametrize("limit", [None, 1, 2, 3])
@pytest.mark.parametrize("forward", [True, False])
def test_a_query_of_the_index_pages_as_moto_s(
    aws: Any,
    local: Any,
    any_shape: None,
    condition: str,
    names: Any,
    values: Any,
    limit: int | None,
    forward: bool,
) -> None:
    name = _both(aws, local)
    query: dict[str, Any] = {
        "TableName": name,
        "KeyConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ScanIndexForward": forward,
    }
    if limit is not None:
        query["Limit"] = limit
    theirs, mine = pages(aws, **query), pages(local, **query)
    assert mine == theirs
    if condition == "#k = :k" and limit is None:  # by stamp, ties by the table's key
        order = ["item-008", "item-001", "item-003", "item-005", "item-004", "item-000", "item-009"]
        assert labels(mine) == [order if forward else order[::-1]]


@pytest.mark.parametrize(
    "projection",
    [{"ProjectionType": "KEYS_ONLY"}, INCLUDE, {"ProjectionType": "ALL"}],
)
def test_each_item_comes_as_the_index_projects_it(
    aws: Any, local: Any, projection: dict[str, Any]
) -> None:
    name = _both(aws, local, projection)
    query = {
        "TableName": name,
        "KeyConditionExpression": "kind = :k",
        "ExpressionAttributeValues": {":k": {"S": "b"}},
    }
    mine = local.query(IndexName="by-stamp", **query)["Items"]
    assert mine == aws.query(IndexName="by-stamp", **query)["Items"]
    expected = {
        "KEYS_ONLY": {"label", "kind", "stamp"},
        "INCLUDE": {"label", "kind", "stamp", "data"},
    }
    assert set(mine[0]) == expected.get(
        projection["ProjectionType"], set(_item(2)) | {"kind", "stamp"}
    )


def test_writes_move_items_in_the_index_and_out_of_it(aws: Any, local: Any) -> None:
    name = _both(aws, local)
    for client in (aws, local):
        client.update_item(  # moves to another partition
            TableName=name,
            Key={"label": {"S": "item-001"}},
            UpdateExpression="SET #k = :b, #s = :s",
            ExpressionAttributeNames={"#k": "kind", "#s": "stamp"},
            ExpressionAttributeValues={":b": {"S": "b"}, ":s": {"N": "5"}},
        )
        client.update_item(  # leaves the index (sparse)
            TableName=name,
            Key={"label": {"S": "item-003"}},
            UpdateExpression="REMOVE #s",
            ExpressionAttributeNames={"#s": "stamp"},
        )
        client.delete_item(TableName=name, Key={"label": {"S": "item-004"}})
        client.put_item(TableName=name, Item=_item(6, "a", 150))  # comes into it
    for kind in ("a", "b"):
        query = {
            "TableName": name,
            "KeyConditionExpression": "kind = :k",
            "ExpressionAttributeValues": {":k": {"S": kind}},
        }
        assert pages(local, **query) == pages(aws, **query)
    query["ExpressionAttributeValues"] = {":k": {"S": "a"}}
    assert labels(pages(local, **query)) == [
        ["item-008", "item-005", "item-006", "item-000", "item-009"]
    ]


def test_a_table_given_an_index_later_indexes_the_items_it_holds(aws: Any, local: Any) -> None:
    name = f"later-{next(_serial)}"
    for client in (aws, local):
        client.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=KEY_SCHEMA,
            AttributeDefinitions=DEFINITIONS[:1],
        )
        for item in ITEMS:
            client.put_item(TableName=name, Item=item)
        client.update_table(
            TableName=name,
            AttributeDefinitions=DEFINITIONS[1:],
            GlobalSecondaryIndexUpdates=[{"Create": index(INCLUDE)}],
        )
    described = local.describe_table(TableName=name)["Table"]["GlobalSecondaryIndexes"]
    assert [(i["IndexName"], i["IndexStatus"]) for i in described] == [("by-stamp", "ACTIVE")]
    query = {
        "TableName": name,
        "KeyConditionExpression": "kind = :k",
        "ExpressionAttributeValues": {":k": {"S": "a"}},
    }
    assert pages(local, **query) == pages(aws, **query)
    assert len(pages(local, **query)[0]) == 7


def _code(call: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return str(caught.value.response["Error"]["Code"])


def test_a_consistent_read_of_the_index_and_an_unknown_index_are_refused(
    aws: Any, local: Any
) -> None:
    """Both ValidationException, as DynamoDB's Query reference says ("The table does not have
    the specified index"; moto answers ResourceNotFoundException to the second)."""
    name = _both(aws, local)
    query = {
        "TableName": name,
        "KeyConditionExpression": "kind = :k",
        "ExpressionAttributeValues": {":k": {"S": "a"}},
    }
    consistent = {**query, "IndexName": "by-stamp", "ConsistentRead": True}
    for client in (aws, local):
        assert _code(lambda c=client: c.query(**consistent)) == "ValidationException"
    assert _code(lambda: local.query(**query, IndexName="nope")) == "ValidationException"


@pytest.mark.parametrize("stamp", [{"S": "not a number"}, {"N": "1"}])
def test_an_index_key_of_the_wrong_type_or_empty_is_refused(
    local: Any, stamp: dict[str, str]
) -> None:
    """As DynamoDB ("Type mismatch for Index Key"; an empty string key); moto stores both."""
    local.create_table(
        TableName="t",
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=DEFINITIONS,
        GlobalSecondaryIndexes=[index(INCLUDE)],
    )
    wrong = {**_item(20, "a"), "stamp": stamp}
    if "N" in stamp:
        wrong["kind"] = {"S": ""}
    assert _code(lambda: local.put_item(TableName="t", Item=wrong)) == "ValidationException"
    assert "Item" not in local.get_item(TableName="t", Key={"label": wrong["label"]})
