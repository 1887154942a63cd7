"""The facade: :class:`LocalTables` (one federation's file) and :class:`LocalTablesClient`,
which takes the DynamoDB calls the stores make, with boto3's names and arguments, and answers
them as DynamoDB does, failures as botocore ``ClientError`` with DynamoDB's error codes.

Each call is checked against the contract (``contract.py``) and against the parameters its
method takes, then run: a write in one transaction (``storage.py``), its expressions parsed
and evaluated (``expressions.py``, ``evaluation.py``), a read of a page (``queries.py``), a
change of a table's schema (``catalog.py``).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from functions.shared.dynamo import FULL_DISK
from ibi_tools.local.tables import catalog, queries, storage
from ibi_tools.local.tables.contract import check_shape
from ibi_tools.local.tables.evaluation import (
    Scope,
    apply_update,
    holds,
    projected,
    scope_ready,
)
from ibi_tools.local.tables.expressions import parse_condition, parse_update
from ibi_tools.local.tables.schema import Table
from ibi_tools.local.tables.storage import Transaction
from ibi_tools.local.tables.values import (
    ITEM_LIMIT,
    Invalid,
    Record,
    checked_item,
    fail,
    item_size,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SWEEP_SECONDS = 60.0  # how often a client removes a TTL table's expired items, at most


class LocalTables:
    """The tables of one local federation, in one SQLite file (made 0600 if missing)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        storage.prepare(self.path)

    def client(self) -> DynamoDBClient:
        """A client for the stores (the part of boto3's DynamoDB client they use)."""
        return cast("DynamoDBClient", LocalTablesClient(self.path))

    def checkpoint(self) -> None:
        """Everything the write-ahead log holds, written into the file itself."""
        storage.checkpoint(self.path)


# Every connection a client opened, held until :meth:`LocalTablesClient.close`: never closed
# by the garbage collector. A connection made before a fork (by the parent of the gateway's
# workers, say) and collected in the child would be closed there, and closing a database
# file releases every POSIX lock the process holds on it, and may checkpoint and delete the
# write-ahead log under the other processes: committed writes lost (SQLite's "How To
# Corrupt", 2.6). Held here, such a connection is never touched in the child.
_OPEN: set[sqlite3.Connection] = set()

_SNAKE = re.compile(r"(?<=[a-z])(?=[A-Z])")


def _operation(name: str) -> Callable[..., dict[str, Any]]:
    def call(self: LocalTablesClient, **api_params: Any) -> dict[str, Any]:
        return self._make_api_call(name, api_params)

    call.__name__ = _SNAKE.sub("_", name).lower()
    return call


@lru_cache(maxsize=32)
def _parameters(method: Callable[..., Any]) -> frozenset[str]:
    return frozenset(inspect.signature(method).parameters) - {"self"}


class LocalTablesClient:
    """The subset of boto3's DynamoDB client the stores use, over :class:`LocalTables`.

    A connection per process and thread (made at first use, so a client built before the
    gateway forks its workers works in each of them).
    """

    def __init__(self, path: Path, *, sweep_seconds: float = SWEEP_SECONDS) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._tables: dict[str, Table] = {}
        self.sweep_seconds = sweep_seconds
        self._swept: dict[str, float] = {}  # table -> when this client last removed expired items

    # One entry point, as botocore's ``BaseClient._make_api_call`` (the tests' IAM check
    # records calls there): the operation's name and its parameters.
    get_item = _operation("GetItem")
    put_item = _operation("PutItem")
    update_item = _operation("UpdateItem")
    delete_item = _operation("DeleteItem")
    batch_get_item = _operation("BatchGetItem")
    scan = _operation("Scan")
    query = _operation("Query")
    list_tables = _operation("ListTables")
    create_table = _operation("CreateTable")
    describe_table = _operation("DescribeTable")
    update_table = _operation("UpdateTable")
    update_time_to_live = _operation("UpdateTimeToLive")
    describe_time_to_live = _operation("DescribeTimeToLive")

    def _make_api_call(self, operation_name: str, api_params: dict[str, Any]) -> dict[str, Any]:
        check_shape(operation_name, api_params)
        method = getattr(self, "_" + _SNAKE.sub("_", operation_name).lower())
        accepted = _parameters(method.__func__)
        unknown = sorted(set(api_params) - accepted)
        if unknown:
            raise fail(
                "ValidationException",
                f"parameters local mode's tables do not take: {', '.join(unknown)}",
                operation_name,
            )
        answer: dict[str, Any] = method(**api_params)
        return answer

    def close(self) -> None:
        """Close this thread's connection (another opens at the next call)."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is not None and self._local.pid == os.getpid():
            _OPEN.discard(connection)
            connection.close()
        self._local.connection = None

    def items(self, table_name: str) -> Iterator[Record]:
        """Every item of a table (for copying and inspection, not a DynamoDB call)."""
        for (item,) in self._connection().execute(
            "SELECT item FROM items WHERE tbl = ? ORDER BY pk, sk", (table_name,)
        ):
            yield json.loads(item)

    # -- plumbing ----------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None or self._local.pid != pid:
            connection = storage.connect(self.path)
            _OPEN.add(connection)
            self._local.connection, self._local.pid = connection, pid
        return connection

    def _table(self, name: Any, operation: str) -> Table:
        if not isinstance(name, str):
            raise fail("ValidationException", "TableName is required", operation)
        table = self._tables.get(name)
        if table is None:
            row = (
                self._connection()
                .execute("SELECT schema FROM tables WHERE name = ?", (name,))
                .fetchone()
            )
            if row is None:
                raise fail(
                    "ResourceNotFoundException", f"Requested resource not found: {name}", operation
                )
            table = self._tables[name] = Table(name, json.loads(row[0]))
        return table

    def _current(self, table: Table, key: tuple[str, str]) -> tuple[Table, Record | None]:
        """The table as its row says now and the item at ``key``, in one statement of a
        write's transaction: another client may have turned the table's TTL on or off since
        this one read its schema."""
        schema, item = (
            self._connection()
            .execute(
                "SELECT (SELECT schema FROM tables WHERE name = ?),"
                " (SELECT item FROM items WHERE tbl = ? AND pk = ? AND sk = ?)",
                (table.name, table.name, *key),
            )
            .fetchone()
        )
        if schema is not None and schema != table.text:
            table = self._tables[table.name] = Table(table.name, json.loads(schema))
        return table, (json.loads(item) if item is not None else None)

    def _read(self, table: Table, key: tuple[str, str]) -> Record | None:
        row = (
            self._connection()
            .execute(
                "SELECT item FROM items WHERE tbl = ? AND pk = ? AND sk = ?", (table.name, *key)
            )
            .fetchone()
        )
        return json.loads(row[0]) if row else None

    def _write(
        self,
        table: Table,
        key: tuple[str, str],
        change: Callable[[Record | None], Record | None],
    ) -> Record | None:
        """Run ``change`` on the item at ``key`` in one write transaction; store what it
        returns (None: delete). Gives back the item as it was."""
        with Transaction(self._connection()) as connection:
            table, old = self._current(table, key)
            new = change(old)
            entries = table.entries(new) if new is not None else []  # (refused before a write)
            if table.indexes and old is not None:
                connection.execute(
                    "DELETE FROM index_entries WHERE tbl = ? AND pk = ? AND sk = ?",
                    (table.name, *key),
                )
            if new is None:
                if old is not None:
                    connection.execute(
                        "DELETE FROM items WHERE tbl = ? AND pk = ? AND sk = ?",
                        (table.name, *key),
                    )
            else:
                stored = json.dumps(new, separators=(",", ":"))
                # (ASCII, never shorter than the item's size: counted only when it might be over)
                if len(stored) > ITEM_LIMIT and item_size(new) > ITEM_LIMIT:
                    raise Invalid("Item size has exceeded the maximum allowed size")
                connection.execute(
                    "INSERT OR REPLACE INTO items (tbl, pk, sk, item, expires) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (table.name, *key, stored, table.expiry(new)),
                )
                connection.executemany(
                    "INSERT INTO index_entries (tbl, idx, ipk, isk, pk, sk) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [(table.name, *entry, *key) for entry in entries],
                )
        if table.ttl is not None:
            self._expire(table)
        return old

    def _expire(self, table: Table) -> None:
        """Remove the table's expired items, at most once per :attr:`sweep_seconds` per client
        (TTL, as DynamoDB applies it: items whose TTL attribute, a number of seconds since 1970,
        has passed; until then a read may still find them, as in DynamoDB)."""
        now = time.monotonic()
        if now - self._swept.get(table.name, float("-inf")) < self.sweep_seconds:
            return
        self._swept[table.name] = now
        connection, moment = self._connection(), time.time()
        if not table.indexes:
            connection.execute(
                "DELETE FROM items WHERE tbl = ? AND expires < ?", (table.name, moment)
            )
            return
        with Transaction(connection):  # (TTL deletions leave the indexes too)
            connection.execute(
                "DELETE FROM index_entries WHERE tbl = ? AND (pk, sk) IN"
                " (SELECT pk, sk FROM items WHERE tbl = ? AND expires < ?)",
                (table.name, table.name, moment),
            )
            connection.execute(
                "DELETE FROM items WHERE tbl = ? AND expires < ?", (table.name, moment)
            )

    def _guard(self, operation: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return run()
        except Invalid as error:
            raise fail("ValidationException", str(error), operation) from None
        except sqlite3.OperationalError as error:  # locked past the timeout, disk full…
            if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                where = self.path.resolve().parent
                raise fail(
                    "InternalServerError", f"local tables: {FULL_DISK} {where} is full", operation
                ) from None
            raise fail("InternalServerError", f"local tables: {error}", operation) from None

    @staticmethod
    def _check(
        operation: str,
        condition: str | None,
        old: Record | None,
        scope: Scope,
        on_failure: str = "NONE",
    ) -> None:
        """Refuse the write unless ``condition`` holds; ``on_failure`` ``ALL_OLD`` puts the item
        as it is in the error (ReturnValuesOnConditionCheckFailure)."""
        if condition is None or holds(parse_condition(condition), old or {}, scope):
            return
        more = {"Item": old} if on_failure == "ALL_OLD" and old is not None else {}
        raise fail(
            "ConditionalCheckFailedException", "The conditional request failed", operation, **more
        )

    def _put_or_delete(
        self,
        operation: str,
        table_name: str,
        given: Record,
        *,
        condition: str | None,
        names: dict[str, str] | None,
        values: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """PutItem (``given``: the item) or DeleteItem (``given``: its key), if ``condition``
        holds for the item as it is."""
        put = operation == "PutItem"

        def run() -> dict[str, Any]:
            table = self._table(table_name, operation)
            item = checked_item(given)
            scope = Scope(names, values)
            scope_ready(scope, condition)

            def change(old: Record | None) -> Record | None:
                self._check(operation, condition, old, scope)
                return item if put else None

            self._write(table, table.key_of(item, exact=not put), change)
            return {}

        return self._guard(operation, run)

    # -- items -------------------------------------------------------------------------------

    def _get_item(
        self,
        *,
        TableName: str,
        Key: Record,
        ConsistentRead: bool = False,
        ProjectionExpression: str | None = None,
        ExpressionAttributeNames: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            table = self._table(TableName, "GetItem")
            key = table.key_of(checked_item(Key), exact=True)
            wanted = None
            if ProjectionExpression is not None or ExpressionAttributeNames is not None:
                wanted = projected(ProjectionExpression, ExpressionAttributeNames)
            item = self._read(table, key)
            if item is None:
                return {}
            if wanted is not None:
                item = {name: value for name, value in item.items() if name in wanted}
            return {"Item": item}

        return self._guard("GetItem", run)

    def _put_item(
        self,
        *,
        TableName: str,
        Item: Record,
        ConditionExpression: str | None = None,
        ExpressionAttributeNames: dict[str, str] | None = None,
        ExpressionAttributeValues: dict[str, Any] | None = None,
        ReturnValues: str = "NONE",  # (no store asks for more: the contract refuses it)
        ReturnValuesOnConditionCheckFailure: str = "NONE",
    ) -> dict[str, Any]:
        return self._put_or_delete(
            "PutItem",
            TableName,
            Item,
            condition=ConditionExpression,
            names=ExpressionAttributeNames,
            values=ExpressionAttributeValues,
        )

    def _update_item(
        self,
        *,
        TableName: str,
        Key: Record,
        UpdateExpression: str,
        ConditionExpression: str | None = None,
        ExpressionAttributeNames: dict[str, str] | None = None,
        ExpressionAttributeValues: dict[str, Any] | None = None,
        ReturnValues: str = "NONE",
        ReturnValuesOnConditionCheckFailure: str = "NONE",
    ) -> dict[str, Any]:
        touched: set[str] = set()
        result: dict[str, Record] = {}

        def run() -> dict[str, Any]:
            table = self._table(TableName, "UpdateItem")
            key = checked_item(Key)
            actions = parse_update(UpdateExpression)
            scope = Scope(ExpressionAttributeNames, ExpressionAttributeValues)
            scope_ready(scope, ConditionExpression, actions)

            def change(old: Record | None) -> Record:
                self._check(
                    "UpdateItem",
                    ConditionExpression,
                    old,
                    scope,
                    ReturnValuesOnConditionCheckFailure,
                )
                new, names = apply_update(actions, old or dict(key), scope)
                if names & set(table.types):
                    raise Invalid("an update expression cannot change the key")
                touched.update(names)
                result["new"] = new
                return new

            old = self._write(table, table.key_of(key, exact=True), change) or {}
            new = result["new"]
            chosen = {
                "ALL_NEW": new,
                "ALL_OLD": old,  # (the minting state's write: the reservation it replaced)
                "UPDATED_OLD": {n: old[n] for n in touched if n in old},
                "UPDATED_NEW": {n: new[n] for n in touched if n in new},
            }.get(ReturnValues, {})
            return {"Attributes": chosen} if chosen else {}

        return self._guard("UpdateItem", run)

    def _delete_item(
        self,
        *,
        TableName: str,
        Key: Record,
        ConditionExpression: str | None = None,
        ExpressionAttributeNames: dict[str, str] | None = None,
        ExpressionAttributeValues: dict[str, Any] | None = None,
        ReturnValues: str = "NONE",  # (no store asks for more: the contract refuses it)
        ReturnValuesOnConditionCheckFailure: str = "NONE",
    ) -> dict[str, Any]:
        return self._put_or_delete(
            "DeleteItem",
            TableName,
            Key,
            condition=ConditionExpression,
            names=ExpressionAttributeNames,
            values=ExpressionAttributeValues,
        )

    def _batch_get_item(self, *, RequestItems: dict[str, Any]) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            responses: dict[str, list[Record]] = {}
            for name, request in RequestItems.items():
                table = self._table(name, "BatchGetItem")
                keys = [table.key_of(checked_item(k), exact=True) for k in request["Keys"]]
                if not 0 < len(keys) <= 100 or len(set(keys)) != len(keys):
                    raise Invalid("BatchGetItem takes 1 to 100 distinct keys per table")
                found = responses.setdefault(name, [])
                for key in keys:
                    item = self._read(table, key)
                    if item is not None:
                        found.append(item)
            return {"Responses": responses, "UnprocessedKeys": {}}

        return self._guard("BatchGetItem", run)

    def _scan(
        self,
        *,
        TableName: str,
        Limit: int | None = None,
        ExclusiveStartKey: Record | None = None,
        FilterExpression: str | None = None,
        ExpressionAttributeNames: dict[str, str] | None = None,
        ExpressionAttributeValues: dict[str, Any] | None = None,
        ConsistentRead: bool = False,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            table = self._table(TableName, "Scan")
            scope = Scope(ExpressionAttributeNames, ExpressionAttributeValues)
            page = queries.Page(scope, Limit, ExclusiveStartKey, FilterExpression)
            return queries.scan(self._connection(), table, page)

        return self._guard("Scan", run)

    def _query(
        self,
        *,
        TableName: str,
        KeyConditionExpression: str,
        ExpressionAttributeNames: dict[str, str] | None = None,
        ExpressionAttributeValues: dict[str, Any] | None = None,
        FilterExpression: str | None = None,
        Limit: int | None = None,
        ExclusiveStartKey: Record | None = None,
        ScanIndexForward: bool = True,
        ConsistentRead: bool = False,
        IndexName: str | None = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            table = self._table(TableName, "Query")
            scope = Scope(ExpressionAttributeNames, ExpressionAttributeValues)
            page = queries.Page(
                scope, Limit, ExclusiveStartKey, FilterExpression, forward=ScanIndexForward
            )
            return queries.query(
                self._connection(),
                table,
                page,
                key_condition=KeyConditionExpression,
                index_name=IndexName,
                consistent=ConsistentRead,
            )

        return self._guard("Query", run)

    # -- tables ------------------------------------------------------------------------------

    def _list_tables(self) -> dict[str, Any]:
        rows = self._connection().execute("SELECT name FROM tables ORDER BY name").fetchall()
        return {"TableNames": [row[0] for row in rows]}

    def _create_table(
        self,
        *,
        TableName: str,
        KeySchema: list[dict[str, str]],
        AttributeDefinitions: list[dict[str, str]],
        BillingMode: str = "PAY_PER_REQUEST",
        GlobalSecondaryIndexes: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        table = catalog.create_table(
            self._connection(), TableName, KeySchema, AttributeDefinitions, GlobalSecondaryIndexes
        )
        return {"TableDescription": table.description()}

    def _update_table(
        self,
        *,
        TableName: str,
        AttributeDefinitions: list[dict[str, str]],
        GlobalSecondaryIndexUpdates: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """Add a global secondary index to a table (one per call, as DynamoDB), made from the
        items it holds at once (DynamoDB's backfill, without its wait)."""
        table = self._table(TableName, "UpdateTable")
        updated = catalog.add_index(
            self._connection(), table, AttributeDefinitions, GlobalSecondaryIndexUpdates
        )
        self._tables[TableName] = updated
        return {"TableDescription": updated.description()}

    def _describe_table(self, *, TableName: str) -> dict[str, Any]:
        return {"Table": self._table(TableName, "DescribeTable").description()}

    def _update_time_to_live(
        self, *, TableName: str, TimeToLiveSpecification: dict[str, Any]
    ) -> dict[str, Any]:
        table = self._table(TableName, "UpdateTimeToLive")
        updated = catalog.set_time_to_live(self._connection(), table, TimeToLiveSpecification)
        self._tables[TableName] = updated
        enabled, attribute = (TimeToLiveSpecification[k] for k in ("Enabled", "AttributeName"))
        return {"TimeToLiveSpecification": {"Enabled": enabled, "AttributeName": attribute}}

    def _describe_time_to_live(self, *, TableName: str) -> dict[str, Any]:
        table = self._table(TableName, "DescribeTimeToLive")
        if table.ttl is None:
            return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}
        return {
            "TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": table.ttl}
        }
