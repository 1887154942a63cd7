"""Local mode's tables: the DynamoDB calls the stores make, answered in process from SQLite.

The data-access layers (``functions/*/store.py``, ``registry.py``, ``throttle.py``) are
written against boto3's DynamoDB client and nothing else. In AWS they get one; in local mode
they get a :class:`LocalTablesClient`, which takes the same calls (``get_item``,
``put_item``, ``update_item``, ``delete_item``, ``batch_get_item``, ``query``, ``scan``, and
the table calls ``ensure_table`` makes) with the same arguments, and answers them the way
DynamoDB does: typed attribute values (numbers of at most 38 significant digits, between
1E-130 and 1E+126 in magnitude), items of at most 400 KB counted as DynamoDB counts them,
condition and update expressions, ``ReturnValues``, ``ReturnValuesOnConditionCheckFailure``,
``Limit`` and ``LastEvaluatedKey``, and failures as botocore ``ClientError`` with DynamoDB's
error codes. The stores cannot tell the difference, and the integration tests run them
against both this client and moto (``tests/integration``).

The contract (issue 25): an item call is answered only in a shape some store makes
(:func:`call_shape`: the operation, the forms each expression uses, the choices and paging it
asks for; ``ibi_tools/local/table_shapes.py``, recorded from the test suite by ``python -m
tests.dynamo_shapes``), or in a part of one; any other shape is refused with a
ValidationException naming it. ``tests/unit/test_local_tables_contract.py`` replays every
recorded call on moto and on these tables and compares the answers. The evaluator keeps only
what those shapes use.

Why not a DynamoDB server (local mode ran dynalite before, issue 14): each call then costs an
HTTP request, botocore's serialisation, signing and parsing (about 1 to 1.4 ms of CPU) and the
server's own work (≈ 1 ms); here a call is a SQLite statement in the calling process
(docs/decisions.md, "Local mode's tables").

Every write is one SQLite transaction begun ``IMMEDIATE``: it reads the item, checks the
condition and writes, holding the database's write lock throughout, so conditional writes
are atomic across every worker process and thread (WAL; readers never wait). The file is
``synchronous=NORMAL``: a crash of any process loses nothing; a power cut may lose the last
transactions (as dynalite's LevelDB, which did not sync either).

TTL (``UpdateTimeToLive``): a client removes a table's expired items after a write, at most
once a minute; until then reads may still find them, as in DynamoDB. Each write reads the
table's schema in its transaction, so a TTL another client turned on applies at once.

Not answered (no store uses them): any other expression form (``NOT``, ``BETWEEN``, ``IN``,
``begins_with``, ``contains``, ``size``, ``REMOVE``, ``DELETE``, ``list_append``, arithmetic),
nested attribute paths, binary (``B``, ``BS``) values, secondary indexes, transactions, and
the 1 MB page of Query and Scan (a page ends at ``Limit`` only).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from decimal import Context, Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from functions.shared.dynamo import FULL_DISK
from ibi_tools.local.stores import PRIVATE_FILE
from ibi_tools.local.table_shapes import STORE_SHAPES

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SWEEP_SECONDS = 60.0  # how often a client removes a TTL table's expired items, at most
# DynamoDB numbers: 38 significant digits, magnitude from 1E-130 to 9.99…E+125 ("Naming
# rules and data types", Number). Arithmetic is done wider and its result checked as input is.
NUMBERS = Context(prec=38)
ARITHMETIC = Context(prec=80, Emax=999, Emin=-999)
SMALLEST, LARGEST = -130, 125  # the adjusted exponents allowed
ITEM_LIMIT = 400 * 1024  # bytes, counted as DynamoDB counts them (:func:`item_size`)
SCHEMA = """
CREATE TABLE IF NOT EXISTS tables (name TEXT PRIMARY KEY, schema TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    tbl TEXT NOT NULL, pk TEXT NOT NULL, sk TEXT NOT NULL, item TEXT NOT NULL,
    expires REAL,  -- the TTL attribute's value, when the table has a TTL and it is a number
    PRIMARY KEY (tbl, pk, sk)
) WITHOUT ROWID;
"""
EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS items_expiry ON items (tbl, expires) WHERE expires IS NOT NULL"
)

Record = dict[str, Any]  # an item: attribute names to typed values


def _fail(code: str, message: str, operation: str, **more: Any) -> ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        **more,
    }
    return ClientError(response, operation)


class _Invalid(Exception):
    """A request DynamoDB would refuse (ValidationException)."""


# -- typed values ------------------------------------------------------------------------------


def _number(text: str) -> Decimal:
    """A Number's value, refused as DynamoDB refuses it: not a number, more than 38
    significant digits (never rounded), or a magnitude out of range."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise _Invalid(f"not a number: {text!r}") from None
    if not value.is_finite():
        raise _Invalid(f"not a number: {text!r}")
    return _in_range(value)


def _in_range(value: Decimal) -> Decimal:
    if value.is_zero():
        return value
    digits = value.as_tuple().digits  # (no leading zeros; trailing ones are not significant)
    if len(digits) > 38 and len("".join(map(str, digits)).rstrip("0")) > 38:
        raise _Invalid("Attempting to store more than 38 significant digits in a Number")
    adjusted = value.adjusted()
    if adjusted > LARGEST:
        raise _Invalid(
            "Number overflow. Attempting to store a number with magnitude larger than "
            "supported range"
        )
    if adjusted < SMALLEST:
        raise _Invalid(
            "Number underflow. Attempting to store a number with magnitude smaller than "
            "supported range"
        )
    return value


def _canonical(value: Decimal) -> str:
    """A number as DynamoDB gives it back: no exponent, no trailing zeros."""
    if value.is_zero():
        return "0"
    return format(value.normalize(NUMBERS), "f")


def _sortable_number(value: Decimal) -> str:
    """A text that sorts as the number does (sort keys of type N)."""
    if value.is_zero():
        return "1"
    digits = "".join(map(str, value.normalize(NUMBERS).as_tuple().digits)).rstrip("0") or "0"
    exponent = value.adjusted() + 500
    if value > 0:
        return f"2{exponent:04d}{digits}"
    complement = "".join(str(9 - int(d)) for d in digits)
    return f"0{9999 - exponent:04d}{complement}~"


def _checked(value: Any, where: str) -> Any:
    """A typed attribute value, validated and with its numbers canonical."""
    if not isinstance(value, dict) or len(value) != 1:
        raise _Invalid(f"{where}: not one typed attribute value")
    ((kind, data),) = value.items()
    if kind == "S" and isinstance(data, str):
        return value
    if kind == "N" and isinstance(data, str):
        return {"N": _canonical(_number(data))}
    if kind == "BOOL" and isinstance(data, bool):
        return value
    if kind == "NULL" and data is True:
        return value
    if kind in ("SS", "NS") and isinstance(data, list) and data:
        if kind == "NS":
            data = [_canonical(_number(n)) for n in data]
        if len(set(data)) != len(data):
            raise _Invalid(f"{where}: a set holds duplicates")
        return {kind: list(data)}
    if kind == "L" and isinstance(data, list):
        return {"L": [_checked(v, where) for v in data]}
    if kind == "M" and isinstance(data, dict):
        return {"M": {str(k): _checked(v, where) for k, v in data.items()}}
    if kind in ("B", "BS"):
        raise _Invalid(f"{where}: binary values are not kept by local mode's tables")
    raise _Invalid(f"{where}: {kind} is not an attribute type (or its value is malformed)")


def _equal(a: Any, b: Any) -> bool:
    (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
    if ka != kb:
        return False
    if ka == "N":
        return bool(_number(va) == _number(vb))
    if ka in ("SS", "NS"):
        return {_canonical(_number(x)) if ka == "NS" else x for x in va} == set(
            _canonical(_number(x)) if ka == "NS" else x for x in vb
        )
    return bool(va == vb)


def _order(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 comparing two scalars of one type (S by code point, N by value); None if
    they do not compare (different types, or not scalars)."""
    (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
    if ka != kb or ka not in ("S", "N"):
        return None
    if ka == "N":
        va, vb = _number(va), _number(vb)
    return int(va > vb) - int(va < vb)


# -- expressions -------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(<>|<=|>=|=|<|>|\(|\)|,|\+|-|\.|\[|\])"
    r"|(#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*|[0-9]+))"
)
_COMPARATORS = ("=", "<>", "<", "<=", ">", ">=")
_FUNCTIONS = ("attribute_exists", "attribute_not_exists")
# DynamoDB's reserved words (Developer Guide, "Reserved words in DynamoDB"): an expression
# names such an attribute through a placeholder (``#status``), or DynamoDB refuses it.
_RESERVED_WORDS = """
ABORT ABSOLUTE ACTION ADD AFTER AGENT AGGREGATE ALL ALLOCATE ALTER ANALYZE AND ANY ARCHIVE
ARE ARRAY AS ASC ASCII ASENSITIVE ASSERTION ASYMMETRIC AT ATOMIC ATTACH ATTRIBUTE AUTH
AUTHORIZATION AUTHORIZE AUTO AVG BACK BACKUP BASE BATCH BEFORE BEGIN BETWEEN BIGINT BINARY
BIT BLOB BLOCK BOOLEAN BOTH BREADTH BUCKET BULK BY BYTE CALL CALLED CALLING CAPACITY CASCADE
CASCADED CASE CAST CATALOG CHAR CHARACTER CHECK CLASS CLOB CLOSE CLUSTER CLUSTERED
CLUSTERING CLUSTERS COALESCE COLLATE COLLATION COLLECTION COLUMN COLUMNS COMBINE COMMENT
COMMIT COMPACT COMPILE COMPRESS CONDITION CONFLICT CONNECT CONNECTION CONSISTENCY CONSISTENT
CONSTRAINT CONSTRAINTS CONSTRUCTOR CONSUMED CONTINUE CONVERT COPY CORRESPONDING COUNT
COUNTER CREATE CROSS CUBE CURRENT CURSOR CYCLE DATA DATABASE DATE DATETIME DAY DEALLOCATE
DEC DECIMAL DECLARE DEFAULT DEFERRABLE DEFERRED DEFINE DEFINED DEFINITION DELETE DELIMITED
DEPTH DEREF DESC DESCRIBE DESCRIPTOR DETACH DETERMINISTIC DIAGNOSTICS DIRECTORIES DISABLE
DISCONNECT DISTINCT DISTRIBUTE DO DOMAIN DOUBLE DROP DUMP DURATION DYNAMIC EACH ELEMENT ELSE
ELSEIF EMPTY ENABLE END EQUAL EQUALS ERROR ESCAPE ESCAPED EVAL EVALUATE EXCEEDED EXCEPT
EXCEPTION EXCEPTIONS EXCLUSIVE EXEC EXECUTE EXISTS EXIT EXPLAIN EXPLODE EXPORT EXPRESSION
EXTENDED EXTERNAL EXTRACT FAIL FALSE FAMILY FETCH FIELDS FILE FILTER FILTERING FINAL FINISH
FIRST FIXED FLATTERN FLOAT FOR FORCE FOREIGN FORMAT FORWARD FOUND FREE FROM FULL FUNCTION
FUNCTIONS GENERAL GENERATE GET GLOB GLOBAL GO GOTO GRANT GREATER GROUP GROUPING HANDLER HASH
HAVE HAVING HEAP HIDDEN HOLD HOUR IDENTIFIED IDENTITY IF IGNORE IMMEDIATE IMPORT IN
INCLUDING INCLUSIVE INCREMENT INCREMENTAL INDEX INDEXED INDEXES INDICATOR INFINITE INITIALLY
INLINE INNER INNTER INOUT INPUT INSENSITIVE INSERT INSTEAD INT INTEGER INTERSECT INTERVAL
INTO INVALIDATE IS ISOLATION ITEM ITEMS ITERATE JOIN KEY KEYS LAG LANGUAGE LARGE LAST
LATERAL LEAD LEADING LEAVE LEFT LENGTH LESS LEVEL LIKE LIMIT LIMITED LINES LIST LOAD LOCAL
LOCALTIME LOCALTIMESTAMP LOCATION LOCATOR LOCK LOCKS LOG LOGED LONG LOOP LOWER MAP MATCH
MATERIALIZED MAX MAXLEN MEMBER MERGE METHOD METRICS MIN MINUS MINUTE MISSING MOD MODE
MODIFIES MODIFY MODULE MONTH MULTI MULTISET NAME NAMES NATIONAL NATURAL NCHAR NCLOB NEW NEXT
NO NONE NOT NULL NULLIF NUMBER NUMERIC OBJECT OF OFFLINE OFFSET OLD ON ONLINE ONLY OPAQUE
OPEN OPERATOR OPTION OR ORDER ORDINALITY OTHER OTHERS OUT OUTER OUTPUT OVER OVERLAPS
OVERRIDE OWNER PAD PARALLEL PARAMETER PARAMETERS PARTIAL PARTITION PARTITIONED PARTITIONS
PATH PERCENT PERCENTILE PERMISSION PERMISSIONS PIPE PIPELINED PLAN POOL POSITION PRECISION
PREPARE PRESERVE PRIMARY PRIOR PRIVATE PRIVILEGES PROCEDURE PROCESSED PROJECT PROJECTION
PROPERTY PROVISIONING PUBLIC PUT QUERY QUIT QUORUM RAISE RANDOM RANGE RANK RAW READ READS
REAL REBUILD RECORD RECURSIVE REDUCE REF REFERENCE REFERENCES REFERENCING REGEXP REGION
REINDEX RELATIVE RELEASE REMAINDER RENAME REPEAT REPLACE REQUEST RESET RESIGNAL RESOURCE
RESPONSE RESTORE RESTRICT RESULT RETURN RETURNING RETURNS REVERSE REVOKE RIGHT ROLE ROLES
ROLLBACK ROLLUP ROUTINE ROW ROWS RULE RULES SAMPLE SATISFIES SAVE SAVEPOINT SCAN SCHEMA
SCOPE SCROLL SEARCH SECOND SECTION SEGMENT SEGMENTS SELECT SELF SEMI SENSITIVE SEPARATE
SEQUENCE SERIALIZABLE SESSION SET SETS SHARD SHARE SHARED SHORT SHOW SIGNAL SIMILAR SIZE
SKEWED SMALLINT SNAPSHOT SOME SOURCE SPACE SPACES SPARSE SPECIFIC SPECIFICTYPE SPLIT SQL
SQLCODE SQLERROR SQLEXCEPTION SQLSTATE SQLWARNING START STATE STATIC STATUS STORAGE STORE
STORED STREAM STRING STRUCT STYLE SUB SUBMULTISET SUBPARTITION SUBSTRING SUBTYPE SUM SUPER
SYMMETRIC SYNONYM SYSTEM TABLE TABLESAMPLE TEMP TEMPORARY TERMINATED TEXT THAN THEN
THROUGHPUT TIME TIMESTAMP TIMEZONE TINYINT TO TOKEN TOTAL TOUCH TRAILING TRANSACTION
TRANSFORM TRANSLATE TRANSLATION TREAT TRIGGER TRIM TRUE TRUNCATE TTL TUPLE TYPE UNDER UNDO
UNION UNIQUE UNIT UNKNOWN UNLOGGED UNNEST UNPROCESSED UNSIGNED UNTIL UPDATE UPPER URL USAGE
USE USER USERS USING UUID VACUUM VALUE VALUED VALUES VARCHAR VARIABLE VARIANCE VARINT
VARYING VIEW VIEWS VIRTUAL VOID WAIT WHEN WHENEVER WHERE WHILE WINDOW WITH WITHIN WITHOUT
WORK WRAPPED WRITE YEAR ZONE
"""
_RESERVED = frozenset(_RESERVED_WORDS.split())


def _tokens(expression: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    text = expression.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise _Invalid(f"invalid expression near {text[position : position + 20]!r}")
        tokens.append(match.group(1) or match.group(2))
        position = match.end()
    return tokens


class _Parser:
    """The expression forms the stores use (see "the contract" below): conditions of
    comparisons and ``attribute_exists``/``attribute_not_exists`` joined by ``AND``, ``OR`` and
    parentheses; updates of ``SET`` (a value, or ``if_not_exists``) and ``ADD``."""

    def __init__(self, expression: str) -> None:
        self.tokens = _tokens(expression)
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected.upper()):
            raise _Invalid(f"invalid expression: expected {expected or 'more'}, found {token}")
        self.at += 1
        return token

    def done(self) -> None:
        if self.peek() is not None:
            raise _Invalid(f"invalid expression: unexpected {self.peek()}")

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token.upper() == word:
            self.at += 1
            return True
        return False

    # condition := term (OR term)*; term := factor (AND factor)*
    def condition(self) -> tuple[Any, ...]:
        node = self.conjunction()
        while self.keyword("OR"):
            node = ("or", node, self.conjunction())
        return node

    def conjunction(self) -> tuple[Any, ...]:
        node = self.factor()
        while self.keyword("AND"):
            node = ("and", node, self.factor())
        return node

    def factor(self) -> tuple[Any, ...]:
        if self.peek() == "(":
            self.take("(")
            node = self.condition()
            self.take(")")
            return node
        if self.peek() in _FUNCTIONS:
            name = self.take()
            self.take("(")
            path = self.operand()
            self.take(")")
            if path[0] != "path":
                raise _Invalid(f"{name} takes one attribute")
            return ("call", name, path)
        left = self.operand()
        token = self.take()
        if token in _COMPARATORS:
            return ("compare", token, left, self.operand())
        raise _Invalid(f"invalid expression: {token} is not a comparator")

    def operand(self) -> tuple[str, str]:
        token = self.take()
        if token.startswith(":"):
            return ("value", token)
        if token[0] == "#":
            return ("path", self.path(token))
        if token[0].isalpha() or token[0] == "_":
            if token.upper() in _RESERVED:
                raise _Invalid(f"invalid expression: {token} is a reserved word (use a #name)")
            return ("path", self.path(token))
        raise _Invalid(f"invalid expression: {token} is not an operand")

    def path(self, token: str) -> str:
        if self.peek() in (".", "["):
            raise _Invalid("nested attribute paths are not answered by local mode's tables")
        return token

    # update := (SET a = v, … | ADD a :v, …)+ ; v := :value | attribute | if_not_exists(a, v)
    def update(self) -> list[tuple[Any, ...]]:
        actions: list[tuple[Any, ...]] = []
        seen: set[str] = set()
        while self.peek() is not None:
            clause = self.take().upper()
            if clause not in ("SET", "ADD") or clause in seen:
                raise _Invalid(f"invalid update expression near {clause}")
            seen.add(clause)
            while True:
                path = self.operand()
                if path[0] != "path":
                    raise _Invalid("invalid update expression: an action needs an attribute")
                if clause == "SET":
                    self.take("=")
                    actions.append(("set", path[1], self.set_value()))
                else:
                    value = self.operand()
                    if value[0] != "value":
                        raise _Invalid("invalid update expression: ADD takes a value")
                    actions.append(("add", path[1], value))
                if self.peek() != ",":
                    break
                self.take(",")
        if not actions:
            raise _Invalid("invalid update expression: empty")
        return actions

    def set_value(self) -> tuple[Any, ...]:
        if self.peek() == "if_not_exists":
            self.take()
            self.take("(")
            path = self.operand()
            self.take(",")
            fallback = self.set_value()
            self.take(")")
            if path[0] != "path":
                raise _Invalid("if_not_exists takes an attribute first")
            return ("if_not_exists", path, fallback)
        return self.operand()

    def projection(self) -> list[str]:
        names = [self.operand()]
        while self.peek() == ",":
            self.take(",")
            names.append(self.operand())
        self.done()
        if any(kind != "path" for kind, _ in names):
            raise _Invalid("invalid ProjectionExpression: it names attributes only")
        return [token for _, token in names]


@lru_cache(maxsize=512)
def _condition(expression: str) -> tuple[Any, ...]:
    parser = _Parser(expression)
    node = parser.condition()
    parser.done()
    return node


@lru_cache(maxsize=512)
def _update(expression: str) -> tuple[tuple[Any, ...], ...]:
    parser = _Parser(expression)
    return tuple(parser.update())


@lru_cache(maxsize=512)
def _projection(expression: str) -> tuple[str, ...]:
    return tuple(_Parser(expression).projection())


# -- the contract: the shapes of the calls the stores make -------------------------------------

_SHAPED = frozenset(
    {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "Query", "Scan"}
)
_EXPRESSIONS = (
    "ConditionExpression",
    "FilterExpression",
    "KeyConditionExpression",
    "ProjectionExpression",
    "UpdateExpression",
)
_CHOICES = ("ReturnValues", "ReturnValuesOnConditionCheckFailure", "ScanIndexForward")
_DEFAULTS = {"ReturnValues": "NONE", "ReturnValuesOnConditionCheckFailure": "NONE"}
# What a call names or carries rather than how it asks: not part of its shape.
_CONTENT = frozenset(
    {
        "TableName",
        "Key",
        "Keys",
        "Item",
        "RequestItems",
        "ExpressionAttributeNames",
        "ExpressionAttributeValues",
        "ConsistentRead",  # (every read here is consistent)
    }
)
_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE"})
_SYMBOLS = frozenset({*_COMPARATORS, "+", "-", ".", "["})


@lru_cache(maxsize=512)
def _features(expression: str) -> tuple[str, ...]:
    """The forms an expression uses: comparators, operators, keywords, functions and nested
    paths (``.``, ``[``); not the attributes it names nor the values it gives."""
    tokens = _tokens(expression)
    found: set[str] = set()
    for at, token in enumerate(tokens):
        if token in _SYMBOLS:
            found.add(token)
        elif token.upper() in _KEYWORDS:
            found.add(token.upper())
        elif token[0].isalpha() and tokens[at + 1 : at + 2] == ["("]:
            found.add(token)
    return tuple(sorted(found))


def call_shape(operation: str, parameters: dict[str, Any]) -> str:
    """An item call's shape: its operation, each expression it sends with the forms it uses,
    the choices it makes (``ReturnValues=ALL_NEW``), the paging it asks for and any other
    parameter, by name. Its tables, keys, items, names and values are not part of it.

    ``UpdateItem ConditionExpression(<,OR,attribute_not_exists) ReturnValues=ALL_OLD
    UpdateExpression(ADD,SET,if_not_exists)`` is the minting state's write."""
    shape: set[str] = set()
    batch = parameters.get("RequestItems") if operation == "BatchGetItem" else None
    requests = list(batch.values()) if isinstance(batch, dict) else [parameters]
    for request in requests:
        for name, value in request.items() if isinstance(request, dict) else ():
            if name in _EXPRESSIONS and isinstance(value, str):
                features = _features(value)
                if name == "UpdateExpression":  # (every SET has its "=")
                    features = tuple(f for f in features if f != "=")
                shape.add(f"{name}({','.join(features)})" if features else name)
            elif name in _CHOICES:
                if value != _DEFAULTS.get(name, True):
                    shape.add(f"{name}={value}")
            elif name not in _CONTENT:
                shape.add(name)
    return " ".join([operation, *sorted(shape)])


def _parts(shape: str) -> tuple[str, frozenset[str]]:
    """A shape's operation and what it uses: each part, and each form of each expression."""
    operation, *parts = shape.split(" ")
    used: set[str] = set()
    for part in parts:
        name, _, forms = part.partition("(")
        used.add(name)
        used.update(f"{name}:{form}" for form in forms.rstrip(")").split(",") if form)
    return operation, frozenset(used)


# A read's next page: a store that reads a table sends it whenever a page was cut (by Limit
# or at 1 MB), which the test suite's small tables may never show.
_PAGING = {"Query": "ExclusiveStartKey", "Scan": "ExclusiveStartKey"}


def _contract(shapes: Iterable[str]) -> dict[str, tuple[frozenset[str], ...]]:
    found: dict[str, list[frozenset[str]]] = {}
    for shape in shapes:
        operation, used = _parts(shape)
        if operation in _PAGING:
            used |= {_PAGING[operation]}
        found.setdefault(operation, []).append(used)
    return {operation: tuple(uses) for operation, uses in found.items()}


_CONTRACT = _contract(STORE_SHAPES)
# While ``python -m tests.dynamo_shapes`` records the stores' calls, every shape the evaluator
# can answer is answered: a new expression in a store is recorded, not refused before it is.
_RECORDING = bool(os.environ.get("IBI_RECORD_DYNAMO_SHAPES"))


@lru_cache(maxsize=1024)
def refused_shape(shape: str) -> bool:
    """Whether ``shape`` is outside the contract: not a shape a store makes, nor a part of one
    (a PutItem without the condition the stores send, a Scan without their filter: what the
    migration of an old data directory and the tests' own reads send)."""
    if _RECORDING:
        return False
    operation, used = _parts(shape)
    return not any(used <= recorded for recorded in _CONTRACT.get(operation, ()))


class _Scope:
    """An expression's names and values, and which of them it used (DynamoDB refuses unused
    ones)."""

    def __init__(self, names: dict[str, str] | None, values: dict[str, Any] | None) -> None:
        self.names = names or {}
        self.values = {k: _checked(v, k) for k, v in (values or {}).items()}
        self.used: set[str] = set()

    def name(self, token: str) -> str:
        if token.startswith("#"):
            if token not in self.names:
                raise _Invalid(f"an expression attribute name is not defined: {token}")
            self.used.add(token)
            return self.names[token]
        return token

    def value(self, token: str) -> Any:
        if token not in self.values:
            raise _Invalid(f"an expression attribute value is not defined: {token}")
        self.used.add(token)
        return self.values[token]

    def operand(self, node: tuple[str, str], item: Record) -> Any:
        kind, token = node
        if kind == "value":
            return self.value(token)
        return item.get(self.name(token))

    def check_all_used(self) -> None:
        unused = (set(self.names) | set(self.values)) - self.used
        if unused:
            raise _Invalid(f"expression attribute names or values not used: {sorted(unused)}")


def _holds(node: tuple[Any, ...], item: Record, scope: _Scope) -> bool:
    kind = node[0]
    if kind == "or":
        return _holds(node[1], item, scope) or _holds(node[2], item, scope)
    if kind == "and":
        return _holds(node[1], item, scope) and _holds(node[2], item, scope)
    if kind == "call":  # attribute_exists, attribute_not_exists
        present = scope.name(node[2][1]) in item
        return present if node[1] == "attribute_exists" else not present
    left, right = scope.operand(node[2], item), scope.operand(node[3], item)
    if left is None or right is None:  # a missing attribute equals nothing, orders nothing
        return bool(node[1] == "<>")
    if node[1] == "=":
        return _equal(left, right)
    if node[1] == "<>":
        return not _equal(left, right)
    order = _order(left, right)
    if order is None:
        return False
    return {"<": order < 0, "<=": order <= 0, ">": order > 0, ">=": order >= 0}[node[1]]


def _evaluate(node: tuple[Any, ...], item: Record, scope: _Scope) -> Any:
    """A SET action's value: a value, an attribute, or ``if_not_exists``."""
    if node[0] == "if_not_exists":
        present = item.get(scope.name(node[1][1]))
        return present if present is not None else _evaluate(node[2], item, scope)
    found = scope.operand(node, item)
    if found is None:
        raise _Invalid(f"the attribute in an update expression is missing: {node[1]}")
    return found


def _apply(
    actions: Iterable[tuple[Any, ...]], item: Record, scope: _Scope
) -> tuple[Record, set[str]]:
    """The item after the update, and the names of the attributes it touched."""
    new = dict(item)
    touched: set[str] = set()
    for kind, token, operand in actions:
        name = scope.name(token)
        if name in touched:
            raise _Invalid(f"two actions in one update expression touch {name}")
        touched.add(name)
        if kind == "set":
            new[name] = _evaluate(operand, item, scope)
            continue
        ((type_, data),) = scope.operand(operand, item).items()  # ADD: to a number or a set
        present = item.get(name)
        if type_ == "N":
            start = _number(present["N"]) if present and "N" in present else None
            if present is not None and start is None:
                raise _Invalid("ADD: the attribute is not a number")
            total = ARITHMETIC.add(start or Decimal(0), _number(data))
            new[name] = {"N": _canonical(_in_range(total))}
        elif type_ in ("SS", "NS"):
            if present is not None and type_ not in present:
                raise _Invalid("ADD: the attribute is not a set of that type")
            members = list(present[type_]) if present else []
            members += [m for m in data if m not in members]
            new[name] = {type_: members}
        else:
            raise _Invalid("ADD takes a number or a set")
    return new, touched


# -- the store ---------------------------------------------------------------------------------


class _Table:
    def __init__(self, name: str, schema: dict[str, Any]) -> None:
        self.name = name
        self.schema = schema
        self.text = json.dumps(schema)  # as its row holds it
        types = {d["AttributeName"]: d["AttributeType"] for d in schema["AttributeDefinitions"]}
        keys = {k["KeyType"]: k["AttributeName"] for k in schema["KeySchema"]}
        self.hash = keys["HASH"]
        self.range = keys.get("RANGE")
        self.types = {n: types[n] for n in (self.hash, self.range) if n is not None}
        self.ttl: str | None = schema.get("TimeToLive")  # the attribute, when TTL is on

    def expiry(self, item: Record) -> float | None:
        """When ``item`` expires (the TTL attribute, a number), or None."""
        value = item.get(self.ttl) if self.ttl is not None else None
        if isinstance(value, dict) and "N" in value:
            return float(_number(value["N"]))
        return None

    def key_of(self, item: Record, *, exact: bool) -> tuple[str, str]:
        """``(pk, sk)`` of an item or key, as stored; ``exact``: nothing but the key."""
        if exact and set(item) != set(self.types):
            raise _Invalid("the provided key element does not match the schema")
        sort = self.stored(self.range, item.get(self.range)) if self.range else ""
        return self.stored(self.hash, item.get(self.hash)), sort

    def stored(self, name: str | None, value: Any) -> str:
        """A key attribute's value as stored (sort keys of type N: a text that sorts as the
        number does); "" for the sort key of a table without one."""
        if name is None:
            return ""
        kind = self.types[name]
        if not isinstance(value, dict) or set(value) != {kind}:
            raise _Invalid(f"the key attribute {name} is missing or not of type {kind}")
        if kind == "N":
            return _sortable_number(_number(value[kind]))
        if not value[kind]:
            raise _Invalid(f"the key attribute {name} is an empty string")
        return str(value[kind])

    def key_item(self, item: Record) -> Record:
        return {n: item[n] for n in self.types}

    def description(self) -> dict[str, Any]:
        return {
            "TableName": self.name,
            "TableStatus": "ACTIVE",
            "KeySchema": self.schema["KeySchema"],
            "AttributeDefinitions": self.schema["AttributeDefinitions"],
        }


class LocalTables:
    """The tables of one local federation, in one SQLite file (made 0600 if missing)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.exists():  # (closing any descriptor of an open database would
            # drop this process's locks on it: only a file no connection has open yet)
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE))
        connection = self._open()
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.executescript(SCHEMA)
            columns = {row[1] for row in connection.execute("PRAGMA table_info(items)")}
            if "expires" not in columns:  # a file made before TTL was kept: its column
                connection.execute("ALTER TABLE items ADD COLUMN expires REAL")
                for name, schema in connection.execute("SELECT name, schema FROM tables"):
                    _note_expiry(connection, name, json.loads(schema).get("TimeToLive"))
            connection.execute(EXPIRY_INDEX)
        finally:
            connection.close()

    def _open(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        connection.execute("PRAGMA synchronous=NORMAL")
        return connection

    def client(self) -> DynamoDBClient:
        """A client for the stores (the part of boto3's DynamoDB client they use)."""
        return cast("DynamoDBClient", LocalTablesClient(self.path))

    def checkpoint(self) -> None:
        """Everything the write-ahead log holds, written into the file itself."""
        connection = self._open()
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()


# Every connection a client opened, held until :meth:`LocalTablesClient.close`: never closed
# by the garbage collector. A connection made before a fork (by the parent of the gateway's
# workers, say) and collected in the child would be closed there, and closing a database
# file releases every POSIX lock the process holds on it, and may checkpoint and delete the
# write-ahead log under the other processes: committed writes lost (SQLite's "How To
# Corrupt", 2.6). Held here, such a connection is never touched in the child.
_OPEN: set[sqlite3.Connection] = set()

_SNAKE = re.compile(r"(?<=[a-z])(?=[A-Z])")
# (operation, parameter names, expressions and choices) -> "" if answered, else its shape
_SEEN_SHAPES: dict[tuple[Any, ...], str] = {}


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
        self._tables: dict[str, _Table] = {}
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
    update_time_to_live = _operation("UpdateTimeToLive")
    describe_time_to_live = _operation("DescribeTimeToLive")

    def _make_api_call(self, operation_name: str, api_params: dict[str, Any]) -> dict[str, Any]:
        if operation_name in _SHAPED:
            self._check_shape(operation_name, api_params)
        method = getattr(self, "_" + _SNAKE.sub("_", operation_name).lower())
        accepted = _parameters(method.__func__)
        unknown = sorted(set(api_params) - accepted)
        if unknown:
            raise _fail(
                "ValidationException",
                f"parameters local mode's tables do not take: {', '.join(unknown)}",
                operation_name,
            )
        answer: dict[str, Any] = method(**api_params)
        return answer

    def _check_shape(self, operation: str, parameters: dict[str, Any]) -> None:
        """Refuse a call outside the contract, naming its shape (ValidationException)."""
        seen: tuple[Any, ...] | None = None
        refused: str | None = None
        try:  # one dictionary look-up per call: the shape of these parameters, decided once
            if "RequestItems" not in parameters:  # (a batch's shape is inside it)
                seen = (operation, tuple(parameters), *map(parameters.get, _EXPRESSIONS + _CHOICES))
                refused = _SEEN_SHAPES.get(seen)
        except TypeError:  # (an unhashable expression: refused below as malformed)
            seen = None
        if refused is None:
            try:
                shape = call_shape(operation, parameters)
            except _Invalid as error:
                raise _fail("ValidationException", str(error), operation) from None
            refused = shape if refused_shape(shape) else ""
            if seen is not None and len(_SEEN_SHAPES) < 4096:
                _SEEN_SHAPES[seen] = refused
        if refused:
            raise _fail(
                "ValidationException",
                f"local mode's tables answer the calls the stores make, not this one: {refused}"
                " (ibi_tools/local/table_shapes.py lists them; python -m tests.dynamo_shapes"
                " records them)",
                operation,
            )

    def close(self) -> None:
        """Close this thread's connection (another opens at the next call)."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is not None and self._local.pid == os.getpid():
            _OPEN.discard(connection)
            connection.close()
        self._local.connection = None

    # -- plumbing ----------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        pid = os.getpid()
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None or self._local.pid != pid:
            connection = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            connection.execute("PRAGMA synchronous=NORMAL")
            _OPEN.add(connection)
            self._local.connection, self._local.pid = connection, pid
        return connection

    def _table(self, name: Any, operation: str) -> _Table:
        if not isinstance(name, str):
            raise _fail("ValidationException", "TableName is required", operation)
        table = self._tables.get(name)
        if table is None:
            row = (
                self._connection()
                .execute("SELECT schema FROM tables WHERE name = ?", (name,))
                .fetchone()
            )
            if row is None:
                raise _fail(
                    "ResourceNotFoundException", f"Requested resource not found: {name}", operation
                )
            table = self._tables[name] = _Table(name, json.loads(row[0]))
        return table

    def _current(self, table: _Table, key: tuple[str, str]) -> tuple[_Table, Record | None]:
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
            table = self._tables[table.name] = _Table(table.name, json.loads(schema))
        return table, (json.loads(item) if item is not None else None)

    def _read(self, table: _Table, key: tuple[str, str]) -> Record | None:
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
        table: _Table,
        key: tuple[str, str],
        change: Callable[[Record | None], Record | None],
    ) -> Record | None:
        """Run ``change`` on the item at ``key`` in one write transaction; store what it
        returns (None: delete). Gives back the item as it was."""
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            table, old = self._current(table, key)
            new = change(old)
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
                    raise _Invalid("Item size has exceeded the maximum allowed size")
                connection.execute(
                    "INSERT OR REPLACE INTO items (tbl, pk, sk, item, expires) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (table.name, *key, stored, table.expiry(new)),
                )
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        if table.ttl is not None:
            self._expire(table)
        return old

    def _expire(self, table: _Table) -> None:
        """Remove the table's expired items, at most once per :attr:`sweep_seconds` per client
        (TTL, as DynamoDB applies it: items whose TTL attribute, a number of seconds since 1970,
        has passed; until then a read may still find them, as in DynamoDB)."""
        now = time.monotonic()
        if now - self._swept.get(table.name, float("-inf")) < self.sweep_seconds:
            return
        self._swept[table.name] = now
        self._connection().execute(
            "DELETE FROM items WHERE tbl = ? AND expires < ?", (table.name, time.time())
        )

    def _guard(self, operation: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return run()
        except _Invalid as error:
            raise _fail("ValidationException", str(error), operation) from None
        except sqlite3.OperationalError as error:  # locked past the timeout, disk full…
            if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                where = self.path.resolve().parent
                raise _fail(
                    "InternalServerError", f"local tables: {FULL_DISK} {where} is full", operation
                ) from None
            raise _fail("InternalServerError", f"local tables: {error}", operation) from None

    @staticmethod
    def _check(
        operation: str,
        condition: str | None,
        old: Record | None,
        scope: _Scope,
        on_failure: str = "NONE",
    ) -> None:
        """Refuse the write unless ``condition`` holds; ``on_failure`` ``ALL_OLD`` puts the item
        as it is in the error (ReturnValuesOnConditionCheckFailure)."""
        if condition is None or _holds(_condition(condition), old or {}, scope):
            return
        more = {"Item": old} if on_failure == "ALL_OLD" and old is not None else {}
        raise _fail(
            "ConditionalCheckFailedException", "The conditional request failed", operation, **more
        )

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
            key = table.key_of(_checked_item(Key), exact=True)
            wanted = None
            if ProjectionExpression is not None or ExpressionAttributeNames is not None:
                wanted = _wanted(ProjectionExpression, ExpressionAttributeNames)
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
        def run() -> dict[str, Any]:
            table = self._table(TableName, "PutItem")
            item = _checked_item(Item)
            scope = _Scope(ExpressionAttributeNames, ExpressionAttributeValues)
            scope_ready(scope, ConditionExpression)

            def change(old: Record | None) -> Record:
                self._check("PutItem", ConditionExpression, old, scope)
                return item

            self._write(table, table.key_of(item, exact=False), change)
            return {}

        return self._guard("PutItem", run)

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
            key = _checked_item(Key)
            actions = _update(UpdateExpression)
            scope = _Scope(ExpressionAttributeNames, ExpressionAttributeValues)
            scope_ready(scope, ConditionExpression, actions)

            def change(old: Record | None) -> Record:
                self._check(
                    "UpdateItem",
                    ConditionExpression,
                    old,
                    scope,
                    ReturnValuesOnConditionCheckFailure,
                )
                new, names = _apply(actions, old or dict(key), scope)
                if names & set(table.types):
                    raise _Invalid("an update expression cannot change the key")
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
        def run() -> dict[str, Any]:
            table = self._table(TableName, "DeleteItem")
            key = _checked_item(Key)
            scope = _Scope(ExpressionAttributeNames, ExpressionAttributeValues)
            scope_ready(scope, ConditionExpression)

            def change(old: Record | None) -> None:
                self._check("DeleteItem", ConditionExpression, old, scope)

            self._write(table, table.key_of(key, exact=True), change)
            return {}

        return self._guard("DeleteItem", run)

    def _batch_get_item(self, *, RequestItems: dict[str, Any]) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            responses: dict[str, list[Record]] = {}
            for name, request in RequestItems.items():
                table = self._table(name, "BatchGetItem")
                keys = [table.key_of(_checked_item(k), exact=True) for k in request["Keys"]]
                if not 0 < len(keys) <= 100 or len(set(keys)) != len(keys):
                    raise _Invalid("BatchGetItem takes 1 to 100 distinct keys per table")
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
            scope = _Scope(ExpressionAttributeNames, ExpressionAttributeValues)
            scope_ready(scope, FilterExpression)
            sql = "SELECT pk, sk, item FROM items WHERE tbl = ?"
            parameters: list[Any] = [table.name]
            if ExclusiveStartKey is not None:
                pk, sk = table.key_of(_checked_item(ExclusiveStartKey), exact=True)
                sql += " AND (pk > ? OR (pk = ? AND sk > ?))"
                parameters += [pk, pk, sk]
            rows = self._page(sql + " ORDER BY pk, sk", parameters, Limit)
            return _filtered(table, rows, Limit, FilterExpression, scope)

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
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            table = self._table(TableName, "Query")
            scope = _Scope(ExpressionAttributeNames, ExpressionAttributeValues)
            sql, parameters = _key_condition(table, _condition(KeyConditionExpression), scope)
            scope_ready(scope, FilterExpression)
            if ExclusiveStartKey is not None:
                _, sk = table.key_of(_checked_item(ExclusiveStartKey), exact=True)
                sql += " AND sk > ?" if ScanIndexForward else " AND sk < ?"
                parameters.append(sk)
            order = "sk" if ScanIndexForward else "sk DESC"  # (the minting record, newest first)
            rows = self._page(f"{sql} ORDER BY {order}", parameters, Limit)
            return _filtered(table, rows, Limit, FilterExpression, scope)

        return self._guard("Query", run)

    def _page(self, sql: str, parameters: list[Any], limit: int | None) -> list[Any]:
        if limit is not None:
            if not isinstance(limit, int) or limit < 1:
                raise _Invalid("Limit must be at least 1")
            sql += " LIMIT ?"
            parameters = [*parameters, limit]
        return self._connection().execute(sql, parameters).fetchall()

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
    ) -> dict[str, Any]:
        schema = {"KeySchema": KeySchema, "AttributeDefinitions": AttributeDefinitions}
        try:
            table = _Table(TableName, schema)
        except (KeyError, TypeError):
            raise _fail("ValidationException", "malformed key schema", "CreateTable") from None
        try:
            self._connection().execute(
                "INSERT INTO tables (name, schema) VALUES (?, ?)", (TableName, json.dumps(schema))
            )
        except sqlite3.IntegrityError:
            raise _fail(
                "ResourceInUseException", f"Table already exists: {TableName}", "CreateTable"
            ) from None
        return {"TableDescription": table.description()}

    def _describe_table(self, *, TableName: str) -> dict[str, Any]:
        return {"Table": self._table(TableName, "DescribeTable").description()}

    def _update_time_to_live(
        self, *, TableName: str, TimeToLiveSpecification: dict[str, Any]
    ) -> dict[str, Any]:
        table = self._table(TableName, "UpdateTimeToLive")
        enabled = TimeToLiveSpecification.get("Enabled")
        attribute = TimeToLiveSpecification.get("AttributeName")
        if not isinstance(enabled, bool) or not isinstance(attribute, str) or not attribute:
            raise _fail(
                "ValidationException",
                "TimeToLiveSpecification takes Enabled and AttributeName",
                "UpdateTimeToLive",
            )
        if enabled == (table.ttl is not None):  # as DynamoDB: no change is an error
            state = "enabled" if enabled else "disabled"
            raise _fail("ValidationException", f"TimeToLive is already {state}", "UpdateTimeToLive")
        schema = dict(table.schema)
        if enabled:
            schema["TimeToLive"] = attribute
        else:
            schema.pop("TimeToLive", None)
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(
                "UPDATE tables SET schema = ? WHERE name = ?", (json.dumps(schema), TableName)
            )
            _note_expiry(connection, TableName, schema.get("TimeToLive"))
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        self._tables[TableName] = _Table(TableName, schema)
        return {"TimeToLiveSpecification": {"Enabled": enabled, "AttributeName": attribute}}

    def _describe_time_to_live(self, *, TableName: str) -> dict[str, Any]:
        table = self._table(TableName, "DescribeTimeToLive")
        if table.ttl is None:
            return {"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}
        return {
            "TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": table.ttl}
        }

    def items(self, table_name: str) -> Iterator[Record]:
        """Every item of a table (for copying and inspection, not a DynamoDB call)."""
        for (item,) in self._connection().execute(
            "SELECT item FROM items WHERE tbl = ? ORDER BY pk, sk", (table_name,)
        ):
            yield json.loads(item)


def condition_holds(
    expression: str,
    item: Record,
    *,
    names: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> bool:
    """Whether a ConditionExpression holds for ``item`` ({}: a missing item), as a write
    under it would decide (ValidationException: an expression DynamoDB refuses, or a form no
    store sends)."""
    try:
        scope = _Scope(names, values)
        scope_ready(scope, expression)
        return _holds(_condition(expression), item, scope)
    except _Invalid as error:
        raise _fail("ValidationException", str(error), "ConditionExpression") from None


def scope_ready(
    scope: _Scope, condition: str | None, actions: Iterable[tuple[Any, ...]] = ()
) -> None:
    """Refuse, before anything is read, names or values an expression does not define or
    does not use (as DynamoDB does)."""
    if condition is not None:
        _mark(_condition(condition), scope)
    for action in actions:
        scope.name(action[1])
        _mark(action[2:], scope)
    scope.check_all_used()


def _mark(node: Any, scope: _Scope) -> None:
    """Note every name and value an expression's tree uses (and refuse undefined ones)."""
    if not isinstance(node, tuple | list):
        return
    if isinstance(node, tuple) and node and node[0] in ("path", "value"):
        if node[0] == "value":
            scope.value(node[1])
        else:
            scope.name(node[1])
        return
    for child in node:
        _mark(child, scope)


def _note_expiry(connection: sqlite3.Connection, table: str, ttl: str | None) -> None:
    """Set the ``expires`` column of every item of ``table`` from its TTL attribute ``ttl``
    (None: the table has no TTL, nothing expires)."""
    if ttl is None:
        connection.execute("UPDATE items SET expires = NULL WHERE tbl = ?", (table,))
        return
    path = '$."' + ttl.replace('"', '\\"') + '".N'
    connection.execute(
        "UPDATE items SET expires = CAST(json_extract(item, ?) AS REAL) WHERE tbl = ?",
        (path, table),
    )


def _filtered(
    table: _Table, rows: list[Any], limit: int | None, expression: str | None, scope: _Scope
) -> dict[str, Any]:
    """A page as DynamoDB gives it: ``Limit`` counts the items read, before the filter."""
    items = [json.loads(row[2]) for row in rows]
    scanned = len(items)
    if expression is not None:
        node = _condition(expression)
        items = [item for item in items if _holds(node, item, scope)]
    answer: dict[str, Any] = {"Items": items, "Count": len(items), "ScannedCount": scanned}
    if limit is not None and scanned == limit:
        answer["LastEvaluatedKey"] = table.key_item(json.loads(rows[-1][2]))
    return answer


def _checked_item(item: Any) -> Record:
    if not isinstance(item, dict):
        raise _Invalid("an item is a map of attribute names to typed values")
    return {str(name): _checked(value, str(name)) for name, value in item.items()}


def _wanted(expression: str | None, names: dict[str, str] | None) -> set[str] | None:
    """The attributes a ProjectionExpression names (None: every attribute), refused as
    DynamoDB refuses it: a reserved word, a name not defined, a name defined and not used."""
    scope = _Scope(names, None)
    wanted = None if expression is None else {scope.name(t) for t in _projection(expression)}
    scope.check_all_used()
    return wanted


def item_size(item: Record) -> int:
    """An item's size as DynamoDB counts it against its 400 KB ("Item sizes and formats"):
    each attribute's name in UTF-8 bytes plus its value."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: Any) -> int:
    """A string: its UTF-8 bytes; a number: one byte per two significant digits, plus one;
    a boolean or null: one byte; a list or map: 3 bytes, plus each element and one byte for
    it (and a map's names); a set: its members."""
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode())
    if kind == "N":
        digits = "".join(map(str, Decimal(data).as_tuple().digits)).strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS"):
        return sum(_value_size({kind[0]: member}) for member in data)
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in data)
    return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in data.items())  # M


def _key_condition(table: _Table, node: tuple[Any, ...], scope: _Scope) -> tuple[str, list[Any]]:
    """SQL for a KeyConditionExpression: the partition key's equality and, maybe, one
    comparison on the sort key."""
    parts = [node[1], node[2]] if node[0] == "and" else [node]
    sql = "SELECT pk, sk, item FROM items WHERE tbl = ?"
    parameters: list[Any] = [table.name]
    seen: set[str] = set()
    for part in parts:
        if part[0] != "compare" or part[2][0] != "path" or part[3][0] != "value":
            raise _Invalid("invalid KeyConditionExpression")
        operator, name, value = part[1], scope.name(part[2][1]), scope.value(part[3][1])
        if name in seen or name not in table.types:
            raise _Invalid(f"invalid KeyConditionExpression: {name} is not a key or is repeated")
        seen.add(name)
        if name == table.hash:
            if operator != "=":
                raise _Invalid("the partition key's condition must be an equality")
            sql += " AND pk = ?"
        elif operator == "<>":
            raise _Invalid("invalid KeyConditionExpression: <> on a key")
        else:
            sql += f" AND sk {operator} ?"
        parameters.append(table.stored(name, value))
    if table.hash not in seen:
        raise _Invalid("the KeyConditionExpression must name the partition key")
    return sql, parameters
