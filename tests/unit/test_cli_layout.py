"""The ``ibi`` command's layout (issue 29): one module a command group, none over 800 lines,
and every subcommand's ``cmd_*`` in the module whose argparse definition registers it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ibi_tools.cli
from ibi_tools.cli import build_parser
from ibi_tools.cli.labels import cmd_label

PACKAGE = Path(ibi_tools.cli.__file__).parent
MAX_LINES = 800


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Any]:
    """``("archive item", parser)`` for each command that runs (has no subcommands)."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        yield " ".join(path), parser
    for group in groups:
        for name, child in group.choices.items():
            yield from leaves(child, (*path, name))


def registrations(
    build: Callable[[], argparse.ArgumentParser], monkeypatch: pytest.MonkeyPatch
) -> dict[str, tuple[str, Any]]:
    """Each command that runs: the module whose code called ``add_parser`` for it, its ``run``."""
    registered_in: dict[int, str] = {}
    add_parser = argparse._SubParsersAction.add_parser

    def recording(self: Any, name: str, **kwargs: Any) -> Any:
        parser = add_parser(self, name, **kwargs)
        registered_in[id(parser)] = sys._getframe(1).f_globals["__name__"]
        return parser

    with monkeypatch.context() as patched:
        patched.setattr(argparse._SubParsersAction, "add_parser", recording)
        parser = build()
    return {
        command: (registered_in[id(leaf)], leaf.get_default("run"))
        for command, leaf in leaves(parser)
    }


def misplaced(found: dict[str, tuple[str, Any]]) -> dict[str, str]:
    """The commands whose ``run`` is not a ``cmd_*`` of the module that registers them."""
    wrong: dict[str, str] = {}
    for command, (module, run) in found.items():
        name = getattr(run, "__name__", repr(run))
        if getattr(run, "__module__", None) != module or not name.startswith("cmd_"):
            wrong[command] = (
                f"registered in {module}, runs {getattr(run, '__module__', '?')}.{name}"
            )
    return wrong


def test_no_module_of_the_ibi_command_is_over_800_lines() -> None:
    sizes = {path.name: len(path.read_text().splitlines()) for path in PACKAGE.glob("*.py")}
    assert {"__init__.py", "common.py", "archive.py", "deposit.py"} <= set(sizes)
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}


def test_every_subcommand_runs_a_cmd_of_the_module_that_defines_its_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = registrations(build_parser, monkeypatch)
    assert {"label", "mints", "deposit", "archive item", "archive on", "local"} <= set(found)
    assert misplaced(found) == {}


def test_a_subcommand_registered_away_from_its_cmd_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def drifted() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="ibi")
        commands = parser.add_subparsers(dest="command")
        commands.add_parser("label").set_defaults(run=cmd_label)  # its cmd_ is in labels.py
        return parser

    assert misplaced(registrations(drifted, monkeypatch)) == {
        "label": f"registered in {__name__}, runs ibi_tools.cli.labels.cmd_label"
    }
