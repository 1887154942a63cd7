"""``python -m ibi_tools.lint``: no function outside tests/ longer than the limit.

The limit (80 lines, from ``def`` to the function's last line, decorators excluded) keeps a
function readable in one screen. An exception is named in pyproject.toml with its reason::

    [tool.ibi.lint]
    max-function-lines = 80
    long-functions = { "path/to/module.py:Class.function" = "why it must stay whole" }

Complexity is ruff's (C901, ``[tool.ruff.lint.mccabe]``); this checks length only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_FUNCTION_LINES = 80
EXCLUDED_PARTS = frozenset({"tests", ".venv", "node_modules", "cdk.out", "build", ".cache"})


@dataclass(frozen=True, slots=True)
class LongFunction:
    path: str  # relative to the root, with /
    name: str  # qualified: Class.method, outer.inner
    lines: int

    @property
    def key(self) -> str:
        return f"{self.path}:{self.name}"


def long_functions(source: str, path: str, limit: int) -> Iterator[LongFunction]:
    """The functions of ``source`` over ``limit`` lines, nested ones included."""

    def visit(node: ast.AST, prefix: str) -> Iterator[LongFunction]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > limit:
                        yield LongFunction(path, name, lines)
                yield from visit(child, f"{name}.")
            else:
                yield from visit(child, prefix)

    yield from visit(ast.parse(source, filename=path), "")


def python_files(root: Path) -> list[Path]:
    """The Python files git knows below ``root`` (tracked, or untracked and not ignored)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],  # noqa: S607
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        paths = [root / name for name in listed]
    except (OSError, subprocess.CalledProcessError):
        paths = sorted(root.rglob("*.py"))
    return [
        path
        for path in paths
        if path.is_file() and not EXCLUDED_PARTS & set(path.relative_to(root).parts)
    ]


def check(
    root: Path, paths: Sequence[Path], limit: int, allowed: Mapping[str, str]
) -> tuple[list[LongFunction], list[str]]:
    """The long functions not allowed, and the allowed names that are not long (stale)."""
    found: list[LongFunction] = []
    for path in paths:
        relative = path.relative_to(root).as_posix()
        found += long_functions(path.read_text(encoding="utf-8"), relative, limit)
    keys = {function.key for function in found}
    return [f for f in found if f.key not in allowed], sorted(set(allowed) - keys)


def settings(pyproject: Path) -> tuple[int, dict[str, str]]:
    """The limit and the named exceptions of ``[tool.ibi.lint]``."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8")) if pyproject.exists() else {}
    lint = config.get("tool", {}).get("ibi", {}).get("lint", {})
    allowed = dict(lint.get("long-functions", {}))
    for key, reason in allowed.items():
        if not isinstance(reason, str) or not reason.strip():
            raise SystemExit(f"[tool.ibi.lint] long-functions: {key} needs a reason")
    return int(lint.get("max-function-lines", MAX_FUNCTION_LINES)), allowed


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path.cwd()
    limit, allowed = settings(root / "pyproject.toml")
    paths = [Path(arg).resolve() for arg in args] if args else python_files(root)
    too_long, stale = check(root, paths, limit, allowed)
    for function in too_long:
        sys.stdout.write(
            f"{function.key}: {function.lines} lines (limit {limit}; split it, or name it "
            "with a reason in [tool.ibi.lint] long-functions)\n"
        )
    for key in stale:
        sys.stdout.write(f"{key}: named in [tool.ibi.lint] long-functions but not long: remove\n")
    return 1 if too_long or stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
