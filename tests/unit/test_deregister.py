"""Issue 39: an Archive deregistered at the resolver (``DELETE /admin/archives?ibi=<service IBI>``,
``ibi resolver deregister``) is never asked again, frees the prefixes it owned (to no one, or to
the next registration that claims them), and none of its kept answers is given as its word;
its throttle rows and a switch with its old key bring nothing of it back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
import pytest
from moto import mock_aws

from functions.resolver import handler, wiring
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut
from functions.resolver.kept import TableKept, ensure_table
from functions.resolver.registry import DynamoRegistry, PrefixTaken, RegisteredArchive
from functions.resolver.resolution import Alert, Found, Resolver
from functions.resolver.service import RegistrationService, UnknownArchive
from functions.resolver.settings import ResolverSettings
from ibi.core.persistent_url import parse_persistent_url
from ibi_tools.local.gateway import LocalContext
from tests.fakes import FakeClock
from tests.fakes_resolver import FixedPepper, MemoryRegistry, MemoryThrottle
from tests.fuzzing import event
from tests.unit.test_owner_first import PerIBI, copy, original

A = "8JMKD3MGP8W/3FSUP4L"  # owns 8JMKD3MGP8W (its service IBI's prefix), ITEM's
B = "J8LNKB5R7W/3FUQHC5"
C = "LK47B6W/362SFKH"
ITEM = "8JMKD3MGP8W/35MMLL8"
KEY = "1234567890-0987654321"
WRONG = "9999999999-0000000000"
NOW = 1_796_000_000


class DeregisteringRegistry(MemoryRegistry):
    """:class:`MemoryRegistry` with the registry's ``deregister`` (as DynamoRegistry's)."""

    def deregister(self, archive: RegisteredArchive) -> bool:
        with self._lock:
            held = self.items.get(archive.service_ibi)
            if held is None or held.key_hash != archive.key_hash:
                return False
            del self.items[archive.service_ibi]
        self.release_prefixes(archive.service_ibi, archive.prefixes)
        with self._lock:
            self.changes += 1
        return True


def service_over(registry: Any, throttle: MemoryThrottle | None = None, **options: Any) -> Any:
    return RegistrationService(
        registry=registry,
        throttle=throttle or MemoryThrottle(),
        transport=PerIBI({}),
        pepper=FixedPepper().load(),
        clock=FakeClock(Decimal(NOW)),
        confirmation_timeout=1.0,
        **options,
    )


@pytest.fixture
def kept() -> Iterator[TableKept]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(client, "kept")
        yield TableKept(client, "kept", clock=lambda: float(NOW))


def resolve(fanout: FanOut, kept: TableKept) -> Found | Alert:
    url = parse_persistent_url(f"/{ITEM}")
    return Resolver(fanout.for_request("r"), kept=kept).resolve(url, "192.0.2.9")


def test_three_archives_one_deregistered_its_word_is_never_given_again(kept: TableKept) -> None:
    """A holds the original of ITEM and owns its prefix; C holds a copy; B comes later."""
    registry = DeregisteringRegistry()
    for archive in (A, B, C):
        registry.add(archive, f"{archive[:4].lower()}.example:80")
    answers = {A: {ITEM: original(ITEM, "a")}, C: {ITEM: copy(ITEM, "c")}}
    transport = PerIBI(answers)
    directory = ArchiveDirectory(registry)
    fanout = FanOut(transport, directory, timeout=1.0, deadline=3.0, grace=0.05)
    service = service_over(registry, on_change=directory.forget)
    first = resolve(fanout, kept)
    assert isinstance(first, Found) and first.url == f"http://a/{ITEM}"  # A's answer kept
    with pytest.raises(PrefixTaken):  # A owns the prefix
        service.change_prefixes(B, add=["8JMKD3MGP8W"])

    removed = service.deregister(A, forget_answers=kept.forget_archive)
    assert removed.service_ibi == A and A not in registry.items
    assert directory.owner_of(ITEM) is None  # its prefix is free
    transport.asked.clear()
    after = resolve(fanout, kept)
    assert A not in {archive for archive, _ in transport.asked}  # never asked again
    assert not (isinstance(after, Found) and after.url == f"http://a/{ITEM}")

    service.change_prefixes(B, add=["8JMKD3MGP8W"])  # the next to claim it owns it
    assert directory.owner_of(ITEM).service_ibi == B  # type: ignore[union-attr]
    transport.down = {B}  # the new owner down: A's kept answer is not given as the owner's
    alert = resolve(fanout, kept)
    assert isinstance(alert, Alert) and alert.status == 504, alert


def test_another_environment_stops_asking_it_within_its_generation_check() -> None:
    registry = DeregisteringRegistry()
    registry.add(A, "a.example:80")
    now = [0.0]
    elsewhere = ArchiveDirectory(registry, monotonic=lambda: now[0])
    assert [a.service_ibi for a in elsewhere.included()] == [A]
    service_over(registry).deregister(A)
    now[0] = 5.1  # its usual 5 s
    assert elsewhere.included() == []


def test_its_old_key_and_its_throttle_rows_bring_nothing_back() -> None:
    registry, throttle = DeregisteringRegistry(), MemoryThrottle()
    service = service_over(registry, throttle)
    service.register(A, KEY)
    for _ in range(6):
        service.switch(_pairs(WRONG), client_ip="203.0.113.9")
    service.deregister(A)
    rows, generation = dict(throttle.items), registry.generation()
    for key in (KEY, WRONG):
        assert service.switch(_pairs(key), client_ip="203.0.113.9").status == 403
    assert A not in registry.items and registry.generation() == generation
    assert throttle.items == rows  # nothing counted for what is not registered
    with pytest.raises(UnknownArchive):
        service.deregister(A)


def _pairs(key: str) -> dict[str, str]:
    return {
        "servicesubject": "inclusionRequest",
        "archiveaddress": "a.example:80",
        "archiveserviceibi": A,
        "archiveip": "192.0.2.7",
        "archiveprotocol": "HTTP",
        "archiveplatformversion": "fake-1.0",
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": key,
    }


def test_the_registry_table_loses_its_item_and_claims_and_bumps_the_generation() -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        wiring.ensure_tables(client, "resolver")
        registry = DynamoRegistry(client, "resolver")
        service = service_over(registry)
        service.register(A, KEY, ["sid.inpe.br/mtc-m18"])
        stale = registry.get(A)
        service.register(A, "5555555555-6666666666")  # re-keyed since that read
        assert stale is not None and registry.deregister(stale) is False and registry.get(A)
        generation = registry.generation()
        service.deregister(A)
        assert registry.get(A) is None and registry.archives() == []
        assert registry.generation() == generation + 1
        claims = client.scan(TableName="resolver")["Items"]
        assert [i["service"]["S"] for i in claims] == ["#generation"]
        service.register(B, KEY, ["sid.inpe.br/mtc-m18"])  # free: the next claim takes it


# ---------------------------------------------------------------------------- the route, the CLI


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[None]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        wiring.ensure_tables(client, "resolver")
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(tmp_path / "pepper")}
        )
        wiring.install(wiring.build(settings, dynamodb=client))
        try:
            yield
        finally:
            wiring.install(None)


def call(
    method: str, path: str, body: dict[str, Any] | None = None, *, query: str = ""
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    answer = handler.lambda_handler(
        event(method, path, query, body=data, headers={}), LocalContext("t", "r-1")
    )
    return answer["statusCode"], json.loads(answer["body"] or "null")


def test_the_admin_route_deregisters_and_says_what_it_freed(admin: None) -> None:
    assert call("POST", "/admin/archives", {"archiveserviceibi": A, "registrationkey": KEY})[0]
    status, body = call("DELETE", "/admin/archives", query=f"ibi={A}")
    assert status == 200 and body == {
        "archiveserviceibi": {"ibip": A},
        "deregistered": True,
        "freed": ["8JMKD3MGP8W"],
    }
    assert call("GET", "/admin/archives")[1] == {"archives": []}
    status, body = call("DELETE", "/admin/archives", query=f"ibi={A}")
    assert status == 404 and body["error"]["code"] == "NotFound"
    assert call("DELETE", "/admin/archives", query="ibi=not-an-ibi!")[0] == 400
    status, body = call("PUT", "/admin/archives")
    assert status == 405 and "DELETE" in body["error"]["message"]


def test_ibi_resolver_deregister(
    admin: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ibi import client as ibi_client
    from ibi.client import Raw
    from ibi_tools import cli

    def send(method: str, url: str, *, data: Any = b"", **_: Any) -> Raw:
        split = urlsplit(url)
        query = unquote(split.query)  # as API Gateway hands the parameters on
        request = event(method, split.path, query, body=data or b"", headers={})
        answer = handler.lambda_handler(request, LocalContext("t", "r-2"))
        return Raw(
            answer["statusCode"], {"Content-Type": "application/json"}, answer["body"].encode()
        )

    real = ibi_client.ResolverClient
    monkeypatch.setattr(
        ibi_client, "ResolverClient", lambda *a, **k: real(*a, **{**k, "transport": send})
    )
    call("POST", "/admin/archives", {"archiveserviceibi": A, "registrationkey": KEY})
    assert cli.main(["resolver", "deregister", A, "--endpoint", "http://r.example/"]) == 0
    assert capsys.readouterr().out == f"deregistered {A}; prefixes freed: 8JMKD3MGP8W\n"
    assert cli.main(["resolver", "deregister", A, "--endpoint", "http://r.example/"]) != 0
    assert "no Archive" in capsys.readouterr().err
