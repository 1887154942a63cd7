"""Key schemas: a table's, and its global secondary indexes'.

A key attribute's value is stored as a text that sorts as the value does (a Number's too:
:func:`~ibi_tools.local.tables.values.sortable_number`), so SQLite's order of ``(pk, sk)``,
and of an index's ``(ipk, isk)``, is DynamoDB's. An index is sparse, as DynamoDB's: an item
lacking one of its key attributes is not in it; one of the wrong type, or an empty string, is
refused as DynamoDB refuses it.
"""

from __future__ import annotations

import json
from typing import Any

from ibi_tools.local.tables.values import Invalid, Record, number, sortable_number


class Keys:
    """A key schema (a table's, or a global secondary index's): its partition key, its sort
    key if any, their types, and their values as stored (texts that sort as the values do)."""

    def __init__(self, key_schema: list[dict[str, str]], definitions: list[dict[str, str]]) -> None:
        types = {d["AttributeName"]: d["AttributeType"] for d in definitions}
        keys = {k["KeyType"]: k["AttributeName"] for k in key_schema}
        if set(keys) - {"HASH", "RANGE"} or len(keys) != len(key_schema):
            raise KeyError("KeySchema")
        self.hash = keys["HASH"]
        self.range = keys.get("RANGE")
        self.types = {n: types[n] for n in (self.hash, self.range) if n is not None}

    def stored(self, name: str | None, value: Any) -> str:
        """A key attribute's value as stored (sort keys of type N: a text that sorts as the
        number does); "" for the sort key of a table without one."""
        if name is None:
            return ""
        kind = self.types[name]
        if not isinstance(value, dict) or set(value) != {kind}:
            raise Invalid(f"the key attribute {name} is missing or not of type {kind}")
        if kind == "N":
            return sortable_number(number(value[kind]))
        if not value[kind]:
            raise Invalid(f"the key attribute {name} is an empty string")
        return str(value[kind])


class Index(Keys):
    """A global secondary index: its key schema and what it projects. Sparse, as DynamoDB's:
    an item lacking either of its key attributes is not in it."""

    def __init__(self, spec: dict[str, Any], definitions: list[dict[str, str]]) -> None:
        super().__init__(spec["KeySchema"], definitions)
        self.name: str = spec["IndexName"]
        projection = spec["Projection"]
        self.projection: str = projection["ProjectionType"]
        self.included = frozenset(projection.get("NonKeyAttributes", ()))
        if self.projection not in ("ALL", "KEYS_ONLY", "INCLUDE"):
            raise KeyError("ProjectionType")
        if bool(self.included) != (self.projection == "INCLUDE"):
            raise KeyError("NonKeyAttributes")

    def entry(self, item: Record) -> tuple[str, str] | None:
        """``(ipk, isk)`` of ``item`` in this index, or None when it lacks a key attribute
        (ValidationException, as DynamoDB's: one of another type, or an empty string)."""
        if any(name not in item for name in self.types):
            return None
        for name, kind in self.types.items():
            actual = next(iter(item[name]))
            if actual != kind:
                raise Invalid(
                    "One or more parameter values were invalid: Type mismatch for Index Key"
                    f" {name} Expected: {kind} Actual: {actual} IndexName: {self.name}"
                )
            if not item[name][kind]:
                raise Invalid(
                    "One or more parameter values are not valid. The AttributeValue for a key"
                    f" attribute cannot contain an empty string value. IndexName: {self.name},"
                    f" IndexKey: {name}"
                )
        sort = item[self.range] if self.range is not None else None
        return self.stored(self.hash, item[self.hash]), self.stored(self.range, sort)

    def spec(self) -> dict[str, Any]:
        projection: dict[str, Any] = {"ProjectionType": self.projection}
        if self.included:
            projection["NonKeyAttributes"] = sorted(self.included)
        return {
            "IndexName": self.name,
            "KeySchema": [
                {"AttributeName": n, "KeyType": k}
                for n, k in ((self.hash, "HASH"), (self.range, "RANGE"))
                if n is not None
            ],
            "Projection": projection,
        }


class Table(Keys):
    def __init__(self, name: str, schema: dict[str, Any]) -> None:
        super().__init__(schema["KeySchema"], schema["AttributeDefinitions"])
        self.name = name
        self.schema = schema
        self.text = json.dumps(schema)  # as its row holds it
        self.ttl: str | None = schema.get("TimeToLive")  # the attribute, when TTL is on
        definitions = schema["AttributeDefinitions"]
        self.indexes = {
            spec["IndexName"]: Index(spec, definitions)
            for spec in schema.get("GlobalSecondaryIndexes", ())
        }
        if len(self.indexes) != len(schema.get("GlobalSecondaryIndexes", ())):
            raise KeyError("IndexName")

    def check_definitions(self) -> None:
        """Refuse attribute definitions that are not exactly the key attributes of the table
        and its indexes (as DynamoDB's CreateTable and UpdateTable)."""
        used = set(self.types).union(*(index.types for index in self.indexes.values()))
        if {d["AttributeName"] for d in self.schema["AttributeDefinitions"]} != used:
            raise KeyError("AttributeDefinitions")

    def expiry(self, item: Record) -> float | None:
        """When ``item`` expires (the TTL attribute, a number), or None."""
        value = item.get(self.ttl) if self.ttl is not None else None
        if isinstance(value, dict) and "N" in value:
            return float(number(value["N"]))
        return None

    def key_of(self, item: Record, *, exact: bool) -> tuple[str, str]:
        """``(pk, sk)`` of an item or key, as stored; ``exact``: nothing but the key."""
        if exact and set(item) != set(self.types):
            raise Invalid("the provided key element does not match the schema")
        sort = self.stored(self.range, item.get(self.range)) if self.range else ""
        return self.stored(self.hash, item.get(self.hash)), sort

    def key_item(self, item: Record) -> Record:
        return {n: item[n] for n in self.types}

    def entries(self, item: Record) -> list[tuple[str, str, str]]:
        """``(index, ipk, isk)`` of each index ``item`` is in."""
        found = ((name, index.entry(item)) for name, index in self.indexes.items())
        return [(name, *entry) for name, entry in found if entry is not None]

    def description(self) -> dict[str, Any]:
        described = {
            "TableName": self.name,
            "TableStatus": "ACTIVE",
            "KeySchema": self.schema["KeySchema"],
            "AttributeDefinitions": self.schema["AttributeDefinitions"],
        }
        if self.indexes:
            described["GlobalSecondaryIndexes"] = [
                {**index.spec(), "IndexStatus": "ACTIVE"} for index in self.indexes.values()
            ]
        return described
