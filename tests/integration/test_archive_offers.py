"""A transfer between two institutions' Archives that share no credentials (issue 13, item 4).

Each Archive runs in its own process (a ``LocalGateway`` worker, as ``ibi local`` runs them),
with its own item store, file store and HMAC key, on its own loopback port. In front of each,
a stand-in for IAM: a request under ``/api/`` is answered 403 unless it carries that Archive's
owner's credential (``X-Owner``), as API Gateway answers a caller of another account. The
receiver never holds the sender's credential, so the transfer succeeds only if it goes through
the sender's public routes: ``/col/`` and ``POST /transfers/confirm``.

Both are registered and included at a real resolver (in local mode's tables): an original
moves only to an Archive registered there, each read at its registered address (issue 24).

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
from collections.abc import Callable, Iterator, MutableMapping
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
    name: str,
    owner: str,
    switches: Path,
    first_date: int,
    seed: bool,
    port: list[int],
    resolver: str,
    items: int = ITEMS,
    shared: Any = None,
) -> Callable[[], Any]:
    """Runs in the worker after the fork: this Archive's own stores, keys and clock. The
    receiver's stores are ``shared`` by its two workers (items on tables, files on disk): one
    takes an offer while the other answers the sender, which reads it at its registered address
    before it lets the original go."""

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

        store: Any = MemoryItemStore()
        files = MemoryFileStore()
        if shared is not None:
            from functions.archive.store import DynamoItemStore

            tables, directory = shared
            store = DynamoItemStore(tables.client(), f"{name}-items")
            files.files = OnDisk(directory / "files")  # type: ignore[assignment]
            files.uploads = OnDisk(directory / "uploads")  # type: ignore[assignment]
            files.versions = OnDisk(directory / "versions")  # type: ignore[assignment]
        settings = ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": f"{name}-items"})
        service = ArchiveService(store, clock=clock, mint=mint, own_prefixes=OWN, name=name)
        runtime = Runtime(
            service=service,
            store=store,  # type: ignore[arg-type]
            settings=settings,
            clock=clock,
            files=files,
            receivers=receivers(("127.0.0.0/8",), resolver),
        )
        site = wiring.install(runtime).start(f"http://127.0.0.1:{port[0]}")
        for n in range(items if seed else 0):
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


class OnDisk(MutableMapping[tuple[str, ...], bytes]):
    """A dict of bytes kept in a directory, so that every worker of an Archive sees it."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory

    def _file(self, key: tuple[str, ...]) -> Path:
        return self.directory / hashlib.sha256(json.dumps(key).encode()).hexdigest()

    def __getitem__(self, key: tuple[str, ...]) -> bytes:
        try:
            return self._file(key).read_bytes()
        except FileNotFoundError:
            raise KeyError(key) from None

    def __setitem__(self, key: tuple[str, ...], value: bytes) -> None:
        self._file(key).write_bytes(value)
        self._file(key).with_suffix(".key").write_text(json.dumps(key))

    def __delitem__(self, key: tuple[str, ...]) -> None:
        self._file(key).unlink()
        self._file(key).with_suffix(".key").unlink()

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        return (tuple(json.loads(f.read_text())) for f in self.directory.glob("*.key"))

    def __len__(self) -> int:
        return len(list(self.directory.glob("*.key")))


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from ibi_tools.local.tables import LocalTables

    yield LocalTables(tmp_path_factory.mktemp("tables") / "tables.sqlite3")


@pytest.fixture(scope="module")
def resolver(tables: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGateway]:
    """The real resolver, in local mode's tables: where both Archives are registered."""
    from tests.integration.test_archive_robustness import start_resolver

    gateway = start_resolver(tables, tmp_path_factory.mktemp("resolver"))
    try:
        yield gateway
    finally:
        gateway.shutdown()


@pytest.fixture(scope="module")
def archives(
    switch_dir: Path, resolver: LocalGateway, tables: Any
) -> Iterator[tuple[Archive, Archive]]:
    yield from federation(switch_dir, resolver, tables)


def federation(
    switches: Path, resolver: LocalGateway, tables: Any, items: int = ITEMS
) -> Iterator[tuple[Archive, Archive]]:
    """A sender holding ``items`` originals (one worker, its stores in memory) and an empty
    receiver (two workers sharing theirs), both included at ``resolver``."""
    from functions.archive.model import Forms
    from functions.archive.store import ensure_table
    from tests.integration.test_archive_robustness import include

    gateways, pair = [], []
    for name, first_date, seed in (("sender", 1795473000, True), ("receiver", 1795490000, False)):
        port: list[int] = []
        owner = f"{name}-owner-credential"
        shared = None
        if not seed:
            ensure_table(tables.client(), f"{name}-items")
            shared = (tables, switches / f"{name}-files")
        made = _factory(name, owner, switches, first_date, seed, port, resolver.url, items, shared)
        gateway = LocalGateway(name, made, 0, workers=1 if seed else 2)
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
        for archive, gateway in zip(pair, gateways, strict=True):
            include(resolver.url, Forms(ibip=archive.service), gateway)
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
    archives: tuple[Archive, Archive], switches: Path, resolver: LocalGateway
) -> None:
    from types import SimpleNamespace

    from functions.archive.model import Forms
    from functions.resolver.directory import CACHE_SECONDS
    from tests.integration.archives import FakeArchive, serving
    from tests.integration.test_archive_robustness import include

    sender, receiver = archives
    ibi = an_original(sender)
    elsewhere = "8JMKD3MGP8W/3FSUP4L"  # some third Archive's service IBI
    status, answer = sender.api("POST", f"/api/item/offers?ibi={ibi}", {"to": elsewhere})
    assert status == 409 and "not registered" in answer["error"]["message"], answer
    with serving(FakeArchive(elsewhere)) as (third,):  # registered and included: offered
        include(resolver.url, Forms(ibip=elsewhere), SimpleNamespace(url=f"http://{third.address}"))
        deadline = time.monotonic() + 2 * CACHE_SECONDS  # the resolver's snapshot, refreshed
        while (made := sender.api("POST", f"/api/item/offers?ibi={ibi}", {"to": elsewhere}))[
            0
        ] == 409 and time.monotonic() < deadline:
            time.sleep(0.5)
        status, answer = made
        assert status == 201, answer
        token = str(answer["offer"])

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
