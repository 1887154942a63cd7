"""Errors of the IBI rules. Each names the part of the input that is wrong."""

from __future__ import annotations


class InvalidInput(ValueError):
    """Something a caller gave is not acceptable; ``part`` names what, ``reason`` says why."""

    def __init__(self, part: str, reason: str) -> None:
        super().__init__(f"{part}: {reason}")
        self.part = part
        self.reason = reason


class InvalidIBI(InvalidInput):
    """A label that is not a valid IBI in either form."""


class InvalidGranularity(InvalidInput):
    """A temporal granularity outside {60, 1, 0.1, 0.01, ...}."""

    def __init__(self, reason: str) -> None:
        super().__init__("granularity", reason)
