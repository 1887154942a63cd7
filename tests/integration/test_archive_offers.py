"""A transfer between two institutions' Archives that share no credentials (issue 13, item 4).

Each Archive runs in its own process (a ``LocalGateway`` worker, as ``ibi local`` runs them),
with its own item store, file store and HMAC key, on its own loopback port. In front of each,
a stand-in for IAM: a request under ``/api/`` is answered 403 unless it carries that Archive's
owner's credential (``X-Owner``), as API Gateway answers a caller of another account. The
receiver never holds the sender's credential, so the transfer succeeds only if it goes through
the sender's public routes: ``/col/`` and ``POST /transfers/confirm``.

Switches the test sets in files the workers read: the clock's offset (an expired offer), bytes
damaged on their way to the receiver, a confirmation whose answer is lost after the sender acted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from ibi_tools.local.gateway import LocalGateway

FILES = {"paper.pdf": b"%PDF-1.7 a paper for another institution\n", "data.csv": b"x,y\n1,2\n"}
OWN = ("8JMKD3MGP8W", "example.org/ibi")
ITEMS = 8  # originals the sender holds, one per test that moves one


@dataclass
class Archive:
    url: str
    owner: str  # this Archive's owner's credential: no one else has it
    service: str = ""

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(method, self.url + path, body, {"X-Owner": self.owner})

    def item(self, ibi: str) -> dict[str, Any] | None:
        status, answer = self.api("GET", f"/api/item?ibi={ibi}")
        assert status in {200, 404}, answer
        return answer if status == 200 else None


def call(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def _factory(
    name: str, owner: str, switches: Path, first_date: int, seed: bool, port: list[int]
) -> Callable[[], Any]:
    """Runs in the worker after the fork: this Archive's own stores, keys and clock."""

    def factory() -> Any:
        from functions.archive import wiring
        from functions.archive.handler import lambda_handler
        from functions.archive.model import Forms
        from functions.archive.service import ArchiveService
        from functions.archive.settings import ArchiveSettings
        from functions.archive.wiring import Runtime, receivers
        from ibi.core.labels import IBI
        from tests.fakes_archive import MemoryFileStore, MemoryItemStore

        dates = count(first_date)

        def mint(_: str | None, key: str | None) -> Forms:
            ibi = IBI.build(Decimal(next(dates)), host="ibi.example.org", ip="192.0.2.10")
            return Forms(rep=ibi.rep, ibip=ibi.ibip)

        def clock() -> Decimal:
            offset = switches / "offset"
            return Decimal(int(time.time()) + (int(offset.read_text()) if offset.exists() else 0))

        store, files = MemoryItemStore(), MemoryFileStore()
        settings = ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": f"{name}-items"})
        service = ArchiveService(store, clock=clock, mint=mint, own_prefixes=OWN, name=name)
        runtime = Runtime(
            service=service,
            store=store,  # type: ignore[arg-type]
            settings=settings,
            clock=clock,
            files=files,
            receivers=receivers(("127.0.0.0/8",)),
        )
        site = wiring.install(runtime).start(f"http://127.0.0.1:{port[0]}")
        for n in range(ITEMS if seed else 0):
            item = service.create_original({"language": "en", "dc": {"title": [f"item-{n}"]}})
            for path, data in FILES.items():
                files.upload(item.key, path, data)
            declared = [
                {"path": p, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
                for p, d in FILES.items()
            ]
            site.content.commit_files(item.key, {"files": declared, "default_file": "paper.pdf"})

        def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
            path = event["rawPath"]
            if path.startswith("/api/") and event["headers"].get("x-owner") != owner:
                return {"statusCode": 403, "body": '{"message":"Forbidden"}'}  # IAM
            answer: dict[str, Any] = lambda_handler(event, context)
            confirming = path == "/transfers/confirm" and '"confirm"' in event.get("body", "")
            if confirming and (switches / "lose").exists():
                (switches / "lose").unlink()  # the sender acted; its answer never arrives
                return {"statusCode": 504, "body": '{"message":"Gateway Timeout"}'}
            if path.startswith("/col/") and (switches / "damage").exists():
                data = base64.b64decode(answer["body"]) if answer.get("isBase64Encoded") else b""
                damaged = bytes([data[0] ^ 1]) + data[1:] if data else b"?"
                answer = {**answer, "body": base64.b64encode(damaged).decode()}
                answer["isBase64Encoded"] = True
            return answer

        return handler

    return factory


@pytest.fixture(scope="module")
def switch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("switches")


@pytest.fixture(scope="module")
def archives(switch_dir: Path) -> Iterator[tuple[Archive, Archive]]:
    switches = switch_dir
    gateways, pair = [], []
    for name, first_date, seed in (("sender", 1795473000, True), ("receiver", 1795490000, False)):
        port: list[int] = []
        owner = f"{name}-owner-credential"
        gateway = LocalGateway(
            name, _factory(name, owner, switches, first_date, seed, port), 0, workers=1
        )
        port.append(gateway.port)
        gateways.append(gateway.start())
        pair.append(Archive(gateway.url, owner))
    try:
        for archive in pair:
            deadline = time.monotonic() + 30
            while True:
                try:
                    status, answer = archive.api("GET", "/api/service")
                    assert status == 200, answer
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            archive.service = answer["archiveserviceibi"]["ibip"]
        yield pair[0], pair[1]
    finally:
        for gateway in gateways:
            gateway.shutdown()


@pytest.fixture
def switches(switch_dir: Path) -> Iterator[Path]:
    yield switch_dir
    for name in ("offset", "lose", "damage"):
        (switch_dir / name).unlink(missing_ok=True)


_taken = count()


def an_original(sender: Archive) -> str:
    """One of the sender's originals no other test moved."""
    status, answer = sender.api("GET", "/api/items?limit=200")
    assert status == 200
    wanted = f"item-{next(_taken)}"
    (item,) = [i for i in answer["items"] if i["dc"].get("title") == [wanted]]
    assert item["state"] == "Original"
    return str(item["ibi"]["ibip"])


def offer(sender: Archive, ibi: str, to: str, **options: Any) -> str:
    status, answer = sender.api("POST", f"/api/item/offers?ibi={ibi}", {"to": to, **options})
    assert status == 201, answer
    return str(answer["offer"])


def unchanged(sender: Archive, receiver: Archive, ibi: str) -> None:
    item = sender.item(ibi)
    assert item is not None and item["state"] == "Original" and item["transferable"]
    assert receiver.item(ibi) is None


def test_the_receiver_cannot_call_the_senders_deposit_api(
    archives: tuple[Archive, Archive],
) -> None:
    sender, receiver = archives
    # The receiver's owner's credential is not the sender's: IAM refuses every /api/ route.
    status, _ = call("GET", f"{sender.url}/api/service", headers={"X-Owner": receiver.owner})
    assert status == 403


def test_an_original_moves_between_archives_sharing_no_credentials(
    archives: tuple[Archive, Archive], switches: Path
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    token = offer(sender, ibi, receiver.service)
    assert sender.item(ibi)["state"] == "Original"  # type: ignore[index]  # an offer writes nothing

    status, there = receiver.api("POST", "/api/transfers/accept", {"offer": token})

    assert status == 200, there
    assert there["state"] == "Original" and there["pending"] is False
    assert {f["path"]: f["sha256"] for f in there["files"]} == {
        p: hashlib.sha256(d).hexdigest() for p, d in FILES.items()
    }
    assert there["dc"]["title"] == sender.item(ibi)["dc"]["title"]  # type: ignore[index]
    here = sender.item(ibi)
    assert here is not None and here["state"] == "Copy" and not here["transferable"]
    assert [r["action"] for r in here["history"]] == ["released"]
    status, _ = call("GET", f"{receiver.url}/col/{ibi}/paper.pdf")
    assert status == 200
    # Single use: the receiver refuses it again; the sender's answer stays "confirmed" (no write).
    status, again = receiver.api("POST", "/api/transfers/accept", {"offer": token})
    assert status == 409, again
    body = {"offer": token, "receiver": receiver.service, "action": "confirm"}
    status, confirmed = call("POST", f"{sender.url}/transfers/confirm", body)
    assert status == 200 and confirmed["confirmed"] is True
    assert sender.item(ibi)["history"] == here["history"]  # type: ignore[index]
    # And the sender can offer it no more: it holds a copy.
    status, refused = sender.api("POST", f"/api/item/offers?ibi={ibi}", {"to": receiver.service})
    assert status == 409, refused


def test_a_forged_offer_is_refused_and_nothing_changes(
    archives: tuple[Archive, Archive], switches: Path
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    prefix, payload, tag = offer(sender, ibi, receiver.service).split(".")
    content = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    content["leave"] = "tombstone"  # what the sender's owner did not offer
    forged_payload = base64.urlsafe_b64encode(json.dumps(content).encode()).decode().rstrip("=")
    forged = f"{prefix}.{forged_payload}.{tag}"

    status, answer = receiver.api("POST", "/api/transfers/accept", {"offer": forged})

    assert status == 403 and "signature" in answer["error"]["message"], answer
    unchanged(sender, receiver, ibi)
    body = {"offer": forged, "receiver": receiver.service, "action": "confirm"}
    status, answer = call("POST", f"{sender.url}/transfers/confirm", body)
    assert status == 403, answer
    unchanged(sender, receiver, ibi)


def test_an_expired_offer_is_refused_and_nothing_changes(
    archives: tuple[Archive, Archive], switches: Path
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    token = offer(sender, ibi, receiver.service, expires_in=60)
    (switches / "offset").write_text("3600")  # both clocks, an hour later

    status, answer = receiver.api("POST", "/api/transfers/accept", {"offer": token})

    assert status == 410, answer
    unchanged(sender, receiver, ibi)
    body = {"offer": token, "receiver": receiver.service, "action": "confirm"}
    status, answer = call("POST", f"{sender.url}/transfers/confirm", body)
    assert status == 410, answer
    unchanged(sender, receiver, ibi)


def test_an_offer_for_another_archive_is_refused(
    archives: tuple[Archive, Archive], switches: Path
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    elsewhere = "8JMKD3MGP8W/3FSUP4L"  # some third Archive's service IBI
    token = offer(sender, ibi, elsewhere)

    status, answer = receiver.api("POST", "/api/transfers/accept", {"offer": token})

    assert status == 403 and elsewhere in answer["error"]["message"], answer
    unchanged(sender, receiver, ibi)
    # Nor may the receiver pass for the one named: the sender checks the receiver it names.
    body = {"offer": token, "receiver": receiver.service, "action": "confirm"}
    status, answer = call("POST", f"{sender.url}/transfers/confirm", body)
    assert status == 403, answer
    unchanged(sender, receiver, ibi)


def test_bytes_that_fail_the_offers_checksums_are_refused_and_nothing_changes(
    archives: tuple[Archive, Archive], switches: Path
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    token = offer(sender, ibi, receiver.service)
    (switches / "damage").write_text("")

    status, answer = receiver.api("POST", "/api/transfers/accept", {"offer": token})

    assert status == 403 and "not the offered file" in answer["error"]["message"], answer
    unchanged(sender, receiver, ibi)
    # The same offer still works once the bytes arrive intact.
    (switches / "damage").unlink()
    status, there = receiver.api("POST", "/api/transfers/accept", {"offer": token})
    assert status == 200 and there["state"] == "Original", there


def test_a_lost_confirmation_is_retried_without_two_originals(
    archives: tuple[Archive, Archive], switches: Path
) -> None:
    sender, receiver = archives
    ibi = an_original(sender)
    token = offer(sender, ibi, receiver.service, leave="tombstone")
    (switches / "lose").write_text("")

    status, answer = receiver.api("POST", "/api/transfers/accept", {"offer": token})

    assert status == 502 and "staged" in answer["error"]["message"], answer
    # The sender released it; the receiver holds it staged, answered to no one: one original
    # in custody, none answering, never two.
    here, there = sender.item(ibi), receiver.item(ibi)
    assert here is None or here["state"] == "Deleted", here
    assert there is not None and there["state"] == "Copy" and there["pending"] is True
    status, _ = call("GET", f"{receiver.url}/col/{ibi}/paper.pdf")
    assert status == 404
    # Accepting the same offer again asks the sender, which answers "confirmed" again.
    status, there = receiver.api("POST", "/api/transfers/accept", {"offer": token})
    assert status == 200 and there["state"] == "Original" and there["pending"] is False, there
    status, _ = call("GET", f"{receiver.url}/col/{ibi}/data.csv")
    assert status == 200
