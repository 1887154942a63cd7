"""``ibi``: the command line of the IBI system.

``label`` and ``inspect`` print the contract outputs that conformance suites read; ``mint``
and ``mints`` talk to a minting API; ``deposit``, ``archive`` and ``resolver`` to an Archive's
deposit API and a resolver; ``local`` runs the services on loopback. Every command that prints
JSON does so with ``--json`` only, and prints text for people without it.

One module a command group, each command's argparse definition beside its ``cmd_*``:
:mod:`.labels` (label, inspect), :mod:`.minting` (mint, mints), :mod:`.deposit` (deposit,
holdings, cite), :mod:`.archive` (``archive …``), :mod:`.resolver` (``resolver …``),
:mod:`.local` (local); :mod:`.common` holds what they share. Here: the parser and ``main``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from ibi import __version__
from ibi.core.errors import InvalidInput
from ibi_tools.cli.archive import add_archive_commands
from ibi_tools.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    ibi_argument,
)
from ibi_tools.cli.deposit import (
    add_cite_command,
    add_deposit_command,
    add_holdings_command,
    gather_files,
)
from ibi_tools.cli.labels import add_label_commands
from ibi_tools.cli.local import add_local_command
from ibi_tools.cli.minting import add_minting_commands
from ibi_tools.cli.resolver import add_resolver_commands
from ibi_tools.cli.terminal import plain_output

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CommandError",
    "Parser",
    "build_parser",
    "gather_files",
    "ibi_argument",
    "main",
]

DESCRIPTION = (
    "ibi: the command line of the IBI system: make and decode IBIs, mint them, deposit items "
    "in an Archive and manage it, ask a resolver, run the federation locally."
)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2, and an unknown
    option is refused by the command it was given to, with the option it is likely to mean."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ibi: {message} (see `{self.prog} --help`)\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command: argparse.ArgumentParser = getattr(parsed, "command_parser", self)
            command.error(unrecognized(extras, command))
        return parsed


def unrecognized(extras: Sequence[str], command: argparse.ArgumentParser) -> str:
    """``unrecognized arguments: --idempotency-keys (did you mean --idempotency-key?)``."""
    import difflib

    known = [option for action in command._actions for option in action.option_strings]
    guesses = []
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.partition("=")[0], known, n=1, cutoff=0.6)
            guesses += close
    meant = f" (did you mean {' and '.join(guesses)}?)" if guesses else ""
    return f"unrecognized arguments: {' '.join(extras)}{meant}"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ibi", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"ibi {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, parser_class=Parser, metavar="COMMAND"
    )
    add_label_commands(commands)
    add_minting_commands(commands)
    add_deposit_command(commands)
    add_archive_commands(commands)
    add_resolver_commands(commands)
    add_holdings_command(commands)
    add_cite_command(commands)
    add_local_command(commands)
    _name_commands(parser)
    return parser


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Each (sub)command records itself in what it parses: its errors are its own."""
    parser.set_defaults(command_parser=parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _name_commands(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; whatever it writes is :func:`~ibi_tools.cli.terminal.plain` text."""
    with plain_output():
        return _run(argv)


def _run(argv: Sequence[str] | None) -> int:
    from ibi.client import ApiError

    try:
        # An IBI argument is read while parsing (ibi_argument): its refusal is a CommandError.
        args = build_parser().parse_args(argv)
        status: int = args.run(args)
        return status
    except CommandError as error:
        sys.stderr.write(f"ibi: {error}\n")
        return error.status
    except InvalidInput as error:
        sys.stderr.write(f"ibi: {error}\n")
        return EXIT_USAGE
    except ApiError as error:
        sys.stderr.write(f"ibi: {error}\n")
        return EXIT_FAILED
    except BrokenPipeError:
        return EXIT_OK
