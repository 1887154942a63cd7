"""Query and Scan: pages of a table, or of a global secondary index, read from SQLite.

A page ends at ``Limit`` (counting the items read, before the filter), never at 1 MB; its
``LastEvaluatedKey`` is the last item's key (an index's: the table's key and the index's).
A Query of an index reads its entries in the order of the index's sort key, then of the
table's key (moto's order for equal index keys too), forwards or backwards, and gives each
item as the index projects it (``KEYS_ONLY``, ``INCLUDE``, ``ALL``).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from ibi_tools.local.tables.evaluation import Scope, holds, scope_ready
from ibi_tools.local.tables.expressions import parse_condition
from ibi_tools.local.tables.schema import Index, Keys, Table
from ibi_tools.local.tables.values import Invalid, Record, checked_item, order


@dataclass(frozen=True, slots=True)
class Page:
    """What a Query or Scan asks of its page: its expressions' names and values, at most
    ``limit`` items read, after the key ``start``, forwards or backwards, those the filter
    ``expression`` keeps."""

    scope: Scope
    limit: int | None
    start: Record | None
    expression: str | None
    forward: bool = True


def scan(connection: sqlite3.Connection, table: Table, page: Page) -> dict[str, Any]:
    """A Scan's page: the table's items in the order of its key."""
    scope_ready(page.scope, page.expression)
    sql = "SELECT pk, sk, item FROM items WHERE tbl = ?"
    parameters: list[Any] = [table.name]
    if page.start is not None:
        pk, sk = table.key_of(checked_item(page.start), exact=True)
        sql += " AND (pk > ? OR (pk = ? AND sk > ?))"
        parameters += [pk, pk, sk]
    rows = _rows(connection, sql + " ORDER BY pk, sk", parameters, page.limit)
    return _filtered(table, rows, page)


def query(
    connection: sqlite3.Connection,
    table: Table,
    page: Page,
    *,
    key_condition: str,
    index_name: str | None,
    consistent: bool,
) -> dict[str, Any]:
    """A Query's page: the items of one partition of the table, or of the index
    ``index_name``, in the order of the sort key."""
    node = parse_condition(key_condition)
    if index_name is not None:
        if consistent:
            raise Invalid("Consistent reads are not supported on global secondary indexes")
        index = table.indexes.get(index_name)
        if index is None:
            raise Invalid(f"The table does not have the specified index: {index_name}")
        return _query_index(connection, table, index, node, page)
    conditions, parameters = _key_condition(table, node, page.scope)
    sql = "SELECT pk, sk, item FROM items WHERE tbl = ?"
    sql += conditions
    parameters = [table.name, *parameters]
    scope_ready(page.scope, page.expression)
    if page.start is not None:
        _, sk = table.key_of(checked_item(page.start), exact=True)
        sql += " AND sk > ?" if page.forward else " AND sk < ?"
        parameters.append(sk)
    way = "sk" if page.forward else "sk DESC"  # (the minting record, newest first)
    rows = _rows(connection, f"{sql} ORDER BY {way}", parameters, page.limit)
    return _filtered(table, rows, page)


def _rows(
    connection: sqlite3.Connection, sql: str, parameters: list[Any], limit: int | None
) -> list[Any]:
    """The rows ``sql`` selects, at most ``limit`` of them."""
    if limit is not None:
        if not isinstance(limit, int) or limit < 1:
            raise Invalid("Limit must be at least 1")
        sql += " LIMIT ?"
        parameters = [*parameters, limit]
    return connection.execute(sql, parameters).fetchall()


def _filtered(table: Table, rows: list[Any], page: Page) -> dict[str, Any]:
    """A page as DynamoDB gives it: ``Limit`` counts the items read, before the filter."""
    items = [json.loads(row[2]) for row in rows]
    scanned = len(items)
    if page.expression is not None:
        node = parse_condition(page.expression)
        items = [item for item in items if holds(node, item, page.scope)]
    answer: dict[str, Any] = {"Items": items, "Count": len(items), "ScannedCount": scanned}
    if page.limit is not None and scanned == page.limit:
        answer["LastEvaluatedKey"] = table.key_item(json.loads(rows[-1][2]))
    return answer


def _key_condition(
    keys: Keys, node: tuple[Any, ...], scope: Scope, *, pk: str = "pk", sk: str = "sk"
) -> tuple[str, list[Any]]:
    """SQL conditions (`` AND …``, on the columns ``pk`` and ``sk``) for a
    KeyConditionExpression on ``keys`` (a table's or an index's): the partition key's equality
    and, maybe, one comparison or ``BETWEEN`` on the sort key."""
    parts = [node[1], node[2]] if node[0] == "and" else [node]
    sql = ""
    parameters: list[Any] = []
    seen: set[str] = set()
    for part in parts:
        between = part[0] == "between"
        if not (between or part[0] == "compare"):
            raise Invalid("invalid KeyConditionExpression")
        path, values = (part[1], part[2:]) if between else (part[2], part[3:])
        if path[0] != "path" or any(value[0] != "value" for value in values):
            raise Invalid("invalid KeyConditionExpression")
        name = scope.name(path[1])
        given = [scope.value(value[1]) for value in values]
        if name in seen or name not in keys.types:
            raise Invalid(f"invalid KeyConditionExpression: {name} is not a key or is repeated")
        seen.add(name)
        if name == keys.hash:
            if between or part[1] != "=":
                raise Invalid("the partition key's condition must be an equality")
            sql += f" AND {pk} = ?"
        elif between:
            if order(given[0], given[1]) == 1:
                raise Invalid(
                    "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound"
                    " to be greater than or equal to lower bound"
                )
            sql += f" AND {sk} BETWEEN ? AND ?"
        elif part[1] == "<>":
            raise Invalid("invalid KeyConditionExpression: <> on a key")
        else:
            sql += f" AND {sk} {part[1]} ?"
        parameters += [keys.stored(name, value) for value in given]
    if keys.hash not in seen:
        raise Invalid("the KeyConditionExpression must name the partition key")
    return sql, parameters


def _query_index(
    connection: sqlite3.Connection, table: Table, index: Index, node: tuple[Any, ...], page: Page
) -> dict[str, Any]:
    """A Query of a global secondary index: its entries in the order of its sort key, then
    of the table's key (items with equal index keys); ``LastEvaluatedKey`` holds the
    table's key and the index's, as DynamoDB's; each item as the index projects it."""
    conditions, parameters = _key_condition(index, node, page.scope, pk="e.ipk", sk="e.isk")
    scope_ready(page.scope, page.expression)
    sql = (
        "SELECT e.pk, e.sk, i.item FROM index_entries e JOIN items i"
        " ON i.tbl = e.tbl AND i.pk = e.pk AND i.sk = e.sk"
        " WHERE e.tbl = ? AND e.idx = ?"
    )
    sql += conditions
    parameters = [table.name, index.name, *parameters]
    if page.start is not None:
        start = checked_item(page.start)
        if set(start) != set(table.types) | set(index.types):
            raise Invalid("The provided starting key is invalid")
        position = index.entry(start)
        if position is None:
            raise Invalid("The provided starting key is invalid")
        sql += f" AND (e.ipk, e.isk, e.pk, e.sk) {'>' if page.forward else '<'} (?, ?, ?, ?)"
        parameters += [*position, *table.key_of(start, exact=False)]
    way = "" if page.forward else " DESC"
    sql += f" ORDER BY e.ipk{way}, e.isk{way}, e.pk{way}, e.sk{way}"
    rows = _rows(connection, sql, parameters, page.limit)
    items = [json.loads(row[2]) for row in rows]
    answer = _filtered(table, rows, page)
    keys = set(table.types) | set(index.types)
    if index.projection != "ALL":
        kept = keys | index.included
        answer["Items"] = [{n: v for n, v in i.items() if n in kept} for i in answer["Items"]]
    if "LastEvaluatedKey" in answer:
        answer["LastEvaluatedKey"] = {n: items[-1][n] for n in keys}
    return answer
