"""The API Gateway stand-in itself: events in, answers out, requests counted."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

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
