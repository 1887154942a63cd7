"""The API client: SigV4 for AWS endpoints only, retries as the server says, errors."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from ibi.client import (
    Answer,
    ApiClient,
    ApiError,
    ArchiveClient,
    LocalFile,
    MintingClient,
    Raw,
    ResolverClient,
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
    with pytest.raises(ApiError, match=r"^400 Bad Request: 400 unknown key$") as caught:
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


# ---------------------------------------------------------------------------- refusals, errors


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (502, {"error": {"code": "TransferRefused", "message": "nothing moved"}}),
        (502, {"error": {"code": "TransferIncomplete", "message": "look where it is"}}),
        (403, {"message": "Forbidden"}),
        (400, {"error": {"code": "BadRequest", "message": "no"}}),
        (404, {"error": {"code": "NotHeld", "message": "not here"}}),
        (422, {"error": {"code": "FileMismatch", "message": "other bytes"}}),
    ],
)
def test_a_deterministic_refusal_is_sent_once(status: int, body: dict[str, Any]) -> None:
    server = Scripted((status, {}, body), (200, {}, {}))
    with pytest.raises(ApiError) as caught:
        ArchiveClient("http://127.0.0.1:8810", transport=server, sleep=_no_sleep).call(
            "POST", "/api/item/transfer", {"to": "http://127.0.0.1:8820"}, ibi="x"
        )
    assert caught.value.status == status and len(server.seen) == 1


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (502, {"message": "Internal server error"}),  # API Gateway's: the Lambda failed
        (504, {"message": "Endpoint request timed out"}),
        (503, {"error": {"code": "Unavailable", "message": "retry shortly"}}),
        (408, None),
        (429, {"message": "Too Many Requests"}),
    ],
)
def test_a_gateway_failure_or_a_busy_answer_is_retried(status: int, body: Any) -> None:
    server = Scripted((status, {}, body), (200, {}, {"ok": True}))
    waits: list[float] = []
    client = ArchiveClient("http://127.0.0.1:8810", transport=server, sleep=waits.append)
    assert client.call("POST", "/api/verify", {}) == {"ok": True}
    assert len(server.seen) == 2 and len(waits) == 1


class Site:
    """Three ibi services' answers by path, as their handlers give them (no socket)."""

    RESOLVER_404 = (
        b"<!doctype html><html><head><title>404</title><style>p{color:red}</style></head>"
        b"<body><h1>Malformed persistent URL</h1><p>/mint: ibi: &#x27;mint&#x27; does not "
        b'start with an IBI</p><p><a href="/">IBI resolver</a></p></body></html>'
    )

    def __init__(self, service: str) -> None:
        self.service = service
        self.urls: list[str] = []

    def __call__(self, method: str, url: str, **_: Any) -> Raw:
        self.urls.append(url)
        path = urlsplit(url).path
        html = {"content-type": "text/html; charset=utf-8"}
        if self.service == "resolver":
            if path == "/inspect":
                return Raw(200, {}, json.dumps({"form": "ibip"}).encode())
            return Raw(404, html, self.RESOLVER_404)
        if self.service == "archive" and path == "/api/service":
            return Raw(200, {}, json.dumps({"archiveserviceibi": {"ibip": "A/B"}}).encode())
        if self.service == "minting" and path == "/subsystems":
            return Raw(200, {}, json.dumps({"subsystems": []}).encode())
        message = f"no route {path}"
        return Raw(
            404, {}, json.dumps({"error": {"code": "NotFound", "message": message}}).encode()
        )


@pytest.mark.parametrize(
    ("service", "client_class", "call", "said"),
    [
        ("resolver", MintingClient, lambda c: c.mint(), "is the resolver, not the minting service"),
        ("archive", MintingClient, lambda c: c.mint(), "is an Archive, not the minting service"),
        ("resolver", ArchiveClient, lambda c: c.create({}), "is the resolver, not an Archive"),
        ("minting", ArchiveClient, lambda c: c.item("x"), "is the minting service, not an Archive"),
        ("archive", ResolverClient, lambda c: c.holdings("A/B"), "is an Archive, not the resolver"),
        ("minting", ResolverClient, lambda c: c.archives(), "is the minting service, not the"),
    ],
)
def test_an_endpoint_of_another_service_is_named(
    service: str, client_class: type[ApiClient], call: Any, said: str
) -> None:
    site = Site(service)
    client = client_class("http://127.0.0.1:9/", transport=site, sleep=_no_sleep)
    with pytest.raises(ApiError) as caught:
        call(client)
    message = str(caught.value)
    assert message.startswith("http://127.0.0.1:9 is ") and said in message
    assert "<" not in message and "None" not in message
    assert not any("//" in url.partition("://")[2] for url in site.urls)  # trailing slash


def test_an_html_answer_is_read_as_text_never_dumped() -> None:
    site = Site("resolver")
    with pytest.raises(ApiError) as caught:  # the resolver's own client: no other service named
        ResolverClient("http://127.0.0.1:9", transport=site, sleep=_no_sleep).archives()
    message = str(caught.value)
    assert message.startswith("404 Not Found: ") and "Malformed persistent URL" in message
    assert "<" not in message and "color:red" not in message and "&#x27;" not in message


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (403, "status.archive refused\r\n", "403 Forbidden: status.archive refused"),
        (
            400,
            "error {registrationkey: a key is 10%2B digits}\r\n",
            "400 Bad Request: registrationkey: a key is 10+ digits",
        ),
        (403, {"error": {"code": None, "message": None}}, "403 Forbidden: Forbidden"),
        (500, None, "500 Internal Server Error: no answer body"),
    ],
)
def test_errors_have_a_code_or_a_reason_decoded_text_and_no_none(
    status: int, body: Any, expected: str
) -> None:
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    content = b"" if body is None else content

    def answer(*_: Any, **__: Any) -> Raw:
        return Raw(status, {}, content)

    with pytest.raises(ApiError) as caught:
        ArchiveClient("http://127.0.0.1:9", transport=answer, retries=0).call("GET", "/api/item")
    assert str(caught.value) == expected


def test_switch_refusals_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    import ibi.client.resolver

    def refuse(*_: Any, **__: Any) -> Raw:
        return Raw(400, {}, b"error {registrationkey: a key is 10%2B digits}\r\n")

    monkeypatch.setattr(ibi.client.resolver, "http_send", refuse)
    with pytest.raises(ApiError) as caught:
        send_switch(
            "http://127.0.0.1:9/",
            address="a",
            service_ibi="s",
            base_url="http://127.0.0.1:1",
            registration_key="k",
            on=True,
        )
    assert str(caught.value) == "400 Bad Request: registrationkey: a key is 10+ digits"


# ---------------------------------------------------------------------------- streamed uploads


class Bucket:
    """An Archive's upload routes and a presigned PUT target; keeps what each PUT was given."""

    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []
        self.declared: list[dict[str, Any]] = []

    def __call__(self, method: str, url: str, *, data: Any = b"", **request: Any) -> Raw:
        split = urlsplit(url)
        if split.hostname == "s3.example":
            blocks = []
            while block := data.read(65536):
                blocks.append(block)
            self.puts.append(
                {"data": data, "blocks": blocks, "headers": request["headers"], "path": split.path}
            )
            return Raw(200, {}, b"")
        body = json.loads(data) if data else None
        if split.path == "/api/item/uploads":
            self.declared = body["files"]
            uploads = [
                {
                    "path": f["path"],
                    "method": "PUT",
                    "url": f"http://s3.example/{f['path']}",
                    "headers": {"Content-Type": f["content_type"]},
                }
                for f in body["files"]
            ]
            return Raw(200, {}, json.dumps({"uploads": uploads}).encode())
        return Raw(200, {}, json.dumps({"ibi": {"ibip": "A/B"}, "files": body["files"]}).encode())


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def start(self, path: str, size: int) -> None:
        self.events.append(("start", (path, size)))

    def sent(self, count: int) -> None:
        self.events.append(("sent", count))


def test_a_local_file_is_streamed_never_read_whole(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    content = bytes(range(256)) * 12_288  # 3 MiB: three blocks of LocalFile.BLOCK
    big.write_bytes(content)
    bucket, seen = Bucket(), Seen()
    client = ArchiveClient("http://127.0.0.1:9", transport=bucket)
    client.upload_files(
        "A/B", [("big.bin", LocalFile(big), "application/octet-stream")], progress=seen
    )
    (put,) = bucket.puts
    assert not isinstance(put["data"], bytes | bytearray) and hasattr(put["data"], "read")
    assert b"".join(put["blocks"]) == content and max(map(len, put["blocks"])) <= 65536
    assert put["headers"]["Content-Length"] == str(len(content))
    assert bucket.declared == [
        {
            "path": "big.bin",
            "sha256": hashlib.sha256(content).hexdigest(),
            "size": len(content),
            "content_type": "application/octet-stream",
        }
    ]
    assert seen.events[0] == ("start", ("big.bin", len(content)))
    assert sum(n for kind, n in seen.events if kind == "sent") == len(content)


def test_bytes_are_still_uploaded_as_bytes() -> None:
    class Bytes(Bucket):
        def __call__(self, method: str, url: str, *, data: Any = b"", **request: Any) -> Raw:
            if isinstance(data, bytes) and urlsplit(url).hostname == "s3.example":
                data = io.BytesIO(data)
            return super().__call__(method, url, data=data, **request)

    bucket = Bytes()
    ArchiveClient("http://127.0.0.1:9", transport=bucket).upload_files(
        "A/B", [("a.txt", b"hello\n", "text/plain")]
    )
    assert bucket.puts[0]["blocks"] == [b"hello\n"]
