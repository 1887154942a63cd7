"""No production file over 800 lines (issue 29): a file that long does several things, and
each deserves a module a reader can hold. Production is ``functions/``, ``ibi/``,
``ibi_tools/``, ``infra/`` and ``app.py``; tests, benchmarks and generated files are not."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("functions", "ibi", "ibi_tools", "infra")
MAX_LINES = 800


def production_files(root: Path = ROOT) -> list[Path]:
    """Every Python file of production code under ``root``."""
    files = [path for package in PRODUCTION for path in sorted((root / package).rglob("*.py"))]
    return [*files, root / "app.py"]


def oversized(files: list[Path], root: Path = ROOT, limit: int = MAX_LINES) -> dict[str, int]:
    """Each of ``files`` over ``limit`` lines, by its path from ``root``, with its count."""
    counts = {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in files
    }
    return {path: lines for path, lines in counts.items() if lines > limit}


def test_no_production_file_is_over_800_lines() -> None:
    files = production_files()
    assert len(files) > 100 and ROOT / "ibi" / "core" / "labels.py" in files
    assert oversized(files) == {}


def test_a_file_over_the_limit_is_named_with_its_line_count(tmp_path: Path) -> None:
    (tmp_path / "functions").mkdir()
    (tmp_path / "functions" / "long.py").write_text("x = 1\n" * 801)
    (tmp_path / "functions" / "short.py").write_text("x = 1\n" * 800)
    (tmp_path / "app.py").write_text("")
    for package in PRODUCTION[1:]:
        (tmp_path / package).mkdir()
    assert oversized(production_files(tmp_path), tmp_path) == {"functions/long.py": 801}
