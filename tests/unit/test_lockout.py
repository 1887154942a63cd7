"""Issue 39, never locked out: a stranger's wrong keys never lock out the key holder, and a
rotation is all or nothing.

The key holder's own paths — the administrator's switch (``POST /admin/switch``, IAM in AWS;
``ibi archive on/off``, ``ibi local --rotate-key``) and local mode's own Archives at start
(``admit``) — never consult the wrong-key throttle; the public route keeps guarding against
guessing (tests/unit/test_registration.py). Every path is tried after a stranger, at the key
holder's own address, sent wrong keys past the per-source limit and past the Archive's cap.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from functions.resolver.errors import RegistryError
from functions.resolver.registry import Contact
from functions.resolver.service import RegistrationService, key_hash
from tests.fakes import FakeClock
from tests.fakes_resolver import FixedPepper, MemoryRegistry, MemoryThrottle, ScriptedTransport

A = "8JMKD3MGP8W/3FSUP4L"
KEY = "1234567890-0987654321"
NEW_KEY = "1111111111-2222222222"
WRONG = "9999999999-0000000000"
PEPPER = FixedPepper().load()
NOW = 1_700_000_000
LOOPBACK = "127.0.0.1"  # local mode: every process on the machine is this one source
YES = "confirmation yes"


class UntouchableThrottle(MemoryThrottle):
    """A throttle that fails the test when consulted while ``armed``."""

    armed = False

    def tally(self, counter: str, *, now: int) -> Any:
        assert not self.armed, f"the throttle was read ({counter})"
        return super().tally(counter, now=now)

    def count_failure(self, counter: str, *, now: int, window: int, weight: int = 1) -> Any:
        assert not self.armed, f"the throttle was written ({counter})"
        return super().count_failure(counter, now=now, window=window, weight=weight)


class FailingInclusion(MemoryRegistry):
    """A registry whose next inclusion fails (the store went away mid-rotation)."""

    fail = False

    def include(self, service_ibi: str, contact: Contact, *, at: str, confirmed: bool) -> None:
        if self.fail:
            raise RegistryError("the registry is unavailable")
        super().include(service_ibi, contact, at=at, confirmed=confirmed)


def pairs(subject: str = "inclusionRequest", key: str = KEY, **more: str) -> dict[str, str]:
    return {
        "servicesubject": subject,
        "archiveaddress": "archive.example.org:8080",
        "archiveserviceibi": A,
        "archiveip": "192.0.2.7",
        "archiveprotocol": "http",
        "archiveplatformversion": "fake-1.0",
        "archiveadmemailaddress": "admin@example.org",
        "registrationkey": key,
        **more,
    }


def make(registry: MemoryRegistry, throttle: MemoryThrottle) -> RegistrationService:
    service = RegistrationService(
        registry=registry,
        throttle=throttle,
        transport=ScriptedTransport(answers={A: YES}, refused_hosts={"10.0.0.1"}),
        pepper=PEPPER,
        clock=FakeClock(Decimal(NOW)),
        confirmation_timeout=1.0,
        guess_cap=20,
    )
    service.register(A, KEY)
    return service


def a_stranger_guesses(service: RegistrationService) -> None:
    """Wrong keys from the key holder's own address, then from everywhere past the cap."""
    for _ in range(6):
        service.switch(pairs(key=WRONG), client_ip=LOOPBACK)
    for host in range(25):
        service.switch(pairs(key=WRONG), client_ip=f"198.51.100.{host}")
    assert service.switch(pairs(), client_ip=LOOPBACK).status == 429  # the public route: blocked


@pytest.fixture
def throttle() -> UntouchableThrottle:
    return UntouchableThrottle()


def test_after_a_strangers_wrong_keys_the_administrator_switches_on_off_and_rotates(
    throttle: UntouchableThrottle,
) -> None:
    registry = MemoryRegistry()
    service = make(registry, throttle)
    a_stranger_guesses(service)
    throttle.armed = True  # from here, any look at the throttle fails the test
    off = service.administer(pairs("exclusionRequest"))
    assert (off.status, off.fields()) == (200, {"status.archive": "excluded"})
    assert not registry.items[A].included
    on = service.administer(pairs())
    assert on.status == 200 and on.fields()["status.archive"] == "included"
    rotated = service.administer(pairs(key=NEW_KEY), rotate=True)
    assert rotated.status == 200 and registry.items[A].included
    assert registry.items[A].key_hash == key_hash(PEPPER, NEW_KEY)


def test_a_wrong_key_on_the_administrators_route_is_refused_and_never_counted(
    throttle: UntouchableThrottle,
) -> None:
    registry = MemoryRegistry()
    service = make(registry, throttle)
    throttle.armed = True
    for _ in range(10):
        refused = service.administer(pairs(key=WRONG))
        assert refused.status == 403 and "does not open" in refused.message
    assert service.administer(pairs()).status == 200  # never blocked by its own typos


def test_local_modes_own_archives_are_included_at_start_after_a_strangers_wrong_keys(
    throttle: UntouchableThrottle,
) -> None:
    registry = MemoryRegistry()
    service = make(registry, throttle)
    a_stranger_guesses(service)
    throttle.armed = True
    admitted = service.admit(pairs())
    assert admitted.status == 200 and registry.items[A].included


def test_a_rotation_to_an_address_refused_changes_nothing(throttle: UntouchableThrottle) -> None:
    registry = MemoryRegistry()
    service = make(registry, throttle)
    before = registry.items[A]
    refused = service.administer(pairs(key=NEW_KEY, archiveaddress="10.0.0.1"), rotate=True)
    assert refused.status == 400
    assert registry.items[A] == before  # the old key opens it, the new one does not
    assert service.switch(pairs(), client_ip="192.0.2.7").status == 200


def test_a_rotation_whose_inclusion_fails_puts_the_old_key_back() -> None:
    registry = FailingInclusion()
    service = make(registry, MemoryThrottle())
    registry.fail = True
    with pytest.raises(RegistryError):
        service.administer(pairs(key=NEW_KEY), rotate=True)
    assert registry.items[A].key_hash == key_hash(PEPPER, KEY)
    registry.fail = False
    assert service.switch(pairs(), client_ip="192.0.2.7").status == 200
    assert service.switch(pairs(key=NEW_KEY), client_ip="192.0.2.7").status == 403


def test_a_rotation_is_by_an_inclusion_and_of_a_registered_archive_only() -> None:
    from functions.resolver.service import UnknownArchive

    service = make(MemoryRegistry(), MemoryThrottle())
    assert service.administer(pairs("exclusionRequest", NEW_KEY), rotate=True).status == 400
    with pytest.raises(UnknownArchive):
        service.administer(pairs(archiveserviceibi="J8LNKB5R7W/3FUQHC5"), rotate=True)


# ---------------------------------------------------------------------------- the Lambda's routes


@pytest.fixture
def routes(tmp_path: Any) -> Any:
    import boto3
    from moto import mock_aws

    from functions.resolver import wiring
    from functions.resolver.settings import ResolverSettings

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        wiring.ensure_tables(client, "resolver")
        settings = ResolverSettings.from_environment(
            {
                "IBI_RESOLVER_TABLE": "resolver",
                "IBI_PEPPER_FILE": str(tmp_path / "pepper"),
                "IBI_ALLOW_NETWORKS": "192.0.2.0/24",
            }
        )
        runtime = wiring.build(settings, dynamodb=client)
        wiring.install(runtime)
        try:
            yield runtime
        finally:
            wiring.install(None)


def lambda_call(method: str, path: str, query: str = "", body: Any = None) -> tuple[int, str]:
    import json

    from functions.resolver import handler
    from ibi_tools.local.gateway import LocalContext
    from tests.fuzzing import event

    data = json.dumps(body).encode() if body is not None else b""
    answer = handler.lambda_handler(
        event(method, path, query, body=data, headers={}), LocalContext("t", "r")
    )
    return answer["statusCode"], answer["body"]


def test_the_admin_switch_route_after_a_strangers_wrong_keys_from_the_same_address(
    routes: Any,
) -> None:
    """The stranger and the administrator share one source (the events' 198.51.100.7)."""
    import json
    from urllib.parse import urlencode

    from ibi import defaults

    lambda_call("POST", "/admin/archives", body={"archiveserviceibi": A, "registrationkey": KEY})
    public = "/" + defaults.RESOLVER_SERVICE_IBI
    wrong = urlencode(pairs(key=WRONG, archiveaddress="192.0.2.9:1"))
    for _ in range(6):
        lambda_call("GET", public, wrong)
    status, _ = lambda_call("GET", public, urlencode(pairs(archiveaddress="192.0.2.9:1")))
    assert status == 429  # the public route still guards against guessing
    body = pairs(archiveaddress="192.0.2.9:1")
    for subject in ("exclusionRequest", "inclusionRequest"):
        status, answer = lambda_call(
            "POST", "/admin/switch", body={**body, "servicesubject": subject}
        )
        assert status == 200, answer
    status, answer = lambda_call(
        "POST", "/admin/switch", body={**body, "registrationkey": NEW_KEY, "rotate": True}
    )
    assert status == 200 and json.loads(answer)["status.archive"] == "included"
    assert routes.registry.get(A).key_hash == key_hash(routes.registration.pepper, NEW_KEY)
    status, answer = lambda_call("POST", "/admin/switch", body=body)  # the old key: refused
    assert status == 403 and json.loads(answer)["error"]["code"] == "KeyRefused"
    assert lambda_call("POST", "/admin/switch", body={"servicesubject": "x"})[0] == 400
    assert lambda_call("POST", "/admin/switch", body={**body, "archiveip": ""})[0] == 422
    assert lambda_call("GET", "/admin/switch")[0] == 405
