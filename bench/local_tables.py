"""Microseconds per call of local mode's tables, on the stores' own call shapes.

    .venv/bin/python -m bench.local_tables [--calls N]

Each figure is the median of five runs of N calls on one client, in one process, to a fresh
SQLite file in a temporary directory (WAL, ``synchronous=NORMAL``, as ``ibi local`` opens it).
The calls are the minting state's conditional update, the record's conditional put, an
Archive's access count (a conditional ADD) and a consistent read: the writes every mint and
resolution makes (docs/decisions.md, "Local mode's tables").
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ibi_tools.local.tables import LocalTables

STATE: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "subsystem", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "subsystem", "AttributeType": "S"}],
}
RECORD: dict[str, Any] = {
    "KeySchema": [
        {"AttributeName": "subsystem", "KeyType": "HASH"},
        {"AttributeName": "first_date", "KeyType": "RANGE"},
    ],
    "AttributeDefinitions": [
        {"AttributeName": "subsystem", "AttributeType": "S"},
        {"AttributeName": "first_date", "AttributeType": "N"},
    ],
}
ITEMS: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "label", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "label", "AttributeType": "S"}],
}


def _calls(client: Any) -> dict[str, Callable[[int], Any]]:
    def advance(i: int) -> Any:
        return client.update_item(
            TableName="state",
            Key={"subsystem": {"S": "default"}},
            UpdateExpression="SET #last = :new, granularity = :granularity ADD minted_count :count",
            ConditionExpression="attribute_not_exists(#subsystem) OR #last < :first",
            ExpressionAttributeNames={"#last": "last_date", "#subsystem": "subsystem"},
            ExpressionAttributeValues={
                ":new": {"N": str(20250101000000 + i)},
                ":granularity": {"S": "0.0001"},
                ":count": {"N": "1"},
                ":first": {"N": str(20250101000000 + i)},
            },
            ReturnValues="ALL_OLD",  # (as the minting store's write)
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    def put_record(i: int) -> Any:
        return client.put_item(
            TableName="record",
            Item={
                "subsystem": {"S": "default"},
                "first_date": {"N": str(20250101000000 + i)},
                "dates": {"S": str(20250101000000 + i)},
                "count": {"N": "1"},
                "requester": {"S": "bench"},
                "request_id": {"S": f"request-{i}"},
                "recorded_at": {"N": "1735689600"},
            },
            ConditionExpression="attribute_not_exists(#subsystem)",
            ExpressionAttributeNames={"#subsystem": "subsystem"},
        )

    def count_access(i: int) -> Any:
        return client.update_item(
            TableName="items",
            Key={"label": {"S": "J8LNKAN8RW/49JT9S9"}},
            UpdateExpression="ADD access_count :one",
            ConditionExpression=(
                "attribute_exists(#label) AND (attribute_not_exists(#state) OR #state <> :deleted)"
            ),
            ExpressionAttributeNames={"#label": "label", "#state": "state"},
            ExpressionAttributeValues={":one": {"N": "1"}, ":deleted": {"S": "deleted"}},
            ReturnValues="UPDATED_NEW",
        )

    def read(i: int) -> Any:
        return client.get_item(
            TableName="items", Key={"label": {"S": "J8LNKAN8RW/49JT9S9"}}, ConsistentRead=True
        )

    return {
        "conditional update (minting state)": advance,
        "conditional put (minting record)": put_record,
        "conditional ADD (access count)": count_access,
        "consistent read": read,
    }


def measure(calls: int) -> dict[str, float]:
    """Median microseconds per call of each kind."""
    with tempfile.TemporaryDirectory() as directory:
        tables = LocalTables(Path(directory) / "tables.sqlite3")
        client = tables.client()
        for name, schema in (("state", STATE), ("record", RECORD), ("items", ITEMS)):
            client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **schema)
        client.put_item(
            TableName="items",
            Item={"label": {"S": "J8LNKAN8RW/49JT9S9"}, "data": {"S": "{}" * 400}},
        )
        figures: dict[str, float] = {}
        serial = 0
        for name, call in _calls(client).items():
            runs = []
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(calls):
                    serial += 1
                    call(serial)
                runs.append((time.perf_counter() - start) / calls * 1e6)
            figures[name] = statistics.median(runs)
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    arguments = parser.parse_args()
    for name, microseconds in measure(arguments.calls).items():
        print(f"{name:38} {microseconds:7.1f} µs")


if __name__ == "__main__":
    main()
