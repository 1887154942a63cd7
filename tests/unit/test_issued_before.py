"""Identifiers taken before they are issued, and Idempotency-Keys anyone could spend (issue 35).

The rule (functions/archive/issued.py): an Archive takes an original for an IBI of its own
subsystems only when the minting service's record issued it, to this Archive (not for one of its
deposits) or to the depositor; and an Idempotency-Key is its depositor's, bound to its body.

The minting service here is the real one (functions/minting/service.py over its in-memory
store), its record read as ``GET /mints?ibi=`` answers it (``record_answer``), so the rule is
checked against what the minting service really records, not against a fake of our own.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from functions.archive.deposits import IdempotencyKeyReused
from functions.archive.errors import Conflict
from functions.archive.issued import (
    DEPOSIT_KEY,
    Issue,
    IssuedToAnother,
    MintedForAnotherDeposit,
    NotIssued,
    check_issued,
    principal_of,
)
from functions.archive.model import Forms
from functions.archive.service import ArchiveService
from functions.archive.wiring import issue_from
from functions.minting.service import (
    MintingService,
    MintRequest,
    NotRecorded,
    UnknownSubsystem,
    record_answer,
)
from ibi.core.subsystem import Subsystem, check_distinct
from tests.fakes import FakeClock, MemoryMintStore
from tests.fakes_archive import MemoryItemStore

ARCHIVE = "arn:aws:sts::123456789012:assumed-role/IbiArchive-ArchiveRole/IbiArchive-Function"
ARCHIVE_ROLE = "arn:aws:iam::123456789012:role/service/IbiArchive-ArchiveRole"
DEPOSITOR = "arn:aws:sts::123456789012:assumed-role/Operators/alice"
SQUATTER = "arn:aws:sts::123456789012:assumed-role/Depositors/mallory"
SUBSYSTEM = Subsystem.from_mapping(
    {"name": "default", "host": "ibi.example.org", "ip": "192.0.2.10", "granularity": "1"}
)


class Minting:
    """The real minting service, reached as an Archive reaches it: minting under a principal,
    and an IBI's record as ``GET /mints?ibi=`` answers it."""

    def __init__(self, clock: FakeClock) -> None:
        self.service = MintingService(
            MemoryMintStore(),
            check_distinct([SUBSYSTEM]),
            default_subsystem="default",
            clock=clock,
            sleep=clock.sleep,
            max_wait=Decimal(5),
        )
        self.requests = 0

    def mint_as(self, requester: str, key: str | None = None) -> Forms:
        self.requests += 1
        request = MintRequest(requester, f"r{self.requests}", idempotency_key=key)
        (ibi,) = self.service.mint(request).answer["ibis"]
        return Forms(rep=ibi["rep"], ibip=ibi["ibip"])

    def __call__(self, subsystem: str | None, key: str | None) -> Forms:  # the Archive's Minter
        return self.mint_as(ARCHIVE, key)

    def issue_of(self, label: str) -> Issue | None:  # the Archive's MintRecords
        try:
            return issue_from(record_answer(self.service.record_of(label)))
        except (NotRecorded, UnknownSubsystem):
            return None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(Decimal(1795473000))


@pytest.fixture
def minting(clock: FakeClock) -> Minting:
    return Minting(clock)


def archive(minting: Minting, clock: FakeClock) -> ArchiveService:
    return ArchiveService(
        MemoryItemStore(),
        clock=clock,
        mint=minting,
        own_prefixes=(SUBSYSTEM.rep_prefix, SUBSYSTEM.ibip_prefix),
        mint_records=minting,
        principal=ARCHIVE_ROLE,
    )


def at(date: Decimal) -> dict[str, Any]:
    ibi = SUBSYSTEM.ibi(date)
    return {"ibi": {"rep": ibi.rep, "ibip": ibi.ibip}}


# -- the reproductions ---------------------------------------------------------------------------


def test_an_ibi_dated_seconds_ahead_is_refused_and_then_issued_to_the_deposit_it_is_for(
    minting: Minting, clock: FakeClock
) -> None:
    """The squatter's 201 for an IBI 15 s ahead is a 422 now; the next deposit mints it."""
    service = archive(minting, clock)
    with pytest.raises(NotIssued, match="never issued"):
        service.create_original(
            {**at(clock.now + 15), "url": "https://evil.example/"}, principal=SQUATTER
        )
    clock.now += 15
    item = service.create_original({"dc": {"title": ["The real one"]}}, principal=DEPOSITOR)
    assert item.ibi.key == SUBSYSTEM.ibi(clock.now).ibip  # it is the IBI the squatter named
    assert item.creator == DEPOSITOR


def test_an_ibi_never_issued_long_ago_is_refused(minting: Minting, clock: FakeClock) -> None:
    minting.mint_as(DEPOSITOR)  # the subsystem's record has begun, without 2023's date
    service = archive(minting, clock)
    with pytest.raises(NotIssued):
        service.create_original(at(Decimal(1690000000)), principal=DEPOSITOR)  # 2023-07-22


def test_an_ibi_this_archive_minted_for_a_deposit_is_that_deposits_alone(
    minting: Minting, clock: FakeClock
) -> None:
    """Between the Archive's mint and its write, the IBI is on the record as the Archive's: a
    squatter naming it then is refused (a deposit's key), so the deposit always gets it."""
    service = archive(minting, clock)
    forms = minting(None, f"{DEPOSIT_KEY}once:abc")  # the Archive minted, not written yet
    with pytest.raises(MintedForAnotherDeposit):
        service.create_original({"ibi": forms.to_mapping()}, principal=SQUATTER)
    first = service.create_original({}, principal=DEPOSITOR)
    with pytest.raises(Conflict):  # once written, taken: one item per IBI
        service.create_original({"ibi": first.ibi.to_mapping()}, principal=DEPOSITOR)


def test_an_ibi_issued_to_another_principal_is_refused(minting: Minting, clock: FakeClock) -> None:
    service = archive(minting, clock)
    theirs = minting.mint_as(DEPOSITOR)
    with pytest.raises(IssuedToAnother, match="alice"):
        service.create_original({"ibi": theirs.to_mapping()}, principal=SQUATTER)
    item = service.create_original({"ibi": theirs.to_mapping()}, principal=DEPOSITOR)
    assert item.ibi == theirs  # its holder deposits it


def test_a_depositor_deposits_what_it_minted_in_another_session(
    minting: Minting, clock: FakeClock
) -> None:
    mine = minting.mint_as(DEPOSITOR)
    later = DEPOSITOR.replace("/alice", "/alice-2")  # the same role, another session
    assert archive(minting, clock).create_original({"ibi": mine.ibip}, principal=later).ibi.ibip


def test_every_deposit_mints_under_a_deposit_key(minting: Minting, clock: FakeClock) -> None:
    """Unkeyed deposits too: otherwise their IBIs would be takeable by name in between."""
    service = archive(minting, clock)
    made = [service.create_original({}, principal=DEPOSITOR) for _ in range(3)]
    keyed = service.create_original({}, idempotency_key="k-1", principal=DEPOSITOR)
    for item in (*made, keyed):
        issue = minting.issue_of(item.key)
        assert issue is not None and (issue.idempotency_key or "").startswith(DEPOSIT_KEY)


# -- Idempotency-Keys ----------------------------------------------------------------------------


def test_an_idempotency_key_is_its_depositors_own(minting: Minting, clock: FakeClock) -> None:
    """The importer's and the release action's keys are derivable from public facts: another
    depositor pre-planting one makes an item of its own, never the one the key's owner gets."""
    service = archive(minting, clock)
    key = "gh:owner/repo:123:1.0.0"
    planted = service.create_original(
        {"url": "https://evil.example/"}, idempotency_key=key, principal=SQUATTER
    )
    body = {"dc": {"title": ["Release 1.0.0"]}}
    mine, replayed = service.deposit_original(body, idempotency_key=key, principal=DEPOSITOR)
    assert not replayed and mine.key != planted.key and mine.external_url is None
    again, replayed = service.deposit_original(body, idempotency_key=key, principal=DEPOSITOR)
    assert replayed and again == mine


def test_an_idempotency_key_with_another_body_is_a_422(minting: Minting, clock: FakeClock) -> None:
    service = archive(minting, clock)
    service.create_original({"dc": {"title": ["A"]}}, idempotency_key="k", principal=DEPOSITOR)
    with pytest.raises(IdempotencyKeyReused) as refused:
        service.create_original({"dc": {"title": ["B"]}}, idempotency_key="k", principal=DEPOSITOR)
    assert refused.value.status == 422
    assert len(list(service.items.scan(after=None, limit=100)[0])) == 1


def test_a_named_ibi_retried_with_its_key_is_the_same_item(
    minting: Minting, clock: FakeClock
) -> None:
    service = archive(minting, clock)
    mine = minting.mint_as(DEPOSITOR)
    body = {"ibi": mine.to_mapping(), "url": "https://example.org/a"}
    first, _ = service.deposit_original(body, idempotency_key="k", principal=DEPOSITOR)
    again, replayed = service.deposit_original(body, idempotency_key="k", principal=DEPOSITOR)
    assert replayed and again == first
    with pytest.raises(IdempotencyKeyReused):
        service.deposit_original(
            {**body, "url": "https://example.org/b"}, idempotency_key="k", principal=DEPOSITOR
        )
    with pytest.raises(IssuedToAnother):  # another depositor, the same key: no replay of hers
        service.deposit_original(body, idempotency_key="k", principal=SQUATTER)


# -- the rule, over every case it covers ---------------------------------------------------------

PRINCIPALS = st.sampled_from([ARCHIVE, DEPOSITOR, SQUATTER, "anonymous:127.0.0.1"])
KEYS = st.sampled_from(
    [None, f"{DEPOSIT_KEY}abc", f"{DEPOSIT_KEY}once:1", "archive-service:t", "k"]
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requester=PRINCIPALS, key=KEYS, depositor=PRINCIPALS, recorded=st.booleans())
def test_the_rule_over_every_record(
    requester: str, key: str | None, depositor: str, recorded: bool
) -> None:
    """Accepted exactly when a record holds the IBI and names the depositor, or names this
    Archive for no deposit of its own."""
    forms = Forms.of(SUBSYSTEM.ibi(Decimal(1795473000)).ibip)
    issue = Issue(requester, key, (forms,)) if recorded else None
    ours = principal_of(requester) == principal_of(ARCHIVE_ROLE)
    expected = recorded and (
        (ours and not (key or "").startswith(DEPOSIT_KEY))
        or (not ours and principal_of(requester) == principal_of(depositor))
    )
    try:
        check_issued(forms, issue, archive=ARCHIVE_ROLE, depositor=depositor)
        accepted = True
    except (NotIssued, IssuedToAnother, MintedForAnotherDeposit):
        accepted = False
    assert accepted == expected


def test_a_record_of_another_ibi_proves_nothing() -> None:
    asked = Forms.of(SUBSYSTEM.ibi(Decimal(1795473000)).ibip)
    other = SUBSYSTEM.ibi(Decimal(1795473001))
    issue = Issue(DEPOSITOR, None, (Forms(rep=other.rep, ibip=other.ibip),))
    with pytest.raises(NotIssued):
        check_issued(asked, issue, archive=ARCHIVE_ROLE, depositor=DEPOSITOR)


@pytest.mark.parametrize(
    ("given", "compared"),
    [
        (ARCHIVE_ROLE, "arn:aws:sts::123456789012:assumed-role/IbiArchive-ArchiveRole"),
        (ARCHIVE, "arn:aws:sts::123456789012:assumed-role/IbiArchive-ArchiveRole"),
        ("arn:aws-cn:iam::123456789012:role/R", "arn:aws-cn:sts::123456789012:assumed-role/R"),
        ("arn:aws:iam::123456789012:user/bob", "arn:aws:iam::123456789012:user/bob"),
        ("anonymous:127.0.0.1", "anonymous:127.0.0.1"),
    ],
)
def test_principals_compare_without_the_session(given: str, compared: str) -> None:
    assert principal_of(given) == compared


def test_another_accounts_role_of_the_same_name_is_another_principal() -> None:
    assert principal_of(ARCHIVE_ROLE) != principal_of(
        ARCHIVE.replace("123456789012", "210987654321")
    )
