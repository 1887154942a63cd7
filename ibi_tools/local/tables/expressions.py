"""The expressions the stores send, parsed into trees: ConditionExpression (and
FilterExpression, KeyConditionExpression), UpdateExpression and ProjectionExpression.

Only the forms some store uses are parsed (``ibi_tools/local/tables/contract.py``); a tree is
a tuple (``("compare", "<", ("path", "#last"), ("value", ":first"))``), evaluated by
``evaluation.py``. Parsed expressions are cached: the stores send a few, again and again.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ibi_tools.local.tables.values import Invalid

_TOKEN = re.compile(
    r"\s*(?:(<>|<=|>=|=|<|>|\(|\)|,|\+|-|\.|\[|\])"
    r"|(#[A-Za-z0-9_]+|:[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*|[0-9]+))"
)
COMPARATORS = ("=", "<>", "<", "<=", ">", ">=")
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


def tokens(expression: str) -> list[str]:
    """An expression's tokens: operators, placeholders (``#name``, ``:value``), words."""
    found: list[str] = []
    position = 0
    text = expression.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise Invalid(f"invalid expression near {text[position : position + 20]!r}")
        found.append(match.group(1) or match.group(2))
        position = match.end()
    return found


class _Parser:
    """The expression forms the stores use (see ``contract.py``): conditions of
    comparisons, ``BETWEEN`` and ``attribute_exists``/``attribute_not_exists`` joined by
    ``AND``, ``OR`` and parentheses; updates of ``SET`` (a value, or ``if_not_exists``), ``ADD``
    and ``REMOVE`` (of top-level attributes)."""

    def __init__(self, expression: str) -> None:
        self.tokens = tokens(expression)
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected.upper()):
            raise Invalid(f"invalid expression: expected {expected or 'more'}, found {token}")
        self.at += 1
        return token

    def done(self) -> None:
        if self.peek() is not None:
            raise Invalid(f"invalid expression: unexpected {self.peek()}")

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
                raise Invalid(f"{name} takes one attribute")
            return ("call", name, path)
        left = self.operand()
        token = self.take()
        if token in COMPARATORS:
            return ("compare", token, left, self.operand())
        if token.upper() == "BETWEEN":  # (its AND is its own, not a conjunction)
            low = self.operand()
            self.take("AND")
            return ("between", left, low, self.operand())
        raise Invalid(f"invalid expression: {token} is not a comparator")

    def operand(self) -> tuple[str, str]:
        token = self.take()
        if token.startswith(":"):
            return ("value", token)
        if token[0] == "#":
            return ("path", self.path(token))
        if token[0].isalpha() or token[0] == "_":
            if token.upper() in _RESERVED:
                raise Invalid(f"invalid expression: {token} is a reserved word (use a #name)")
            return ("path", self.path(token))
        raise Invalid(f"invalid expression: {token} is not an operand")

    def path(self, token: str) -> str:
        if self.peek() in (".", "["):
            raise Invalid("nested attribute paths are not answered by local mode's tables")
        return token

    # update := (SET a = v, … | ADD a :v, … | REMOVE a, …)+
    # v := :value | attribute | if_not_exists(a, v)
    def update(self) -> list[tuple[Any, ...]]:
        actions: list[tuple[Any, ...]] = []
        seen: set[str] = set()
        while self.peek() is not None:
            clause = self.take().upper()
            if clause not in ("SET", "ADD", "REMOVE") or clause in seen:
                raise Invalid(f"invalid update expression near {clause}")
            seen.add(clause)
            while True:
                path = self.operand()
                if path[0] != "path":
                    raise Invalid("invalid update expression: an action needs an attribute")
                if clause == "SET":
                    self.take("=")
                    actions.append(("set", path[1], self.set_value()))
                elif clause == "REMOVE":
                    actions.append(("remove", path[1], None))
                else:
                    value = self.operand()
                    if value[0] != "value":
                        raise Invalid("invalid update expression: ADD takes a value")
                    actions.append(("add", path[1], value))
                if self.peek() != ",":
                    break
                self.take(",")
        if not actions:
            raise Invalid("invalid update expression: empty")
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
                raise Invalid("if_not_exists takes an attribute first")
            return ("if_not_exists", path, fallback)
        return self.operand()

    def projection(self) -> list[str]:
        names = [self.operand()]
        while self.peek() == ",":
            self.take(",")
            names.append(self.operand())
        self.done()
        if any(kind != "path" for kind, _ in names):
            raise Invalid("invalid ProjectionExpression: it names attributes only")
        return [token for _, token in names]


@lru_cache(maxsize=512)
def parse_condition(expression: str) -> tuple[Any, ...]:
    parser = _Parser(expression)
    node = parser.condition()
    parser.done()
    return node


@lru_cache(maxsize=512)
def parse_update(expression: str) -> tuple[tuple[Any, ...], ...]:
    parser = _Parser(expression)
    return tuple(parser.update())


@lru_cache(maxsize=512)
def parse_projection(expression: str) -> tuple[str, ...]:
    return tuple(_Parser(expression).projection())
