"""The registration service over in-memory fakes: registering, switching, throttling, keys."""

from __future__ import annotations

import hmac
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.resolver import service as service_module
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.pepper import FilePepper, SecretPepper
from functions.resolver.service import RegistrationService, key_hash, source_of
from ibi.core.errors import InvalidInput
from ibi.core.labels import IBI
from ibi.core.pairlist import format_pair_list
from tests.fakes import FakeClock
from tests.fakes_resolver import (
    FixedPepper,
    MemoryRegistry,
    MemorySecrets,
    MemoryThrottle,
    ScriptedTransport,
)

A = "8JMKD3MGP8W/3FSUP4L"
B = "LK47B6W/362SFKH"
KEY = "1234567890-0987654321"
OTHER_KEY = "5555555555-6666666666"
STRANGER = "J8LNKB5R7W/3FUQHC5"  # a valid IBI nobody registered
PEPPER = FixedPepper().load()
NOW = 1_700_000_000
HOLDER = "192.0.2.7"  # the key holder's address
GUESSER = "203.0.113.66"


def make(
    registry: MemoryRegistry,
    transport: ScriptedTransport,
    throttle: MemoryThrottle | None = None,
    **options: Any,
) -> tuple[RegistrationService, list[str]]:
    changes: list[str] = []
    service = RegistrationService(
        registry=registry,
        throttle=throttle if throttle is not None else MemoryThrottle(),
        transport=transport,
        pepper=PEPPER,
        clock=options.pop("clock", FakeClock(Decimal(NOW))),
        confirmation_timeout=1.0,
        on_change=options.pop("on_change", lambda: changes.append("changed")),
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
    return ScriptedTransport(answers={A: "confirmation yes", B: "confirmation yes"})


@pytest.fixture
def throttle() -> MemoryThrottle:
    return MemoryThrottle()


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
    answer = service.switch(request("inclusionRequest"), client_ip=HOLDER)
    assert answer.status == 200
    assert text(answer) == "status.archive included\r\nstatus.confirmation successful"
    [(endpoint, called, pairs)] = transport.gets
    assert (endpoint.host, endpoint.port, called) == ("archive.example.org", 8080, A)
    assert pairs == [("servicesubject", "inclusionConfirmationRequest")]
    included = registry.items[A]
    assert included.included and included.confirmed and included.protocol == "HTTP"
    assert (included.address, included.ip) == ("archive.example.org:8080", "192.0.2.7")
    answer = service.switch(request("exclusionRequest"), client_ip=HOLDER)
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
    answer = service.switch(request("inclusionRequest"), client_ip=HOLDER)
    assert text(answer) == "status.archive included\r\nstatus.confirmation unsuccessful"
    assert registry.items[A].included and not registry.items[A].confirmed


def test_malformed_requests_are_400_saying_why(
    registry: MemoryRegistry, transport: ScriptedTransport, throttle: MemoryThrottle
) -> None:
    service, changes = make(registry, transport, throttle)
    service.register(A, KEY)
    bad_subject = service.switch({"servicesubject": "hello"}, client_ip=HOLDER)
    assert bad_subject.status == 400
    assert text(bad_subject) == (
        "error {servicesubject must be inclusionRequest or exclusionRequest}"
    )
    incomplete = {"servicesubject": "inclusionRequest", "archiveserviceibi": A}
    missing = service.switch(incomplete, client_ip=HOLDER)
    assert missing.status == 400 and "missing pair(s): archiveaddress" in text(missing)
    gopher = request("inclusionRequest", archiveprotocol="gopher")
    assert service.switch(gopher, client_ip=HOLDER).status == 400
    assert service.switch(request("inclusionRequest", key="12"), client_ip=HOLDER).status == 400
    assert not registry.items[A].included and throttle.items == {}
    assert changes == ["changed"]  # the registration only


def test_an_unsafe_address_is_refused_before_any_call(registry: MemoryRegistry) -> None:
    transport = ScriptedTransport(answers={A: "confirmation yes"}, refused_hosts={"internal"})
    service, _ = make(registry, transport)
    service.register(A, KEY)
    unsafe = request("inclusionRequest", archiveaddress="internal:80")
    answer = service.switch(unsafe, client_ip=HOLDER)
    assert answer.status == 400 and text(answer).startswith("error {archiveaddress:")
    assert transport.gets == [] and not registry.items[A].included


def test_a_wrong_key_and_an_unknown_archive_get_the_same_refusal(
    registry: MemoryRegistry, transport: ScriptedTransport, throttle: MemoryThrottle
) -> None:
    service, _ = make(registry, transport, throttle)
    service.register(A, KEY)
    service.register(B, OTHER_KEY)
    wrong = service.switch(request("inclusionRequest", key=OTHER_KEY), client_ip=GUESSER)  # B's key
    unknown = service.switch(request("inclusionRequest", archive=STRANGER), client_ip=GUESSER)
    assert (wrong.status, text(wrong)) == (403, "status.archive refused")
    assert (unknown.status, text(unknown)) == (403, "status.archive refused")
    assert wrong.retry_after is unknown.retry_after is None
    assert not registry.items[A].included and transport.gets == []
    # The wrong key for a registered Archive is counted; the unknown IBI leaves no trace.
    assert set(throttle.items) == {f"archive {A}", f"source {A} {GUESSER}"}


def _random_unknown_ibis(count: int) -> list[str]:
    draw = random.Random(11)
    return [
        IBI.build(Decimal(draw.randrange(10**9, 2 * 10**9)), ip="198.51.100.9").ibip or ""
        for _ in range(count)
    ]


def test_a_flood_of_refused_requests_writes_nothing_and_never_rereads_the_registry(
    registry: MemoryRegistry, transport: ScriptedTransport, throttle: MemoryThrottle
) -> None:
    """Issue 11, finding 1: 20,000 anonymous requests with random valid IBIs and wrong keys
    each wrote a throttle record into the registry, and each made the registry be re-read."""
    directory = ArchiveDirectory(registry, monotonic=lambda: 0.0)  # time stands still
    service, _ = make(registry, transport, throttle, on_change=directory.forget)
    service.register(A, KEY)
    assert service.switch(request("inclusionRequest"), client_ip=HOLDER).status == 200
    assert [a.service_ibi for a in directory.included()] == [A]  # the snapshot, read once
    registered = dict(registry.items)
    scans, generations = registry.reads, registry.generation_reads
    draw = random.Random(7)
    for ibi in _random_unknown_ibis(500):
        source = f"198.51.{draw.randrange(256)}.{draw.randrange(256)}"
        wrong = f"{draw.randrange(10**10, 10**11)}-{draw.randrange(10**10, 10**11)}"
        for subject in ("inclusionRequest", "exclusionRequest"):
            answer = service.switch(request(subject, archive=ibi, key=wrong), client_ip=source)
            assert (answer.status, text(answer)) == (403, "status.archive refused")
        assert [a.service_ibi for a in directory.included()] == [A]  # a resolution's read
        assert len(directory.archives()) == 1  # /status's read
    assert registry.items == registered and throttle.items == {}  # nothing written anywhere
    assert (registry.reads, registry.generation_reads) == (scans, generations)  # nor re-read


def test_a_guesser_elsewhere_never_locks_the_key_holder_out(
    registry: MemoryRegistry, transport: ScriptedTransport, throttle: MemoryThrottle
) -> None:
    """Issue 11, finding 2: five wrong keys from anyone blocked the right key for 15 min."""
    service, _ = make(registry, transport, throttle)
    service.register(A, KEY)
    for subject in ("inclusionRequest", "exclusionRequest") * 4:
        service.switch(request(subject, key=OTHER_KEY), client_ip=GUESSER)
    guessing = service.switch(request("inclusionRequest", key=OTHER_KEY), client_ip=GUESSER)
    assert (guessing.status, guessing.retry_after) == (429, 900)
    assert text(guessing).startswith("status.archive refused\r\nerror {")  # why, and when
    # The blocked source is refused whatever the key, so a guess there proves nothing.
    assert service.switch(request("exclusionRequest"), client_ip=GUESSER).status == 429
    included = service.switch(request("inclusionRequest"), client_ip=HOLDER)
    assert (included.status, text(included)) == (
        200,
        "status.archive included\r\nstatus.confirmation successful",
    )
    excluded = service.switch(request("exclusionRequest"), client_ip=HOLDER)
    assert (excluded.status, text(excluded)) == (200, "status.archive excluded")
    assert not registry.items[A].included
    # IPv6: the guesser's whole /64 is one source; the next /64 is another.
    for host in range(1, 7):
        service.switch(
            request("inclusionRequest", key=OTHER_KEY), client_ip=f"2001:db8:0:1::{host}"
        )
    assert service.switch(request("inclusionRequest"), client_ip="2001:db8:0:1::99").status == 429
    assert service.switch(request("inclusionRequest"), client_ip="2001:db8:0:2::1").status == 200


def test_the_block_ends_with_its_window(
    registry: MemoryRegistry, transport: ScriptedTransport, throttle: MemoryThrottle
) -> None:
    clock = FakeClock(Decimal(NOW))
    service, _ = make(registry, transport, throttle, clock=clock, failure_limit=3)
    service.register(A, KEY)
    statuses = [
        service.switch(request("exclusionRequest", key=OTHER_KEY), client_ip=GUESSER).status
        for _ in range(4)
    ]
    assert statuses == [403, 403, 403, 429]
    clock.sleep(600)
    late = service.switch(request("exclusionRequest"), client_ip=GUESSER)
    assert (late.status, late.retry_after) == (429, 300)  # the window started at the first
    clock.sleep(300)
    assert service.switch(request("exclusionRequest"), client_ip=GUESSER).status == 200


def test_past_the_cap_wrong_keys_are_429_and_flagged_but_the_right_key_passes(
    registry: MemoryRegistry, transport: ScriptedTransport, throttle: MemoryThrottle
) -> None:
    service, _ = make(registry, transport, throttle, guess_cap=3)
    service.register(A, KEY)
    sources = [f"198.51.100.{n}" for n in range(1, 6)]
    answers = [
        service.switch(request("inclusionRequest", key=OTHER_KEY), client_ip=s) for s in sources
    ]
    assert [(a.status, a.over_cap) for a in answers] == [(403, False)] * 3 + [(429, True)] * 2
    assert answers[3].retry_after == 900
    assert text(answers[3]).startswith("status.archive refused\r\nerror {")  # why, and when
    # Past the cap a wrong key blocks its source at once; the cap holds with 100 + 1 counted.
    assert service.switch(request("inclusionRequest"), client_ip=sources[4]).status == 429
    assert service.switch(request("inclusionRequest"), client_ip=sources[0]).status == 200
    assert service.switch(request("exclusionRequest"), client_ip=HOLDER).status == 200
    assert throttle.items[f"archive {A}"].failures == 5


def test_every_throttle_record_carries_its_expiry(
    registry: MemoryRegistry, transport: ScriptedTransport, throttle: MemoryThrottle
) -> None:
    service, _ = make(registry, transport, throttle, failure_window=600)
    service.register(A, KEY)
    for source in (GUESSER, HOLDER, "2001:db8::1"):
        service.switch(request("inclusionRequest", key=OTHER_KEY), client_ip=source)
    assert len(throttle.items) == 4  # the Archive's counter and one per source
    assert throttle.expires_at == dict.fromkeys(throttle.items, NOW + 600)


@pytest.mark.parametrize(
    ("ip", "source"),
    [
        ("203.0.113.66", "203.0.113.66"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::ffff", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.66", "203.0.113.66"),
        ("", "unknown"),
        ("not an address", "unknown"),
    ],
)
def test_the_source_of_a_wrong_key_is_an_address_or_an_ipv6_64(ip: str, source: str) -> None:
    assert source_of(ip) == source


def test_keys_are_compared_in_constant_time_and_an_unknown_archive_costs_one_read(
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
    assert service.switch(request("exclusionRequest"), client_ip=HOLDER).status == 200
    wrong = request("exclusionRequest", key="1111111111")
    assert service.switch(wrong, client_ip=HOLDER).status == 403
    assert compared == [
        (key_hash(PEPPER, KEY), key_hash(PEPPER, KEY)),
        (key_hash(PEPPER, "1111111111"), key_hash(PEPPER, KEY)),
    ]
    # An unknown Archive: the same 403 answer, and no comparison to make.
    unknown = service.switch(request("exclusionRequest", archive=B), client_ip=HOLDER)
    refused = service.switch(wrong, client_ip=HOLDER)
    assert (
        (unknown.status, text(unknown)) == (refused.status, text(refused)) == (403, text(refused))
    )
    assert len(compared) == 3


def test_the_pepper_comes_from_secrets_manager_or_a_file_made_once(tmp_path: Path) -> None:
    secrets = MemorySecrets({"arn:pepper": "s3cret"})
    assert SecretPepper(secrets, "arn:pepper").load() == b"s3cret"
    assert secrets.calls == ["arn:pepper"]
    path = tmp_path / "keys" / "pepper"
    first = FilePepper(path).load()
    assert len(first) == 64 and FilePepper(path).load() == first
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["pepper"]  # no draft left behind
