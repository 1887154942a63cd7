"""Issue 29: what the docs say about the code, checked against the code.

* README's list of the modules that import boto3 or botocore is that set, computed from the
  imports of every production module (``functions/``, ``ibi/``);
* each metric ``infra/operations.py`` alarms on is emitted (a name written out in a call to the
  metrics API) by the module its docstring names for it;
* the deepest request body docs/minting-api.md gives is the edge's constant, and the constant is
  the deepest body docs/openapi.yaml describes;
* the worker pool local mode's docs describe is the one it starts.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from functions.shared.edge import DEEPEST_BODY
from ibi_tools.local.federation import LocalFederation

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("functions", "ibi")  # what is deployed or shipped, as opposed to tools and tests
BACKTICKED = re.compile(r"`([^`]+)`")
METRICS_API = {"add_metric", "single_metric"}  # Powertools: the name is `name=` or the first


# --------------------------------------------------------------------------- the AWS modules


def imported_modules(source: str) -> set[str]:
    """Every module ``source`` imports, anywhere (type-only imports and lazy ones too)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def imports_aws(source: str) -> bool:
    """Whether ``source`` imports boto3 or botocore (or their type stubs, ``mypy_boto3_*``)."""
    roots = {module.split(".")[0] for module in imported_modules(source)}
    return bool(roots & {"boto3", "botocore"}) or any(r.startswith("mypy_boto3_") for r in roots)


def aws_modules(root: Path = ROOT) -> set[str]:
    """The production modules that import boto3 or botocore, as repository paths."""
    return {
        path.relative_to(root).as_posix()
        for package in PRODUCTION
        for path in (root / package).rglob("*.py")
        if imports_aws(path.read_text())
    }


def readme_row(readme: str, what: str) -> list[str]:
    """The paths in the first cell of README's "What is where" row whose text begins ``what``."""
    for line in readme.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[1].startswith(what):
            return BACKTICKED.findall(cells[0])
    raise AssertionError(f"README has no row saying {what!r}")


IMPORTERS = "data access: the only modules that import boto3 or botocore"
HANDED_A_CLIENT = "data access through a client `wiring.py` hands them"


def test_the_readme_names_every_module_that_imports_boto3_or_botocore() -> None:
    readme = (ROOT / "README.md").read_text()
    named = readme_row(readme, IMPORTERS)
    assert len(named) == len(set(named))
    assert set(named) == aws_modules()


def test_the_modules_handed_a_client_exist_and_import_no_aws_library() -> None:
    named = readme_row((ROOT / "README.md").read_text(), HANDED_A_CLIENT)
    assert named
    for path in named:
        assert (ROOT / path).is_file(), f"README names {path}, which is gone"
        assert not imports_aws((ROOT / path).read_text()), f"{path} imports boto3 or botocore"


# ------------------------------------------------------------------------- alarmed metrics


def _strings(node: ast.AST, tables: dict[str, list[str]]) -> Iterator[str]:
    """The metric names an expression can be: its string literals (not an f-string's parts),
    a module-level string constant it names, and the values of a module-level dict it looks up
    (``NAMES[status]``, ``NAMES.get(…)``)."""
    if isinstance(node, ast.JoinedStr):
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Name) and node.id in tables:
        yield from tables[node.id]
    for child in ast.iter_child_nodes(node):
        yield from _strings(child, tables)


def _name_argument(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "name":
            return keyword.value
    return call.args[0] if call.args else None


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def emitted_metrics(source: str) -> set[str]:
    """The metric names a module emits, written out: the name given to ``add_metric`` or
    ``single_metric``, or to a function of the module that passes its argument on as one."""
    tree = ast.parse(source)
    tables = {  # module-level names: a string constant, or a dict of them
        target.id: [
            value.value
            for value in (node.value.values if isinstance(node.value, ast.Dict) else [node.value])
            if isinstance(value, ast.Constant) and isinstance(value.value, str)
        ]
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    wrappers = {
        function.name
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef)
        for call in ast.walk(function)
        if isinstance(call, ast.Call) and _called(call) in METRICS_API
        if isinstance(argument := _name_argument(call), ast.Name)
        and argument.id in {a.arg for a in function.args.args}
    }
    found = set()
    for call in calls:
        if _called(call) in METRICS_API | wrappers:
            argument = _name_argument(call)
            if argument is not None:
                found.update(_strings(argument, tables))
    return found


def alarmed_metrics(source: str) -> set[str]:
    """Every metric ``infra/operations.py`` alarms on: the name of each ``Signal(…)``."""
    return {
        node.args[0].value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Signal"
        if node.args and isinstance(node.args[0], ast.Constant)
    }


def documented_emitters(source: str) -> dict[str, str]:
    """metric -> module, as the docstring of ``infra/operations.py`` names them: each
    ````Name````, ````Other```` is followed by the ``(functions/….py[: …])`` that emits them."""
    docstring = ast.get_docstring(ast.parse(source)) or ""
    text = docstring.partition("publish themselves")[2]
    parts = re.split(r"\((functions/[\w/]+\.py)\b[^)]*\)", text)
    found = {}
    for names, module in zip(parts[::2], parts[1::2], strict=False):
        for name in re.findall(r"``(\w+)``", names.rpartition(")")[2]):
            found[name] = module
    return found


def unemitted_alarms(root: Path = ROOT) -> list[str]:
    """Each alarmed metric whose documented module does not emit it, said why."""
    source = (root / "infra" / "operations.py").read_text()
    emitters = documented_emitters(source)
    wrong = []
    for metric in sorted(alarmed_metrics(source)):
        module = emitters.get(metric)
        if module is None:
            wrong.append(f"{metric}: infra/operations.py names no module emitting it")
        elif not (root / module).is_file():
            wrong.append(f"{metric}: {module} is gone")
        elif metric not in emitted_metrics((root / module).read_text()):
            wrong.append(f"{metric}: {module} does not emit it")
    return wrong


def test_every_alarmed_metric_is_emitted_by_the_module_named_for_it() -> None:
    assert alarmed_metrics((ROOT / "infra" / "operations.py").read_text()) >= {
        "MintConflicts",
        "Resolution409",
        "Resolution504",
        "TwoOriginals",
        "ArchiveFailures",
    }
    assert unemitted_alarms() == []


def test_a_metric_is_emitted_only_when_its_name_is_written_out() -> None:
    source = (
        'NAMES = {409: "Resolution409"}\n'
        'BROKEN = "BrokenLinks"\n'
        "metrics.add_metric(name=BROKEN, unit=1, value=1)\n"
        "def count(name):\n"
        "    metrics.add_metric(name=name, unit=1, value=1)\n"
        'metrics.add_metric(name=f"Resolution{status}", unit=1, value=1)\n'
        'metrics.add_metric(name=NAMES.get(status, f"Resolution{status}"), unit=1, value=1)\n'
        'count("IntegrityProblems")\n'
        'with single_metric(name="ArchiveFailures", unit=1, value=1):\n'
        "    pass\n"
        'logger.info("Resolution504")\n'
    )
    assert emitted_metrics(source) == {
        "Resolution409",
        "BrokenLinks",
        "IntegrityProblems",
        "ArchiveFailures",
    }


# ------------------------------------------------------------------------ the edge's depth


def _depth(schema: Any, document: dict[str, Any], seen: frozenset[str] = frozenset()) -> int:
    """How deep objects and arrays nest in a body ``schema`` allows (``$ref`` followed)."""
    if not isinstance(schema, dict):
        return 0
    if "$ref" in schema:
        reference = schema["$ref"]
        assert reference not in seen, f"{reference} nests without end"
        target: Any = document
        for part in reference.removeprefix("#/").split("/"):
            target = target[part]
        return _depth(target, document, seen | {reference})
    deepest = max(
        (_depth(s, document, seen) for k in ("oneOf", "anyOf", "allOf") for s in schema.get(k, [])),
        default=0,
    )
    children = [*schema.get("properties", {}).values()]
    if isinstance(schema.get("additionalProperties"), dict):
        children.append(schema["additionalProperties"])
    if schema.get("type") == "object" or children:
        deepest = max(deepest, 1 + max((_depth(c, document, seen) for c in children), default=0))
    if schema.get("type") == "array" or "items" in schema:
        deepest = max(deepest, 1 + _depth(schema.get("items", {}), document, seen))
    return deepest


def deepest_documented_body(document: dict[str, Any]) -> int:
    """The deepest JSON request body of every operation in the OpenAPI ``document``."""
    depths = [0]
    for operations in document["paths"].values():
        for operation in operations.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            for media_type, media in (body or {}).get("content", {}).items():
                if "json" in media_type:
                    depths.append(_depth(media.get("schema", {}), document))
    return max(depths)


def docs_deepest_body(text: str) -> int:
    (found,) = re.findall(r"the deepest body any route takes has (\d+)", text)
    return int(found)


def test_the_deepest_body_in_the_docs_is_the_edge_constant() -> None:
    assert docs_deepest_body((ROOT / "docs" / "minting-api.md").read_text()) == DEEPEST_BODY
    document = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())
    assert deepest_documented_body(document) == DEEPEST_BODY


# -------------------------------------------------------------------- local mode's workers


def test_the_worker_pool_the_docs_describe_is_the_one_local_mode_starts() -> None:
    (workers,) = [f.default for f in dataclasses.fields(LocalFederation) if f.name == "workers"]
    for name in ("README.md", "docs/architecture.md", "docs/decisions.md"):
        text = " ".join((ROOT / name).read_text().split())
        assert "one worker process per concurrent request" not in text.lower(), name
        assert f"pool of {workers} worker" in text, f"{name} does not say pool of {workers}"
