"""Local mode's tables under a contract: the stores' own calls, answered as DynamoDB answers them.

The replay: every call shape the stores make (``ibi_tools/local/table_shapes.py``), one
recorded call per shape and outcome (``tests/dynamo_calls.json``, both written by ``python -m
tests.dynamo_shapes``), run on moto and on the local tables from the items it met, with the
same answer and the same items after it. Any other shape is refused with a ValidationException
naming it. Numbers and item sizes follow DynamoDB's documentation ("Naming rules and data
types", "Item sizes and formats"), checked against moto where moto agrees.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator
from decimal import Decimal, Inexact
from pathlib import Path
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import DYNAMODB_CONTEXT
from botocore.exceptions import ClientError
from moto import mock_aws

from ibi_tools.local.table_shapes import STORE_SHAPES
from ibi_tools.local.tables import LocalTables, LocalTablesClient, call_shape, item_size
from tests.unit.test_local_tables import _normal, outcome

CALLS = json.loads((Path(__file__).parent.parent / "dynamo_calls.json").read_text())
SCHEMA = {
    "KeySchema": [{"AttributeName": "label", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "label", "AttributeType": "S"}],
}
KEY = {"label": {"S": "J8LNKAN8RW/49JT9S9"}}
_serial = itertools.count()


@pytest.fixture(scope="module")
def aws() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def local(tmp_path: Path) -> LocalTablesClient:
    return LocalTablesClient(LocalTables(tmp_path / "tables.sqlite3").path)


def _table(client: Any, name: str, schema: dict[str, Any] = SCHEMA) -> None:
    client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **schema)


def _error(call: Any) -> dict[str, str]:
    with pytest.raises(ClientError) as caught:
        call()
    error: dict[str, str] = caught.value.response["Error"]
    return error


# -- numbers -----------------------------------------------------------------------------------

DIGITS_39 = "123456789012345678901234567890123456789"


def test_a_number_of_39_significant_digits_is_refused_not_rounded(local: Any) -> None:
    """DynamoDB: "Numbers can have up to 38 digits of precision. Exceeding this results in an
    exception" (boto3 refuses such a Decimal too: Inexact). moto stores it as sent."""
    with pytest.raises(Inexact):
        DYNAMODB_CONTEXT.create_decimal(DIGITS_39)
    _table(local, "items")
    error = _error(lambda: local.put_item(TableName="items", Item={**KEY, "n": {"N": DIGITS_39}}))
    assert error["Code"] == "ValidationException"
    assert "38 significant digits" in error["Message"]
    assert "Item" not in local.get_item(TableName="items", Key=KEY)


def test_numbers_of_38_significant_digits_and_trailing_zeros_are_kept_exactly(
    local: Any, aws: Any
) -> None:
    table = f"numbers-{next(_serial)}"
    kept = {
        "digits": "12345678901234567890123456789012345678",
        "zeros": "1" + "0" * 41,  # one significant digit
        "largest": "9.9999999999999999999999999999999999999E+125",
        "smallest": "1E-130",
    }
    item = {**KEY, **{name: {"N": text} for name, text in kept.items()}}
    for client in (aws, local):
        _table(client, table)
        client.put_item(TableName=table, Item=item)
        found = client.get_item(TableName=table, Key=KEY)["Item"]
        assert {n: Decimal(found[n]["N"]) for n in kept} == {n: Decimal(t) for n, t in kept.items()}


@pytest.mark.parametrize(
    ("number", "message"),
    [("1E+200", "Number overflow"), ("-1E+127", "Number overflow"), ("1E-131", "Number underflow")],
)
def test_a_number_out_of_range_is_refused_as_by_moto(
    local: Any, aws: Any, number: str, message: str
) -> None:
    table = f"range-{next(_serial)}"
    for client in (aws, local):
        _table(client, table)
        error = _error(
            lambda c=client: c.put_item(TableName=table, Item={**KEY, "n": {"N": number}})
        )
        assert error["Code"] == "ValidationException"
        assert error["Message"].startswith(message)


def test_an_addition_past_38_digits_is_refused_not_rounded(local: Any) -> None:
    _table(local, "items")
    local.put_item(TableName="items", Item={**KEY, "n": {"N": "9" * 38}})
    error = _error(
        lambda: local.update_item(
            TableName="items",
            Key=KEY,
            UpdateExpression="ADD n :small",
            ExpressionAttributeValues={":small": {"N": "0.1"}},
        )
    )
    assert error["Code"] == "ValidationException"
    assert local.get_item(TableName="items", Key=KEY)["Item"]["n"] == {"N": "9" * 38}


# -- item sizes --------------------------------------------------------------------------------

LIMIT = 400 * 1024


def _record(size: int) -> dict[str, Any]:
    """An Archive record of ``size`` bytes as DynamoDB counts them, its text mostly non-ASCII
    (a title in Portuguese and Greek: 2 bytes a letter in UTF-8, 6 in escaped JSON)."""
    record: dict[str, Any] = {**KEY, "version": {"N": "1"}, "state": {"S": "active"}}
    record["data"] = {"S": ""}
    left = size - item_size(record)
    text = ("ção αβγ " * (left // 13 + 1)).encode()[:left].decode(errors="ignore")
    record["data"] = {"S": text + "x" * (left - len(text.encode()))}
    assert item_size(record) == size
    return record


def test_item_sizes_are_counted_as_dynamodb_counts_them() -> None:
    """Names and strings in UTF-8 bytes, numbers by significant digits, 1 byte for a boolean or
    null, 3 for a list or map plus 1 per element ("Item sizes and formats")."""
    assert item_size({"ação": {"S": "çé"}}) == 6 + 4
    assert item_size({"n": {"N": "20090721132300.0001"}}) == 1 + 9 + 1  # 18 significant digits
    assert item_size({"n": {"N": "-0.00100"}}) == 1 + 1 + 1
    assert item_size({"b": {"BOOL": True}, "z": {"NULL": True}}) == 4
    assert item_size({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}) == 1 + 3 + (2 + 1) + (2 + 1)
    assert item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + (1 + 1 + 1)
    assert item_size({"s": {"SS": ["a", "bc"]}}) == 1 + 3


def test_a_record_near_400_kb_of_non_ascii_text_is_kept(local: Any, aws: Any) -> None:
    """395,000 bytes: under moto's limit (405,000 of its own count) and DynamoDB's; its escaped
    JSON (what the tables counted before) is about 1.2 MB."""
    table = f"sizes-{next(_serial)}"
    record = _record(395_000)
    assert len(json.dumps(record)) > 2 * LIMIT
    for client in (aws, local):
        _table(client, table)
        client.put_item(TableName=table, Item=record)
        assert client.get_item(TableName=table, Key=KEY)["Item"]["data"] == record["data"]


def test_a_399_kb_record_is_kept_and_a_401_kb_one_refused(local: Any, aws: Any) -> None:
    """DynamoDB's limit is 400 KB (409,600 bytes); moto's is 405,000 bytes, so it agrees only
    on the record over the limit."""
    table = f"limits-{next(_serial)}"
    _table(local, table)
    local.put_item(TableName=table, Item=_record(399 * 1024))
    local.put_item(TableName=table, Item={**_record(LIMIT), "label": {"S": "at-the-limit"}})
    _table(aws, table)
    over = {**_record(401 * 1024), "label": {"S": "over"}}
    for client in (aws, local):
        error = _error(lambda c=client: c.put_item(TableName=table, Item=over))
        assert error["Code"] == "ValidationException"
        assert "Item size has exceeded the maximum allowed size" in error["Message"]
    growing = {
        "TableName": table,
        "Key": KEY,
        "UpdateExpression": "SET #data = :data",
        "ExpressionAttributeNames": {"#data": "data"},
        "ExpressionAttributeValues": {":data": {"S": "é" * (201 * 1024)}},
    }
    assert _error(lambda: local.update_item(**growing))["Code"] == "ValidationException"


# -- ProjectionExpression ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("projection", "names"),
    [
        ("status", None),  # a reserved word
        ("#last", {"#last": "last_date", "#other": "other"}),  # a name not used
        ("#last, #nope", {"#last": "last_date"}),  # a name not defined
        ("a.b", None),  # a nested path (no store sends one)
    ],
)
def test_a_projection_dynamodb_refuses_is_refused(
    local: Any, projection: str, names: dict[str, str] | None
) -> None:
    _table(local, "items")
    local.put_item(TableName="items", Item={**KEY, "status": {"S": "x"}})
    arguments: dict[str, Any] = {"ProjectionExpression": projection}
    if names:
        arguments["ExpressionAttributeNames"] = names
    error = _error(lambda: local.get_item(TableName="items", Key=KEY, **arguments))
    assert error["Code"] == "ValidationException"


def test_a_reserved_word_in_a_projection_is_refused_as_by_moto(local: Any, aws: Any) -> None:
    table = f"projection-{next(_serial)}"
    for client in (aws, local):
        _table(client, table)
        error = _error(
            lambda c=client: c.get_item(TableName=table, Key=KEY, ProjectionExpression="status")
        )
        assert error["Code"] == "ValidationException"
        assert "reserved" in error["Message"]


# -- TTL across clients ------------------------------------------------------------------------


def test_a_ttl_another_client_turned_on_applies_to_this_clients_writes(tmp_path: Path) -> None:
    tables = LocalTables(tmp_path / "tables.sqlite3")
    writer = LocalTablesClient(tables.path, sweep_seconds=0)
    _table(writer, "items")
    writer.put_item(TableName="items", Item={"label": {"S": "first"}})  # the schema read here
    tables.client().update_time_to_live(
        TableName="items", TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )
    past = {"N": str(int(time.time()) - 5)}
    writer.put_item(TableName="items", Item={"label": {"S": "expired"}, "expires_at": past})
    writer.put_item(TableName="items", Item={"label": {"S": "next"}})  # the sweep after a write
    labels = {item["label"]["S"] for item in writer.scan(TableName="items")["Items"]}
    assert labels == {"first", "next"}


# -- the contract ------------------------------------------------------------------------------


def test_the_recorded_calls_cover_exactly_the_contracts_shapes() -> None:
    assert sorted({call["shape"] for call in CALLS}) == sorted(STORE_SHAPES)
    for call in CALLS:
        assert call_shape(call["operation"], call["parameters"]) == call["shape"]


OUTSIDE = [
    (
        "UpdateItem ConditionExpression(NOT,attribute_exists) UpdateExpression(REMOVE)",
        {
            "UpdateExpression": "REMOVE gone",
            "ConditionExpression": "NOT attribute_exists(#label)",
            "ExpressionAttributeNames": {"#label": "label"},
        },
    ),
    (
        "UpdateItem UpdateExpression(+,SET)",
        {
            "UpdateExpression": "SET n = n + :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        },
    ),
    (
        "UpdateItem ReturnValues=UPDATED_NEW UpdateExpression(SET)",
        {
            "UpdateExpression": "SET n = :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
            "ReturnValues": "UPDATED_NEW",
        },
    ),
    (
        "UpdateItem ReturnConsumedCapacity UpdateExpression(ADD)",
        {
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
            "ReturnConsumedCapacity": "TOTAL",
        },
    ),
]


@pytest.mark.parametrize(("shape", "arguments"), OUTSIDE, ids=[o[0] for o in OUTSIDE])
def test_a_call_no_store_makes_is_refused_naming_its_shape(
    local: Any, shape: str, arguments: dict[str, Any]
) -> None:
    _table(local, "items")
    local.put_item(TableName="items", Item={**KEY, "n": {"N": "1"}, "gone": {"S": "x"}})
    error = _error(lambda: local.update_item(TableName="items", Key=KEY, **arguments))
    assert error["Code"] == "ValidationException"
    assert error["Message"].endswith(f"not this one: {shape} " + _CONTRACT_NOTE)
    assert local.get_item(TableName="items", Key=KEY)["Item"]["n"] == {"N": "1"}


_CONTRACT_NOTE = (
    "(ibi_tools/local/table_shapes.py lists them; python -m tests.dynamo_shapes records them)"
)


def test_a_part_of_a_store_shape_is_answered(local: Any) -> None:
    """An unconditional PutItem (the migration of an old data directory) and a Scan without the
    stores' filter (the tests' own reads) use nothing the stores' calls do not."""
    _table(local, "items")
    local.put_item(TableName="items", Item=KEY)
    assert local.scan(TableName="items")["Items"] == [KEY]


def _renamed(call: dict[str, Any], suffix: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The call's parameters on tables of its own (``suffix`` added to each name)."""
    names = {table: table + suffix for table in call["tables"]}
    parameters = dict(call["parameters"])
    if "RequestItems" in parameters:
        parameters["RequestItems"] = {
            names[table]: request for table, request in parameters["RequestItems"].items()
        }
    else:
        parameters["TableName"] = names[parameters["TableName"]]
    return parameters, names


def _keys_of(item: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {k["AttributeName"]: item[k["AttributeName"]] for k in schema["KeySchema"]}


def _state(client: Any, call: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """After the call: the items at the keys it named, or met, in each of its tables."""
    state: dict[str, Any] = {}
    for table, schema in call["tables"].items():
        keys = [_keys_of(item, schema) for item in call["before"][table]]
        parameters = call["parameters"]
        if "Key" in parameters:
            keys.append(parameters["Key"])
        if "Item" in parameters:
            keys.append(_keys_of(parameters["Item"], schema))
        found = [
            client.get_item(TableName=names[table], Key=key, ConsistentRead=True).get("Item")
            for key in keys
        ]
        state[table] = _normal(found)
    return state


def _same_updated_attributes(moto: Any, local: Any, call: dict[str, Any]) -> tuple[Any, Any]:
    """moto leaves out of ``UPDATED_OLD``/``UPDATED_NEW`` an attribute SET to the value it had;
    DynamoDB returns every attribute the update names (test_local_tables.py, the same case).
    The local answer's extra attributes must be such ones: then both are compared without."""
    returns = call["parameters"].get("ReturnValues", "")
    if not returns.startswith("UPDATED_") or moto[0] != "ok" or local[0] != "ok":
        return moto, local
    mine = dict(local[1].get("Attributes", {}))
    theirs = moto[1].get("Attributes", {})
    before = {}
    for items in call["before"].values():
        before.update(_normal(items[0]) if items else {})
    for name in set(mine) - set(theirs):
        values = call["parameters"].get("ExpressionAttributeValues", {})
        unchanged = name in before and any(_normal(v) == before[name] for v in values.values())
        assert unchanged, f"{name} is in the local answer only, and the update changed it"
        del mine[name]
    answer = {key: value for key, value in local[1].items() if key != "Attributes"}
    if mine:
        answer["Attributes"] = mine
    return moto, ("ok", answer)


@pytest.mark.parametrize("call", CALLS, ids=[f"{c['shape']} -> {c['outcome']}" for c in CALLS])
def test_every_recorded_store_call_gives_the_same_answer_on_moto_and_the_local_tables(
    aws: Any, local: Any, call: dict[str, Any]
) -> None:
    parameters, names = _renamed(call, f"-{next(_serial)}")
    for client in (aws, local):
        for table, schema in call["tables"].items():
            _table(client, names[table], schema)
            for item in call["before"][table]:
                client.put_item(TableName=names[table], Item=item)
    method = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", call["operation"]).lower()

    def run(client: Any) -> dict[str, Any]:
        answer: dict[str, Any] = getattr(client, method)(**parameters)
        for table in list(answer.get("Responses", {})):
            answer["Responses"][table.rsplit("-", 1)[0]] = answer["Responses"].pop(table)
        return answer

    expected = outcome(aws, run, unordered=True)
    got = outcome(local, run, unordered=True)
    expected, got = _same_updated_attributes(expected, got, call)
    assert got == expected
    if call["outcome"] != "ValidationException":
        assert got[0] == "ok" or got[1] == call["outcome"]
    assert _state(local, call, names) == _state(aws, call, names)
