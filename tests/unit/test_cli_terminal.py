"""Remote text reaches the terminal shown, never run (issue 35): whatever a command prints."""

from __future__ import annotations

import argparse
import io
import sys

import pytest

from ibi.client import ApiError
from ibi_tools.cli import main
from ibi_tools.cli.terminal import PlainStream, plain, plain_output, raw

HOSTILE = "title\x1b[2J\x1b]0;owned\x07\rfake ok\u202eevil\x9b"


def test_plain_writes_each_control_as_its_escape() -> None:
    assert plain(HOSTILE) == "title\\x1b[2J\\x1b]0;owned\\x07\\x0dfake ok\\u202eevil\\x9b"
    assert plain("a\tb\nc é ü 日本") == "a\tb\nc é ü 日本"  # tab, newline, letters pass


def test_an_api_error_message_is_printed_escaped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hostile server's error message (the ApiError the client raises), as main prints it."""
    import ibi_tools.cli as cli

    def hostile(_: argparse.Namespace) -> int:
        raise ApiError(400, HOSTILE, "BadRequest")

    parser = cli.build_parser()
    monkeypatch.setattr(parser, "parse_args", lambda argv: argparse.Namespace(run=hostile))
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert main(["mint"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err and "\u202e" not in err
    assert "\\x1b[2J" in err and "fake ok" in err


def test_what_a_command_writes_to_stdout_is_plain(capsys: pytest.CaptureFixture[str]) -> None:
    with plain_output():
        sys.stdout.write(HOSTILE + "\n")
        print("and", "\x1b[31mred")
    out = capsys.readouterr().out
    assert "\x1b" not in out and out.endswith("and \\x1b[31mred\n")


def test_progress_bars_write_under_the_plain_stream() -> None:
    under = io.StringIO()
    stream = PlainStream(under)
    assert raw(stream) is under and raw(under) is under
    raw(stream).write("\x1b[2K")  # rich's own sequence, as rich writes it
    stream.write("\x1b")
    assert under.getvalue() == "\x1b[2K\\x1b"
