"""Transfer records on the wire (issue 24): the Archive an original left says where it went,
and the resolver follows that from the owner of the prefix to the receiver."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from functions.archive.mapping import item_from_mapping, item_to_mapping
from functions.archive.model import Forms, State
from functions.archive.protocol import ArchiveIdentity, ProtocolService
from functions.archive.views import ArchiveViews
from functions.resolver.authority import Trust
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut
from functions.resolver.resolution import Found, Resolver
from ibi.core.pairlist import format_pair_list
from ibi.core.persistent_url import parse_persistent_url
from ibi.core.transfers import moved_to
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryArchive
from tests.fakes_resolver import MemoryRegistry
from tests.unit.test_archive_transfer import ITEM, Sender
from tests.unit.test_owner_first import PerIBI

SENDER = "8JMKD3MGP8W/3FSUP4L"  # owns ITEM's prefix, 8JMKD3MGP8W
RECEIVER = "J8LNKB5R7W/3FUQHC5"


class NamedReceiver:
    """A receiving Archive (``MemoryArchive``) that says its service IBI, as the deposit API
    client's ``service()`` reads it (``GET /api/service``)."""

    def __init__(self) -> None:
        self.archive = MemoryArchive()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)

    def service(self) -> dict[str, Any]:
        return {"archiveserviceibi": {"rep": None, "ibip": RECEIVER}}


def protocol_of(store: Any, service: str, host: str) -> ProtocolService:
    return ProtocolService(
        store,
        identity=ArchiveIdentity(host, Forms(ibip=service)),
        views=ArchiveViews(f"https://{host}"),
        clock=FakeClock(Decimal(1795473200)),
        urlkey_ttl_seconds=600,
    )


def answer_text(protocol: ProtocolService) -> str:
    asked = protocol.answer(
        f"servicesubject=urlRequest&parsedibiurl.ibi={ITEM}&clientinformation.ipaddress=1.2.3.4"
    )
    return format_pair_list(asked.pairs)


@pytest.mark.parametrize("leave", ["copy", "tombstone"])
def test_the_archive_an_original_left_says_where_it_went(leave: str) -> None:
    sender, receiver = Sender(), NamedReceiver()
    sender.move(receiver, leave=leave)  # type: ignore[arg-type]
    item = sender.service.get(ITEM)
    assert item.state is (State.COPY if leave == "copy" else State.DELETED)
    assert item.moved_to == Forms(ibip=RECEIVER) and item.moved_at is not None
    assert item_from_mapping(item_to_mapping(item)).moved_to == item.moved_to  # stored
    asked = protocol_of(sender.service.items, SENDER, "a.example.org").answer(
        f"servicesubject=urlRequest&parsedibiurl.ibi={ITEM}&clientinformation.ipaddress=1.2.3.4"
    )
    assert asked.pairs.get("transfer.archiveservice") == ("ibip", RECEIVER)
    assert asked.pairs.get("transfer.timestamp") == "2026-11-23T22:30:00Z"  # the clock's
    assert moved_to(asked.pairs) == RECEIVER


def test_a_receiver_that_does_not_say_its_service_ibi_leaves_no_record() -> None:
    sender = Sender()
    sender.move(MemoryArchive())
    item = sender.service.get(ITEM)
    assert item.state is State.COPY and item.moved_to is None
    assert "transfer.archiveservice" not in answer_text(
        protocol_of(sender.service.items, SENDER, "a.example.org")
    )


def test_the_resolver_follows_the_record_from_the_owner_to_the_receiver() -> None:
    """The two Archives' own protocol answers, as the resolver's fan-out gets them: two
    requests, the receiver's original, trusted because the owner named it."""
    sender, receiver = Sender(), NamedReceiver()
    sender.move(receiver, leave="tombstone")  # type: ignore[arg-type]
    answers = {
        SENDER: {ITEM: answer_text(protocol_of(sender.service.items, SENDER, "a.example.org"))},
        RECEIVER: {ITEM: answer_text(protocol_of(receiver.store, RECEIVER, "b.example.org"))},
    }
    registry = MemoryRegistry()
    registry.add(SENDER, "a.example.org:443")
    registry.add(RECEIVER, "b.example.org:443")
    fanout = FanOut(PerIBI(answers), ArchiveDirectory(registry), timeout=1.0, deadline=3.0)
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{ITEM}"), "1.2.3.4")
    assert isinstance(found, Found) and found.answer.archive == RECEIVER
    assert found.url.startswith("https://b.example.org/") and found.answer.trust is Trust.NAMED
    assert fanout.requests_made == 2
