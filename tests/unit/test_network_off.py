"""The unit suite's guard: no connection leaves a unit test, not even to loopback."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from tests.unit.conftest import NetworkOff


def test_a_connection_from_a_unit_test_is_refused() -> None:
    with pytest.raises(NetworkOff):
        socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_an_http_request_from_a_unit_test_is_refused() -> None:
    with pytest.raises(NetworkOff):
        urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)


def test_a_server_cannot_listen_in_a_unit_test() -> None:
    with socket.socket() as server, pytest.raises(NetworkOff):
        server.bind(("127.0.0.1", 0))
