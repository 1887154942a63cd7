"""Issue 35: the Archive's own outbound requests (a transfer's receiver, a sending Archive's
reads, the registry) end by one deadline for the whole exchange, not a timeout per read: a
server dripping its answer a byte at a time cannot hold one. A raw server on 127.0.0.2, the
only network the policy allows (tests/oai_fixtures.py's scripted server)."""

from __future__ import annotations

import time

import pytest

from functions.archive.outbound import vetted_transport
from functions.shared.addresses import AddressPolicy
from ibi.client import ApiError
from tests.oai_fixtures import scripted as serving

PUBLIC = AddressPolicy(["127.0.0.2/32"], public=False)


def answer(body: bytes) -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"Connection: close\r\n\r\n" + body


def test_a_dripped_answer_ends_at_the_deadline_not_a_read_at_a_time() -> None:
    """80 bytes at one per 0.1 s: 8 s with a timeout per read; about 1 s now."""
    send = vetted_transport(PUBLIC)
    with serving(
        "127.0.0.2", answer(b'{"ok": true, "padding": "' + b"x" * 40 + b'"}'), pause=0.1
    ) as server:
        started = time.monotonic()
        with pytest.raises(ApiError, match="cannot reach"):
            send("GET", f"{server.url}/api/service", timeout=1.0)
        took = time.monotonic() - started
    assert took < 4.0, took  # the head's deadline (1 s), well before the drip's end (8 s)
    assert server.sent < 60


def test_an_answer_in_time_is_read_whole() -> None:
    body = b'{"ok": true}'
    with serving("127.0.0.2", answer(body)) as server:
        raw = vetted_transport(PUBLIC)("GET", f"{server.url}/api/service", timeout=2.0)
    assert (raw.status, raw.content) == (200, body)


def test_an_answer_over_the_cap_is_refused() -> None:
    send = vetted_transport(PUBLIC, max_bytes=4096)
    with (
        serving("127.0.0.2", answer(b"x" * 5000)) as server,
        pytest.raises(ApiError, match="more than 4096 bytes"),
    ):
        send("GET", f"{server.url}/", timeout=2.0)
