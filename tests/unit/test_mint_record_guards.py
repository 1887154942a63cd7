"""Every condition of the minting store, each proven by a test that fails without it.

The store's conditional writes are what keeps an IBI unique and a retried request's answer
the same; the in-memory fake does not run them, so these tests run the real store over moto
(DynamoDB's API in process) and over local mode's SQLite tables. ``make mutants``
(ibi_tools/mutants.py) weakens each condition in turn and checks that a test here, or the
concurrency test, fails.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from functions.minting.service import IdempotencyInProgress, MintingService, MintRequest
from functions.minting.store import (
    DynamoMintStore,
    IdempotencyClaim,
    MintRecord,
    Reservation,
    StateConflict,
    StateWrite,
    StoreError,
    ensure_tables,
)
from ibi.core.subsystem import Subsystem
from tests.conftest import TABLES, dynamodb_client
from tests.fakes import FakeClock

EXPIRES = 4_102_444_800  # 2100: local mode's tables hide an item whose expiry has passed


@pytest.fixture(params=["moto", "local-tables"])
def dynamo_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DynamoMintStore]:
    with dynamodb_client(request.param, tmp_path) as client:
        ensure_tables(client, TABLES)
        yield DynamoMintStore(
            client,
            state_table=TABLES["state"],
            record_table=TABLES["record"],
            idempotency_table=TABLES["idempotency"],
        )


def block_write(previous: str | None, new: str) -> StateWrite:
    """A block's state write: conditional on the state being ``previous`` (None: no state)."""
    return StateWrite("default", Decimal(previous) if previous else None, Decimal(new), "1", 1)


def write_after(first: str, new: str | None = None) -> StateWrite:
    """A write conditional on the state being before ``first``, with nothing read before."""
    return StateWrite("default", None, Decimal(new or first), "1", 1, first=Decimal(first))


def ended(replaced: Reservation | None) -> Decimal | None:
    """The date a state write replaced: the end of the reservation it answers."""
    return replaced.end if replaced is not None else None


def record(first_date: str, *, subsystem: str = "default", requester: str = "a") -> MintRecord:
    return MintRecord(
        subsystem=subsystem,
        rep_prefix="ibi.example.org/x",
        ibip_prefix="8JMKD3MGP3W/x",
        dates=(Decimal(first_date), Decimal(first_date) + 1),
        previous_date=None,
        requester=requester,
        request_id=f"request of {requester}",
        recorded_at=Decimal(first_date),
    )


# -- the subsystem's state ---------------------------------------------------------------------


def test_a_subsystems_first_block_is_claimed_once(dynamo_store: DynamoMintStore) -> None:
    assert dynamo_store.advance(block_write(None, "10")) is None
    with pytest.raises(StateConflict) as lost:  # another environment also saw no state
        dynamo_store.advance(block_write(None, "20"))
    assert lost.value.current == Decimal(10)
    assert dynamo_store.last_date("default") == Decimal(10)


def test_a_block_is_claimed_only_from_the_state_it_read(dynamo_store: DynamoMintStore) -> None:
    dynamo_store.advance(block_write(None, "10"))
    assert ended(dynamo_store.advance(block_write("10", "20"))) == Decimal(10)
    for stale in ("10", "5"):  # another environment read 10 (or earlier), then 20 was written
        with pytest.raises(StateConflict) as lost:
            dynamo_store.advance(block_write(stale, "30"))
        assert lost.value.current == Decimal(20)
    assert dynamo_store.last_date("default") == Decimal(20)


def test_a_write_without_a_read_wins_only_after_the_state(dynamo_store: DynamoMintStore) -> None:
    assert dynamo_store.advance(write_after("10", new="12")) is None  # the subsystem's first
    for not_after in ("12", "11"):  # its first date would repeat, or precede, one handed out
        with pytest.raises(StateConflict) as lost:
            dynamo_store.advance(write_after(not_after, new="14"))
        assert lost.value.current == Decimal(12)
    assert ended(dynamo_store.advance(write_after("13", new="14"))) == Decimal(12)
    assert dynamo_store.last_date("default") == Decimal(14)


# -- the record --------------------------------------------------------------------------------


def test_the_record_refuses_a_repeated_subsystem_and_first_date(
    dynamo_store: DynamoMintStore,
) -> None:
    first = record("100", requester="a")
    dynamo_store.put_record(first)
    with pytest.raises(StoreError, match="recording the minted IBIs"):
        dynamo_store.put_record(record("100", requester="b"))  # the same dates handed out twice
    assert dynamo_store.find_record("default", Decimal(100)) == first  # not overwritten
    dynamo_store.put_record(record("100", subsystem="classic"))  # another subsystem's dates
    dynamo_store.put_record(record("102", requester="b"))
    listed, _ = dynamo_store.list_records("default", after=None, limit=10)
    assert [(r.first_date, r.requester) for r in listed] == [(100, "a"), (102, "b")]


# -- idempotency keys --------------------------------------------------------------------------


def claim(store: DynamoMintStore, now: str, lease_until: str = "10") -> IdempotencyClaim | None:
    return store.claim(
        "key", "default:1", now=Decimal(now), lease_until=Decimal(lease_until), expires_at=EXPIRES
    )


def test_a_key_is_held_while_its_lease_runs(dynamo_store: DynamoMintStore) -> None:
    assert claim(dynamo_store, "1") is None
    for now in ("2", "10"):  # a second request with the key, before the lease ends and as it ends
        held = claim(dynamo_store, now, lease_until="99")
        assert held is not None and held.status == "in_progress"
        assert held.lease_until == Decimal(10)
    assert claim(dynamo_store, "10.5", lease_until="99") is None  # its attempt died: taken


def test_a_completed_key_keeps_its_answer_after_its_lease(dynamo_store: DynamoMintStore) -> None:
    claim(dynamo_store, "1")
    dynamo_store.complete("key", {"ibis": ["the first answer"]})
    dynamo_store.release("key")  # a release only frees a key still in progress
    held = claim(dynamo_store, "50", lease_until="99")  # long after its lease
    assert held is not None and held.answer == {"ibis": ["the first answer"]}


def test_a_noted_key_is_taken_over_once_and_never_reclaimed(
    dynamo_store: DynamoMintStore,
) -> None:
    claim(dynamo_store, "1")
    dynamo_store.note("key", "default", Decimal(5))  # its state write won; then it died
    seen = dynamo_store.claim(
        "key", "default:1", now=Decimal(50), lease_until=Decimal(99), expires_at=EXPIRES
    )
    assert seen is not None and seen.minted == ("default", Decimal(5))
    assert dynamo_store.take_over(seen, lease_until=Decimal(99), expires_at=EXPIRES)
    assert not dynamo_store.take_over(seen, lease_until=Decimal(98), expires_at=EXPIRES)
    dynamo_store.complete("key", {"ibis": []})
    completed = dynamo_store.claim(
        "key", "default:1", now=Decimal(200), lease_until=Decimal(300), expires_at=EXPIRES
    )
    assert completed is not None and completed.lease_until == Decimal(99)
    assert not dynamo_store.take_over(completed, lease_until=Decimal(300), expires_at=EXPIRES)
    final = claim(dynamo_store, "400", lease_until="500")
    assert final is not None and final.status == "complete"


def test_a_released_key_is_not_noted(dynamo_store: DynamoMintStore) -> None:
    claim(dynamo_store, "1")
    dynamo_store.release("key")
    with pytest.raises(StoreError, match="noting the idempotency key's dates"):
        dynamo_store.note("key", "default", Decimal(5))
    assert claim(dynamo_store, "2") is None  # free, with nothing half-written in the way


def test_an_attempt_that_died_before_its_record_is_taken_over_after_its_lease(
    dynamo_store: DynamoMintStore, subsystems: dict[str, Subsystem]
) -> None:
    """Its state write won and was noted, then it died before the record: once its lease
    runs out, a retry takes the key over and mints (the take-over once sent an attribute
    name its condition did not use, which DynamoDB refuses: every such retry was a 503)."""
    clock = FakeClock(Decimal(EXPIRES - 10**6))  # late enough for its keys' expiry (a week on)
    service = MintingService(
        dynamo_store, subsystems, default_subsystem="default", clock=clock, sleep=clock.sleep
    )
    mint = MintRequest(requester="me", request_id="r", idempotency_key="k")
    key_id = hashlib.sha256(b"me\nk").hexdigest()
    lease = clock.now + 65
    died = dynamo_store.claim(
        key_id, "default:1", now=clock.now, lease_until=lease, expires_at=EXPIRES
    )
    assert died is None
    dynamo_store.note(key_id, "default", clock.now)
    with pytest.raises(IdempotencyInProgress):
        service.mint(mint)
    clock.now = lease + 1
    retried = service.mint(mint)
    assert not retried.replayed and len(retried.answer["ibis"]) == 1
    again = service.mint(mint)
    assert again.replayed and again.answer == retried.answer
