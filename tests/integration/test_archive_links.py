"""Issue 28 point 2: the scheduled link check's handler over the items table (moto and local
mode's tables), its real fetcher against loopback servers."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from functions.archive import linkcheck
from functions.archive.links import (
    MAX_READ_BYTES,
    USER_AGENT,
    FetchFailed,
    LinkChecker,
    LinkChecks,
    Problem,
    Reply,
)
from functions.archive.model import ContentType, Forms, Item, LinkStatus, State
from functions.archive.outbound import LinkFetcher
from functions.archive.store import DynamoItemStore, ensure_table
from functions.shared.addresses import AddressPolicy
from functions.shared.edge import clock
from ibi_tools.local.gateway import LocalContext

BASE = "http://archive.example.org"
LOOPBACK = ("127.0.0.0/8",)


class Web(BaseHTTPRequestHandler):
    """``/ok`` 200, ``/gone`` 404, ``/loop`` redirects to itself, ``/nohead`` refuses HEAD,
    ``/metadata`` redirects to the cloud metadata address; every request is noted."""

    seen: list[tuple[str, str, str]]

    def _answer(self) -> None:
        self.seen.append((self.command, self.path, self.headers.get("User-Agent", "")))
        routes: dict[str, tuple[int, dict[str, str]]] = {
            "/ok": (200, {}),
            "/gone": (404, {}),
            "/loop": (302, {"Location": "/loop"}),
            "/metadata": (302, {"Location": "http://169.254.169.254/latest/meta-data/"}),
            "/nohead": (405 if self.command == "HEAD" else 200, {}),
        }
        status, headers = routes.get(self.path, (500, {}))
        body = b"x" * (1024 * 1024) if self.command == "GET" else b""  # never read whole
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            with contextlib.suppress(OSError):  # the checker closes after a few KB
                self.wfile.write(body)

    do_HEAD = do_GET = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def web() -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    seen: list[tuple[str, str, str]] = []
    handler = type("Handler", (Web,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


class ScheduledContext(LocalContext):
    """A scheduled run's context: five minutes, as infra/archive.py gives it."""

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def _item(n: int, url: str) -> Item:
    return Item(
        ibi=Forms(ibip=f"8JMKD3MGP8W/35MME{n}E"),
        state=State.ORIGINAL,
        timestamp=Decimal(1_800_000_000),
        content_type=ContentType.DATA,
        external_url=url,
    )


@pytest.fixture
def store(dynamodb: Any) -> DynamoItemStore:
    ensure_table(dynamodb, "archive-items")
    return DynamoItemStore(dynamodb, "archive-items")


def test_the_scheduled_check_keeps_each_link_s_status_and_counts_the_broken_ones(
    store: DynamoItemStore,
    web: tuple[str, list[tuple[str, str, str]]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")  # tests/conftest.py: off
    url, seen = web
    paths = {2: "/ok", 3: "/gone", 4: "/loop", 5: "/nohead", 6: "/metadata"}
    for n, path in paths.items():
        store.create(_item(n, url + path))
    fetch = LinkFetcher(AddressPolicy(LOOPBACK), user_agent=USER_AGENT, max_read=MAX_READ_BYTES)
    checker = LinkChecker(fetch, clock=clock, sleep=lambda _: None, per_host=0.0)
    linkcheck.install(LinkChecks(store, checker, base_url=BASE, clock=clock))
    try:
        summary = linkcheck.lambda_handler({}, ScheduledContext("link-check", "request-1"))
    finally:
        linkcheck.uninstall()
    assert summary == {"checked": 5, "broken": 3, "left": 0}
    found = {}
    for n, path in paths.items():
        held = store.get(f"8JMKD3MGP8W/35MME{n}E")
        assert held is not None and held.link is not None
        found[path] = (held.link.status, held.link.problem, held.link.http_status)
    assert found == {
        "/ok": (LinkStatus.OK, None, 200),
        "/gone": (LinkStatus.BROKEN, "http", 404),
        "/loop": (LinkStatus.BROKEN, "too_many_redirects", 302),
        "/nohead": (LinkStatus.OK, None, 200),
        "/metadata": (LinkStatus.BROKEN, "refused_address", 302),
    }
    assert {agent for _, _, agent in seen} == {USER_AGENT}
    assert [m for m, p, _ in seen if p == "/nohead"] == ["HEAD", "GET"]
    assert [m for m, p, _ in seen if p == "/gone"] == ["HEAD"]  # a 404 is final
    assert len([p for _, p, _ in seen if p == "/loop"]) == 6
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    (metrics,) = [m for m in emitted if "BrokenLinks" in m]
    assert metrics["BrokenLinks"] == [3.0]
    assert metrics["service"] == "archive"


def test_a_link_check_leaves_the_item_s_version_and_json_as_they_were(
    store: DynamoItemStore, web: tuple[str, list[tuple[str, str, str]]]
) -> None:
    url, _ = web
    store.create(_item(2, url + "/gone"))
    before = store.get("8JMKD3MGP8W/35MME2E")
    fetch = LinkFetcher(AddressPolicy(LOOPBACK), user_agent=USER_AGENT, max_read=MAX_READ_BYTES)
    checker = LinkChecker(fetch, clock=clock, sleep=lambda _: None)
    LinkChecks(store, checker, base_url=BASE, clock=clock).run(seconds=20)
    after = store.get("8JMKD3MGP8W/35MME2E")
    assert before is not None and after is not None
    assert after == before and after.version == before.version  # an offer's version holds
    assert after.link is not None and after.link.reason == "HTTP 404"
    # an update that does not touch the URL keeps the check beside the item
    store.replace(after.changed(Decimal(1_800_000_100), language="pt"), expected_version=0)
    kept = store.get("8JMKD3MGP8W/35MME2E")
    assert kept is not None and kept.link == after.link


def dripping_server(answer: bytes, pause: float) -> tuple[socket.socket, threading.Thread]:
    """A loopback server that sends ``answer`` one byte at a time, ``pause`` s apart."""
    listening = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = listening.accept()
        with connection:
            connection.recv(4096)
            for byte in answer:
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return  # the checker gave up: as it should
                threading.Event().wait(pause)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listening, thread


def test_a_dripped_answer_times_out_at_the_requests_deadline_never_ok() -> None:
    """Issue 35: headers dripped a byte every 3 s held one check 93 s and recorded it ok; each
    read had its timeout, the request none. Now the request has one: a timeout, not ok."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"  # 38 bytes, 0.1 s apart
    listening, thread = dripping_server(answer, 0.1)
    with listening:
        port = listening.getsockname()[1]
        fetch = LinkFetcher(
            AddressPolicy(["127.0.0.0/8"], public=False), user_agent="t", max_read=16
        )
        with pytest.raises(FetchFailed) as failed:
            fetch("HEAD", f"http://127.0.0.1:{port}/x", timeout=0.5)
    assert failed.value.problem is Problem.TIMEOUT
    thread.join(timeout=10)


def test_an_answer_within_the_deadline_is_read_as_ever() -> None:
    listening, thread = dripping_server(b"HTTP/1.1 204 No Content\r\n\r\n", 0.0)
    with listening:
        port = listening.getsockname()[1]
        fetch = LinkFetcher(
            AddressPolicy(["127.0.0.0/8"], public=False), user_agent="t", max_read=16
        )
        assert fetch("HEAD", f"http://127.0.0.1:{port}/x", timeout=5.0) == Reply(204, None)
    thread.join(timeout=10)
