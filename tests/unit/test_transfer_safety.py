"""Transfers that cannot lose an item (issue 24, item 6): receivers that lie.

An original moves only to an Archive registered and included at the sender's resolver, and the
sender believes only what it reads at the address the resolver registered for it
(``functions/archive/registered.py``): a receiver that fakes its promotion, lists our checksums
over other bytes, answers from another address, or an offer confirmed before anything was
staged, never leaves the item held nowhere; an expired offer that left it nowhere is taken back.
The same through real handlers and the real resolver: ``tests/integration/test_transfer_safety.py``.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import pytest

from functions.archive.content import ContentService, Receivers
from functions.archive.errors import BadRequest, Conflict
from functions.archive.mapping import item_to_mapping
from functions.archive.model import Forms, State
from functions.archive.offers import OfferExpired, OfferKeys, Unconfirmed, accept, confirm
from functions.archive.registered import NotRegistered, shown, transfer_view
from functions.archive.service import ArchiveService
from functions.archive.transfer import TransferFailed
from functions.archive.views import ArchiveViews
from tests.fakes import FakeClock
from tests.fakes_archive import (
    ClaimingArchive,
    MemoryArchive,
    MemoryFileStore,
    MemoryItemStore,
    MemoryRegistry,
)

ITEM = "8JMKD3MGP8W/35MME4E"
SENDER = "D7N2U8HW/4GRGLD2"  # the sending Archive's service IBI
RECEIVER = Forms(rep="example.org/ibi/2026/11.24.03.13.20", ibip="D7N2U8HW/4GRHGMK")
FILES = {"paper.pdf": b"%PDF-1.7 a paper\n", "data.csv": b"x,y\n1,2\n"}
RECEIVER_URL = "https://b.example.org"


class Keys:
    def load(self) -> list[bytes]:
        return [b"the sender's key"]


class Sender:
    """The sending Archive in memory, registered at ``registry`` with ``https://a.example.org``."""

    def __init__(self, registry: MemoryRegistry, connect: Any = None) -> None:
        self.clock = FakeClock(Decimal(1795473000))
        self.files = MemoryFileStore()
        self.service = ArchiveService(
            MemoryItemStore(), clock=self.clock, own_prefixes=["8JMKD3MGP8W"]
        )
        self.content = ContentService(
            self.service,
            views=ArchiveViews("https://a.example.org"),
            files=self.files,
            serve_inline_bytes=1024,
            offer_keys=OfferKeys(Keys()),
            receivers=Receivers(connect=connect or (lambda to: None), registry=registry),
        )
        self.service.create_original({"ibi": ITEM, "language": "en"})
        for path, data in FILES.items():
            self.files.upload(ITEM, path, data)
        declared = [
            {"path": p, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
            for p, d in FILES.items()
        ]
        self.content.commit_files(ITEM, {"files": declared, "default_file": "paper.pdf"})
        registry.add(SENDER, "https://a.example.org", self)

    def transfer_view(self, ibi: str) -> dict[str, Any] | None:
        item = self.service.items.get(Forms.of(ibi).key)
        return transfer_view(item) if item is not None and shown(item) else None

    def state(self) -> tuple[State, bool]:
        item = self.service.get(ITEM)
        return item.state, item.pending

    def move(self, to: str = RECEIVER_URL, leave: str = "tombstone") -> Any:
        return self.content.transfer(ITEM, {"to": to, "leave": leave})


def held(archive: MemoryArchive) -> tuple[State, bool] | None:
    item = archive.held(ITEM)
    return None if item is None else (item.state, item.pending)


def federation(receiver: MemoryArchive) -> tuple[Sender, MemoryRegistry]:
    """A sender and ``receiver``, both registered; the sender reaches the receiver's deposit
    API at any URL given, which says it is RECEIVER."""
    registry = MemoryRegistry()
    registry.add(RECEIVER, RECEIVER_URL, receiver)
    sender = Sender(registry, connect=lambda to: ClaimingArchive(receiver, RECEIVER.key))
    return sender, registry


# ---------------------------------------------------------------------------- the deposit API


class FakesPromotion(MemoryArchive):
    """Answers its promotion, and every read after it, as if it held the original — but never
    promotes (its deposit API lies; its public view where the resolver registered it does not)."""

    def complete_transfer(self, ibi: str) -> Any:
        self.calls.append("complete")
        return self.faked(ibi)

    def item(self, ibi: str) -> Any:
        return self.faked(ibi) if "complete" in self.calls else super().item(ibi)

    def faked(self, ibi: str) -> dict[str, Any]:
        return {**item_to_mapping(self.service.get(ibi)), "state": "Original", "pending": False}


@pytest.mark.parametrize("leave", ["tombstone", "copy"])
def test_a_receiver_that_fakes_its_promotion_never_makes_the_sender_let_go(leave: str) -> None:
    receiver = FakesPromotion()
    sender, registry = federation(receiver)

    with pytest.raises(TransferFailed, match="back here"):
        sender.move(leave=leave)

    assert sender.state() == (State.ORIGINAL, False)  # never a tombstone, never lost
    assert sender.service.get(ITEM).files  # its files are its own again
    assert held(receiver) is None  # what it staged was cancelled
    # Read where the resolver registered it, after the promotion it claimed: still pending.
    assert receiver.calls[-2:] == ["complete", "cancel"] and len(registry.reads) == 2


class ListsOurChecksums(MemoryArchive):
    """Stores other bytes, but its deposit API lists our files' checksums."""

    def __init__(self) -> None:
        super().__init__()
        self.ours: list[dict[str, Any]] = []

    def upload_files(self, ibi: str, files: Any, *, default_file: str | None = None) -> Any:
        self.ours = [
            {"path": p, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
            for p, d, _ in files
        ]
        tampered = [(p, d.replace(b"1", b"7"), t) for p, d, t in files]
        return super().upload_files(ibi, tampered, default_file=default_file)

    def item(self, ibi: str) -> Any:
        return {**super().item(ibi), "files": self.ours}

    def complete_transfer(self, ibi: str) -> Any:
        return {**super().complete_transfer(ibi), "files": self.ours}


def test_a_receiver_that_lists_our_checksums_over_other_bytes_gets_nothing() -> None:
    receiver = ListsOurChecksums()
    sender, _ = federation(receiver)

    with pytest.raises(TransferFailed, match="files") as failed:
        sender.move(leave="copy")

    assert failed.value.refused and sender.state() == (State.ORIGINAL, False)
    assert held(receiver) is None and "complete" not in receiver.calls


def test_a_receiver_not_at_its_registered_address_gets_nothing() -> None:
    receiver = MemoryArchive()
    sender, _ = federation(receiver)

    with pytest.raises(BadRequest, match=f"give its registered address, {RECEIVER_URL}"):
        sender.move(to="https://impostor.example.net")

    assert sender.state() == (State.ORIGINAL, False) and receiver.calls == []


def test_an_archive_not_registered_or_not_included_gets_nothing() -> None:
    receiver = MemoryArchive()
    registry = MemoryRegistry()
    sender = Sender(registry, connect=lambda to: ClaimingArchive(receiver, RECEIVER.key))

    with pytest.raises(NotRegistered, match="not registered") as refused:
        sender.move()
    assert refused.value.status == 409
    with pytest.raises(NotRegistered, match="not registered"):
        sender.content.make_offer(ITEM, {"to": RECEIVER.key}, sender=SENDER)

    registry.add(RECEIVER.key, RECEIVER_URL, receiver, included=False)
    with pytest.raises(NotRegistered, match="registered but not included"):
        sender.move()
    assert sender.state() == (State.ORIGINAL, False) and receiver.calls == []


def test_the_transfer_record_names_the_receiver_as_the_resolver_registered_it() -> None:
    receiver = MemoryArchive()
    sender, _ = federation(receiver)  # the receiver says only its ibip form

    moved = sender.move(leave="copy")

    assert moved.here.moved_to == RECEIVER  # both forms: the resolver's
    assert held(receiver) == (State.ORIGINAL, False)
    assert moved.there["state"] == "Original" and moved.there["pending"] is False


# ---------------------------------------------------------------------------- offers


class Receiver:
    """The receiving Archive in memory, registered at ``registry``: it accepts offers."""

    def __init__(self, registry: MemoryRegistry) -> None:
        self.clock = FakeClock(Decimal(1795473000))
        self.service = ArchiveService(MemoryItemStore(), clock=self.clock)
        self.files = MemoryFileStore()
        self.content = ContentService(
            self.service,
            views=ArchiveViews(RECEIVER_URL),
            files=self.files,
            serve_inline_bytes=1024,
            receivers=Receivers(connect=lambda to: None, registry=registry),
        )
        self.registry = registry
        self.contacted: list[str] = []
        registry.add(RECEIVER, RECEIVER_URL, self)

    def transfer_view(self, ibi: str) -> dict[str, Any] | None:
        item = self.service.items.get(Forms.of(ibi).key)
        return transfer_view(item) if item is not None and shown(item) else None

    def state(self) -> tuple[State, bool] | None:
        item = self.service.items.get(ITEM)
        return None if item is None else (item.state, item.pending)

    def accept(self, sender: Sender, token: str, *, lose: str = "") -> Any:
        def connect(base_url: str) -> Any:
            self.contacted.append(base_url)
            return Public(sender, lose=lose)

        return accept(
            self.content,
            connect,
            token,
            me=RECEIVER,
            principal="receiver-owner",
            registry=self.registry,
        )


class Public:
    """The sender's public routes, called directly; ``lose``: the confirmation is lost on its
    way (``request``) or its answer after the sender acted (``answer``)."""

    def __init__(self, sender: Sender, *, lose: str = "") -> None:
        self.sender = sender
        self.lose = lose

    def file(self, ibi: Forms, path: str, *, max_bytes: int) -> bytes:
        return self.sender.files.read(ibi.key, path, max_bytes=max_bytes)

    def confirm(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.lose == "request" and body["action"] == "confirm":
            raise TimeoutError("the sender cannot be reached")
        try:
            answer = self.sender.content.confirm_offer(body, sender=SENDER)
        except Conflict as error:
            return error.status, {"error": {"message": str(error)}}
        if self.lose == "answer" and body["action"] == "confirm":
            raise TimeoutError("the sender's answer is lost")
        return 200, answer


def offers() -> tuple[Sender, Receiver, MemoryRegistry]:
    registry = MemoryRegistry()
    return Sender(registry), Receiver(registry), registry


def confirmation(sender: Sender, token: str) -> dict[str, Any]:
    body = {"offer": token, "receiver": RECEIVER.key, "action": "confirm"}
    return confirm(
        sender.service,
        sender.content._keys(),
        body,
        sender=SENDER,
        registry=sender.content._registry(),
    )


def test_an_offer_confirmed_before_the_receiver_staged_anything_changes_nothing() -> None:
    sender, receiver, _ = offers()
    _, token = sender.content.make_offer(ITEM, {"to": RECEIVER.key}, sender=SENDER)

    with pytest.raises(Conflict, match="holds nothing of") as early:  # anyone, from anywhere
        confirmation(sender, token)

    assert early.value.status == 409 and "nothing changed here" in str(early.value)
    assert sender.state() == (State.ORIGINAL, False) and receiver.state() is None
    # The receiver's owner then accepts: the transfer goes through as it should.
    item = receiver.accept(sender, token)
    assert item.state is State.ORIGINAL and sender.state() == (State.COPY, False)
    assert receiver.contacted == ["https://a.example.org"]  # the sender's registered address


def test_an_offer_confirmed_after_its_expiry_changes_nothing() -> None:
    sender, receiver, _ = offers()
    _, token = sender.content.make_offer(
        ITEM, {"to": RECEIVER.key, "expires_in": 60}, sender=SENDER
    )
    with pytest.raises(Unconfirmed):
        receiver.accept(sender, token, lose="request")  # staged there, not confirmed
    assert receiver.state() == (State.COPY, True)
    sender.clock.sleep(3600)

    with pytest.raises(OfferExpired, match="expired"):
        confirmation(sender, token)
    assert sender.state() == (State.ORIGINAL, False)


def test_the_receiver_reads_the_sender_only_at_its_registered_address() -> None:
    sender, receiver, registry = offers()
    registry.add(SENDER, "https://a-registered.example.org", sender)
    _, token = sender.content.make_offer(ITEM, {"to": RECEIVER.key}, sender=SENDER)

    receiver.accept(sender, token)

    assert receiver.contacted == ["https://a-registered.example.org"]  # not the offer's URL


def test_an_expired_offer_whose_receiver_lost_the_item_is_taken_back_and_offered_again() -> None:
    sender, receiver, _ = offers()
    _, token = sender.content.make_offer(
        ITEM, {"to": RECEIVER.key, "leave": "copy", "expires_in": 60}, sender=SENDER
    )
    with pytest.raises(Unconfirmed):
        receiver.accept(sender, token, lose="answer")
    assert sender.state() == (State.COPY, False) and receiver.state() == (State.COPY, True)
    with pytest.raises(Conflict, match="holds it staged"):
        sender.content.make_offer(ITEM, {"to": RECEIVER.key}, sender=SENDER)
    receiver.service.cancel_transfer(ITEM)  # its owner forgot what it staged: held nowhere
    with pytest.raises(Conflict, match="open until"):  # the receiver may still take it
        sender.content.make_offer(ITEM, {"to": RECEIVER.key}, sender=SENDER)
    sender.clock.sleep(3600)
    receiver.clock.sleep(3600)

    with pytest.raises(OfferExpired):  # the old offer: too late there
        receiver.accept(sender, token)
    _, again = sender.content.make_offer(ITEM, {"to": RECEIVER.key}, sender=SENDER)

    here = sender.service.get(ITEM)
    assert here.state is State.ORIGINAL and here.transferable and here.moved_to is None
    assert [r.action for r in here.history] == ["released", "restored"]
    assert [f.path for f in here.files] == list(FILES)
    item = receiver.accept(sender, again)  # the new offer moves it
    assert item.state is State.ORIGINAL and sender.state() == (State.COPY, False)
    with pytest.raises(Conflict, match="only an original moves"):  # nothing to take back now
        sender.content.make_offer(ITEM, {"to": RECEIVER.key}, sender=SENDER)


def test_an_expired_offer_still_staged_there_is_finished_by_accepting_it_again() -> None:
    sender, receiver, _ = offers()
    _, token = sender.content.make_offer(
        ITEM, {"to": RECEIVER.key, "leave": "copy", "expires_in": 60}, sender=SENDER
    )
    with pytest.raises(Unconfirmed):
        receiver.accept(sender, token, lose="answer")
    sender.clock.sleep(3600)

    with pytest.raises(Conflict, match="holds it staged: its owner completes the transfer"):
        sender.content.make_offer(ITEM, {"to": RECEIVER.key}, sender=SENDER)
    item = receiver.accept(sender, token)

    assert item.state is State.ORIGINAL and sender.state() == (State.COPY, False)
