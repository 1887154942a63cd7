"""Issue 26 item 1: the edge's origin check (functions/origin/) and the host it passes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from functions.origin import handler
from functions.origin.verify import decide
from functions.shared.edge import public_base

EVENT = Path(__file__).resolve().parents[2] / "events" / "origin" / "authorizer.json"
CURRENT, PREVIOUS = b"origin-verify-value-from-the-secret", b"the-value-before-a-rotation"


def headers(**changes: str | None) -> dict[str, str]:
    base: dict[str, str] = json.loads(EVENT.read_text())["headers"]
    for name, value in changes.items():
        base.pop(name.replace("_", "-"), None)
        if value is not None:
            base[name.replace("_", "-")] = value
    return base


def test_the_edges_secret_passes_with_the_readers_host() -> None:
    assert decide(headers(), [CURRENT]) == {
        "isAuthorized": True,
        "context": {"host": "urlib.example.org"},
    }
    # the previous value too, while a rotation reaches the edge
    rotated = headers(x_ibi_origin_verify=PREVIOUS.decode())
    assert decide(rotated, [CURRENT, PREVIOUS])["isAuthorized"] is True


@pytest.mark.parametrize(
    "changes",
    [
        {"x_ibi_origin_verify": None},  # straight to execute-api
        {"x_ibi_origin_verify": "guess"},
        {"x_ibi_origin_verify": ""},
        {"x_forwarded_host": None},
        {"x_forwarded_host": "evil.example.org/path"},
        {"x_forwarded_host": "a b"},
    ],
)
def test_anything_else_is_refused(changes: dict[str, str | None]) -> None:
    assert decide(headers(**changes), [CURRENT]) == {"isAuthorized": False}


def test_the_handler_reads_the_secret_and_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []

    class Keys:
        def load(self) -> list[bytes]:
            reads.append("read")
            return [CURRENT]

    monkeypatch.setattr(handler, "keys", Keys())

    class Context:
        function_name = "origin"
        memory_limit_in_mb = 256
        invoked_function_arn = "arn:aws:lambda:sa-east-1:123456789012:function:origin"
        aws_request_id = "r-1"

    event: dict[str, Any] = json.loads(EVENT.read_text())
    assert handler.lambda_handler(event, Context())["isAuthorized"] is True
    event["headers"]["x-ibi-origin-verify"] = "guess"
    assert handler.lambda_handler(event, Context()) == {"isAuthorized": False}


def test_the_secret_is_read_again_after_its_maximum_age(monkeypatch: pytest.MonkeyPatch) -> None:
    values = iter([[b"one"], [b"two"]])

    class Secrets:
        def __init__(self, client: Any, secret_id: str) -> None:
            assert secret_id == "arn:secret"

        def load(self) -> list[bytes]:
            return next(values)

    monkeypatch.setenv("IBI_ORIGIN_SECRET_ARN", "arn:secret")
    monkeypatch.setattr(handler, "SecretKeys", Secrets)
    monkeypatch.setattr(handler.boto3, "client", lambda *args, **kwargs: object())
    now = [0.0]
    keys = handler.CachedKeys(
        handler.OriginSecret(),
        name="origin keys",
        logger=handler.logger,
        max_age=300,
        monotonic=lambda: now[0],
    )
    assert keys.load() == [b"one"]
    now[0] = 299
    assert keys.load() == [b"one"]
    now[0] = 300
    assert keys.load() == [b"two"]


def _event(authorizer: dict[str, Any] | None) -> APIGatewayProxyEventV2:
    event: dict[str, Any] = {
        "headers": {"x-forwarded-proto": "https", "x-forwarded-host": "spoofed.example.org"},
        "requestContext": {"domainName": "k1l2m3n4o5.execute-api.sa-east-1.amazonaws.com"},
    }
    if authorizer is not None:
        event["requestContext"]["authorizer"] = authorizer
    return APIGatewayProxyEventV2(event)


def test_links_name_the_host_the_edge_verified_and_nothing_a_client_sent() -> None:
    verified = _event({"lambda": {"host": "urlib.example.org"}})
    assert public_base(verified) == "https://urlib.example.org"
    # without the origin check's context, the API's own domain: a header proves nothing
    assert public_base(_event(None)) == "https://k1l2m3n4o5.execute-api.sa-east-1.amazonaws.com"
    signed = _event({"iam": {"userArn": "arn:aws:iam::123456789012:user/x"}})
    assert public_base(signed) == "https://k1l2m3n4o5.execute-api.sa-east-1.amazonaws.com"
