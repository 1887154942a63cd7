"""The function-length check of `make lint` (ibi_tools/lint.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ibi_tools.lint import check, long_functions, main, python_files, settings


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines - 1))
    return f"{indent}def {name}() -> None:\n{body}"


def test_a_function_over_the_limit_is_flagged_with_its_length() -> None:
    source = _function("short", 80) + "\n\n" + _function("long", 81)
    (found,) = long_functions(source, "pkg/mod.py", 80)
    assert (found.key, found.lines) == ("pkg/mod.py:long", 81)


def test_a_function_at_the_limit_passes() -> None:
    assert list(long_functions(_function("short", 80), "mod.py", 80)) == []


def test_methods_and_nested_functions_are_named_by_their_path() -> None:
    source = "class Service:\n" + _function("handle", 12, indent="    ")
    (found,) = long_functions(source, "mod.py", 10)
    assert found.key == "mod.py:Service.handle"


def test_a_named_exception_passes_and_a_stale_one_is_reported(tmp_path: Path) -> None:
    module = tmp_path / "mod.py"
    module.write_text(_function("long", 30))
    too_long, stale = check(tmp_path, [module], 20, {"mod.py:long": "a table, read whole"})
    assert (too_long, stale) == ([], [])
    too_long, stale = check(tmp_path, [module], 40, {"mod.py:long": "a table, read whole"})
    assert (too_long, stale) == ([], ["mod.py:long"])


def test_the_settings_come_from_pyproject_and_need_a_reason(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[tool.ibi.lint]\nmax-function-lines = 50\nlong-functions = { "a.py:f" = "why" }\n'
    )
    assert settings(pyproject) == (50, {"a.py:f": "why"})
    pyproject.write_text('[tool.ibi.lint]\nlong-functions = { "a.py:f" = "" }\n')
    with pytest.raises(SystemExit, match=r"a\.py:f needs a reason"):
        settings(pyproject)


def test_the_command_exits_1_on_a_long_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "long.py").write_text(_function("long", 81))
    (tmp_path / "short.py").write_text(_function("short", 5))
    monkeypatch.chdir(tmp_path)
    assert main(["short.py"]) == 0
    assert main(["long.py"]) == 1
    assert "long.py:long: 81 lines" in capsys.readouterr().out


def test_the_repository_has_no_function_over_the_limit() -> None:
    root = Path(__file__).resolve().parents[2]
    limit, allowed = settings(root / "pyproject.toml")
    too_long, stale = check(root, python_files(root), limit, allowed)
    assert [f.key for f in too_long] == [] and stale == []
