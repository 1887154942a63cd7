"""Transfers that cannot lose an item (issue 24, item 6), through the real handlers on loopback
and the real resolver: each Archive in its own process (``LocalGateway``), both registered and
included at the resolver (its tables local mode's, in SQLite), a fake receiver speaking the deposit API.

The assembly is ``test_archive_offers.py``'s (owners' credentials checked by an IAM stand-in,
switches in files: the clocks' offset, a lost confirmation). The pieces in memory:
``tests/unit/test_transfer_safety.py``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from ibi_tools.local.gateway import LocalGateway
from tests.integration.test_archive_offers import Archive, call, federation, offer

ITEMS = 5
_taken = count()


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ibi_tools.local.tables import LocalTables

    yield LocalTables(tmp_path_factory.mktemp("tables") / "tables.sqlite3")


@pytest.fixture(scope="module")
def resolver(tables: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGateway]:
    from tests.integration.test_archive_robustness import start_resolver

    gateway = start_resolver(tables, tmp_path_factory.mktemp("resolver"))
    try:
        yield gateway
    finally:
        gateway.shutdown()


@pytest.fixture(scope="module")
def switch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("switches")


@pytest.fixture(scope="module")
def archives(
    switch_dir: Path, resolver: LocalGateway, tables: Any
) -> Iterator[tuple[Archive, Archive]]:
    yield from federation(switch_dir, resolver, tables, ITEMS)


@pytest.fixture
def switches(switch_dir: Path) -> Iterator[Path]:
    yield switch_dir
    for name in ("offset", "lose", "damage"):
        (switch_dir / name).unlink(missing_ok=True)


def an_original(sender: Archive) -> str:
    status, answer = sender.api("GET", "/api/items?limit=200")
    assert status == 200
    wanted = f"item-{next(_taken)}"
    (item,) = [i for i in answer["items"] if i["dc"].get("title") == [wanted]]
    assert item["state"] == "Original"
    return str(item["ibi"]["ibip"])


def state(archive: Archive, ibi: str) -> tuple[str, bool] | None:
    item = archive.item(ibi)
    return None if item is None else (item["state"], item["pending"])


def test_the_resolver_says_where_a_registered_archive_is_and_nothing_more(
    archives: tuple[Archive, Archive], resolver: LocalGateway
) -> None:
    _, receiver = archives
    status, answer = call("GET", f"{resolver.url}/archives/{receiver.service}")
    assert status == 200, answer
    assert answer == {
        "archiveserviceibi": answer["archiveserviceibi"],
        "address": receiver.url.split("://", 1)[1],
        "protocol": "HTTP",
        "included": True,
    }
    assert answer["archiveserviceibi"]["ibip"] == receiver.service
    status, answer = call("GET", f"{resolver.url}/archives/8JMKD3MGP8W/3FSUP4L")
    assert status == 404 and "no Archive of service IBI" in answer["error"]["message"]


def test_an_offer_confirmed_before_the_receiver_staged_it_changes_nothing(
    archives: tuple[Archive, Archive], switches: Path
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    token = offer(sender, ibi, receiver.service, leave="tombstone")

    body = {"offer": token, "receiver": receiver.service, "action": "confirm"}
    status, answer = call("POST", f"{sender.url}/transfers/confirm", body)  # anyone holding it

    assert status == 409 and "holds nothing of" in answer["error"]["message"], answer
    assert state(sender, ibi) == ("Original", False) and state(receiver, ibi) is None
    status, there = receiver.api("POST", "/api/transfers/accept", {"offer": token})
    assert status == 200 and there["state"] == "Original", there
    assert state(sender, ibi) == ("Deleted", False)


class FakeReceiver(BaseHTTPRequestHandler):
    """A deposit API that claims to be ``claims`` and fakes every step, its promotion too."""

    claims = ""
    seen: list[str] = []

    def _answer(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.seen.append(self.path)
        if self.path.startswith("/api/service"):
            self._answer({"archiveserviceibi": {"ibip": self.claims}})
        else:
            self._answer({"state": "Original", "pending": False})

    do_POST = do_DELETE = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("claims", ["the receiver", "8JMKD3MGP8W/3FSUP4L"])
def test_a_deposit_transfer_to_a_receiver_that_is_not_where_the_resolver_says_moves_nothing(
    archives: tuple[Archive, Archive], claims: str
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    FakeReceiver.claims = receiver.service if claims == "the receiver" else claims
    FakeReceiver.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        fake = f"http://127.0.0.1:{server.server_address[1]}"
        sent = {"to": fake, "leave": "tombstone"}
        status, answer = sender.api("POST", f"/api/item/transfer?ibi={ibi}", sent)
    finally:
        server.shutdown()
        server.server_close()

    if claims == "the receiver":  # a registered Archive's name, from another address
        assert status == 400, answer
        assert f"give its registered address, {receiver.url}" in answer["error"]["message"]
    else:  # an Archive the resolver does not know
        assert status == 409 and "not registered" in answer["error"]["message"], answer
    assert FakeReceiver.seen == ["/api/service"]  # asked who it is, and nothing else
    assert state(sender, ibi) == ("Original", False)


def test_an_expired_offer_that_left_a_copy_and_no_original_is_taken_back(
    archives: tuple[Archive, Archive], switches: Path
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    token = offer(sender, ibi, receiver.service, leave="copy", expires_in=60)
    (switches / "lose").write_text("")  # the sender demotes; its answer never arrives
    status, answer = receiver.api("POST", "/api/transfers/accept", {"offer": token})
    assert status == 502, answer
    assert state(sender, ibi) == ("Copy", False) and state(receiver, ibi) == ("Copy", True)
    status, answer = receiver.api("DELETE", f"/api/transfers?ibi={ibi}")  # forgotten there
    assert status == 200, answer
    (switches / "offset").write_text("3600")  # both clocks: the offer expired

    status, answer = receiver.api("POST", "/api/transfers/accept", {"offer": token})
    assert status == 410, answer  # too late to accept: no original anywhere, until ...
    status, answer = sender.api("POST", f"/api/item/offers?ibi={ibi}", {"to": receiver.service})

    assert status == 201, answer  # ... offering it again takes the original back
    here = sender.item(ibi)
    assert here is not None and here["state"] == "Original" and here["transferable"]
    assert [r["action"] for r in here["history"]] == ["released", "restored"]
    status, there = receiver.api("POST", "/api/transfers/accept", {"offer": answer["offer"]})
    assert status == 200 and there["state"] == "Original", there
    assert state(sender, ibi) == ("Copy", False)
    deadline = time.monotonic() + 5
    while call("GET", f"{receiver.url}/col/{ibi}/paper.pdf")[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.2)
