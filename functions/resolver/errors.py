"""The resolver's store errors, apart from any store: the registry and the throttle raise them,
the handler answers them (503, or 429 when DynamoDB throttled), and neither store imports the
other."""

from __future__ import annotations


class RegistryError(Exception):
    """The registry (or its throttle table) is unavailable."""

    def __init__(self, message: str, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.throttled = throttled
