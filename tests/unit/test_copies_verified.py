"""Issue 24, item 5: a copy's expected files are read from its original's Archive (through the
resolver's holdings view), not taken from the depositor; a copy that cannot be checked is
recorded ``unverified``, ``verify`` says so, and a later verify that reads the original records
``verified`` (``functions/archive/copies.py``).

In memory: the holdings view is the resolver's own (``HoldingsView.to_mapping``) over the
Archives' protocol answers (``tests.fakes_archive``). The same through HTTP, with a real
resolver and two Archives on loopback: ``tests/integration/test_copies_verified.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from functions.archive import outbound
from functions.archive.content import ContentService
from functions.archive.copies import (
    NO_RESOLVER,
    CopyChecks,
    NotTheOriginal,
    Original,
    Uncheckable,
    original_in,
    through_resolver,
)
from functions.archive.mapping import item_from_mapping, item_to_mapping
from functions.archive.model import CopyCheck, Forms
from functions.archive.outbound import ResolverHoldings
from functions.archive.service import DiffersFromOriginal
from functions.resolver.authority import ArchiveAnswer, Trust
from functions.resolver.holdings import HoldingsView, holding_of
from functions.shared.addresses import AddressPolicy
from ibi.client import ApiError, Raw
from ibi.core.holdings import REQUEST_PAIR
from ibi.core.labels import IBI
from ibi_tools import cli
from ibi_tools.cli import archive as cli_archive
from ibi_tools.cli import deposit as cli_deposit
from tests.fakes_archive import ArchiveNode, MemoryFederation

RESOLVER = "https://resolver.example.org"
REPORT = IBI.build(Decimal(1795000000), host="example.org", ip="192.0.2.10")
LABEL = str(REPORT.ibip)
BYTES = {"report.txt": b"The report.\n", "data.csv": b"a,b\n1,2\n"}
TAMPERED = {"report.txt": b"The rep0rt, with a payload.\n", "data.csv": BYTES["data.csv"]}


def listed(files: dict[str, bytes]) -> list[dict[str, Any]]:
    """``original_files`` as a depositor declares them: path, SHA-256, size."""
    return [
        {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        for path, data in files.items()
    ]


def holdings_view(federation: MemoryFederation, label: str) -> dict[str, Any]:
    """The resolver's holdings view (JSON) of ``label`` over the federation's Archives."""
    pairs = [("clientinformation.ipaddress", "203.0.113.9"), REQUEST_PAIR]
    answers = federation.ask_all(label, pairs)
    return HoldingsView(label, [holding_of(answer) for answer in answers]).to_mapping()


class Resolver:
    """The resolver as the copy's Archive reads it: up (the federation's view) or down."""

    def __init__(self, federation: MemoryFederation) -> None:
        self.federation = federation
        self.up = True
        self.asked: list[str] = []

    def view(self, label: str) -> dict[str, Any]:
        self.asked.append(label)
        if not self.up:
            raise ApiError(0, "cannot reach the resolver: [Errno 111] Connection refused")
        return holdings_view(self.federation, label)


def checking(node: ArchiveNode, resolver: Resolver | None) -> None:
    """``node``'s content service as deployed, its copies checked through ``resolver``."""
    originals = through_resolver(resolver.view) if resolver is not None else None
    node.content = ContentService(
        node.service,
        views=node.views,
        files=node.files,
        serve_inline_bytes=1 << 20,
        copies=CopyChecks(originals, node.service.now),
    )


def federation_with_original() -> tuple[MemoryFederation, Resolver]:
    federation = MemoryFederation("a", "b")
    federation["a"].original(LABEL, BYTES)
    resolver = Resolver(federation)
    checking(federation["b"], resolver)
    return federation, resolver


def copy(node: ArchiveNode, files: dict[str, bytes] | None = None, **fields: Any) -> Any:
    """``POST /api/copies`` on ``node`` (then its files committed, when given)."""
    item = node.content.add_copy({"ibi": LABEL, **fields})
    return node.commit(item.key, files, "report.txt") if files else item


# ---------------------------------------------------------------------------- making a copy


def test_a_copy_declaring_the_checksums_of_tampered_bytes_is_refused_naming_each_file() -> None:
    federation, _ = federation_with_original()
    b = federation["b"]
    declared = listed({**TAMPERED, "extra.txt": b"x"})
    with pytest.raises(NotTheOriginal) as refused:
        copy(b, original_files=declared)
    assert refused.value.status == 409
    message = str(refused.value)
    assert "'report.txt': SHA-256 " + declared[0]["sha256"] in message
    assert hashlib.sha256(BYTES["report.txt"]).hexdigest() in message  # the original's
    assert "'extra.txt': not a file of the original" in message and "'data.csv'" not in message
    assert b.store.get(LABEL) is None  # nothing made
    with pytest.raises(NotTheOriginal, match="original_sha256"):
        copy(b, original_sha256=declared[0]["sha256"])


def test_a_copy_takes_the_originals_files_as_its_archive_lists_them() -> None:
    federation, resolver = federation_with_original()
    b = federation["b"]
    made = copy(b)  # no original_files: this Archive reads them
    assert resolver.asked == [LABEL]
    assert made.original_files == federation["a"].service.get(LABEL).files
    assert made.original_sha256 == hashlib.sha256(BYTES["report.txt"]).hexdigest()
    check = made.original_check
    assert check is not None and check.status is CopyCheck.VERIFIED
    assert check.archive == "a" and check.reason is None
    with pytest.raises(DiffersFromOriginal, match="not the original's"):
        b.commit(LABEL, TAMPERED, "report.txt")
    assert b.commit(LABEL, BYTES, "report.txt").files  # the original's bytes
    report = b.content.verify(LABEL, None)
    assert report.problems == [] and report.unverified == []
    assert report.items[0]["original_check"]["status"] == "verified"


def test_the_depositors_original_files_are_a_cross_check_that_must_agree() -> None:
    federation, _ = federation_with_original()
    made = copy(federation["b"], original_files=listed(BYTES))
    check = made.original_check
    assert check is not None and check.verified and len(made.original_files) == 2


def test_a_copy_whose_original_cannot_be_read_is_unverified_and_verify_says_so() -> None:
    federation, resolver = federation_with_original()
    b = federation["b"]
    resolver.up = False
    made = copy(b, TAMPERED, original_files=listed(TAMPERED))  # the depositor's word
    check = b.service.get(LABEL).original_check
    assert check is not None and check.status is CopyCheck.UNVERIFIED
    assert "cannot be read" in str(check.reason) and "Connection refused" in str(check.reason)
    assert check.at == b.clock() and made.original_files  # kept, the depositor's
    report = b.content.verify(LABEL, None)
    [unverified] = report.unverified
    assert unverified["ibi"] == LABEL and "Connection refused" in unverified["reason"]
    assert unverified["since"] == item_to_mapping(b.service.get(LABEL))["original_check"]["at"]
    assert report.items[0]["original_check"]["status"] == "unverified"
    assert resolver.asked == [LABEL, LABEL]  # verify tried again


def test_a_later_verify_reads_the_original_records_verified_and_names_what_differs() -> None:
    federation, resolver = federation_with_original()
    b = federation["b"]
    resolver.up = False
    copy(b, TAMPERED, original_files=listed(TAMPERED))
    assert b.content.verify(LABEL, None).problems == []  # against the depositor's list
    resolver.up = True
    b.clock.sleep(60)
    report = b.content.verify(LABEL, None)
    held = b.service.get(LABEL)
    check = held.original_check
    assert check is not None and check.status is CopyCheck.VERIFIED and check.at == b.clock()
    assert held.original_files == federation["a"].service.get(LABEL).files  # replaced
    assert report.unverified == [] and report.items[0]["original_check"]["archive"] == "a"
    assert [(p["path"], p["problem"]) for p in report.problems] == [
        ("report.txt", "differs from the original")
    ]
    b.content.verify(LABEL, None)
    assert resolver.asked == [LABEL, LABEL, LABEL]  # a verified copy is not read again


def test_without_a_resolver_every_copy_is_unverified() -> None:
    federation = MemoryFederation("a", "b")
    b = federation["b"]
    checking(b, None)
    made = copy(b)
    assert made.original_check is not None and made.original_check.reason == NO_RESOLVER
    assert [u["reason"] for u in b.content.verify(LABEL, None).unverified] == [NO_RESOLVER]


def test_a_copy_made_before_copies_were_checked_is_checked_by_verify() -> None:
    federation, _ = federation_with_original()
    b = federation["b"]
    b.service.add_copy({"ibi": LABEL, "original_files": listed(TAMPERED)})  # the old way
    stored = item_to_mapping(b.service.get(LABEL))
    del stored["original_check"]  # as stored before this field
    assert item_from_mapping(stored).original_check is None
    b.commit(LABEL, TAMPERED, "report.txt")
    report = b.content.verify(LABEL, None)
    check = b.service.get(LABEL).original_check
    assert check is not None and check.verified
    assert [p["problem"] for p in report.problems] == ["differs from the original"]


def test_one_verify_reads_originals_only_while_its_time_budget_lasts() -> None:
    federation = MemoryFederation("a", "b")
    b = federation["b"]
    moments = iter([0.0, 0.0, 5.0])  # started; the first read; after it, 5 s spent
    labels = [str(IBI.build(Decimal(1795000000 + n), ip="192.0.2.10").ibip) for n in range(3)]

    def never(label: str) -> Original:
        raise Uncheckable(f"{label}: the original's Archive did not answer")

    checks = CopyChecks(never, b.service.now, monotonic=lambda: next(moments))
    for label in labels:
        b.service.add_copy({"ibi": label})
    done = checks.recheck(b.service, [b.service.get(label) for label in labels])
    assert list(done) == [labels[0]]  # a second read would not fit in the budget


# ---------------------------------------------------------------------------- the view


def holder(archive: str, **more: Any) -> dict[str, Any]:
    files = [{"path": "report.txt", "sha256": "ab" * 32, "size": 12}]
    return {
        "archive": archive,
        "state": "Original",
        "trust": "owner",
        "extension": True,
        "listable": True,
        "files": files,
        "file_count": 1,
        "truncated": False,
        "default_file": "report.txt",
        **more,
    }


@pytest.mark.parametrize(
    ("holders", "why"),
    [
        ([holder("A", trust="untrusted")], "only Archives the resolver does not trust"),
        ([holder("A"), holder("B", trust="named")], "2 Archives claim the original"),
        ([holder("A", state="unreachable", problem="timeout")], r"did not answer: A \(timeout\)"),
        ([holder("A", extension=False)], "does not report its files"),
        ([holder("A", listable=False)], "not listable"),
        ([holder("A", truncated=True)], "cut short"),
        ([holder("A", file_count=2)], "cut short"),
        ([holder("A", files=[{"path": "../x", "sha256": "ab" * 32, "size": 1}])], "malformed"),
    ],
)
def test_an_original_the_view_does_not_settle_is_uncheckable(
    holders: list[dict[str, Any]], why: str
) -> None:
    with pytest.raises(Uncheckable, match=why):
        original_in({"ibi": LABEL, "archives": holders})


def test_the_original_is_the_one_claim_the_resolver_trusts() -> None:
    view = {"archives": [holder("H", trust="untrusted", files=[]), holder("A", trust="named")]}
    original = original_in(view)
    assert original.archive == "A" and [f.path for f in original.files] == ["report.txt"]
    assert original.main_sha256 == "ab" * 32


def test_the_resolvers_view_is_read_as_json_and_any_failure_is_uncheckable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: list[tuple[int, Any]] = [
        (200, {"ibi": LABEL, "archives": [holder("A")]}),
        (503, {"message": "busy"}),
        (200, b"<html>not JSON</html>"),
        (200, {"no": "archives"}),
    ]
    seen: list[tuple[str, str, float]] = []

    def fake_send(method: str, url: str, *, timeout: float, **_: Any) -> Raw:
        seen.append((method, url, timeout))
        status, body = answers.pop(0)
        return Raw(status, {}, body if isinstance(body, bytes) else json.dumps(body).encode())

    monkeypatch.setattr(outbound, "vetted_transport", lambda policy, **_: fake_send)
    holdings = ResolverHoldings(RESOLVER, "https://b.example.org", AddressPolicy())
    read: Callable[[str], Original] = through_resolver(holdings.view)
    assert read(LABEL).archive == "A"
    assert seen[0][:2] == ("GET", f"{RESOLVER}/holdings/{LABEL}")
    for why in ("answered 503", "no holdings view", "no holdings view"):
        with pytest.raises(Uncheckable, match=f"the resolver cannot be read: .*{why}"):
            read(LABEL)


def test_an_item_keeps_its_check_through_the_store_mapping() -> None:
    federation, _ = federation_with_original()
    made = copy(federation["b"])
    assert item_from_mapping(item_to_mapping(made)) == made
    original = federation["a"].service.get(LABEL)
    assert item_to_mapping(original)["original_check"] is None


def test_a_holding_of_a_trusted_owner_is_what_the_copy_is_read_from() -> None:
    """The view's ``trust`` as the resolver writes it (``holding_of``)."""
    federation = MemoryFederation("a")
    federation["a"].original(LABEL, BYTES)
    [answer] = federation.ask_all(
        LABEL, [("clientinformation.ipaddress", "192.0.2.1"), REQUEST_PAIR]
    )
    owned = ArchiveAnswer(answer.archive, answer.address, answer.pairs, trust=Trust.OWNER)
    foreign = ArchiveAnswer("x", "x.example.org", answer.pairs, trust=Trust.UNTRUSTED)
    view = HoldingsView(LABEL, [holding_of(foreign), holding_of(owned)]).to_mapping()
    assert original_in(view).archive == "a"


# ---------------------------------------------------------------------------- the CLI


def test_archive_verify_says_which_copies_are_unverified(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    forms = Forms(ibip=LABEL).to_mapping()
    entries = [
        {
            "ibi": forms,
            "state": "Copy",
            "files": 2,
            "problems": [],
            "original_check": {
                "status": "unverified",
                "at": "2026-11-25T13:38:23Z",
                "reason": "the resolver cannot be read: timeout",
            },
        },
        {"ibi": forms, "state": "Copy", "files": 2, "problems": [], "original_check": None},
        {
            "ibi": forms,
            "state": "Copy",
            "files": 2,
            "problems": [],
            "original_check": {"status": "verified", "at": "2026-11-25T13:38:23Z"},
        },
    ]

    class Archive:
        def verify(self, ibi: str | None) -> Any:
            return iter(entries)

    monkeypatch.setattr(cli_archive, "archive_client", lambda args: Archive())
    status = cli.main(["archive", "verify", "--endpoint", "http://b.example"])
    out = capsys.readouterr().out.splitlines()
    assert status == cli.EXIT_OK
    assert out == [
        f"UNVERIFIED {LABEL}: the resolver cannot be read: timeout (since 2026-11-25T13:38:23Z)",
        f"ok {LABEL} (2 file(s))",
        f"UNVERIFIED {LABEL}: made before copies were checked",
        f"ok {LABEL} (2 file(s))",
        f"ok {LABEL} (2 file(s))",
    ]


def test_deposit_copy_of_warns_when_the_archive_could_not_check_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    copy_answer = {
        "ibi": {"ibip": LABEL},
        "original_check": {"status": "unverified", "reason": "no resolver", "at": "x"},
    }
    cli_deposit._warn_unverified(copy_answer)
    err = capsys.readouterr().err
    assert "could not check this copy against its original (no resolver)" in err
    assert f"ibi archive verify {LABEL}" in err
    cli_deposit._warn_unverified({**copy_answer, "original_check": {"status": "verified"}})
    assert capsys.readouterr().err == ""


def test_deposit_copy_of_reads_the_original_the_resolver_trusts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hostile Archive's claim of the original is not the one the CLI copies (as the Archive)."""
    view = {"archives": [holder("H", trust="untrusted"), holder("A", trust="owner")]}

    class Resolver:
        def holdings(self, ibi: str) -> dict[str, Any]:
            return view

    monkeypatch.setattr(cli_deposit, "resolver_client", lambda url, timeout: Resolver())
    args = cli.build_parser().parse_args(
        ["deposit", "x.txt", "--copy-of", LABEL, "--endpoint", "http://b.example"]
    )
    assert cli_deposit._original(args, RESOLVER)["archive"] == "A"
