"""Issue 34, each reproduction of the issue as a test (each failed on the code before it).

Scripted Archives (``tests.unit.test_owner_first``: OWNER owns ITEM's prefix; RECEIVER,
COPIER and HOSTILE own prefixes of their own) and the real fan-out and resolution. HOSTILE
lies about every pair it is asked to; the differential proof over the whole pair grammar is
tests/unit/test_whose_word.py.
"""

from __future__ import annotations

import pytest

from functions.resolver.resolution import Alert, Found
from functions.resolver.service import RegistrationService
from tests.fakes_resolver import FixedPepper, MemoryRegistry, MemoryThrottle, ScriptedTransport
from tests.unit.test_owner_first import (
    COPIER,
    FRESH,
    HOSTILE,
    ITEM,
    OWNER,
    RECEIVER,
    copy,
    federation,
    moved_to,
    original,
    resolve,
)

NEXT = FRESH[0]  # ITEM's next edition, also OWNER's
LIAR = "http://hostile.example/lie"


def chain_in_owner() -> dict[str, str]:
    """ITEM (first edition) and NEXT (its next, the last), both originals at OWNER."""
    first = original(ITEM, "owner", f"ibi.nextedition {{ibip {NEXT}}}\n")
    first += (
        f"ibi.lastedition {{ibip {NEXT}}}\nstate.lastedition Original\n"
        f"url.lastedition http://owner/{NEXT}\n"
    )
    return {ITEM: first, NEXT: original(NEXT, "owner")}


@pytest.mark.parametrize("required", ["", "?ibiurl.requireditemstatus=Original"])
def test_the_last_edition_cannot_be_taken_over(required: str) -> None:
    lie = (
        f"ibi {{ibip {ITEM}}}\nstate.lastedition Original\nibi.lastedition {{ibip {NEXT}}}\n"
        f"url.lastedition {LIAR}\ncontenttype.lastedition Data\n"
    )
    fanout, _ = federation({OWNER: chain_in_owner(), HOSTILE: {ITEM: lie}}, down=set())
    fanout.pace.head_start = lambda owner: 0.0  # type: ignore[method-assign]  # all asked
    found = resolve(fanout, f"/{ITEM}!{required}")
    assert isinstance(found, Found) and found.url == f"http://owner/{NEXT}", found


def test_a_translation_cannot_be_added_to_anothers_item() -> None:
    lie = (
        f"ibi {{ibip {ITEM}}}\nstate.translation(fr) Original\n"
        f"url.translation(fr) {LIAR}\nibi.translation(fr) {{ibip {ITEM}}}\n"
    )
    fanout, _ = federation({OWNER: {ITEM: original(ITEM, "owner")}, HOSTILE: {ITEM: lie}})
    fanout.pace.head_start = lambda owner: 0.0  # type: ignore[method-assign]
    alert = resolve(fanout, f"/{ITEM}+(fr)")
    assert isinstance(alert, Alert) and alert.status == 404, alert


def deleted(ibi: str) -> str:
    return f"ibi {{ibip {ibi}}}\nstate Deleted\ntimestamp 2026-01-01T00:00:00Z\n"


@pytest.mark.parametrize("claim", ["Copy", "Original"])
def test_a_deleted_item_never_comes_back(claim: str) -> None:
    hostile = {ITEM: original(ITEM, "hostile").replace("state Original", f"state {claim}")}
    fanout, _ = federation(
        {OWNER: {ITEM: deleted(ITEM)}, COPIER: {ITEM: copy(ITEM, "copier")}, HOSTILE: hostile}
    )
    fanout.pace.head_start = lambda owner: 0.0  # type: ignore[method-assign]
    alert = resolve(fanout, f"/{ITEM}")
    assert isinstance(alert, Alert) and alert.status == 410, alert
    assert any(COPIER in line for line in alert.copies)  # where copies still are


def test_a_strangers_tombstone_never_deletes_an_owned_ibi() -> None:
    fanout, _ = federation({HOSTILE: {FRESH[1]: deleted(FRESH[1])}})
    fanout.pace.head_start = lambda owner: 0.0  # type: ignore[method-assign]
    alert = resolve(fanout, f"/{FRESH[1]}")
    assert isinstance(alert, Alert) and alert.status == 404, alert


def test_registering_an_archive_never_strips_another_of_its_prefix() -> None:
    from functions.resolver.registry import PrefixTaken

    registry = MemoryRegistry()
    service = RegistrationService(
        registry=registry,
        throttle=MemoryThrottle(),
        transport=ScriptedTransport(),
        pepper=FixedPepper().value,
        clock=lambda: 1_700_000_000,  # type: ignore[arg-type,return-value]
        confirmation_timeout=1.0,
    )
    service.register(OWNER, "1234567890-0987654321")
    with pytest.raises(PrefixTaken, match=OWNER):
        service.register("8JMKD3MGP8W/3FSUP4M", "1234567890-0987654321")  # OWNER's prefix
    assert service.owned()["8JMKD3MGP8W"].service_ibi == OWNER
    service.register("8JMKD3MGP8W/3FSUP4M", "1234567890-0987654321", share_prefix=True)
    assert "8JMKD3MGP8W" not in service.owned()  # said explicitly: shared, no owner


def test_one_slow_moment_never_hands_the_owners_readers_away() -> None:
    """The owner slower than its head start, a copy fast: the owner's answer is waited for,
    every time, and the grace after the copy's answer does not end the round."""
    fanout, transport = federation(
        {OWNER: {ITEM: original(ITEM, "owner")}, COPIER: {ITEM: copy(ITEM, "copier")}}
    )
    transport.delays = {OWNER: 1.3, COPIER: 0.0}
    for _ in range(5):
        found = resolve(fanout, f"/{ITEM}")
        assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}", found


def test_during_a_transfer_a_reader_never_sees_zero_originals() -> None:
    """The sender holds a copy naming the receiver, which does not hold it as original yet:
    with the original required the sender's answer stands (never a 404)."""
    fanout, _ = federation(
        {
            OWNER: {ITEM: copy(ITEM, "owner", moved_to(RECEIVER))},
            RECEIVER: {ITEM: ""},  # staged, not yet answered for
        }
    )
    found = resolve(fanout, f"/{ITEM}?ibiurl.requireditemstatus=Original")
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}", found


def test_a_silent_archive_never_holds_a_410_once_the_owner_answered() -> None:
    """The grace bounds the round that names where copies are: the owner's tombstone came,
    a copy answered, and the silent Archive is not waited for (never noted as a timeout)."""
    fanout, transport = federation(
        {OWNER: {ITEM: deleted(ITEM)}, COPIER: {ITEM: copy(ITEM, "copier")}}, down={HOSTILE}
    )
    transport.delays = {OWNER: 0.0, COPIER: 0.01}
    alert = resolve(fanout, f"/{ITEM}")
    assert isinstance(alert, Alert) and alert.status == 410
    assert any(COPIER in line for line in alert.copies)
    notes = fanout.directory.registry.notes  # type: ignore[attr-defined]
    assert not any(archive == HOSTILE for archive, _ in notes), notes
