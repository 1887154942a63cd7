"""Issue 13 item 10: the pepper rotation of docs/deploy.md ("Rotating the pepper"), step by step
against the registration code, as in AWS (the secret read through ``SecretPepper``).

1. ``put-secret-value`` gives the secret a new value: running environments keep the old one.
2. New execution environments (a configuration update) read the new one: every stored key hash
   stops matching, so inclusion and exclusion requests are refused; the registry's records,
   and so resolution, are untouched.
3. ``ibi resolver register`` of each Archive (its key, or a new one) stores the hash under the
   new pepper: that Archive switches again. Archives not yet re-registered stay refused.
"""

from __future__ import annotations

from decimal import Decimal

from functions.resolver.pepper import SecretPepper
from functions.resolver.service import RegistrationService, key_hash
from tests.fakes import FakeClock
from tests.fakes_resolver import MemoryRegistry, MemorySecrets, MemoryThrottle, ScriptedTransport
from tests.unit.test_registration import KEY, NOW, OTHER_KEY, A, B, request

SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ResolverPepper-abc123"


def environment(
    secrets: MemorySecrets, registry: MemoryRegistry, throttle: MemoryThrottle
) -> RegistrationService:
    """A new execution environment: it reads the pepper once, as handler.py does."""
    return RegistrationService(
        registry=registry,
        throttle=throttle,
        transport=ScriptedTransport(answers={A: "confirmation yes", B: "confirmation yes"}),
        pepper=SecretPepper(secrets, SECRET).load(),
        clock=FakeClock(Decimal(NOW)),
        confirmation_timeout=1.0,
    )


def test_the_documented_pepper_rotation_rekeys_every_archive() -> None:
    secrets = MemorySecrets({SECRET: "old-pepper-" + "0" * 53})
    registry, throttle = MemoryRegistry(), MemoryThrottle()
    before = environment(secrets, registry, throttle)
    before.register(A, KEY)
    before.register(B, OTHER_KEY)
    for archive, key in ((A, KEY), (B, OTHER_KEY)):
        assert (
            before.switch(request("inclusionRequest", archive, key), client_ip="192.0.2.7").status
            == 200
        )

    # step 1: aws secretsmanager put-secret-value (a new random value)
    secrets.secrets[SECRET] = "new-pepper-" + "1" * 53
    # a running environment still holds the old pepper: nothing breaks yet
    assert before.switch(request("inclusionRequest", A, KEY), client_ip="192.0.2.7").status == 200

    # step 2: new environments read the new pepper; old hashes stop matching
    after = environment(secrets, registry, throttle)
    refused = after.switch(request("inclusionRequest", A, KEY), client_ip="192.0.2.7")
    assert refused.status == 403
    # the records are kept: both Archives are still included (resolution goes on)
    assert {a.service_ibi: a.included for a in after.archives()} == {A: True, B: True}

    # step 3: re-register each Archive under the new pepper (same key here)
    after.register(A, KEY)
    assert registry.items[A].key_hash == key_hash(b"new-pepper-" + b"1" * 53, KEY)
    assert after.switch(request("inclusionRequest", A, KEY), client_ip="192.0.2.7").status == 200
    # B, not re-registered yet, is still refused; then re-keyed, it switches too
    assert (
        after.switch(request("exclusionRequest", B, OTHER_KEY), client_ip="192.0.2.8").status == 403
    )
    after.register(B, OTHER_KEY)
    answer = after.switch(request("exclusionRequest", B, OTHER_KEY), client_ip="192.0.2.8")
    assert answer.status == 200
    assert {a.service_ibi: a.included for a in after.archives()} == {A: True, B: False}


def test_the_procedure_is_the_one_documented() -> None:
    """docs/deploy.md names the three steps this test runs, in order."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    section = text.split("### Rotating the pepper", 1)[1].split("\n## ", 1)[0]
    steps = [
        "aws secretsmanager put-secret-value",
        "aws lambda update-function-configuration",
        "ibi resolver register",
    ]
    positions = [section.index(step) for step in steps]
    assert positions == sorted(positions)
