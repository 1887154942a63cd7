"""The DynamoDB calls the stores make, recorded from the test suite: local mode's contract.

    .venv/bin/python -m tests.dynamo_shapes [PYTEST ARGUMENTS]

runs the tests (by default ``tests/unit tests/integration``, arguments replacing that) with every item call a store
makes recorded (``tests/aws_calls.py`` hands each call here when ``IBI_RECORD_DYNAMO_SHAPES``
names a file), then writes:

- ``ibi_tools/local/table_shapes.py``: each call's shape (``tables.call_shape``), the calls
  local mode's tables answer;
- ``tests/dynamo_calls.json``: for each shape and outcome (answered, or an error code), the
  smallest call met, with its tables' key schemas and the items it found, which
  ``tests/unit/test_local_tables_contract.py`` replays on moto and on the local tables.

A call is a store's when the innermost caller outside botocore and the tables is code of
``functions`` or ``ibi_tools`` (a store, ``ensure_table``, the migration of an old data
directory); calls a test makes to its client directly are not recorded. Run it again after
changing an expression a store sends; the replay test fails until it is run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ibi_tools.local.tables import call_shape

LOG_VARIABLE = "IBI_RECORD_DYNAMO_SHAPES"
ROOT = Path(__file__).resolve().parent.parent
SHAPES_MODULE = ROOT / "ibi_tools" / "local" / "table_shapes.py"
CALLS_FILE = ROOT / "tests" / "dynamo_calls.json"
# The stores' calls; the tables' own tests are left out (they check refusals, which recording
# switches off). Arguments given on the command line replace these.
DEFAULT_TESTS = [
    "tests/unit",
    "tests/integration",
    "--ignore=tests/unit/test_local_tables.py",
    "--ignore=tests/unit/test_local_tables_contract.py",
    "-p",
    "no:cacheprovider",
]
ITEM_CALLS = frozenset({"GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem"})
READS = frozenset({"Query", "Scan"})
EXAMPLES_PER_SHAPE = 20  # calls of one shape whose items are read, per process
LIBRARIES = ("botocore.", "boto3.", "moto.", "tests.aws_calls", "tests.dynamo_shapes")

Raw = Callable[[str, dict[str, Any]], dict[str, Any]]

_met: dict[str, int] = {}  # shape -> calls recorded with their items, in this process
_written: set[tuple[str, str]] = set()  # (shape, outcome) written by this process


def _from_a_store() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        tables = module == "ibi_tools.local.tables" or module.startswith("ibi_tools.local.tables.")
        if not module.startswith(LIBRARIES) and not tables:
            return module.startswith(("functions.", "ibi_tools."))
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _tables(parameters: dict[str, Any]) -> list[str]:
    if "RequestItems" in parameters:
        return list(parameters["RequestItems"])
    return [parameters["TableName"]]


def _keys(parameters: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    names = [k["AttributeName"] for k in schema["KeySchema"]]
    if "Item" in parameters:
        return [{n: parameters["Item"][n] for n in names if n in parameters["Item"]}]
    if "Key" in parameters:
        return [parameters["Key"]]
    return [key for request in parameters["RequestItems"].values() for key in request["Keys"]]


def _items(raw: Raw, operation: str, parameters: dict[str, Any], schema: Any) -> list[Any]:
    """The items a call may read or change, as they are before it."""
    table = schema["TableName"]
    if operation in READS:
        found: list[Any] = []
        request: dict[str, Any] = {"TableName": table}
        while len(found) < 200:
            page = raw("Scan", request)
            found += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found
    items = []
    for key in _keys(parameters, schema):
        item = raw("GetItem", {"TableName": table, "Key": key, "ConsistentRead": True}).get("Item")
        if item is not None:
            items.append(item)
    return items


def _define_keys(schema: dict[str, Any], items: list[dict[str, Any]]) -> None:
    """Put back a key attribute's definition that moto's UpdateTable dropped (it replaces a
    table's AttributeDefinitions with the update's): its type is the one the items carry (S
    when there is none), so that the example's table can be created again."""
    defined = {d["AttributeName"] for d in schema["AttributeDefinitions"]}
    for key in schema["KeySchema"]:
        name = key["AttributeName"]
        if name not in defined:
            kind = next((next(iter(item[name])) for item in items if name in item), "S")
            schema["AttributeDefinitions"].insert(0, {"AttributeName": name, "AttributeType": kind})


def capture(raw: Raw, operation: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """Make the call through ``raw``; when a store makes it, record its shape, what it found
    and how it ended (see the module)."""
    if operation not in ITEM_CALLS | READS or not _from_a_store():
        return raw(operation, parameters)
    shape = call_shape(operation, parameters)
    _met[shape] = _met.get(shape, 0) + 1
    if _met[shape] > EXAMPLES_PER_SHAPE:
        return raw(operation, parameters)
    try:
        tables: dict[str, Any] = {}
        before: dict[str, Any] = {}
        for name in _tables(parameters):
            table = raw("DescribeTable", {"TableName": name})["Table"]
            tables[name] = {k: table[k] for k in ("KeySchema", "AttributeDefinitions")}
            if table.get("GlobalSecondaryIndexes"):  # (as CreateTable takes them)
                tables[name]["GlobalSecondaryIndexes"] = [
                    {k: index[k] for k in ("IndexName", "KeySchema", "Projection")}
                    for index in table["GlobalSecondaryIndexes"]
                ]
            before[name] = _items(raw, operation, parameters, table)
            _define_keys(tables[name], before[name])
    except Exception:
        return raw(operation, parameters)
    outcome = "answered"
    try:
        return raw(operation, parameters)
    except Exception as error:
        outcome = (
            getattr(error, "response", {}).get("Error", {}).get("Code") or type(error).__name__
        )
        raise
    finally:
        if (shape, outcome) not in _written:
            _written.add((shape, outcome))
            example = {
                "shape": shape,
                "outcome": outcome,
                "operation": operation,
                "parameters": parameters,
                "tables": tables,
                "before": before,
            }
            line = (json.dumps(example, sort_keys=True) + "\n").encode()
            descriptor = os.open(os.environ[LOG_VARIABLE], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(descriptor, line)
            finally:
                os.close(descriptor)


def recording() -> bool:
    return bool(os.environ.get(LOG_VARIABLE))


def write(log: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """The shapes and, per shape and outcome, the smallest example, from a recorded log."""
    chosen: dict[tuple[str, str], dict[str, Any]] = {}
    for line in log.read_text().splitlines():
        example = json.loads(line)
        slot = (example["shape"], example["outcome"])
        if slot not in chosen or len(line) < len(json.dumps(chosen[slot], sort_keys=True)):
            chosen[slot] = example
    shapes = sorted({shape for shape, _ in chosen})
    examples = [chosen[slot] for slot in sorted(chosen)]
    listed = "".join(f"    {json.dumps(shape)},\n" for shape in shapes)
    SHAPES_MODULE.write_text(
        '"""The shapes of the DynamoDB calls the stores make: local mode\'s tables answer these'
        " only.\n\nGenerated; do not edit. Recorded from the test suite by"
        ' ``python -m tests.dynamo_shapes``\n(see ``ibi_tools/local/tables/contract.py``).\n"""\n'
        "\n# ruff: noqa: E501\n\n"
        f"STORE_SHAPES: tuple[str, ...] = (\n{listed})\n"
    )
    lines = ",\n".join(json.dumps(example, sort_keys=True) for example in examples)
    CALLS_FILE.write_text(f"[\n{lines}\n]\n")
    return shapes, examples


def main(arguments: list[str]) -> int:
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "calls.jsonl"
        environment = {**os.environ, LOG_VARIABLE: str(log)}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        command.append("--continue-on-collection-errors")  # (a test being written elsewhere)
        tests = subprocess.run(
            [*command, *(arguments or DEFAULT_TESTS)], env=environment, cwd=ROOT, check=False
        )
        if not log.exists():
            print("no store call was recorded", file=sys.stderr)
            return 1
        shapes, examples = write(log)
    print(
        f"{len(shapes)} shapes, {len(examples)} examples: "
        f"{SHAPES_MODULE.relative_to(ROOT)}, {CALLS_FILE.relative_to(ROOT)}"
        + ("" if tests.returncode == 0 else f" (pytest exited {tests.returncode})")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
