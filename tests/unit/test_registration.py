"""The registration service over in-memory fakes: registering, switching, throttling, keys."""

from __future__ import annotations

import hmac
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.resolver import service as service_module
from functions.resolver.pepper import FilePepper, SecretPepper
from functions.resolver.service import RegistrationService, key_hash
from ibi.core.errors import InvalidInput
from ibi.core.pairlist import format_pair_list
from tests.fakes import FakeClock
from tests.fakes_resolver import FixedPepper, MemoryRegistry, MemorySecrets, ScriptedTransport

A = "8JMKD3MGP8W/3FSUP4L"
B = "LK47B6W/362SFKH"
KEY = "1234567890-0987654321"
OTHER_KEY = "5555555555-6666666666"
PEPPER = FixedPepper().load()


def make(
    registry: MemoryRegistry, transport: ScriptedTransport, **options: Any
) -> tuple[RegistrationService, list[str]]:
    changes: list[str] = []
    service = RegistrationService(
        registry=registry,
        transport=transport,
        pepper=PEPPER,
        clock=FakeClock(Decimal(1_700_000_000)),
        confirmation_timeout=1.0,
        on_change=lambda: changes.append("changed"),
        **options,
    )
    return service, changes


def request(subject: str, archive: str = A, key: str = KEY, **pairs: str) -> dict[str, str]:
    return {
        "servicesubject": subject,
        "archiveaddress": "archive.example.org:8080",
        "archiveserviceibi": archive,
        "archiveip": "192.0.2.7",
        "archiveprotocol": "http",
        "archiveplatformversion": "fake-1.0",
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": key,
        **pairs,
    }


def text(answer: Any) -> str:
    return format_pair_list(answer.pairs)


@pytest.fixture
def registry() -> MemoryRegistry:
    return MemoryRegistry()


@pytest.fixture
def transport() -> ScriptedTransport:
    return ScriptedTransport(answers={A: "confirmation yes"})


def test_registration_keeps_only_the_keyed_hash_of_the_key(
    registry: MemoryRegistry, transport: ScriptedTransport
) -> None:
    service, changes = make(registry, transport)
    registered = service.register(A.lower(), KEY)
    assert registered.service_ibi == A and registered.forms == {"ibip": A}
    assert not registered.included and changes == ["changed"]
    stored = registry.items[A]
    assert stored.key_hash == key_hash(PEPPER, KEY) != key_hash(b"another pepper", KEY)
    assert KEY not in repr(stored) and KEY not in repr(service)
    assert [a.service_ibi for a in service.archives()] == [A]


@pytest.mark.parametrize(("archive", "key"), [(A, "123"), (A, "12345678901-12"), ("nope", KEY)])
def test_registration_refuses_a_malformed_key_or_ibi(
    registry: MemoryRegistry, transport: ScriptedTransport, archive: str, key: str
) -> None:
    service, _ = make(registry, transport)
    with pytest.raises(InvalidInput):
        service.register(archive, key)
    assert registry.items == {}


def test_inclusion_calls_the_archive_back_then_exclusion_switches_it_off(
    registry: MemoryRegistry, transport: ScriptedTransport
) -> None:
    service, changes = make(registry, transport)
    service.register(A, KEY)
    answer = service.switch(request("inclusionRequest"))
    assert answer.status == 200
    assert text(answer) == "status.archive included\r\nstatus.confirmation successful"
    [(endpoint, called, pairs)] = transport.gets
    assert (endpoint.host, endpoint.port, called) == ("archive.example.org", 8080, A)
    assert pairs == [("servicesubject", "inclusionConfirmationRequest")]
    included = registry.items[A]
    assert included.included and included.confirmed and included.protocol == "HTTP"
    assert (included.address, included.ip) == ("archive.example.org:8080", "192.0.2.7")
    answer = service.switch(request("exclusionRequest"))
    assert (answer.status, text(answer)) == (200, "status.archive excluded")
    assert not registry.items[A].included
    assert changes == ["changed"] * 3  # the fan-out's cache is told every time


@pytest.mark.parametrize("confirmation", ["confirmation no", "confirmation yes\nextra 1", None])
def test_a_confirmation_other_than_exactly_yes_is_unsuccessful(
    registry: MemoryRegistry, confirmation: str | None
) -> None:
    answers: dict[str, str | Exception] = {A: confirmation or ConnectionError("down")}
    service, _ = make(registry, ScriptedTransport(answers=answers))
    service.register(A, KEY)
    answer = service.switch(request("inclusionRequest"))
    assert text(answer) == "status.archive included\r\nstatus.confirmation unsuccessful"
    assert registry.items[A].included and not registry.items[A].confirmed


def test_malformed_requests_are_400_saying_why(
    registry: MemoryRegistry, transport: ScriptedTransport
) -> None:
    service, _ = make(registry, transport)
    service.register(A, KEY)
    bad_subject = service.switch({"servicesubject": "hello"})
    assert bad_subject.status == 400
    assert text(bad_subject) == (
        "error {servicesubject must be inclusionRequest or exclusionRequest}"
    )
    missing = service.switch({"servicesubject": "inclusionRequest", "archiveserviceibi": A})
    assert missing.status == 400 and "missing pair(s): archiveaddress" in text(missing)
    assert service.switch(request("inclusionRequest", archiveprotocol="gopher")).status == 400
    assert service.switch(request("inclusionRequest", key="12")).status == 400
    assert not registry.items[A].included and registry.failures == {}


def test_an_unsafe_address_is_refused_before_any_call(registry: MemoryRegistry) -> None:
    transport = ScriptedTransport(answers={A: "confirmation yes"}, refused_hosts={"internal"})
    service, _ = make(registry, transport)
    service.register(A, KEY)
    answer = service.switch(request("inclusionRequest", archiveaddress="internal:80"))
    assert answer.status == 400 and text(answer).startswith("error {archiveaddress:")
    assert transport.gets == [] and not registry.items[A].included


def test_a_wrong_key_and_an_unknown_archive_get_the_same_refusal(
    registry: MemoryRegistry, transport: ScriptedTransport
) -> None:
    service, _ = make(registry, transport)
    service.register(A, KEY)
    service.register(B, OTHER_KEY)
    wrong = service.switch(request("inclusionRequest", key=OTHER_KEY))  # B's key opens only B
    unknown = service.switch(request("inclusionRequest", archive="J8LNKB5R7W/3FUQHC5"))
    assert (wrong.status, text(wrong)) == (403, "status.archive refused")
    assert (unknown.status, text(unknown)) == (403, "status.archive refused")
    assert not registry.items[A].included and transport.gets == []
    assert registry.failures == {A: 1, "J8LNKB5R7W/3FUQHC5": 1}


def test_failed_attempts_are_throttled_per_ibi(
    registry: MemoryRegistry, transport: ScriptedTransport
) -> None:
    service, _ = make(registry, transport, failure_limit=3, failure_window=600)
    service.register(A, KEY)
    statuses = [service.switch(request("inclusionRequest", key=OTHER_KEY)).status for _ in range(3)]
    assert statuses == [403, 403, 403]
    blocked = service.switch(request("inclusionRequest"))  # even the right key, for a while
    assert (blocked.status, blocked.retry_after, text(blocked)) == (
        429,
        600,
        "status.archive refused",
    )
    assert registry.blocked[A] == 1_700_000_000 + 600
    service.register(B, OTHER_KEY)
    assert service.switch(request("exclusionRequest", archive=B, key=OTHER_KEY)).status == 200


def test_keys_are_compared_in_constant_time_even_for_an_unknown_archive(
    registry: MemoryRegistry, transport: ScriptedTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[str, str]] = []
    constant_time = hmac.compare_digest

    def compare_digest(a: str, b: str) -> bool:
        compared.append((a, b))
        return constant_time(a, b)

    monkeypatch.setattr(service_module.hmac, "compare_digest", compare_digest)
    service, _ = make(registry, transport)
    service.register(A, KEY)
    assert service.switch(request("exclusionRequest")).status == 200
    assert service.switch(request("exclusionRequest", archive=B)).status == 403
    assert compared == [
        (key_hash(PEPPER, KEY), key_hash(PEPPER, KEY)),
        (key_hash(PEPPER, KEY), key_hash(PEPPER, "0" * 10)),  # a dummy hash: same work
    ]


def test_the_pepper_comes_from_secrets_manager_or_a_file_made_once(tmp_path: Path) -> None:
    secrets = MemorySecrets({"arn:pepper": "s3cret"})
    assert SecretPepper(secrets, "arn:pepper").load() == b"s3cret"
    assert secrets.calls == ["arn:pepper"]
    path = tmp_path / "keys" / "pepper"
    first = FilePepper(path).load()
    assert len(first) == 64 and FilePepper(path).load() == first
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["pepper"]  # no draft left behind
