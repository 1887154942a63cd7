"""The tables' schemas, as ``CreateTable``, ``UpdateTable`` and ``UpdateTimeToLive`` change
them: each a row of the ``tables`` table (its key schema, attribute definitions, global
secondary indexes and TTL attribute, as JSON).

A global secondary index is made with its table or added to it (one ``Create`` per
``UpdateTable``, as DynamoDB), from the items the table holds at once (DynamoDB's backfill,
without its wait). TTL: the ``expires`` column of each item follows the table's TTL
attribute (:func:`~ibi_tools.local.tables.storage.note_expiry`).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ibi_tools.local.tables.schema import Table
from ibi_tools.local.tables.storage import Transaction, note_expiry
from ibi_tools.local.tables.values import Invalid, fail


def create_table(
    connection: sqlite3.Connection,
    name: str,
    key_schema: list[dict[str, str]],
    definitions: list[dict[str, str]],
    indexes: list[dict[str, Any]] | None,
) -> Table:
    """The table made (ResourceInUseException: one of that name exists)."""
    schema: dict[str, Any] = {"KeySchema": key_schema, "AttributeDefinitions": definitions}
    if indexes:
        schema["GlobalSecondaryIndexes"] = indexes
    try:
        table = Table(name, schema)
        table.check_definitions()
        schema["GlobalSecondaryIndexes"] = [i.spec() for i in table.indexes.values()]
        if not schema["GlobalSecondaryIndexes"]:
            del schema["GlobalSecondaryIndexes"]
        table = Table(name, schema)
    except (KeyError, TypeError, AttributeError):
        raise fail("ValidationException", "malformed key schema", "CreateTable") from None
    try:
        connection.execute(
            "INSERT INTO tables (name, schema) VALUES (?, ?)", (name, json.dumps(schema))
        )
    except sqlite3.IntegrityError:
        raise fail(
            "ResourceInUseException", f"Table already exists: {name}", "CreateTable"
        ) from None
    return table


def add_index(
    connection: sqlite3.Connection,
    table: Table,
    definitions: list[dict[str, str]],
    updates: list[dict[str, Any]],
) -> Table:
    """``table`` with the global secondary index ``updates`` creates, its entries made from
    the items the table holds."""
    spec = updates[0].get("Create") if isinstance(updates, list) and len(updates) == 1 else None
    if not isinstance(spec, dict) or set(updates[0]) != {"Create"}:
        raise fail(
            "ValidationException",
            "local mode's tables take one GlobalSecondaryIndexUpdates Create per call",
            "UpdateTable",
        )
    if spec.get("IndexName") in table.indexes:
        raise fail(
            "ValidationException",
            f"Attempting to create an index which already exists: {spec.get('IndexName')}",
            "UpdateTable",
        )
    schema = dict(table.schema)
    defined = {d["AttributeName"]: d for d in table.schema["AttributeDefinitions"]}
    defined.update({d["AttributeName"]: d for d in definitions})
    schema["AttributeDefinitions"] = list(defined.values())
    schema["GlobalSecondaryIndexes"] = [
        *(i.spec() for i in table.indexes.values()),
        {k: spec[k] for k in ("IndexName", "KeySchema", "Projection") if k in spec},
    ]
    try:
        updated = Table(table.name, schema)
        updated.check_definitions()
    except (KeyError, TypeError, AttributeError):
        raise fail("ValidationException", "malformed index schema", "UpdateTable") from None
    index = updated.indexes[spec["IndexName"]]
    with Transaction(connection):
        rows = connection.execute(
            "SELECT pk, sk, item FROM items WHERE tbl = ?", (table.name,)
        ).fetchall()
        entries = []
        for pk, sk, text in rows:
            try:
                entry = index.entry(json.loads(text))
            except Invalid:
                entry = None  # (DynamoDB reports such items as violations, not indexed)
            if entry is not None:
                entries.append((table.name, index.name, *entry, pk, sk))
        connection.executemany(
            "INSERT INTO index_entries (tbl, idx, ipk, isk, pk, sk) VALUES (?, ?, ?, ?, ?, ?)",
            entries,
        )
        connection.execute(
            "UPDATE tables SET schema = ? WHERE name = ?", (json.dumps(schema), table.name)
        )
    return updated


def set_time_to_live(
    connection: sqlite3.Connection, table: Table, specification: dict[str, Any]
) -> Table:
    """``table`` with its TTL turned on (on the attribute the specification names) or off;
    as DynamoDB, asking for the state it is in is an error."""
    enabled = specification.get("Enabled")
    attribute = specification.get("AttributeName")
    if not isinstance(enabled, bool) or not isinstance(attribute, str) or not attribute:
        raise fail(
            "ValidationException",
            "TimeToLiveSpecification takes Enabled and AttributeName",
            "UpdateTimeToLive",
        )
    if enabled == (table.ttl is not None):  # as DynamoDB: no change is an error
        state = "enabled" if enabled else "disabled"
        raise fail("ValidationException", f"TimeToLive is already {state}", "UpdateTimeToLive")
    schema = dict(table.schema)
    if enabled:
        schema["TimeToLive"] = attribute
    else:
        schema.pop("TimeToLive", None)
    with Transaction(connection):
        connection.execute(
            "UPDATE tables SET schema = ? WHERE name = ?", (json.dumps(schema), table.name)
        )
        note_expiry(connection, table.name, schema.get("TimeToLive"))
    return Table(table.name, schema)
