"""A data directory an earlier ``ibi local`` kept in dynalite is copied into the local tables
at its first start: every table, every item, keys and sort order intact, the old directory
kept beside (renamed), and a second start copies nothing again."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from functions.archive.store import ensure_table as ensure_items_table
from functions.minting.store import ensure_tables
from ibi_tools.local.federation import DYNALITE_DIR, DYNALITE_KEPT, TABLES_FILE, open_tables
from ibi_tools.local.stores import Dynalite
from tests.conftest import TABLES


def _everything(client: Any) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for name in client.list_tables()["TableNames"]:
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {"TableName": name, "ConsistentRead": True}
        while True:
            page = client.scan(**request)
            items += page["Items"]
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        found[name] = sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    return found


def test_an_earlier_dynalite_directory_is_copied_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with Dynalite(data / DYNALITE_DIR) as dynalite:
        old = dynalite.client()
        ensure_tables(old, TABLES)  # the minting tables: a sort key of type N
        ensure_items_table(old, "ibi-archive-a-items")
        for n in range(120):
            date = Decimal("1795623235.001") + Decimal(n) / 7
            old.put_item(
                TableName=TABLES["record"],
                Item={
                    "subsystem": {"S": "default"},
                    "first_date": {"N": str(date)},
                    "dates": {"L": [{"N": str(date)}]},
                },
            )
        old.put_item(
            TableName="ibi-archive-a-items",
            Item={
                "label": {"S": "8JMKD3MGP8W/ABC"},
                "data": {"S": "{}"},
                "version": {"N": "3"},
                "access_count": {"N": "41"},
                "languages": {"SS": ["en", "pt-BR"]},
                "listable": {"BOOL": True},
                "nothing": {"NULL": True},
                "forms": {"M": {"rep": {"S": "sid.inpe.br/x/2009/07.21.13.23"}}},
            },
        )
        before = _everything(old)

    tables = open_tables(data)
    assert (data / TABLES_FILE).exists() and not (data / DYNALITE_DIR).exists()
    assert (data / DYNALITE_KEPT).is_dir()  # kept, for whoever wants it back
    client = tables.client()
    assert _everything(client) == before

    # The minting record reads in date order, page by page, from where the copy put it (paged
    # as its store pages it: after the last date read; the stores send no ExclusiveStartKey
    # with a Query, and local mode's tables answer only the stores' calls).
    dates: list[Decimal] = []
    while True:
        request: dict[str, Any] = {
            "TableName": TABLES["record"],
            "KeyConditionExpression": "#subsystem = :subsystem",
            "ExpressionAttributeNames": {"#subsystem": "subsystem"},
            "ExpressionAttributeValues": {":subsystem": {"S": "default"}},
            "Limit": 50,
        }
        if dates:
            request["KeyConditionExpression"] += " AND #first > :after"
            request["ExpressionAttributeNames"]["#first"] = "first_date"
            request["ExpressionAttributeValues"][":after"] = {"N": str(dates[-1])}
        page = client.query(**request)
        dates += [Decimal(item["first_date"]["N"]) for item in page["Items"]]
        if "LastEvaluatedKey" not in page:
            break
    assert len(dates) == 120 and dates == sorted(dates)

    client.put_item(TableName="ibi-archive-a-items", Item={"label": {"S": "written-after"}})
    again = open_tables(data)  # the next start: nothing copied over what was written since
    assert any(
        item["label"]["S"] == "written-after"
        for item in _everything(again.client())["ibi-archive-a-items"]
    )
