"""The API client: SigV4 for AWS endpoints only, retries as the server says, errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from ibi.client import ApiError, MintingClient, aws_region_of


def test_region_of_api_gateway_endpoints() -> None:
    assert aws_region_of("https://a1b2c3.execute-api.eu-west-1.amazonaws.com/") == "eu-west-1"
    assert aws_region_of("http://127.0.0.1:8800") is None
    assert aws_region_of("https://ids.example.org") is None


def test_aws_endpoints_are_signed_with_sigv4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    client = MintingClient("https://a1b2c3.execute-api.eu-west-1.amazonaws.com")
    assert client.signer is not None
    headers = client.signer.sign(
        "POST", "https://a1b2c3.execute-api.eu-west-1.amazonaws.com/mint", {}, b"{}"
    )
    assert (
        headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        and "/eu-west-1/execute-api/aws4_request" in headers["Authorization"]
    )
    assert "secret" not in json.dumps(headers)


def test_local_endpoints_are_not_signed() -> None:
    assert MintingClient("http://127.0.0.1:8800").signer is None
    assert MintingClient("https://x.execute-api.eu-west-1.amazonaws.com", sign=False).signer is None


def test_sign_needs_a_region_outside_aws() -> None:
    with pytest.raises(ApiError, match="--region"):
        MintingClient("https://ids.example.org", sign=True)


class Scripted(BaseHTTPRequestHandler):
    """Answers from a script; records what it was sent."""

    script: list[tuple[int, dict[str, str], Any]] = []
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        type(self).seen.append(
            {
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": json.loads(self.rfile.read(length)),
            }
        )
        status, headers, body = type(self).script.pop(0)
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    Scripted.script, Scripted.seen = [], []
    httpd = HTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


def test_retries_keep_the_idempotency_key_and_honour_retry_after(server: str) -> None:
    busy = {"error": {"code": "Contention", "message": "busy"}}
    ok = {"subsystem": "default", "ibis": [{"rep": "r", "ibip": "i", "date": "1", "iso": "x"}]}
    Scripted.script = [(503, {"Retry-After": "2"}, busy), (429, {}, busy), (200, {}, ok)]
    slept: list[float] = []
    client = MintingClient(server, sleep=slept.append)
    assert client.mint(count=2, idempotency_key="k-1") == ok
    assert slept[0] == 2.0 and len(slept) == 2
    assert {s["headers"]["idempotency-key"] for s in Scripted.seen} == {"k-1"}
    assert all(s["body"] == {"count": 2} for s in Scripted.seen)


def test_errors_carry_the_servers_message(server: str) -> None:
    Scripted.script = [(404, {}, {"error": {"code": "UnknownSubsystem", "message": "no 'x'"}})]
    with pytest.raises(ApiError) as caught:
        MintingClient(server, retries=0).mint(subsystem="x")
    assert caught.value.status == 404 and caught.value.code == "UnknownSubsystem"
    assert "no 'x'" in str(caught.value)


def test_unreachable_endpoint_is_a_clear_error() -> None:
    from ibi_tools.local.stores import free_port

    with pytest.raises(ApiError, match="cannot reach"):
        MintingClient(f"http://127.0.0.1:{free_port()}", retries=0, timeout=2).mint()
