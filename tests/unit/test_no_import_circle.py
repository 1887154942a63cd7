"""No import circle among the modules of ``functions/`` and ``ibi/`` (issue 29).

Read from the source (``ast``), nothing imported: every ``import`` counts, at module level or
deferred inside a function (a deferred import hides a circle, it does not break it), except
those under ``if TYPE_CHECKING:``, which never run. ``from package import name`` depends on
``package.name`` when that is a module, else on ``package``; a package's own ``__init__``
importing its modules is the package, not a circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("functions", "ibi")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement that may run, nested ones included (not ``if TYPE_CHECKING:``)."""
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _statements(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                yield from _statements([c for c in children if isinstance(c, ast.AST)])  # type: ignore[misc]


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: set[str] = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            wanted.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = (
                ".".join([*base, node.module] if node.module else base)
                if node.level
                else node.module or ""
            )
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                wanted.add(submodule if submodule in known else source)
    return {_module(w, known) for w in wanted} - {name, "", *_ancestors(name)}


def _module(dotted: str, known: dict[str, Path]) -> str:
    """The longest prefix of ``dotted`` that is one of ours ('' if none)."""
    parts = dotted.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_functions_or_ibi_imports_itself_through_another() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert circles(graph) == []


def test_the_reader_sees_a_deferred_import_and_ignores_type_checking_ones(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from functions.b import X\n"
        "def f():\n    from functions.c import Y\n"
    )
    known = {"functions.b": tmp_path, "functions.c": tmp_path, "functions.a": tmp_path / "a.py"}
    assert imports("functions.a", tmp_path / "a.py", known) == {"functions.c"}
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
