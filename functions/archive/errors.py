"""What can go wrong in an Archive that a caller is told about, each with its HTTP status."""

from __future__ import annotations


class ArchiveError(Exception):
    """A refusal the caller can act on; ``status`` is the HTTP answer."""

    status = 400


class BadRequest(ArchiveError):
    """The request is malformed or asks for something the rules forbid."""


class NotHeld(ArchiveError):
    """This Archive holds no such item (or page)."""

    status = 404


class Conflict(ArchiveError):
    """The item's state forbids the change (one item per IBI, untransferable, busy)."""

    status = 409


class Gone(ArchiveError):
    """The item was deleted: its IBI stays known and is never reused."""

    status = 410


class Unprocessable(ArchiveError):
    """Well-formed, but its content cannot be used (an offer token that does not decode)."""

    status = 422


class Unavailable(ArchiveError):
    """A store or service this Archive depends on cannot answer now."""

    status = 503


class ProtocolError(Exception):
    """A service-protocol request the Archive cannot answer (a 400 with an ``error`` pair)."""
