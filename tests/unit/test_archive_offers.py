"""Offers between institutions, in memory (``functions/archive/offers.py``).

The HTTP run between two Archives sharing no credentials is
``tests/integration/test_archive_offers.py``; here, the pieces: the signature (its own
context, rotation, tampering), the sender's single-use confirmation, and what the receiver
keeps or forgets for each kind of answer.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any

import pytest

from functions.archive.content import ContentService, Receivers
from functions.archive.errors import BadRequest, Conflict, Unprocessable
from functions.archive.model import Forms, State
from functions.archive.offers import (
    OfferExpired,
    OfferKeys,
    OfferRefused,
    Unconfirmed,
    accept,
    confirm,
    read_offer,
)
from functions.archive.registered import shown, transfer_view
from functions.archive.service import ArchiveService
from functions.archive.urlkeys import UrlKeys
from functions.archive.views import ArchiveViews
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore, MemoryItemStore, MemoryRegistry

ITEM = "8JMKD3MGP8W/35MME4E"
SENDER, RECEIVER = "D7N2U8HW/4GRGLD2", "D7N2U8HW/4GRHGMK"  # two Archives' service IBIs
FILES = {"paper.pdf": b"%PDF-1.7 a paper\n"}
REGISTRY = MemoryRegistry()  # the resolver both Archives are registered at (each Side adds itself)


class Keys:
    def __init__(self, *keys: bytes) -> None:
        self.keys = list(keys)

    def load(self) -> list[bytes]:
        return self.keys


class HoldsNothing:
    """A registered Archive that holds nothing yet, as its public transfer view shows."""

    def transfer_view(self, ibi: str) -> None:
        return None


class Side:
    def __init__(self, keys: Keys, *, seed: bool) -> None:
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
            offer_keys=OfferKeys(keys),
            receivers=Receivers(connect=self._no_deposit_api, registry=REGISTRY),
        )
        if seed:  # the receiver is registered, holding nothing until its Side is made
            REGISTRY.add(SENDER, "https://a.example.org", self)
            REGISTRY.add(RECEIVER, "https://b.example.org", HoldsNothing())
        else:
            REGISTRY.add(RECEIVER, "https://b.example.org", self)
        if seed:
            self.service.create_original({"ibi": ITEM, "language": "en"})
            for path, data in FILES.items():
                self.files.upload(ITEM, path, data)
            declared = [
                {"path": p, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
                for p, d in FILES.items()
            ]
            self.content.commit_files(ITEM, {"files": declared})

    @staticmethod
    def _no_deposit_api(to: str) -> Any:
        raise AssertionError(f"an offer never calls another Archive's deposit API ({to})")

    def transfer_view(self, ibi: str) -> dict[str, Any] | None:
        """Its public ``GET /transfers/held`` (the registry reads it)."""
        item = self.service.items.get(Forms.of(ibi).key)
        return transfer_view(item) if item is not None and shown(item) else None

    def state(self) -> tuple[State, bool] | None:
        item = self.service.items.get(ITEM)
        return None if item is None else (item.state, item.pending)


class InProcess:
    """The sender's public routes, called directly; ``answers``: what the next confirmations
    get instead of reaching the sender (an exception, or a status and a body)."""

    def __init__(self, sender: Side, answers: list[Any] | None = None) -> None:
        self.sender = sender
        self.answers = answers or []

    def file(self, ibi: Forms, path: str, *, max_bytes: int) -> bytes:
        return self.sender.files.read(ibi.key, path, max_bytes=max_bytes)

    def confirm(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body["action"] == "confirm" and self.answers:  # the sender is never reached
            instead = self.answers.pop(0)
            if isinstance(instead, Exception):
                raise instead
            return instead  # type: ignore[no-any-return]
        try:
            return 200, self.sender.content.confirm_offer(body, sender=SENDER)
        except (OfferRefused, Conflict, BadRequest) as error:
            return error.status, {"error": {"message": str(error)}}


def make(sender: Side, **body: Any) -> str:
    _, token = sender.content.make_offer(ITEM, {"to": RECEIVER, **body}, sender=SENDER)
    return token


def test_offers_have_their_own_context_and_survive_a_rotation() -> None:
    keys = Keys(b"k1")
    sender = Side(keys, seed=True)
    token = make(sender)
    assert read_offer(token).files == {
        "paper.pdf": (hashlib.sha256(FILES["paper.pdf"]).hexdigest(), len(FILES["paper.pdf"]))
    }
    # The same key signs urlkeys, under another context: no tag of one is a tag of the other.
    urlkey = UrlKeys(keys).issue(1795473000, SENDER)
    assert urlkey.split("-")[1][20:] not in token
    keys.keys = [b"k2", b"k1"]  # rotated: the previous key still verifies
    assert OfferKeys(keys).verified(token).ibi == ITEM
    keys.keys = [b"k3"]
    with pytest.raises(OfferRefused, match="signature"):
        OfferKeys(keys).verified(token)
    for broken in ("", "ibioffer1.x", "other.a.b", "ibioffer1.0.0"):  # no offer's shape: 422
        with pytest.raises(Unprocessable):
            OfferKeys(keys).verified(broken)
    with pytest.raises(BadRequest):  # not even a string: 400
        OfferKeys(keys).verified(5)


def test_only_a_transferable_original_is_offered_for_a_while() -> None:
    sender = Side(Keys(b"k"), seed=True)
    bodies = ({"leave": "burn"}, {"leave": {}}, {"leave": []}, {"expires_in": 10}, {"to": "no"})
    for body in (*bodies, {"expires_in": True}):
        with pytest.raises(BadRequest):
            make(sender, **body)
    with pytest.raises(BadRequest, match="another Archive"):
        sender.content.make_offer(ITEM, {"to": SENDER}, sender=SENDER)
    sender.service.update(ITEM, {"transferable": False})
    with pytest.raises(Conflict, match="untransferable"):
        make(sender)


def test_the_confirmation_is_single_use_and_answers_a_retry_the_same() -> None:
    sender, receiver = Side(Keys(b"k"), seed=True), Side(Keys(b"r"), seed=False)
    token = make(sender)
    lost = InProcess(sender, [ConnectionError("reset")])  # staged there, not confirmed yet
    with pytest.raises(Unconfirmed):
        accept(
            receiver.content,
            lambda _: lost,
            token,
            me=Forms.of(RECEIVER),
            principal="o",
            registry=REGISTRY,
        )
    body = {"offer": token, "receiver": RECEIVER, "action": "confirm"}
    first = confirm(sender.service, sender.content._keys(), body, sender=SENDER, registry=REGISTRY)
    assert first["confirmed"] is True and sender.state() == (State.COPY, False)
    sender.clock.sleep(10**6)  # long expired: a lost answer is still answered
    again = confirm(sender.service, sender.content._keys(), body, sender=SENDER, registry=REGISTRY)
    assert again == first and len(sender.service.get(ITEM).history) == 1
    # An offer made before a change to the item is dead.
    other = Side(Keys(b"k"), seed=True)
    stale = make(other)
    other.service.update(ITEM, {"listable": False})
    with pytest.raises(OfferRefused, match="changed"):
        body = {"offer": stale, "receiver": RECEIVER, "action": "check"}
        confirm(other.service, other.content._keys(), body, sender=SENDER, registry=REGISTRY)


def test_the_receiver_forgets_what_it_staged_only_on_a_refusal() -> None:
    sender, receiver = Side(Keys(b"s"), seed=True), Side(Keys(b"r"), seed=False)
    me = Forms.of(RECEIVER)
    token = make(sender)
    unknown = InProcess(sender, [ConnectionError("reset"), (503, {})])
    for _ in range(2):  # the sender cannot be reached, then answers 503: kept, staged
        with pytest.raises(Unconfirmed, match="accept again"):
            accept(
                receiver.content,
                lambda _: unknown,
                token,
                me=me,
                principal="owner",
                registry=REGISTRY,
            )
        assert receiver.state() == (State.COPY, True)
        assert sender.state() == (State.ORIGINAL, False)
    refused = InProcess(sender, [(403, {"error": {"message": "no"}})])
    with pytest.raises(OfferRefused, match="no"):
        accept(
            receiver.content, lambda _: refused, token, me=me, principal="owner", registry=REGISTRY
        )
    assert receiver.state() is None and sender.state() == (State.ORIGINAL, False)
    item = accept(
        receiver.content,
        lambda _: InProcess(sender),
        token,
        me=me,
        principal="x",
        registry=REGISTRY,
    )
    assert item.state is State.ORIGINAL and sender.state() == (State.COPY, False)
    assert receiver.files.files[(ITEM, "paper.pdf")] == FILES["paper.pdf"]


def test_the_receiver_refuses_an_expired_offer_before_reading_anything() -> None:
    sender, receiver = Side(Keys(b"s"), seed=True), Side(Keys(b"r"), seed=False)
    token = make(sender, expires_in=60)
    receiver.clock.sleep(3600)
    with pytest.raises(OfferExpired):
        accept(
            receiver.content,
            lambda _: InProcess(sender),
            token,
            me=Forms.of(RECEIVER),
            principal="o",
            registry=REGISTRY,
        )
    assert receiver.state() is None and sender.state() == (State.ORIGINAL, False)


def test_an_offer_for_an_item_held_here_already_says_in_what_state() -> None:
    sender, receiver = Side(Keys(b"s"), seed=True), Side(Keys(b"r"), seed=False)
    token = make(sender)
    me = Forms.of(RECEIVER)
    accept(
        receiver.content,
        lambda _: InProcess(sender),
        token,
        me=me,
        principal="o",
        registry=REGISTRY,
    )
    with pytest.raises(Conflict, match=r"held here already \(an Original\): offer used"):
        accept(
            receiver.content,
            lambda _: InProcess(sender),
            token,
            me=Forms.of(RECEIVER),
            principal="o",
            registry=REGISTRY,
        )
