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
(:func:`call_shape`; ``ibi_tools/local/table_shapes.py``, recorded from the test suite by
``python -m tests.dynamo_shapes``), or in a part of one; any other shape is refused with a
ValidationException naming it. The evaluator keeps only what those shapes use.

Why not a DynamoDB server (local mode ran dynalite before, issue 14): each call then costs an
HTTP request, botocore's serialisation, signing and parsing (about 1 to 1.4 ms of CPU) and the
server's own work (≈ 1 ms); here a call is a SQLite statement in the calling process
(docs/decisions.md, "Local mode's tables").

TTL (``UpdateTimeToLive``): a client removes a table's expired items after a write, at most
once a minute; until then reads may still find them, as in DynamoDB. Each write reads the
table's schema in its transaction, so a TTL another client turned on applies at once.

Global secondary indexes (OAI-PMH's, ``functions/archive/store.py``): made with the table
(``CreateTable``'s ``GlobalSecondaryIndexes``) or added to it (``UpdateTable``), kept by every
write in the same transaction (the ``index_entries`` rows), sparse; ``ConsistentRead`` on one
is refused, as DynamoDB refuses it.

Not answered (no store uses them): any other expression form (``NOT``, ``IN``,
``begins_with``, ``contains``, ``size``, ``DELETE``, ``list_append``, arithmetic), nested
attribute paths, binary (``B``, ``BS``) values, local secondary indexes, an index removed or
changed, transactions, and the 1 MB page of Query and Scan (a page ends at ``Limit`` only).

The modules, one reason to change each:

- ``client.py``: the facade, :class:`LocalTables` and :class:`LocalTablesClient` (boto3's
  method names and parameters, DynamoDB's errors, item writes in one transaction);
- ``contract.py``: the call shapes the stores make, and the refusal of any other;
- ``expressions.py``: the expressions' tokens and parser;
- ``evaluation.py``: conditions, updates and projections evaluated against items;
- ``values.py``: typed attribute values (number rules, sizes, comparison);
- ``schema.py``: key schemas, a table's and its global secondary indexes';
- ``queries.py``: Query and Scan pages, of a table or an index;
- ``catalog.py``: the tables' schemas (CreateTable, UpdateTable, TTL);
- ``storage.py``: the SQLite file, its connections and write transactions.
"""

from ibi_tools.local.tables.client import SWEEP_SECONDS, LocalTables, LocalTablesClient
from ibi_tools.local.tables.contract import call_shape, refused_shape
from ibi_tools.local.tables.evaluation import condition_holds, scope_ready
from ibi_tools.local.tables.storage import EXPIRY_INDEX, SCHEMA
from ibi_tools.local.tables.values import (
    ARITHMETIC,
    ITEM_LIMIT,
    LARGEST,
    NUMBERS,
    SMALLEST,
    Record,
    item_size,
)

__all__ = [
    "ARITHMETIC",
    "EXPIRY_INDEX",
    "ITEM_LIMIT",
    "LARGEST",
    "NUMBERS",
    "SCHEMA",
    "SMALLEST",
    "SWEEP_SECONDS",
    "LocalTables",
    "LocalTablesClient",
    "Record",
    "call_shape",
    "condition_holds",
    "item_size",
    "refused_shape",
    "scope_ready",
]
