"""The API Gateway stand-in itself: events in, answers out, requests counted."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.stores import free_port


def _echo() -> Any:
    def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if event["rawPath"] == "/fail":
            raise RuntimeError("the Lambda failed")
        body = {"path": event["rawPath"], "query": event["rawQueryString"]}
        return {
            "statusCode": 200,
            "headers": {"content-type": "application/json"},
            "body": json.dumps(body),
        }

    return handle


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_every_answered_request_is_counted_as_api_gateway_counts_them() -> None:
    gateway = LocalGateway("echo", _echo, free_port(), workers=2).start()
    try:
        assert gateway.requests_served == 0
        with urllib.request.urlopen(f"{gateway.url}/a/b?x=1", timeout=10) as response:
            assert json.loads(response.read()) == {"path": "/a/b", "query": "x=1"}
        statuses = [_status(f"{gateway.url}/n{i}") for i in range(4)]
        statuses.append(_status(f"{gateway.url}/fail"))  # the handler raised: a 500, counted
        assert statuses == [200, 200, 200, 200, 500]
        assert gateway.requests_served == 6
    finally:
        gateway.shutdown()


def test_free_ports_lie_below_the_range_outgoing_connections_take_theirs_from() -> None:
    from ibi_tools.local.stores import _ephemeral_ports

    low, _ = _ephemeral_ports()
    ports = {free_port() for _ in range(20)}
    assert all(port < low for port in ports)
    gateway = LocalGateway("echo", _echo, ports.pop(), workers=1)  # binds it
    gateway.shutdown()


# -- HTTP/1.1: kept connections, and what the gateway refuses itself (issue 14) -----------------


def _raw(port: int, data: bytes, *, wait: float = 0.3) -> bytes:
    """Send ``data`` on a new connection; everything the gateway wrote back within ``wait``."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        sock.settimeout(wait)
        answer = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := sock.recv(65536):
                answer += chunk
    return answer


@pytest.fixture
def echo() -> Iterator[LocalGateway]:
    gateway = LocalGateway("echo", _echo, free_port(), workers=1).start()
    yield gateway
    gateway.shutdown()


def test_a_kept_connection_carries_request_after_request(echo: LocalGateway) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", echo.port, timeout=10)
    for n in range(5):
        connection.request("GET", f"/kept?n={n}")
        response = connection.getresponse()
        assert json.loads(response.read()) == {"path": "/kept", "query": f"n={n}"}
        assert response.getheader("connection") is None  # kept open
    connection.close()
    pipelined = _raw(
        echo.port, b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n"
    )
    assert pipelined.count(b"HTTP/1.1 200 OK") == 2 and pipelined.index(b"/a") < pipelined.index(
        b"/b"
    )


def test_an_idle_or_slow_connection_holds_no_worker(echo: LocalGateway) -> None:
    """One worker: a client that opened a connection and sent half a request, and one that
    sent nothing, do not keep it from answering a third."""
    with (
        socket.create_connection(("127.0.0.1", echo.port)) as idle,
        socket.create_connection(("127.0.0.1", echo.port)) as slow,
    ):
        slow.sendall(b"GET /slow HTTP/1.1\r\nHo")
        assert _status(f"{echo.url}/third") == 200
        slow.sendall(b"st: h\r\n\r\n")  # the rest, later: answered too
        slow.settimeout(5)
        assert slow.recv(65536).startswith(b"HTTP/1.1 200 OK")
        idle.sendall(b"GET /late HTTP/1.1\r\nHost: h\r\n\r\n")
        idle.settimeout(5)
        assert idle.recv(65536).startswith(b"HTTP/1.1 200 OK")


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999\r\n\r\n", b"413"),
        (b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", b"400"),
        (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", b"431"),
        (b"NOT HTTP AT ALL\r\n\r\n", b"400"),
        (b"GET /fail HTTP/1.1\r\nHost: h\r\n\r\n", b"500"),
    ],
)
def test_what_the_gateway_refuses_is_answered_then_closed(
    echo: LocalGateway, request_bytes: bytes, status: bytes
) -> None:
    answer = _raw(echo.port, request_bytes)
    assert answer.startswith(b"HTTP/1.1 " + status), answer[:80]
    assert _status(f"{echo.url}/after") == 200  # the worker serves on


def test_head_has_no_body_and_expect_continue_is_answered(echo: LocalGateway) -> None:
    head = _raw(echo.port, b"HEAD /h HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")
    assert b"connection: close" in head
    continued = _raw(
        echo.port,
        b"POST /c HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
    )
    assert continued.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
    chunked = _raw(
        echo.port,
        b"POST /chunked HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n0\r\n\r\n",
    )
    assert chunked.startswith(b"HTTP/1.1 200 OK") and b'"/chunked"' in chunked


def test_a_header_with_a_line_break_is_never_sent() -> None:
    def splitting() -> Any:
        def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
            return {"statusCode": 200, "headers": {"x-a": "1\r\nset-cookie: evil=1"}, "body": ""}

        return handle

    gateway = LocalGateway("split", splitting, free_port(), workers=1).start()
    try:
        answer = _raw(gateway.port, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 500") and b"evil" not in answer
    finally:
        gateway.shutdown()
