"""The API client: SigV4 for AWS endpoints only, retries as the server says, errors."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from email.message import Message
from typing import Any

import pytest

from ibi.client import (
    Answer,
    ApiError,
    ArchiveClient,
    MintingClient,
    Raw,
    RetryPolicy,
    aws_region_of,
    http_send,
    send_switch,
)


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


class Scripted:
    """A transport answering from a script; records what it was sent (no socket)."""

    def __init__(self, *script: tuple[int, dict[str, str], Any]) -> None:
        self.script = list(script)
        self.seen: list[dict[str, Any]] = []

    def __call__(self, method: str, url: str, **request: Any) -> Raw:
        self.seen.append(
            {
                "method": method,
                "url": url,
                "headers": {k.lower(): v for k, v in request["headers"].items()},
                "body": json.loads(request["data"]),
            }
        )
        status, headers, body = self.script.pop(0)
        return Raw(status, headers, json.dumps(body).encode())


def test_retries_keep_the_idempotency_key_and_honour_retry_after() -> None:
    busy = {"error": {"code": "Contention", "message": "busy"}}
    ok = {"subsystem": "default", "ibis": [{"rep": "r", "ibip": "i", "date": "1", "iso": "x"}]}
    server = Scripted((503, {"Retry-After": "2"}, busy), (429, {}, busy), (200, {}, ok))
    slept: list[float] = []
    client = MintingClient("http://127.0.0.1:8800", sleep=slept.append, transport=server)
    assert client.mint(count=2, idempotency_key="k-1") == ok
    assert slept[0] == 2.0 and len(slept) == 2
    assert {s["headers"]["idempotency-key"] for s in server.seen} == {"k-1"}
    assert all(s["body"] == {"count": 2} for s in server.seen)
    assert {(s["method"], s["url"]) for s in server.seen} == {
        ("POST", "http://127.0.0.1:8800/mint")
    }


def test_errors_carry_the_servers_message() -> None:
    server = Scripted((404, {}, {"error": {"code": "UnknownSubsystem", "message": "no 'x'"}}))
    with pytest.raises(ApiError) as caught:
        MintingClient("http://127.0.0.1:8800", retries=0, transport=server).mint(subsystem="x")
    assert caught.value.status == 404 and caught.value.code == "UnknownSubsystem"
    assert "no 'x'" in str(caught.value)


@pytest.mark.parametrize(
    ("statuses", "slept"),
    [
        ([503, 503, 503, 200], [0.2, 0.4, 0.8]),  # exponential backoff without Retry-After
        ([409, 200], [0.2]),  # minting: a request still in progress is retried
        ([503] * 9, [0.2, 0.4, 0.8, 1.6, 3.2]),  # 5 retries, then the last answer
    ],
)
def test_the_retry_policy(statuses: list[int], slept: list[float]) -> None:
    server = Scripted(*[(status, {}, {}) for status in statuses])
    waits: list[float] = []
    client = MintingClient("http://127.0.0.1:8800", sleep=waits.append, transport=server)
    assert client.request("POST", "/mint", {}).status == statuses[len(slept)]
    assert waits == pytest.approx(slept)


def test_409_is_retried_only_by_the_minting_client() -> None:
    server = Scripted((409, {}, {"error": {"code": "Conflict", "message": "exists"}}))
    with pytest.raises(ApiError, match="exists"):
        ArchiveClient("http://127.0.0.1:8800", transport=server, sleep=_no_sleep).create({})
    assert RetryPolicy(frozenset({503})).delay(1, Answer(503, {"retry-after": "99"}, None)) == 30


def _no_sleep(_: float) -> None:
    raise AssertionError("not retried")


def test_unreachable_endpoint_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    with pytest.raises(ApiError, match=r"cannot reach http://127\.0\.0\.1:9/mint: .*refused"):
        MintingClient("http://127.0.0.1:9", retries=0, timeout=2).mint()


def test_http_send_gives_error_answers_as_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_found(request: urllib.request.Request, timeout: float) -> Any:
        assert request.get_method() == "GET" and timeout == 3
        body = io.BytesIO(b"400 unknown key")
        raise urllib.error.HTTPError(request.full_url, 400, "Bad", Message(), body)

    monkeypatch.setattr(urllib.request, "urlopen", not_found)
    raw = http_send("GET", "http://127.0.0.1:9/x", timeout=3)
    assert (raw.status, raw.content, raw.reason) == (400, b"400 unknown key", "Bad Request")
    with pytest.raises(ApiError, match=r"^400 : 400 unknown key$") as caught:
        send_switch(
            "http://127.0.0.1:9",
            address="a",
            service_ibi="s",
            base_url="http://127.0.0.1:1",
            registration_key="k",
            on=True,
            timeout=3,
        )
    assert caught.value.status == 400
