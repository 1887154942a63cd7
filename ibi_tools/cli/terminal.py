"""What the ``ibi`` command writes: remote text shown, never run (issue 35).

Everything the command prints can hold text another server chose — an API's error message, a
reason phrase, an item's title, a repository's record — and a terminal runs the control
characters in it (``ESC [`` rewrites the screen, ``CR`` overwrites a line, a bidi override
reorders it). :func:`plain_output` puts :class:`PlainStream` over ``sys.stdout`` and
``sys.stderr`` while a command runs, so each such character is written as its escape
(``\\x1b``, ``\\u202e``); tab and newline pass. Progress bars (rich) write to :attr:`raw`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides/isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def plain(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\u202e``)."""
    return _CONTROLS.sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class PlainStream:
    """A text stream that writes :func:`plain` text to :attr:`raw`."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        return self.raw.write(plain(text))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def raw(stream: Any) -> TextIO:
    """The stream under a :class:`PlainStream` (for rich's own escape sequences), else it."""
    return stream.raw if isinstance(stream, PlainStream) else stream


@contextmanager
def plain_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as :class:`PlainStream`\\ s while the block runs."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PlainStream(saved[0]), PlainStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
