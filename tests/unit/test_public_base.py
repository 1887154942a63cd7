"""The scheme of the persistent URL a request came to (issue 12, item 12)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from functions.shared.edge import public_base
from ibi_tools.local.gateway import build_event


def event(headers: dict[str, str]) -> SimpleNamespace:
    return SimpleNamespace(
        headers=headers, request_context=SimpleNamespace(domain_name="r.example")
    )


@pytest.mark.parametrize(
    ("proto", "expected"),
    [
        (None, "https://r.example"),  # API Gateway always says; nothing said: https
        ("https", "https://r.example"),
        ("http", "http://r.example"),  # the local gateway
        ("HTTP", "http://r.example"),
        ("http,https", "https://r.example"),  # a list: the nearest proxy's, the last
        ("javascript", "https://r.example"),
        ("", "https://r.example"),
    ],
)
def test_public_base_takes_the_scheme_the_gateway_says(proto: str | None, expected: str) -> None:
    headers = {} if proto is None else {"x-forwarded-proto": proto}
    assert public_base(event(headers)) == expected


def test_the_local_gateway_says_http_whatever_the_client_sent() -> None:
    built = build_event(
        method="GET",
        target="/8JMKD3MGP8W/35MMLL8",
        headers=[("Host", "127.0.0.1:8080"), ("X-Forwarded-Proto", "https")],
        body=b"",
        source_ip="127.0.0.1",
        host="127.0.0.1:8080",
    )
    assert built["headers"]["x-forwarded-proto"] == "http"
