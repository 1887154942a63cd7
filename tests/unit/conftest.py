"""Unit tests run with the network off: any connection attempt fails the test that makes it.

Unit tests use the in-memory fakes (``tests/fakes*.py``); what needs a socket, even on
loopback, is an integration test.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest


class NetworkOff(RuntimeError):
    """A unit test tried to open a connection."""


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise NetworkOff(f"unit tests run with the network off (tried to connect to {args[1:]!r})")


@pytest.fixture(autouse=True)
def network_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse)
    monkeypatch.setattr(socket.socket, "bind", _refuse)
    monkeypatch.setattr(socket, "create_connection", _refuse)
    yield
