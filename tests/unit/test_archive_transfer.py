"""A transfer to a misbehaving receiver never destroys the item (issue 11, finding 7).

The receiver is a whole Archive in memory (``MemoryArchive``) that can answer an empty 200,
drop the files, lie about checksums, fail or time out at any step, or lose the answer of a
step it did take. Whatever it does, the original is released here only after the receiver
showed our files with our checksums, is put back on any failure, and at no moment do both
Archives hold it as an original.
"""

from __future__ import annotations

import hashlib
import itertools
from decimal import Decimal
from typing import Any

import pytest

from functions.archive.content import ContentService, Receivers
from functions.archive.errors import Conflict, NotHeld, Unprocessable
from functions.archive.model import Forms, Item, State
from functions.archive.protocol import ArchiveIdentity, ProtocolService
from functions.archive.service import ArchiveService, NotCreator
from functions.archive.transfer import CRITICAL_SECONDS, TransferFailed, transfer
from functions.archive.views import ArchiveViews
from functions.archive.wiring import receivers
from ibi.client import ApiError
from tests.fakes import FakeClock
from tests.fakes_archive import (
    ClaimingArchive,
    MemoryArchive,
    MemoryFileStore,
    MemoryItemStore,
    MemoryRegistry,
)

ITEM = "8JMKD3MGP8W/35MME4E"
RECEIVER = "D7N2U8HW/4GRHGMK"  # the receiving Archive's service IBI
FILES = {"paper.pdf": b"%PDF-1.7 a paper\n", "data.csv": b"x,y\n1,2\n"}


class Sender:
    def __init__(self) -> None:
        self.files = MemoryFileStore()
        self.service = ArchiveService(
            MemoryItemStore(), clock=FakeClock(Decimal(1795473000)), own_prefixes=["8JMKD3MGP8W"]
        )
        self.service.create_original({"ibi": ITEM, "language": "en", "dc": {"title": ["A paper"]}})
        for path, data in FILES.items():
            self.files.upload(ITEM, path, data)
        declared = [
            {"path": p, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)}
            for p, d in FILES.items()
        ]
        content = ContentService(
            self.service,
            views=ArchiveViews("https://a.example.org"),
            files=self.files,
            serve_inline_bytes=1024,
        )
        content.commit_files(ITEM, {"files": declared, "default_file": "paper.pdf"})
        self.service.link(ITEM, {"translation": {"language": "pt", "url": "https://x.org/pt"}})
        self.original = self.service.get(ITEM)

    def move(self, receiver: MemoryArchive, leave: str = "copy", **options: Any) -> Any:
        return transfer(self.service, self.files, receiver, ITEM, leave=leave, **options)

    def still_the_original(self) -> None:
        item = self.service.get(ITEM)
        assert item.state is State.ORIGINAL and item.transferable
        assert item.files == self.original.files and item.translations
        assert self.files.files[(ITEM, "paper.pdf")] == FILES["paper.pdf"]


def never_two_originals(sender: Sender, receiver: MemoryArchive) -> None:
    def check(step: str) -> None:
        here = sender.service.get(ITEM).state is State.ORIGINAL
        held = receiver.held(ITEM)
        assert not (here and held is not None and held.state is State.ORIGINAL), step
        if step == "complete":  # the receiver promotes only what was released here
            assert not here

    receiver.watch = check


def test_a_transfer_moves_the_item_with_its_files_links_and_checksums() -> None:
    sender, receiver = Sender(), MemoryArchive()
    never_two_originals(sender, receiver)
    moved = sender.move(receiver)
    # Read through its deposit API, then where the resolver registered it, before and after.
    assert receiver.calls == ["receive", "upload", "item", "registered", "complete", "registered"]
    assert moved.here.state is State.COPY
    assert moved.here.original_sha256 == hashlib.sha256(FILES["paper.pdf"]).hexdigest()
    there = receiver.held(ITEM)
    assert there is not None and there.state is State.ORIGINAL and not there.pending
    assert there.files == sender.original.files and there.default_file == "paper.pdf"
    assert there.translations == sender.original.translations and there.language == "en"
    assert [r.action for r in there.history] == ["received"]
    assert moved.there["state"] == "Original"


def refused(sender: Sender, receiver: MemoryArchive, **options: Any) -> TransferFailed:
    never_two_originals(sender, receiver)
    with pytest.raises(TransferFailed) as failed:
        sender.move(receiver, **options)
    assert failed.value.refused
    sender.still_the_original()
    held = receiver.held(ITEM)
    assert held is None or held.state is not State.ORIGINAL
    return failed.value


@pytest.mark.parametrize("step", ["receive", "item"])
def test_an_empty_200_takes_nothing(step: str) -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.answers[step] = None  # HTTP 200 with an empty body
    refused(sender, receiver)
    assert receiver.held(ITEM) is None  # its incoming item cancelled
    assert "complete" not in receiver.calls


def test_a_receiver_that_drops_the_files_takes_nothing() -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.skip_uploads = True
    failure = refused(sender, receiver)
    assert "files" in str(failure) and receiver.held(ITEM) is None


def test_a_receiver_showing_other_checksums_takes_nothing() -> None:
    sender, receiver = Sender(), MemoryArchive()
    real = receiver.item

    def lying(ibi: str) -> Any:
        answer = real(ibi)
        answer["files"][0]["sha256"] = "0" * 64
        return answer

    receiver.item = lying  # type: ignore[method-assign]
    refused(sender, receiver)


@pytest.mark.parametrize(
    ("step", "error"),
    [
        ("receive", ApiError(0, "cannot reach the receiver: timed out")),
        ("upload", RuntimeError("the connection dropped midway")),
        ("item", TimeoutError("timed out")),
        ("complete", TimeoutError("timed out")),
        ("complete", ApiError(500, "the receiver failed")),
    ],
)
def test_a_failure_at_any_step_leaves_the_original_here(step: str, error: Exception) -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.fail[step] = error
    refused(sender, receiver)
    assert receiver.held(ITEM) is None


@pytest.mark.parametrize("leave", ["copy", "tombstone"])
def test_a_failed_promotion_puts_the_original_back_with_its_files(leave: str) -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.fail["complete"] = TimeoutError("timed out")
    refused(sender, receiver, leave=leave)
    # asked again (still pending, not promoted), its incoming item cancelled, ours restored
    assert receiver.calls[-3:] == ["complete", "registered", "cancel"]


def test_a_promotion_whose_answer_is_lost_is_a_transfer_not_two_originals() -> None:
    sender, receiver = Sender(), MemoryArchive()
    never_two_originals(sender, receiver)
    receiver.lose["complete"] = TimeoutError("timed out after the receiver promoted")
    moved = sender.move(receiver)
    assert moved.here.state is State.COPY
    held = receiver.held(ITEM)
    assert held is not None and held.state is State.ORIGINAL


def test_an_empty_200_to_the_promotion_is_checked_by_asking_again() -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.answers["complete"] = None
    assert sender.move(receiver).here.state is State.COPY  # it did promote: asked, it says so


def test_too_little_time_left_releases_nothing() -> None:
    sender, receiver = Sender(), MemoryArchive()
    failure = refused(sender, receiver, remaining=lambda: CRITICAL_SECONDS - 1)
    assert "time" in str(failure) and receiver.held(ITEM) is None


def test_damaged_bytes_are_never_sent() -> None:
    sender, receiver = Sender(), MemoryArchive()
    sender.files.put(ITEM, "data.csv", b"x,y\n1,3\n")  # bit rot
    with pytest.raises(Conflict, match="SHA-256"):
        sender.move(receiver)
    assert receiver.calls == [] and sender.service.get(ITEM).state is State.ORIGINAL


def test_an_item_changed_during_the_transfer_is_not_released() -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.watch = lambda step: (
        sender.service.update(ITEM, {"language": "pt"}) if step == "item" else None
    )
    refused_now = pytest.raises(TransferFailed)
    with refused_now:
        sender.move(receiver)
    assert sender.service.get(ITEM).state is State.ORIGINAL and receiver.held(ITEM) is None


def test_the_receiver_refuses_an_ibi_it_holds_and_says_why() -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.service.add_copy({"ibi": ITEM})
    failure = refused(sender, receiver)
    assert "one item per IBI" in str(failure)
    held = receiver.held(ITEM)
    assert held is not None and held.state is State.COPY and not held.pending  # untouched


# -- the receiving side --------------------------------------------------------------------------


def incoming() -> MemoryArchive:
    receiver = MemoryArchive()
    receiver.receive_transfer({"ibi": {"ibip": ITEM}, "language": "en"})
    return receiver


def test_an_incoming_transfer_is_answered_to_no_one() -> None:
    receiver = incoming()
    identity = ArchiveIdentity("receiver.example.org", Forms(ibip="8JMKD3MGP8W/3FSUP4L"))
    protocol = ProtocolService(
        receiver.store,
        identity=identity,
        views=ArchiveViews("https://receiver.example.org"),
        clock=FakeClock(Decimal(1795473100)),
        urlkey_ttl_seconds=600,
    )
    asked = protocol.answer(
        f"servicesubject=urlRequest&parsedibiurl.ibi={ITEM}&clientinformation.ipaddress=1.2.3.4"
    )
    assert len(asked.pairs) == 0 and asked.details["held"] is False
    for page in (
        lambda: receiver.content.serve_file(ITEM, "", None),
        lambda: receiver.content.file_list(ITEM),
        lambda: receiver.content.metadata(ITEM, None),
    ):
        with pytest.raises(NotHeld):
            page()


def test_only_whoever_started_an_incoming_transfer_completes_it() -> None:
    receiver = incoming()
    with pytest.raises(NotCreator):
        receiver.content.complete_transfer(ITEM, "someone-else")
    item: Item = receiver.content.complete_transfer(ITEM, receiver.principal)
    assert item.state is State.ORIGINAL and item.transferable
    with pytest.raises(Conflict):
        receiver.service.cancel_transfer(ITEM)  # an original is never cancelled away


def test_an_incoming_transfer_started_again_replaces_the_pending_one() -> None:
    receiver = incoming()
    again = receiver.service.receive_transfer({"ibi": ITEM, "language": "pt"}, principal="b")
    assert again.pending and again.language == "pt" and again.creator == "b"
    assert receiver.service.cancel_transfer(ITEM).pending and receiver.held(ITEM) is None


# -- where a transfer may go ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "to",
    [
        "http://127.0.0.1:8820",
        "http://[::127.0.0.1]:8820",
        "http://169.254.169.254/latest",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://10.0.0.7/",
    ],
)
def test_a_transfer_goes_only_to_public_addresses(to: str) -> None:
    sender = Sender()
    content = ContentService(
        sender.service,
        views=ArchiveViews("https://a.example.org"),
        files=sender.files,
        serve_inline_bytes=1024,
        receivers=receivers(),
    )
    with pytest.raises(Unprocessable, match="will not contact") as refused:
        content.transfer(ITEM, {"to": to, "leave": "copy"})
    assert refused.value.status == 422  # the caller's address to correct, never contacted
    sender.still_the_original()


def test_the_whole_transfer_has_a_time_budget() -> None:
    sender, receiver = Sender(), MemoryArchive()
    registry = MemoryRegistry()
    registry.add(RECEIVER, "https://b.example.org", receiver)
    ticks = itertools.chain([0.0], itertools.repeat(20.0))  # 20 s gone before the release
    content = ContentService(
        sender.service,
        views=ArchiveViews("https://a.example.org"),
        files=sender.files,
        serve_inline_bytes=1024,
        receivers=Receivers(
            connect=lambda _: ClaimingArchive(receiver, RECEIVER),
            budget_seconds=26.0,
            clock=lambda: next(ticks),
            registry=registry,
        ),
    )
    with pytest.raises(TransferFailed, match="time"):
        content.transfer(ITEM, {"to": "https://b.example.org"})
    sender.still_the_original()


def test_a_transfer_interrupted_after_the_release_is_completed_by_running_it_again() -> None:
    sender, receiver = Sender(), MemoryArchive()

    class Stopped(BaseException):
        """The Lambda killed between the release and the promotion: nothing runs after."""

    receiver.fail["complete"] = Stopped()
    with pytest.raises(Stopped):
        sender.move(receiver)
    assert sender.service.get(ITEM).state is State.COPY
    held = receiver.held(ITEM)
    assert held is not None and held.pending  # neither answers Original: an item held nowhere
    del receiver.fail["complete"]
    moved = sender.move(receiver)
    there = receiver.held(ITEM)
    assert there is not None and there.state is State.ORIGINAL and not there.pending
    assert moved.here.state is State.COPY
    with pytest.raises(Conflict, match="only an original moves"):
        sender.move(receiver)  # nothing left to resume


def test_a_promotion_that_wins_over_the_cancellation_is_a_transfer() -> None:
    """The promotion times out here but completes there before the cancellation arrives:
    the cancellation is refused, and a last look finds the original there."""
    sender, receiver = Sender(), MemoryArchive()
    never_two_originals(sender, receiver)
    receiver.lose["complete"] = TimeoutError("timed out")
    real = receiver.registered_item
    looks: list[str] = []

    def late(ibi: str) -> Any:  # the first look after the promotion comes too early
        looks.append(ibi)
        if len(looks) == 2:
            raise TimeoutError("timed out")
        return real(ibi)

    receiver.registered_item = late  # type: ignore[method-assign]
    moved = sender.move(receiver)
    assert receiver.calls[-3:] == ["complete", "cancel", "registered"] and len(looks) == 3
    assert moved.here.state is State.COPY and moved.there["state"] == "Original"
