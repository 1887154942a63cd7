"""HTTP header values read or written by more than one service, each parsed or written here once.

- ``Accept`` (RFC 9110 §12.5.1): :func:`accept_ranges` gives each media range in the order
  given, lowercased, with its q-value and its other parameters. A q-value is clamped to
  ``[0, 1]``; one that is no number, or no finite one (``NaN``, ``inf``), counts as 0. Only the
  first :data:`MAX_RANGES` ranges of a header are read. :func:`prefers` is the one comparison
  the pages make: one media type against the page types.
- ``Link`` (RFC 8288): :func:`link_target`, a URL as it may stand between ``<`` and ``>``.

Pure: strings in, values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MAX_RANGES = 32  # of one Accept header: the rest is not read

MediaRange = tuple[str, float, dict[str, str]]  # (type/subtype, q, other parameters)


def quality(value: str) -> float:
    """A q-value: clamped to ``[0, 1]``; no number, ``NaN`` or an infinity: 0."""
    try:
        q = float(value)
    except ValueError:
        return 0.0
    return min(max(q, 0.0), 1.0) if math.isfinite(q) else 0.0


def accept_ranges(header: str | None) -> list[MediaRange]:
    """``(media range, q, other parameters)`` in the order given (module doc)."""
    ranges: list[MediaRange] = []
    for part in (header or "").split(",")[:MAX_RANGES]:
        kind, *pieces = (piece.strip() for piece in part.split(";"))
        q, parameters = 1.0, {}
        for piece in pieces:
            key, _, value = piece.partition("=")
            key = key.strip().lower()
            if key == "q":
                q = quality(value)
            elif key:
                parameters[key] = value.strip().strip('"')
        if kind:
            ranges.append((kind.lower(), q, parameters))
    return ranges


def prefers(header: str | None, kind: str, over: Iterable[str]) -> bool:
    """Whether ``kind`` is wanted (q > 0) more than each of ``over``, each type taken at the
    highest q it is named with (a wildcard stands for no type here: ``*/*`` wants the page)."""
    named: dict[str, float] = {}
    for media_range, q, _ in accept_ranges(header):
        named[media_range] = max(q, named.get(media_range, 0.0))
    wanted = named.get(kind, 0.0)
    return wanted > 0 and all(wanted > named.get(other, 0.0) for other in over)


def link_target(url: str) -> str:
    """A URL as it may stand between ``<`` and ``>`` in a Link header: ASCII, and every
    character that would end it (``<>",;\\``, space, controls) percent-encoded as UTF-8."""
    return "".join(
        "".join(f"%{b:02X}" for b in c.encode("utf-8", "replace"))
        if c in '<>"\\,; ' or not "\x21" <= c <= "\x7e"
        else c
        for c in url
    )
