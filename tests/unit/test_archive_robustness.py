"""Issue 23: a damaged original never costs a reader an error while a good copy exists; what a
malformed request gets is a 4xx that says what to send; every change of what a persistent URL
serves is in the item's history; an original may come back where only a copy's tombstone is.

In memory (``tests.fakes_archive``): the federation's resolution is the resolver's own; the
handler's answers to the same requests are ``tests/integration/test_archive_robustness.py``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from decimal import Decimal
from typing import Any

import pytest

from functions.archive import outbound
from functions.archive.content import ContentService, FileAnswer
from functions.archive.errors import BadRequest, Conflict, Unavailable, Unprocessable
from functions.archive.mapping import item_from_mapping, item_to_mapping
from functions.archive.model import Forms, State
from functions.archive.offers import accept, read_offer
from functions.archive.outbound import PublicArchive, ResolverHoldings, vetted_transport
from functions.archive.service import UNKNOWN, ArchiveService
from functions.archive.transfer import TransferFailed, transfer
from functions.archive.views import ArchiveViews
from functions.archive.wiring import receivers
from functions.resolver.resolution import Found
from functions.shared import edge
from functions.shared.addresses import AddressPolicy
from ibi.client import ApiClient, ApiError, Raw, http_send
from ibi.core.labels import IBI
from tests.fakes import FakeClock
from tests.fakes_archive import (
    ArchiveNode,
    MemoryArchive,
    MemoryFederation,
    MemoryFileStore,
    MemoryItemStore,
)

RESOLVER = "https://resolver.example.org"
REPORT = IBI.build(Decimal(1795000000), host="example.org", ip="192.0.2.10")
LABEL = str(REPORT.ibip)
BYTES = {"report.txt": b"The report.\n", "data.csv": b"a,b\n1,2\n"}
ITEM = "8JMKD3MGP8W/35MME4E"
CREATOR, OPERATOR = "arn:aws:sts::1:assumed-role/ci/run-1", "arn:aws:iam::1:user/operator"


# ---------------------------------------------------------------------------- item 3


def with_resolver(node: ArchiveNode, good_copy: Any) -> None:
    """``node``'s content service as deployed: it knows its resolver and can ask it."""
    node.content = ContentService(
        node.service,
        views=ArchiveViews(node.views.base_url, RESOLVER),
        files=node.files,
        serve_inline_bytes=1 << 20,
        good_copy=good_copy,
    )


def good_copy_in(federation: MemoryFederation, here: str) -> Any:
    """The resolver's answer as ``ResolverHoldings`` reads it: another Archive offers it."""

    def elsewhere(label: str) -> bool:
        found = federation.resolve(f"/{label}")
        return isinstance(found, Found) and found.answer.archive != here

    return elsewhere


def damaged_federation(*, copy: bool) -> MemoryFederation:
    """``a`` holds the original, its default file rotten; ``b`` a good copy when ``copy``."""
    federation = MemoryFederation("a", "b")
    federation["a"].original(LABEL, {})
    federation["a"].commit(LABEL, BYTES, "report.txt")
    if copy:
        federation["b"].copy(LABEL, {})
        federation["b"].commit(LABEL, BYTES, "report.txt")
    federation["a"].files.files[(LABEL, "report.txt")] = b"The rep0rt.\n"  # bit rot
    for name in ("a", "b"):
        with_resolver(federation[name], good_copy_in(federation, name))
    return federation


def read(federation: MemoryFederation, persistent: str) -> list[tuple[str, FileAnswer]]:
    """A browser from the persistent URL on, following every redirect: (node, answer) each."""
    seen: list[tuple[str, FileAnswer]] = []
    url = persistent
    for _ in range(6):
        found = federation.resolve(url.removeprefix(RESOLVER))
        if not isinstance(found, Found):
            seen.append(("resolver", FileAnswer(found.status)))
            return seen
        name = found.answer.archive
        path = found.url.split(f"/col/{LABEL}", 1)[1].lstrip("/")
        answer = federation[name].content.serve_file(LABEL, path, None)
        seen.append((name, answer))
        if answer.status != 307:
            return seen
        url = answer.headers["Location"]
    raise AssertionError(f"a redirect loop: {[(n, a.status) for n, a in seen]}")


def test_the_first_reader_of_a_damaged_original_ends_at_the_good_copy() -> None:
    federation = damaged_federation(copy=True)
    seen = read(federation, f"{RESOLVER}/{LABEL}")
    assert [(name, answer.status) for name, answer in seen] == [("a", 307), ("b", 200)]
    assert seen[0][1].headers["Location"] == f"{RESOLVER}/{LABEL}"
    page = seen[-1][1].page
    assert page is not None and page.body == BYTES["report.txt"]
    assert federation["a"].service.get(LABEL).damaged == ("report.txt",)  # recorded
    later = read(federation, f"{RESOLVER}/{LABEL}")  # the resolver goes to the copy at once
    assert [(name, answer.status) for name, answer in later] == [("b", 200)]


def test_a_reader_of_a_damaged_file_by_its_path_is_sent_back_to_that_path() -> None:
    federation = damaged_federation(copy=True)
    federation["a"].files.files[(LABEL, "data.csv")] = b"rot"
    seen = read(federation, f"{RESOLVER}/{LABEL}/data.csv")
    assert [(name, answer.status) for name, answer in seen] == [("a", 307), ("b", 200)]
    assert seen[0][1].headers["Location"] == f"{RESOLVER}/{LABEL}/data.csv"


def test_with_no_good_copy_the_first_reader_gets_the_styled_page() -> None:
    federation = damaged_federation(copy=False)
    [(name, answer)] = read(federation, f"{RESOLVER}/{LABEL}")
    assert (name, answer.status) == ("a", 500) and answer.page is not None
    assert "integrity check" in str(answer.page.body) and "<style>" in str(answer.page.body)


def test_damage_known_before_is_the_styled_page_and_asks_the_resolver_nothing() -> None:
    federation = damaged_federation(copy=True)
    node = federation["a"]
    node.service.record_damage(LABEL, damaged=["report.txt"])
    asked: list[str] = []

    def good_copy(label: str) -> bool:
        asked.append(label)
        return True

    with_resolver(node, good_copy)
    answer = node.content.serve_file(LABEL, "", None)
    assert answer.status == 500 and asked == []  # a reader sent back here: no loop


def test_damage_that_could_not_be_recorded_is_never_a_redirect() -> None:
    """The item is still offered: a 307 would bring the reader straight back, forever."""
    federation = damaged_federation(copy=True)
    node = federation["a"]

    def unavailable(*_: Any, **__: Any) -> Any:
        raise Unavailable("the store cannot answer now")

    node.service.record_damage = unavailable  # type: ignore[method-assign]
    assert node.content.serve_file(LABEL, "", None).status == 500


def test_the_resolvers_holdings_name_a_good_copy_only_in_another_archive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: list[Any] = []

    def fake_send(method: str, url: str, **_: Any) -> Raw:
        assert (method, url) == ("GET", f"{RESOLVER}/holdings/{LABEL}")
        status, body = answers.pop(0)
        return Raw(status, {}, body if isinstance(body, bytes) else json.dumps(body).encode())

    holdings = ResolverHoldings(RESOLVER, "https://a.example.org", AddressPolicy())
    here = {"archive": "A", "url": f"https://a.example.org/col/{LABEL}"}
    there = {"archive": "B", "url": f"https://b.example.org/col/{LABEL}"}
    damaged = {"archive": "C", "url": None}
    answers += [(200, {"archives": [here, damaged, there]}), (200, {"archives": [here, damaged]})]
    answers += [(504, {"archives": [there]}), (200, b"\x81 not json"), (200, [1])]
    monkeypatch.setattr(outbound, "vetted_transport", lambda policy, **_: fake_send)
    assert [holdings.elsewhere(LABEL) for _ in range(5)] == [True, False, False, False, False]


# ---------------------------------------------------------------------------- item 5


def test_an_unclosed_ipv6_url_is_an_api_error_saying_what_to_give() -> None:
    with pytest.raises(ApiError, match="is not a URL") as raised:
        ApiClient("http://[::1")
    assert "https://host" in raised.value.message
    with pytest.raises(ApiError, match="cannot reach"):
        http_send("GET", "http://[::1/x")


def test_a_transfer_to_an_unreadable_url_is_a_bad_request() -> None:
    with pytest.raises(BadRequest, match=r'"to": .*is not a URL'):
        receivers().connect("http://[::1")
    senders = receivers().senders
    assert senders is not None
    with pytest.raises(BadRequest, match=r"the offer's sender: .*is not a URL"):
        senders("http://[::1")


def test_an_unreadable_url_from_another_archive_is_an_api_error() -> None:
    send = vetted_transport(AddressPolicy())
    with pytest.raises(ApiError, match="is not a URL"):
        send("PUT", "http://[::1/uploads/x")  # an upload URL a receiver answered
    with pytest.raises(ApiError, match="is not a URL"):
        PublicArchive("https://[v1.x", AddressPolicy())


def offer_text(payload: bytes, signature: bytes = b"\x00") -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"ibioffer1.{b64(payload)}.{b64(signature)}"


OFFER_FIELDS = {
    "id": "0" * 32,
    "ibi": ITEM,
    "sender": "D7N2U8HW/4GRGLD2",
    "base_url": "https://a.example.org",
    "to": "D7N2U8HW/4GRHGMK",
    "version": 1,
    "expires": 1795476600,
    "leave": "copy",
    "item": {"files": []},
}


@pytest.mark.parametrize(
    "token",
    [
        offer_text(b"\x81\x81\x81"),  # base64 of bytes that are not UTF-8
        "ibioffer1.!!!!.AAAA",  # not base64url at all
        "ibioffer1.e30.AA AA",  # a space inside
        offer_text(b"[1, 2]"),
        offer_text(json.dumps({**OFFER_FIELDS, "base_url": 5}).encode()),
        offer_text(json.dumps({**OFFER_FIELDS, "expires": "soon"}).encode()),
        offer_text(json.dumps({**OFFER_FIELDS, "colour": "red"}).encode()),
    ],
)
def test_an_offer_that_does_not_decode_is_a_422_saying_what_to_send(token: str) -> None:
    with pytest.raises(Unprocessable) as refused:
        read_offer(token)
    message = str(refused.value)
    assert "`ibi archive offer` printed" in message
    assert "codec" not in message and "Expecting" not in message and "__init__" not in message


def test_an_offer_as_signed_is_read() -> None:
    assert read_offer(offer_text(json.dumps(OFFER_FIELDS).encode())).base_url == (
        "https://a.example.org"
    )


class Body:
    def __init__(self, body: str, encoded: bool) -> None:
        self.body, self.is_base64_encoded = body, encoded

    @property
    def decoded_body(self) -> str:
        return base64.b64decode(self.body).decode() if self.is_base64_encoded else self.body


def test_a_body_that_is_not_utf8_is_the_callers_error() -> None:
    unreadable = Body(base64.b64encode(b"verb=\x81").decode(), True)
    with pytest.raises(BadRequest, match="not UTF-8 text; send UTF-8"):
        edge.text_body(unreadable, error=BadRequest, hint="send UTF-8")
    assert edge.text_body(Body(base64.b64encode(b"verb=Identify").decode(), True), error=BadRequest)
    assert edge.text_body(Body("", False), error=BadRequest) == ""


# ---------------------------------------------------------------------------- item 6


def archive_with_files(*paths: str, **fields: Any) -> tuple[ArchiveService, ContentService]:
    clock = FakeClock(Decimal(1795473000))
    service = ArchiveService(MemoryItemStore(), clock=clock, own_prefixes=["8JMKD3MGP8W"])
    files = MemoryFileStore()
    content = ContentService(
        service, views=ArchiveViews("https://a.example.org"), files=files, serve_inline_bytes=99
    )
    service.create_original({"ibi": ITEM, **fields}, principal=CREATOR)
    if paths:
        commit(content, files, paths, CREATOR, default=paths[0])
    return service, content


def commit(
    content: ContentService,
    files: MemoryFileStore,
    paths: tuple[str, ...],
    who: str,
    default: str | None,
) -> None:
    declared = []
    for path in paths:
        data = path.encode()
        files.upload(ITEM, path, data)
        declared.append(
            {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        )
    content.commit_files(ITEM, {"files": declared, "default_file": default}, who)


def retargets(service: ArchiveService) -> list[dict[str, Any]]:
    history = item_to_mapping(service.get(ITEM))["history"]
    return [
        {k: r[k] for k in ("by", "from", "to", "path", "reason")}
        for r in history
        if r["action"] == "retargeted"
    ]


def test_a_deposit_records_nothing_its_first_default_file_is_no_change() -> None:
    service, _ = archive_with_files("a.txt", "b.txt")
    assert service.get(ITEM).history == ()


def test_a_creator_changing_the_default_file_within_the_hour_is_in_the_history() -> None:
    service, content = archive_with_files("a.txt", "b.txt")
    assert content._files is not None
    content.commit_files(ITEM, {"files": [], "default_file": "b.txt"}, CREATOR)
    assert service.get(ITEM).default_file == "b.txt"
    assert retargets(service) == [
        {"by": CREATOR, "from": "a.txt", "to": "b.txt", "path": "b.txt", "reason": ""}
    ]
    [revision] = [r for r in item_to_mapping(service.get(ITEM))["history"]]
    assert revision["old"] == {"sha256": hashlib.sha256(b"a.txt").hexdigest(), "size": 5}
    again = item_from_mapping(item_to_mapping(service.get(ITEM)), 1)  # as the store reads it
    assert again.history == service.get(ITEM).history


def test_an_update_of_the_default_file_or_the_url_is_in_the_history() -> None:
    service, _ = archive_with_files("a.txt", "b.txt")
    service.update(ITEM, {"default_file": "b.txt"}, OPERATOR)
    service.update(ITEM, {"default_file": "b.txt"}, OPERATOR)  # the same again: no change
    service.update(ITEM, {"language": "pt"}, OPERATOR)  # serves the same: nothing recorded
    assert retargets(service) == [
        {"by": OPERATOR, "from": "a.txt", "to": "b.txt", "path": "b.txt", "reason": ""}
    ]


def test_changing_the_url_of_an_external_item_is_in_the_history() -> None:
    service, _ = archive_with_files(url="https://example.org/v1")
    service.update(ITEM, {"url": "https://example.org/v2"}, OPERATOR)
    assert retargets(service) == [
        {
            "by": OPERATOR,
            "from": "https://example.org/v1",
            "to": "https://example.org/v2",
            "path": None,
            "reason": "",
        }
    ]


def test_an_operator_changing_only_the_default_file_is_in_the_history_with_the_reason() -> None:
    service, content = archive_with_files("a.txt", "b.txt")
    body = {"files": [], "default_file": "b.txt", "reason": "the PDF is the version of record"}
    content.revise_files(ITEM, body, OPERATOR)
    [change] = retargets(service)
    assert change["by"] == OPERATOR and change["reason"] == "the PDF is the version of record"


# ---------------------------------------------------------------------------- item 7


class Sender:
    """An original at ``a.example.org`` with one file, transferable."""

    def __init__(self) -> None:
        self.files = MemoryFileStore()
        self.service = ArchiveService(
            MemoryItemStore(), clock=FakeClock(Decimal(1795473000)), own_prefixes=["8JMKD3MGP8W"]
        )
        self.service.create_original({"ibi": ITEM})
        self.files.upload(ITEM, "paper.pdf", b"%PDF")
        declared = {"path": "paper.pdf", "sha256": hashlib.sha256(b"%PDF").hexdigest(), "size": 4}
        ContentService(
            self.service,
            views=ArchiveViews("https://a.example.org"),
            files=self.files,
            serve_inline_bytes=99,
        ).commit_files(ITEM, {"files": [declared]})


def test_an_original_comes_to_an_archive_where_its_copy_was_deleted() -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.service.add_copy({"ibi": ITEM})
    tombstone = receiver.service.delete(ITEM)
    assert tombstone.deleted and not tombstone.deleted_original
    transfer(sender.service, sender.files, receiver, ITEM, leave="copy")
    held = receiver.held(ITEM)
    assert held is not None and held.state is State.ORIGINAL and not held.pending
    assert [f.path for f in held.files] == ["paper.pdf"]
    assert sender.service.get(ITEM).state is State.COPY


def test_an_original_never_comes_back_where_it_was_deleted() -> None:
    sender, receiver = Sender(), MemoryArchive()
    receiver.service.own_prefixes = sender.service.own_prefixes
    receiver.service.import_original({"ibi": ITEM, "reason": "a mirror"})
    tombstone = receiver.service.delete(ITEM)
    assert tombstone.deleted_original
    with pytest.raises(TransferFailed, match="deleted the original"):
        transfer(sender.service, sender.files, receiver, ITEM, leave="copy")
    assert sender.service.get(ITEM).state is State.ORIGINAL  # nothing moved
    held = receiver.held(ITEM)
    assert held is not None and held.deleted


def test_an_original_that_left_by_a_transfer_may_come_back() -> None:
    sender, middle = Sender(), MemoryArchive()
    transfer(sender.service, sender.files, middle, ITEM, leave="tombstone")
    assert sender.service.get(ITEM).deleted and not sender.service.get(ITEM).deleted_original
    back = sender.service.receive_transfer({"ibi": ITEM}, principal=UNKNOWN)
    assert back.pending


def test_a_tombstone_stored_before_this_counts_as_a_deleted_original_unless_it_was_a_copy() -> None:
    item = item_to_mapping(Sender().service.delete(ITEM))
    del item["deleted_original"]
    assert item_from_mapping(item).deleted_original
    assert not item_from_mapping({**item, "original_sha256": "0" * 64}).deleted_original
    live = item_to_mapping(Sender().service.get(ITEM))
    del live["deleted_original"]
    assert not item_from_mapping(live).deleted_original


def test_an_offer_is_accepted_where_the_copy_was_deleted() -> None:
    from functions.archive.content import Receivers
    from functions.archive.offers import OfferKeys
    from tests.fakes_archive import MemoryRegistry

    class Keys:
        def load(self) -> list[bytes]:
            return [b"k"]

    sender, registry = Sender(), MemoryRegistry()
    content = ContentService(
        sender.service,
        views=ArchiveViews("https://a.example.org"),
        files=sender.files,
        serve_inline_bytes=99,
        offer_keys=OfferKeys(Keys()),
        receivers=Receivers(connect=lambda to: None, registry=registry),
    )
    receiver = MemoryArchive()
    registry.add("D7N2U8HW/4GRHGMK", "https://b.example.org", receiver)
    registry.add("D7N2U8HW/4GRGLD2", "https://a.example.org", receiver)  # only found, not read
    receiver.service.add_copy({"ibi": ITEM})
    receiver.service.delete(ITEM)
    me = Forms(ibip="D7N2U8HW/4GRHGMK")
    _, token = content.make_offer(ITEM, {"to": me.key}, sender="D7N2U8HW/4GRGLD2")

    class Public:
        def file(self, ibi: Forms, path: str, *, max_bytes: int) -> bytes:
            return sender.files.read(ibi.key, path, max_bytes=max_bytes)

        def confirm(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            return 200, content.confirm_offer(body, sender="D7N2U8HW/4GRGLD2")

    item = accept(
        receiver.content, lambda _: Public(), token, me=me, principal="owner", registry=registry
    )
    assert item.state is State.ORIGINAL and [f.path for f in item.files] == ["paper.pdf"]


def test_a_conflict_names_the_deleted_original() -> None:
    receiver = MemoryArchive()
    receiver.service.own_prefixes = frozenset(["8JMKD3MGP8W"])
    receiver.service.import_original({"ibi": ITEM, "reason": "a mirror"})
    receiver.service.delete(ITEM)
    with pytest.raises(Conflict, match="transfer it to another Archive"):
        receiver.service.receive_transfer({"ibi": ITEM})


@pytest.mark.parametrize("given", ["-", "ibioffer1.\udc81.AA"])
def test_ibi_archive_accept_refuses_an_offer_that_is_not_ascii_before_sending_it(
    given: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import sys

    from ibi_tools import cli

    stdin = io.TextIOWrapper(io.BytesIO(b"ibioffer1.\x81\x82.AA\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    status = cli.main(["archive", "accept", given, "--endpoint", "http://127.0.0.1:9"])
    error = capsys.readouterr().err
    assert status == cli.EXIT_USAGE and "`ibi archive offer` printed" in error
    assert "codec" not in error and "Traceback" not in error
