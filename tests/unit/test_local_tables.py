"""Local mode's tables against moto: the same calls, the same answers.

Each differential test runs one call on moto's DynamoDB client and on
:class:`~ibi_tools.local.tables.LocalTables`' client and compares what they give back: the
answer without ``ResponseMetadata`` and ``ConsumedCapacity``, or the error's *code* (and the
``Item`` a failed condition returns), never its message. Where moto is known to differ from
DynamoDB the test says so and checks local mode's tables against DynamoDB's documented
behaviour instead.

moto keeps a number as it was spelled ("1.50"); DynamoDB trims leading and trailing zeros
("Leading and trailing zeroes are trimmed", Developer Guide, "Naming rules and data types",
Number). The comparison therefore reads numbers by value, and ``test_numbers_come_back_trimmed``
checks local mode's spelling on its own.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from ibi_tools.local.tables import LocalTables, call_shape, condition_holds, refused_shape

Client = Any
Call = Callable[[Client], dict[str, Any]]

ITEMS = "items"  # HASH id (S)
RECORD = "record"  # HASH subsystem (S) + RANGE first_date (N): the minting record table
PAGES = "pages"  # HASH p (S) + RANGE s (S)
SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {
    ITEMS: (("id", "S"),),
    RECORD: (("subsystem", "S"), ("first_date", "N")),
    PAGES: (("p", "S"), ("s", "S")),
}


def _normal(value: Any) -> Any:
    """A typed value (or anything holding some) with numbers by value and sets sorted."""
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((kind, data),) = value.items()
        if kind == "N" and isinstance(data, str):
            return {"N": Decimal(data).normalize()}
        if kind == "NS" and isinstance(data, list):
            return {"NS": sorted(Decimal(n).normalize() for n in data)}
        if kind == "SS" and isinstance(data, list):
            return {"SS": sorted(data)}
    return {k: _normal(v) for k, v in value.items()}


def _sort_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str)


def _brief(result: tuple[Any, ...]) -> Any:
    """An outcome with its items as their ids (for a readable failure)."""
    if result[0] != "ok" or "Items" not in result[1]:
        return result
    ids = [next(iter(i.get("id", i).values())) for i in result[1]["Items"]]
    return ("ok", {**result[1], "Items": ids})


def _bare(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without its metadata. An empty ``Attributes`` is left out: moto sends one
    where local mode's tables send none (a caller cannot tell them apart)."""
    dropped = {"ResponseMetadata", "ConsumedCapacity"}
    bare = {k: v for k, v in answer.items() if k not in dropped}
    if bare.get("Attributes") == {}:
        del bare["Attributes"]
    return bare


def outcome(client: Client, call: Call, *, unordered: bool = False) -> tuple[Any, ...]:
    """What a call gives: ``("ok", answer)`` or ``("error", code, item)``."""
    try:
        answer = _bare(call(client))
    except ClientError as error:
        return ("error", error.response["Error"]["Code"], _normal(error.response.get("Item")))
    answer = _normal(answer)
    if unordered:
        if "Items" in answer:
            answer["Items"] = sorted(answer["Items"], key=_sort_key)
        for table, items in answer.get("Responses", {}).items():
            answer["Responses"][table] = sorted(items, key=_sort_key)
    return ("ok", answer)


class Both:
    """moto's client and local mode's, side by side."""

    def __init__(self, moto: Client, local: Client, suffix: str) -> None:
        self.moto, self.local, self.suffix = moto, local, suffix

    def name(self, table: str) -> str:
        return table + self.suffix

    def same(self, call: Call, *, unordered: bool = False) -> tuple[Any, ...]:
        """Run ``call`` on both; they must agree. Gives the (common) outcome."""
        expected = outcome(self.moto, call, unordered=unordered)
        got = outcome(self.local, call, unordered=unordered)
        assert got == expected, f"local: {_brief(got)}\nmoto:  {_brief(expected)}"
        return got

    def ok(self, call: Call, *, unordered: bool = False) -> dict[str, Any]:
        result = self.same(call, unordered=unordered)
        assert result[0] == "ok", result
        answer: dict[str, Any] = result[1]
        return answer

    def error(self, code: str, call: Call) -> tuple[Any, ...]:
        result = self.same(call)
        assert result[:2] == ("error", code), result
        return result

    def each(self, call: Call) -> None:
        """Run ``call`` on both without comparing (setting up)."""
        call(self.moto)
        call(self.local)


def _create(client: Client, name: str, schema: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    kinds = ("HASH", "RANGE")
    answer: dict[str, Any] = client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": n, "KeyType": k} for (n, _), k in zip(schema, kinds)],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in schema],
        BillingMode="PAY_PER_REQUEST",
    )
    return answer


# One moto for the module (starting one costs ≈ 0.1 s); each test has its own tables.
_serial = itertools.count()


@pytest.fixture(scope="module")
def aws() -> Iterator[Client]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def _pair(moto: Client, path: Path) -> Both:
    both = Both(moto, LocalTables(path).client(), f"-{next(_serial)}")
    for table, schema in SCHEMAS.items():
        both.each(lambda c, t=table, s=schema: _create(c, both.name(t), s))
    return both


@pytest.fixture
def both(aws: Client, tmp_path: Path) -> Iterator[Both]:
    pair = _pair(aws, tmp_path / "t.sqlite3")
    yield pair
    for table in SCHEMAS:
        aws.delete_table(TableName=pair.name(table))


# -- conditions: one set of items, read only -------------------------------------------------

SEEDED: list[dict[str, Any]] = [
    {
        "id": {"S": "a"},
        "s": {"S": "abc"},
        "n": {"N": "1.5"},
        "big": {"N": "20090721132300.0001"},
        "neg": {"N": "-3"},
        "ss": {"SS": ["red", "green"]},
        "ns": {"NS": ["1", "2"]},
        "l": {"L": [{"S": "x"}, {"N": "1"}]},
        "m": {"M": {"k": {"S": "v"}}},
        "flag": {"BOOL": True},
        "nothing": {"NULL": True},
        "status": {"S": "in_progress"},
        "version": {"N": "3"},
    },
    {
        "id": {"S": "b"},
        "s": {"S": "abd"},
        "n": {"N": "1.50"},
        "big": {"N": "20090721132300.0002"},
        "neg": {"N": "-10.25"},
        "ss": {"SS": ["blue"]},
        "l": {"L": []},
        "flag": {"BOOL": False},
        "status": {"S": "done"},
        "version": {"N": "4"},
    },
    {"id": {"S": "c"}, "s": {"S": "ab"}, "n": {"N": "2"}, "big": {"N": "20090721132300"}},
    {"id": {"S": "d"}},
    {"id": {"S": "e"}, "s": {"N": "5"}, "n": {"S": "1.5"}, "e": {"S": ""}},
]
MISSING_KEY = {"id": {"S": "zz"}}

V = {
    ":abc": {"S": "abc"},
    ":ab": {"S": "ab"},
    ":abd": {"S": "abd"},
    ":a": {"S": "a"},
    ":b": {"S": "b"},
    ":red": {"S": "red"},
    ":x": {"S": "x"},
    ":empty": {"S": ""},
    ":s15": {"S": "1.5"},
    ":n15": {"N": "1.50"},
    ":n150": {"N": "1.5000"},
    ":zero": {"N": "0"},
    ":one": {"N": "1"},
    ":two": {"N": "2"},
    ":three": {"N": "3"},
    ":minus5": {"N": "-5"},
    ":minus10": {"N": "-10.250"},
    ":bigger": {"N": "20090721132300.00015"},
    ":big1": {"N": "20090721132300.0001"},
    ":in_progress": {"S": "in_progress"},
    ":done": {"S": "done"},
    ":four": {"N": "4"},
    ":true": {"BOOL": True},
    ":typeS": {"S": "S"},
    ":typeSS": {"S": "SS"},
}

# (expression, names, where it holds). "Where it holds" is None when moto answers as DynamoDB
# does (the test compares the two); else the ids of the items it holds for ("z": the missing
# item), from DynamoDB's documented behaviour, because moto does not:
# - it raises TypeError ordering values of different types (item "e" holds s as N, n as S);
#   DynamoDB: a comparison of values of different types is false;
# - it refuses size() in a filter ("Invalid attribute name") and raises on size() of a missing
#   attribute; DynamoDB: size() of a missing attribute has no value, so the comparison is false;
# - it holds two missing attributes equal (and not unequal); DynamoDB: a missing attribute
#   equals nothing, so "=" is false and "<>" true (the same rule as for one missing attribute,
#   where moto agrees).
CONDITIONS: list[tuple[str, dict[str, str], str | None]] = [
    ("attribute_exists(s)", {}, None),
    ("attribute_not_exists(s)", {}, None),
    ("attribute_exists(#n)", {"#n": "n"}, None),
    ("attribute_not_exists(#label)", {"#label": "id"}, None),
    ("attribute_exists(nothing)", {}, None),
    ("s = :abc", {}, None),
    ("s <> :abc", {}, None),
    ("#status <> :in_progress", {"#status": "status"}, None),
    ("#status = :in_progress", {"#status": "status"}, None),
    ("nope <> :abc", {}, None),
    ("nope = :abc", {}, None),
    ("nope < :abc", {}, None),
    ("nope >= :abc", {}, None),
    ("#a <> #b", {"#a": "nope", "#b": "nada"}, "abcdez"),
    ("#a = #b", {"#a": "nope", "#b": "nada"}, ""),
    ("s = s", {}, "abce"),
    ("s < :abd", {}, "ac"),
    ("s <= :abd", {}, "abc"),
    ("s > :ab", {}, "ab"),
    ("s >= :ab", {}, "abc"),
    ("s > :empty", {}, "abc"),
    ("n = :n15", {}, None),
    ("n = :n150", {}, None),
    ("n <> :n15", {}, None),
    ("n < :two", {}, "ab"),
    ("n <= :n15", {}, "ab"),
    ("n > :one", {}, "abc"),
    ("n >= :two", {}, "c"),
    ("n = :s15", {}, None),
    ("n <> :s15", {}, None),
    ("n < :s15", {}, ""),
    ("big > :big1", {}, None),
    ("big >= :big1", {}, None),
    ("big < :bigger", {}, None),
    ("big = :big1", {}, None),
    ("neg < :minus5", {}, None),
    ("neg > :minus5", {}, None),
    ("neg = :minus10", {}, None),
    ("version < :four", {}, None),
    ("neg < :zero AND n > :one", {}, None),
    ("neg < :zero OR attribute_not_exists(s)", {}, None),
    ("(s = :abc OR s = :abd) AND (n = :n15)", {}, None),
    (
        "attribute_exists(#label) AND (attribute_not_exists(#st) OR #st <> :done)",
        {"#label": "id", "#st": "status"},
        None,
    ),
    ("flag = :true", {}, None),
    ("flag <> :true", {}, None),
]


def _expression_arguments(expression: str, names: dict[str, str]) -> dict[str, Any]:
    """The ``ExpressionAttributeValues`` (from ``V``) and names an expression uses."""
    arguments: dict[str, Any] = {}
    values = {token: V[token] for token in re.findall(r":\w+", expression)}
    if values:
        arguments["ExpressionAttributeValues"] = values
    if names:
        arguments["ExpressionAttributeNames"] = names
    return arguments


@pytest.fixture(scope="module")
def seeded(aws: Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Both]:
    pair = _pair(aws, tmp_path_factory.mktemp("seeded") / "t.sqlite3")
    for item in SEEDED:
        pair.each(lambda c, i=item: c.put_item(TableName=pair.name(ITEMS), Item=i))
    yield pair
    for table in SCHEMAS:
        aws.delete_table(TableName=pair.name(table))


def _held_on_moto(both: Both, expression: str, extra: dict[str, Any]) -> set[str]:
    """The ids of the items ``expression`` holds for on moto ("z": the missing item), by a
    write under it on each item and on a missing one, and the same items by a scan's filter.
    Nothing changes: the same item is put back; a delete of a missing item deletes nothing."""
    table = both.name(ITEMS)
    held = set()
    for item in SEEDED:
        written = outcome(
            both.moto,
            lambda c, i=item: c.put_item(
                TableName=table, Item=i, ConditionExpression=expression, **extra
            ),
        )
        if written[0] == "ok":
            held.add(item["id"]["S"])
    deleted = outcome(
        both.moto,
        lambda c: c.delete_item(
            TableName=table, Key=MISSING_KEY, ConditionExpression=expression, **extra
        ),
    )
    found = both.moto.scan(TableName=table, FilterExpression=expression, **extra)["Items"]
    assert {item["id"]["S"] for item in found} == held
    return held | ({"z"} if deleted[0] == "ok" else set())


@pytest.mark.parametrize(
    ("expression", "names", "holds"), CONDITIONS, ids=[c[0] for c in CONDITIONS]
)
def test_a_condition_holds_for_the_same_items(
    seeded: Both, expression: str, names: dict[str, str], holds: str | None
) -> None:
    """Every condition form the stores send, on items of every type and on a missing one.
    Local mode's evaluator is compared on its own: most of these are not a whole call shape
    a store makes, and the tables refuse those calls (test_local_tables_contract.py)."""
    extra = _expression_arguments(expression, names)
    local = {
        key
        for key, item in [*((i["id"]["S"], i) for i in SEEDED), ("z", {})]
        if condition_holds(
            expression,
            item,
            names=extra.get("ExpressionAttributeNames"),
            values=extra.get("ExpressionAttributeValues"),
        )
    }
    expected = _held_on_moto(seeded, expression, extra) if holds is None else set(holds)
    assert local == expected


# -- updates -----------------------------------------------------------------------------------

KEY = {"id": {"S": "k"}}
START: dict[str, Any] = {
    **KEY,
    "count": {"N": "5"},
    "tags": {"SS": ["a", "b"]},
    "log": {"L": [{"S": "one"}]},
    "gone": {"S": "x"},
}

UPDATES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    ("SET a = :s, b = :n, c = :l", {}, {":s": {"S": "v"}, ":n": {"N": "1.50"}, ":l": {"L": []}}),
    (
        "SET a = if_not_exists(a, :s), #c = if_not_exists(#c, :n)",
        {"#c": "count"},
        {":s": {"S": "v"}, ":n": {"N": "0"}},
    ),
    ("ADD fresh :n", {}, {":n": {"N": "3"}}),
    ("ADD #c :n", {"#c": "count"}, {":n": {"N": "-5"}}),
    ("ADD tags :t", {}, {":t": {"SS": ["b", "c"]}}),
    ("ADD newtags :t", {}, {":t": {"SS": ["z"]}}),
    ("SET a = :s, gone = :s ADD #c :n", {"#c": "count"}, {":s": {"S": "v"}, ":n": {"N": "1"}}),
    ("SET a = nope", {}, {}),
    ("ADD gone :n", {}, {":n": {"N": "1"}}),
    ("SET a = :s, a = :s", {}, {":s": {"S": "v"}}),
    ("SET id = :s", {}, {":s": {"S": "v"}}),
]

SAME_VALUE_UPDATES = {"SET a = if_not_exists(a, :s), #c = if_not_exists(#c, :n)": {"a", "count"}}


@pytest.mark.parametrize(("expression", "names", "values"), UPDATES, ids=[u[0] for u in UPDATES])
def test_an_update_gives_the_same_item_and_return_values(
    both: Both, expression: str, names: dict[str, str], values: dict[str, Any]
) -> None:
    table = both.name(ITEMS)
    extra: dict[str, Any] = {}
    if names:
        extra["ExpressionAttributeNames"] = names
    if values:
        extra["ExpressionAttributeValues"] = values
    for returns in ("NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"):
        both.each(lambda c: c.put_item(TableName=table, Item=START))

        def update(client: Client, r: str = returns) -> dict[str, Any]:
            answer: dict[str, Any] = client.update_item(
                TableName=table, Key=KEY, UpdateExpression=expression, ReturnValues=r, **extra
            )
            return answer

        shape = call_shape("UpdateItem", {"UpdateExpression": expression, "ReturnValues": returns})
        if refused_shape(shape):  # no store asks for this: refused, whatever moto answers
            assert outcome(both.local, update)[:2] == ("error", "ValidationException")
        elif returns.startswith("UPDATED_") and expression in SAME_VALUE_UPDATES:
            # moto leaves out an attribute SET to the value it had; DynamoDB returns every
            # attribute the update expression names ("the updated attributes").
            named = SAME_VALUE_UPDATES[expression]
            if returns == "UPDATED_OLD":
                named = named & set(START)
            assert set(update(both.local).get("Attributes", {})) == named
            both.each(update)
        else:
            both.same(update)
        both.ok(lambda c: c.get_item(TableName=table, Key=KEY))


def test_an_update_of_a_missing_item_makes_it_with_its_key(both: Both) -> None:
    table = both.name(RECORD)
    key = {"subsystem": {"S": "default"}, "first_date": {"N": "20090721132300.0001"}}
    both.ok(
        lambda c: c.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #last = :d ADD minted_count :one",
            ExpressionAttributeNames={"#last": "last_date"},
            ExpressionAttributeValues={":d": {"N": "7"}, ":one": {"N": "1"}},
            ReturnValues="ALL_OLD",  # (as the minting state's write)
        )
    )
    both.ok(lambda c: c.get_item(TableName=table, Key=key))
    # A conditional update of a missing item: the condition sees no attributes.
    both.error(
        "ConditionalCheckFailedException",
        lambda c: c.update_item(
            TableName=table,
            Key={**key, "first_date": {"N": "1"}},
            UpdateExpression="SET x = :x",
            ConditionExpression="#last < :x",
            ExpressionAttributeNames={"#last": "last_date"},
            ExpressionAttributeValues={":x": {"N": "8"}},
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ),
    )


@pytest.mark.parametrize("operation", ["put_item", "update_item", "delete_item"])
def test_a_failed_condition_gives_back_the_item_when_asked(both: Both, operation: str) -> None:
    table = both.name(ITEMS)
    both.each(lambda c: c.put_item(TableName=table, Item=START))
    arguments: dict[str, Any] = {
        "TableName": table,
        "ConditionExpression": "#c < :expected",
        "ExpressionAttributeNames": {"#c": "count"},
        "ExpressionAttributeValues": {":expected": {"N": "4"}},
    }
    if operation == "put_item":
        arguments["Item"] = KEY
    else:
        arguments["Key"] = KEY
    if operation == "update_item":
        arguments["UpdateExpression"] = "SET x = :expected"
    for asked in ("ALL_OLD", "NONE"):
        name = "".join(part.title() for part in operation.split("_"))
        shape = call_shape(name, {**arguments, "ReturnValuesOnConditionCheckFailure": asked})
        if refused_shape(shape):  # the minting state's update asks for it; no put or delete
            failed = outcome(
                both.local,
                lambda c, a=asked: getattr(c, operation)(
                    **arguments, ReturnValuesOnConditionCheckFailure=a
                ),
            )
            assert failed[:2] == ("error", "ValidationException")
            continue
        result = both.error(
            "ConditionalCheckFailedException",
            lambda c, a=asked: getattr(c, operation)(
                **arguments, ReturnValuesOnConditionCheckFailure=a
            ),
        )
        assert (result[2] is not None) == (asked == "ALL_OLD")
    both.ok(lambda c: c.get_item(TableName=table, Key=KEY))


def test_numbers_come_back_trimmed(tmp_path: Path) -> None:
    """DynamoDB trims leading and trailing zeros (moto keeps the spelling: not compared)."""
    client = LocalTables(tmp_path / "t.sqlite3").client()
    _create(client, ITEMS, SCHEMAS[ITEMS])
    spelled = {"a": "1.50", "b": "0012", "c": "-0.0", "d": "1E+3", "e": "20090721132300.0001"}
    client.put_item(TableName=ITEMS, Item={**KEY, **{k: {"N": v} for k, v in spelled.items()}})
    item = client.get_item(TableName=ITEMS, Key=KEY)["Item"]
    assert {k: item[k]["N"] for k in spelled} == {
        "a": "1.5",
        "b": "12",
        "c": "0",
        "d": "1000",
        "e": "20090721132300.0001",
    }


# -- query and scan ----------------------------------------------------------------------------

DATES = ["1", "1.5", "2", "10", "-3", "20090721132300.0001", "20090721132300.0002", "0.25"]


def _fill_record(both: Both) -> str:
    table = both.name(RECORD)
    for subsystem in ("default", "classic"):
        for number, date in enumerate(DATES):
            item = {"subsystem": {"S": subsystem}, "first_date": {"N": date}}
            if number >= 3:
                item["count"] = {"N": str(number)}
            both.each(lambda c, i=item: c.put_item(TableName=table, Item=i))
    return table


def _pages(client: Client, call: Callable[..., dict[str, Any]]) -> list[dict[str, Any]]:
    """Every page of a query or scan, following LastEvaluatedKey."""
    pages, start = [], None
    while True:
        page = call(client, **({"ExclusiveStartKey": start} if start else {}))
        pages.append(_bare(page))
        start = page.get("LastEvaluatedKey")
        if start is None:
            return pages


SORT_CONDITIONS = [
    ("", {}),
    (" AND #first > :a", {":a": {"N": "1.50"}}),
    (" AND #first >= :a", {":a": {"N": "1.5"}}),
    (" AND #first < :a", {":a": {"N": "2"}}),
    (" AND #first <= :a", {":a": {"N": "2"}}),
    (" AND #first = :a", {":a": {"N": "20090721132300.00010"}}),
    (" AND #first BETWEEN :a AND :b", {":a": {"N": "-3"}, ":b": {"N": "10"}}),
    (" AND #first > :a", {":a": {"N": "20090721132300.0001"}}),
]


@pytest.mark.parametrize(
    ("sort", "values"), SORT_CONDITIONS, ids=[s[0] or "all" for s in SORT_CONDITIONS]
)
def test_a_query_gives_the_same_pages_in_sort_key_order(
    both: Both, sort: str, values: dict[str, Any]
) -> None:
    table = _fill_record(both)
    for limit, forward in itertools.product((None, 1, 3), (True, False)):
        query = _query(table, sort, values, limit, forward)
        asked = {"KeyConditionExpression": "#s = :s" + sort, "ScanIndexForward": forward}
        if refused_shape(call_shape("Query", {**asked, **({"Limit": 1} if limit else {})})):
            # (no store sorts backwards, nor asks for <, <=, >= or BETWEEN on a sort key)
            assert outcome(both.local, query)[:2] == ("error", "ValidationException")
            continue
        # One page: the stores continue a Query by its key condition (the minting record's
        # listing: "#first > :after"), never by ExclusiveStartKey, which the contract refuses.
        expected, got = outcome(both.moto, query), outcome(both.local, query)
        if got != expected and got[0] == "ok" and got[1]["Count"] == limit:
            got = ("ok", _as_moto_page(got[1]))
        assert got == expected, (limit, forward)


def _as_moto_page(page: dict[str, Any]) -> dict[str, Any]:
    """A local page as moto gives it. DynamoDB does not look ahead: a page that ends at
    ``Limit`` has a LastEvaluatedKey even when nothing follows (moto sometimes leaves it out)."""
    return {k: v for k, v in page.items() if k != "LastEvaluatedKey"}


def _query(
    table: str, sort: str, values: dict[str, Any], limit: int | None, forward: bool
) -> Callable[..., dict[str, Any]]:
    def query(client: Client, **more: Any) -> dict[str, Any]:
        answer: dict[str, Any] = client.query(
            TableName=table,
            KeyConditionExpression="#subsystem = :s" + sort,
            ExpressionAttributeNames={
                "#subsystem": "subsystem",
                **({"#first": "first_date"} if sort else {}),
            },
            ExpressionAttributeValues={":s": {"S": "default"}, **values},
            ScanIndexForward=forward,
            **({"Limit": limit} if limit else {}),
            **more,
        )
        return answer

    return query


def test_a_query_on_a_string_sort_key(both: Both) -> None:
    table = both.name(PAGES)
    for s in ("a", "ab", "abc", "b", "B", "é", "a b"):
        both.each(lambda c, s=s: c.put_item(TableName=table, Item={"p": {"S": "x"}, "s": {"S": s}}))
    for condition, values in [
        ("#s > :v", {":v": {"S": "a"}}),
        ("#s = :v", {":v": {"S": "é"}}),
    ]:
        both.ok(
            lambda c, k=condition, v=values: c.query(
                TableName=table,
                KeyConditionExpression=f"p = :p AND {k}",
                ExpressionAttributeNames={"#s": "s"},
                ExpressionAttributeValues={":p": {"S": "x"}, **v},
            )
        )


@pytest.mark.parametrize("limit", [1, 2, 5, 100])
def test_a_scan_gives_the_same_items_over_its_pages(both: Both, limit: int) -> None:
    table = _fill_record(both)

    def scan(client: Client, **more: Any) -> dict[str, Any]:
        answer: dict[str, Any] = client.scan(
            TableName=table,
            Limit=limit,
            FilterExpression="attribute_exists(#c)",
            ExpressionAttributeNames={"#c": "count"},
            **more,
        )
        return answer

    results = []
    for client in (both.moto, both.local):
        pages = _pages(client, scan)
        # Limit counts the items read, before the filter
        assert all(page["ScannedCount"] <= limit for page in pages)
        assert sum(page["ScannedCount"] for page in pages) == 2 * len(DATES)
        items = [item for page in pages for item in page["Items"]]
        results.append(sorted(map(_sort_key, _normal(items))))
    assert results[0] == results[1]
    assert len(results[0]) == 2 * (len(DATES) - 3)
    # The first page alone, as read in order, is the same on both when it reads everything.
    both.ok(lambda c: c.scan(TableName=table, Limit=100), unordered=True)


def test_batch_get_item_gives_the_present_items(both: Both) -> None:
    table = _fill_record(both)
    keys = [
        {"subsystem": {"S": s}, "first_date": {"N": d}}
        for s in ("default", "nowhere")
        for d in ("1.50", "2", "99")
    ]
    both.ok(lambda c: c.batch_get_item(RequestItems={table: {"Keys": keys}}), unordered=True)


# -- refusals ----------------------------------------------------------------------------------

REFUSALS: list[tuple[str, str, Callable[[Both], Call]]] = [
    (
        "a key of the wrong type",
        "ValidationException",
        lambda b: lambda c: c.put_item(TableName=b.name(ITEMS), Item={"id": {"N": "1"}}),
    ),
    (
        "a key with an extra attribute",
        "ValidationException",
        lambda b: lambda c: c.get_item(TableName=b.name(ITEMS), Key={**KEY, "x": {"S": "y"}}),
    ),
    (
        "a key without its sort key",
        "ValidationException",
        lambda b: lambda c: c.get_item(TableName=b.name(RECORD), Key={"subsystem": {"S": "x"}}),
    ),
    (
        "an item without its key",
        "ValidationException",
        lambda b: lambda c: c.put_item(TableName=b.name(ITEMS), Item={"x": {"S": "y"}}),
    ),
    (
        "an empty string in a key",
        "ValidationException",
        lambda b: lambda c: c.put_item(TableName=b.name(ITEMS), Item={"id": {"S": ""}}),
    ),
    (
        "an unused value",
        "ValidationException",
        lambda b: (
            lambda c: c.update_item(
                TableName=b.name(ITEMS),
                Key=KEY,
                UpdateExpression="SET a = :a",
                ExpressionAttributeValues={":a": {"S": "x"}, ":b": {"S": "y"}},
            )
        ),
    ),
    (
        "an unused name",
        "ValidationException",
        lambda b: (
            lambda c: c.put_item(
                TableName=b.name(ITEMS),
                Item=KEY,
                ConditionExpression="attribute_not_exists(id)",
                ExpressionAttributeNames={"#x": "x"},
            )
        ),
    ),
    (
        "an undefined value in an update",
        "ValidationException",
        lambda b: (
            lambda c: c.update_item(TableName=b.name(ITEMS), Key=KEY, UpdateExpression="SET a = :a")
        ),
    ),
    (
        "a reserved word",
        "ValidationException",
        lambda b: (
            lambda c: c.update_item(
                TableName=b.name(ITEMS),
                Key=KEY,
                UpdateExpression="SET status = :a",
                ExpressionAttributeValues={":a": {"S": "x"}},
            )
        ),
    ),
    (
        "a malformed update",
        "ValidationException",
        lambda b: (
            lambda c: c.update_item(
                TableName=b.name(ITEMS),
                Key=KEY,
                UpdateExpression="SET a :a",
                ExpressionAttributeValues={":a": {"S": "x"}},
            )
        ),
    ),
    (
        "an update changing the key",
        "ValidationException",
        lambda b: (
            lambda c: c.update_item(
                TableName=b.name(ITEMS),
                Key=KEY,
                UpdateExpression="SET id = :a",
                ExpressionAttributeValues={":a": {"S": "x"}},
            )
        ),
    ),
    (
        "a query without the partition key",
        "ValidationException",
        lambda b: (
            lambda c: c.query(
                TableName=b.name(RECORD),
                KeyConditionExpression="first_date = :a",
                ExpressionAttributeValues={":a": {"N": "1"}},
            )
        ),
    ),
    (
        "a query on a non-key attribute",
        "ValidationException",
        lambda b: (
            lambda c: c.query(
                TableName=b.name(RECORD),
                KeyConditionExpression="subsystem = :a AND x = :a",
                ExpressionAttributeValues={":a": {"S": "1"}},
            )
        ),
    ),
    (
        "a missing table",
        "ResourceNotFoundException",
        lambda b: lambda c: c.get_item(TableName="nowhere", Key=KEY),
    ),
    (
        "a scan of a missing table",
        "ResourceNotFoundException",
        lambda b: lambda c: c.scan(TableName="nowhere"),
    ),
    (
        "a table made twice",
        "ResourceInUseException",
        lambda b: lambda c: _create(c, b.name(ITEMS), SCHEMAS[ITEMS]),
    ),
]


@pytest.mark.parametrize(("case", "code", "call"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_refused_request_gives_the_same_error_code(
    both: Both, case: str, code: str, call: Callable[[Both], Call]
) -> None:
    both.error(code, call(both))


# moto answers these wrongly; DynamoDB refuses them with a ValidationException.
LOCAL_REFUSALS: list[tuple[str, Callable[[Client], Any]]] = [
    # moto reads a key of the wrong type as a missing item (DynamoDB: "The provided key
    # element does not match the schema").
    (
        "a key of the wrong type, read",
        lambda c: c.get_item(TableName=ITEMS, Key={"id": {"N": "1"}}),
    ),
    (
        "a sort key of the wrong type, read",
        lambda c: c.get_item(
            TableName=RECORD, Key={"subsystem": {"S": "x"}, "first_date": {"S": "1"}}
        ),
    ),
    # moto takes a condition naming a value or a name it is not given (DynamoDB: "An
    # expression attribute value used in expression is not defined").
    (
        "an undefined value",
        lambda c: c.put_item(TableName=ITEMS, Item=KEY, ConditionExpression="a = :a"),
    ),
    (
        "an undefined name",
        lambda c: c.put_item(TableName=ITEMS, Item=KEY, ConditionExpression="attribute_exists(#a)"),
    ),
    # moto raises KeyError.
    (
        "an undefined name in an update",
        lambda c: c.update_item(
            TableName=ITEMS,
            Key=KEY,
            UpdateExpression="SET #a = :a",
            ExpressionAttributeValues={":a": {"S": "x"}},
        ),
    ),
    # moto raises ValueError on a malformed condition (DynamoDB: "Invalid ConditionExpression:
    # Syntax error").
    (
        "a malformed condition",
        lambda c: c.put_item(
            TableName=ITEMS,
            Item=KEY,
            ConditionExpression="a = = :a",
            ExpressionAttributeValues={":a": {"S": "x"}},
        ),
    ),
    (
        "an unbalanced parenthesis",
        lambda c: c.put_item(
            TableName=ITEMS,
            Item=KEY,
            ConditionExpression="(a = :a",
            ExpressionAttributeValues={":a": {"S": "x"}},
        ),
    ),
]


@pytest.mark.parametrize(("case", "call"), LOCAL_REFUSALS, ids=[r[0] for r in LOCAL_REFUSALS])
def test_local_tables_refuse_what_dynamodb_refuses(
    tmp_path: Path, case: str, call: Callable[[Client], Any]
) -> None:
    client = LocalTables(tmp_path / "t.sqlite3").client()
    for table, schema in SCHEMAS.items():
        _create(client, table, schema)
    with pytest.raises(ClientError) as caught:
        call(client)
    assert caught.value.response["Error"]["Code"] == "ValidationException"


def test_the_tables_are_listed_and_described_alike(both: Both) -> None:
    names = {both.name(t) for t in SCHEMAS}
    listed = [sorted(set(c.list_tables()["TableNames"]) & names) for c in (both.moto, both.local)]
    assert listed[0] == listed[1] == sorted(names)
    for table in SCHEMAS:
        described = [
            c.describe_table(TableName=both.name(table))["Table"] for c in (both.moto, both.local)
        ]
        for field in ("TableName", "KeySchema", "AttributeDefinitions", "TableStatus"):
            assert described[0][field] == described[1][field]
    both.error("ResourceNotFoundException", lambda c: c.describe_table(TableName="nowhere"))


# -- local mode's tables alone -----------------------------------------------------------------


def test_the_data_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    client = LocalTables(path).client()
    _create(client, ITEMS, SCHEMAS[ITEMS])
    client.put_item(TableName=ITEMS, Item=START)
    client.close()
    again = LocalTables(path).client()
    assert again.list_tables()["TableNames"] == [ITEMS]
    assert again.get_item(TableName=ITEMS, Key=KEY)["Item"] == START
    with pytest.raises(ClientError) as caught:
        _create(again, ITEMS, SCHEMAS[ITEMS])
    assert caught.value.response["Error"]["Code"] == "ResourceInUseException"


def _increment(path: Path, times: int) -> None:
    """``times`` increments of one counter, each a read and a conditional write (retried when
    another process wrote between them)."""
    client = LocalTables(path).client()
    done = 0
    while done < times:
        item = client.get_item(TableName=ITEMS, Key=KEY, ConsistentRead=True)["Item"]
        current = item["n"]["N"]
        try:
            client.update_item(
                TableName=ITEMS,
                Key=KEY,
                UpdateExpression="SET #n = :next",
                ConditionExpression="#n = :expected",
                ExpressionAttributeNames={"#n": "n"},
                ExpressionAttributeValues={
                    ":expected": {"N": current},
                    ":next": {"N": str(int(current) + 1)},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
        else:
            done += 1


def test_conditional_writes_are_atomic_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    client = LocalTables(path).client()
    _create(client, ITEMS, SCHEMAS[ITEMS])
    client.put_item(TableName=ITEMS, Item={**KEY, "n": {"N": "0"}})
    fork = multiprocessing.get_context("fork")
    workers = [fork.Process(target=_increment, args=(path, 200)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert client.get_item(TableName=ITEMS, Key=KEY)["Item"]["n"] == {"N": "400"}


def _use_inherited(client: Client, queue: Any) -> None:
    client.update_item(
        TableName=ITEMS,
        Key=KEY,
        UpdateExpression="ADD n :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    queue.put(client.get_item(TableName=ITEMS, Key=KEY)["Item"]["n"]["N"])


def test_a_client_made_before_a_fork_works_in_the_child(tmp_path: Path) -> None:
    client = LocalTables(tmp_path / "t.sqlite3").client()
    _create(client, ITEMS, SCHEMAS[ITEMS])
    client.put_item(TableName=ITEMS, Item={**KEY, "n": {"N": "1"}})  # the parent connects
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    child = fork.Process(target=_use_inherited, args=(client, queue))
    child.start()
    assert queue.get(timeout=30) == "2"
    child.join(timeout=30)
    assert child.exitcode == 0
    assert client.get_item(TableName=ITEMS, Key=KEY)["Item"]["n"] == {"N": "2"}
