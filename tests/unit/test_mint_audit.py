"""The mint record as an audit trail (issue 30): reservations on the record, its verification,
and the record searched by IBI and date, over the in-memory store and a fake clock.

``kill`` tests stop an execution environment dead at each point of a request (as ``kill -9``
would: after that point it makes no call at all) and check that the record still accounts
for every date up to the state's.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from functions.minting.audit import GAP, OVERLAP, TWICE, verify
from functions.minting.service import (
    InvalidMintRequest,
    MintingService,
    MintRequest,
    NotRecorded,
    UnknownSubsystem,
    parse_when,
    record_answer,
    verification_answer,
)
from functions.minting.store import MintRecord, Reservation, StateWrite
from ibi.core.subsystem import Subsystem
from tests.fakes import FakeClock, MemoryMintStore

BLOCKS = {"without-blocks": Decimal(0), "with-blocks": Decimal("0.05")}
ELSEWHERE = Subsystem.from_mapping(  # another service's subsystem
    {"name": "other", "host": "ibi.example.net", "ip": "198.51.100.1", "granularity": "1"}
)


def request(n: int = 0, **fields: Any) -> MintRequest:
    return MintRequest(requester=f"client-{n % 3}", request_id=f"r-{n}", **fields)


def environment(
    store: Any, subsystems: dict[str, Subsystem], clock: FakeClock, block: Decimal
) -> MintingService:
    """One execution environment of the minting function."""
    return MintingService(
        store,
        subsystems,
        default_subsystem="default",
        clock=clock,
        sleep=clock.sleep,
        block_seconds=block,
    )


# ---------------------------------------------------------------------------- the walk itself


def record(
    dates: str,
    previous: str | None,
    *,
    end: str | None = None,
    claimed: bool = True,
    replaced: Reservation | None = None,
    request_id: str = "r",
) -> MintRecord:
    parsed = tuple(Decimal(d) for d in dates.split())
    return MintRecord(
        subsystem="default",
        rep_prefix="example.org/ibi",
        ibip_prefix="D7N2U8HW",
        dates=parsed,
        previous_date=Decimal(previous) if previous else None,
        requester="someone",
        request_id=request_id,
        recorded_at=parsed[-1],
        block_end=Decimal(end) if end else parsed[-1],
        claimed=claimed,
        replaced=replaced,
    )


def head(start: str | None, end: str, by: str = "someone") -> Reservation:
    return Reservation(Decimal(start) if start else None, Decimal(end), by, "r", Decimal(end))


def test_a_record_without_blocks_is_one_chain_with_nothing_unused() -> None:
    records = [record("1 2", None), record("3", "2"), record("5 7", "3")]
    found = verify("default", records, head("3", "7"))
    assert found.ok and found.unused == [] and found.unrecorded == []
    assert (found.records, found.ibis, found.reservations) == (3, 5, 3)


def test_the_unused_end_of_a_block_is_shown_with_who_reserved_it() -> None:
    records = [
        record("1", None, end="4", request_id="a"),
        record("2", "1", end="4", claimed=False, request_id="b"),  # from a's block
        record("6", "4", end="9", request_id="c"),
    ]
    found = verify("default", records, head("4", "9"))
    assert found.ok
    spans = [(u.start, u.end, u.reservation.request_id, u.recorded) for u in found.unused]
    assert spans == [(Decimal(2), Decimal(4), "a", True), (Decimal(6), Decimal(9), "c", True)]


def test_a_reservation_missing_from_the_record_is_a_gap() -> None:
    """The record of issue 30: a record continues from the end of a block nobody recorded."""
    records = [record("1", None, end="1"), record("6", "5", end="6")]
    found = verify("default", records, head("5", "6"))
    assert not found.ok
    [problem] = found.problems
    assert (problem.kind, problem.start, problem.end) == (GAP, Decimal(1), Decimal(5))
    assert "no reservation holds the dates after 1 up to 5" in problem.message


def test_the_state_ahead_of_every_reservation_is_a_gap() -> None:
    found = verify("default", [record("1", None)], Reservation(Decimal(1), Decimal(3)))
    assert [(p.kind, p.start, p.end) for p in found.problems] == [(GAP, Decimal(1), Decimal(3))]


def test_overlapping_reservations_and_dates_issued_twice_are_problems() -> None:
    overlapping = [record("1 2", None, end="3"), record("4", "2", end="5")]
    found = verify("default", overlapping, head("2", "5"))
    assert [p.kind for p in found.problems] == [OVERLAP]
    twice = [record("1 2", None), record("2", "2", end="3"), record("3", "2", end="3")]
    kinds = [p.kind for p in verify("default", twice, head("2", "3")).problems]
    assert TWICE in kinds


def test_a_record_outside_its_reservation_is_an_overlap() -> None:
    records = [
        record("1", None, end="3"),
        record("4", "1", end="3", claimed=False),  # says it came from the block up to 3
        record("5", "3", end="6"),
    ]
    found = verify("default", records, head("3", "6"))
    assert [p.kind for p in found.problems] == [OVERLAP]
    assert "not all in its reservation" in found.problems[0].message


def test_a_reservation_whose_request_died_is_on_the_next_record() -> None:
    """Killed between its state write and its record: the next write's record describes it
    (the state item did, and the write returned it), so it is unrecorded, not a gap."""
    dead = Reservation(Decimal(2), Decimal(5), "dead", "r-dead", Decimal(2))
    records = [record("1 2", None), record("6", "5", replaced=dead)]
    found = verify("default", records, head("5", "6"))
    assert found.ok and found.unrecorded == [dead]
    assert [(u.start, u.end, u.recorded) for u in found.unused] == [(Decimal(2), Decimal(5), False)]
    unrecorded_head = verify("default", records[:1], head("2", "4", by="dead"))
    assert unrecorded_head.ok and unrecorded_head.unused[0].reservation.requester == "dead"


def test_a_reservation_described_by_no_one_accounts_for_nothing() -> None:
    """A state item from before reservations were recorded names no requester."""
    records = [record("1", None), record("6", "5", replaced=Reservation(Decimal(1), Decimal(5)))]
    assert [p.kind for p in verify("default", records, head("5", "6")).problems] == [GAP]


def test_records_past_the_state_read_first_are_in_flight_and_left_out() -> None:
    records = [record("1", None), record("2", "1")]
    found = verify("default", records, head(None, "1"))
    assert found.ok and found.records == 1


def test_the_verification_answer_lists_problems_and_unused_dates() -> None:
    found = verify("default", [record("1", None, end="3")], head(None, "3"))
    answer = verification_answer(found)
    assert answer["ok"] is True and answer["last_date"] == "3"
    assert answer["unused"][0]["after"] == "1" and answer["unused"][0]["until"] == "3"
    assert answer["unused"][0]["block"]["requester"] == "someone"


# ---------------------------------------------------------------------------- through the service


@pytest.mark.parametrize("block", BLOCKS.values(), ids=BLOCKS.keys())
def test_environments_taking_turns_leave_an_unbroken_record(
    block: Decimal, store: MemoryMintStore, subsystems: dict[str, Subsystem], clock: FakeClock
) -> None:
    """Issue 30's run: environments alternate; blocks end unused; the record is whole."""
    rng = random.Random(30)
    services = [environment(store, subsystems, clock, block) for _ in range(4)]
    for n in range(300):
        clock.now += Decimal(rng.randint(0, 4)) / 1000
        rng.choice(services).mint(request(n, count=rng.choice((1, 1, 2, 7))))
    found = services[0].verify("default")
    assert found.ok, found.problems
    assert found.records == 300 and found.ibis == sum(len(r.dates) for r in store.records)
    assert found.last_date == store.state["default"]
    if block:
        assert found.unused and found.reservations < 300
        assert all(u.reservation.requester and u.recorded for u in found.unused)
    else:
        assert found.unused == [] and found.reservations == 300


def test_each_record_names_its_reservation(
    store: MemoryMintStore, subsystems: dict[str, Subsystem], clock: FakeClock
) -> None:
    service = environment(store, subsystems, clock, BLOCKS["with-blocks"])
    for n in range(6):
        clock.now += Decimal("0.002")
        service.mint(request(n))
    claimers = {r.block_end: r for r in store.records if r.claimed}
    served = [r for r in store.records if not r.claimed]
    assert served and len(claimers) + len(served) == 6
    first = store.records[0]
    assert first.claimed and first.previous_date is None and first.replaced is None
    for record_ in served:  # each names the block a claimer reserved, whose dates hold it
        claimer = claimers[record_.block_end]
        assert claimer.block_end is not None
        assert claimer.first_date < record_.first_date <= record_.last_date <= claimer.block_end
        assert record_answer(record_)["block"] == str(claimer.block_end)
        assert record_answer(record_)["reserved"] is False
    second = next(r for r in store.records[1:] if r.claimed)
    assert second.replaced is not None and second.replaced.request_id == "r-0"


class Killed(BaseException):
    """The execution environment is gone (kill -9): not an error anything handles."""


POINTS = ("before-state-write", "after-state-write", "after-note", "before-record", "after-record")


class Killing:
    """A store whose execution environment dies at ``point`` once it has recorded ``at``
    requests, and after that makes no call at all, as one killed there."""

    def __init__(self, store: Any, point: str, at: int) -> None:
        self.store, self.point, self.at = store, point, at
        self.recorded, self.dead = 0, False

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.store, name)
        when = {"advance": "state-write", "note": "note", "put_record": "record"}.get(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise Killed
            if self.recorded >= self.at and self.point == f"before-{when}":
                self.die()
            answer = method(*args, **kwargs)
            if self.recorded >= self.at and self.point == f"after-{when}":
                self.die()
            self.recorded += name == "put_record"
            return answer

        return call

    def die(self) -> None:
        self.dead = True
        raise Killed


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("block", BLOCKS.values(), ids=BLOCKS.keys())
def test_a_killed_environment_leaves_the_record_whole(
    point: str,
    block: Decimal,
    store: MemoryMintStore,
    subsystems: dict[str, Subsystem],
    clock: FakeClock,
) -> None:
    """kill -9 at each point of a request, with blocks and without: the dates it reserved are
    on the record (unused, by the request that reserved them) and verification passes."""
    rng = random.Random(point)
    services = [environment(store, subsystems, clock, block) for _ in range(2)]
    doomed: MintingService | None = environment(
        Killing(store, point, at=4), subsystems, clock, block
    )
    killed = 0
    for n in range(60):
        clock.now += Decimal(rng.randint(0, 3)) / 1000
        keyed = {"idempotency_key": f"key-{n}"} if n % 2 else {}
        chosen = doomed if n % 3 == 0 and doomed is not None else rng.choice(services)
        try:
            chosen.mint(request(n, **keyed))
        except Killed:
            killed += 1
            doomed = None  # the environment is gone
    assert killed == 1
    found = services[0].verify("default")
    assert found.ok, found.problems
    assert found.last_date == store.state["default"]
    recorded = [d for r in store.records for d in r.dates]
    assert found.ibis == len(recorded) == len(set(recorded))
    if point == "after-state-write":  # the reservation has no record of its own
        [lost] = found.unrecorded
        assert lost.requester == "client-0" and (lost.request_id or "").startswith("r-")
        assert any(not u.recorded and u.reservation == lost for u in found.unused)


def test_a_failed_record_write_leaves_the_block(
    store: MemoryMintStore, subsystems: dict[str, Subsystem], clock: FakeClock
) -> None:
    """After a record write fails, the environment reads the state again and reserves anew,
    rather than serve more requests from a block whose record may be missing."""
    service = environment(store, subsystems, clock, BLOCKS["with-blocks"])
    for n in range(4):
        clock.now += Decimal("0.002")
        service.mint(request(n))
    assert not store.records[-1].claimed  # served from its block
    store.fail_on.add("put_record")
    with pytest.raises(Exception, match="unavailable"):
        service.mint(request(4))
    store.fail_on.clear()
    clock.now += Decimal("0.002")
    service.mint(request(5))
    assert store.records[-1].claimed and store.records[-1].request_id == "r-5"
    found = service.verify("default")
    assert found.ok and found.records == 5


# ---------------------------------------------------------------------------- search and order


def test_the_record_of_an_ibi_in_either_form(
    service: MintingService, clock: FakeClock, subsystems: dict[str, Subsystem]
) -> None:
    for n in range(3):
        clock.now += Decimal(1)
        service.mint(request(n, count=3, idempotency_key=f"k{n}"))
    ibis = [
        i for r in service.store.list_records("default", after=None, limit=9)[0] for i in r.dates
    ]
    wanted = subsystems["default"].ibi(ibis[4])
    for text in (wanted.rep, wanted.ibip, (wanted.ibip or "").lower()):
        found = service.record_of(text or "")
        assert (found.request_id, found.requester, found.idempotency_key) == (
            "r-1",
            "client-1",
            "k1",
        )
    with pytest.raises(NotRecorded, match="no record issued"):
        service.record_of(subsystems["default"].ibi(ibis[4] + Decimal("0.0005")).ibip or "")
    with pytest.raises(UnknownSubsystem, match="not from this service"):
        service.record_of(ELSEWHERE.ibi(ibis[4]).rep or "")
    with pytest.raises(InvalidMintRequest, match="ibi"):
        service.record_of("not an ibi")


def test_the_record_newest_first_and_between_dates(
    service: MintingService, clock: FakeClock
) -> None:
    for n in range(6):
        clock.now += Decimal(1)
        service.mint(request(n))
    dates = [r.first_date for r in service.store.list_records("default", after=None, limit=9)[0]]
    page, more = service.records("default", after=None, limit=2, newest_first=True)
    assert [r.first_date for r in page] == dates[::-1][:2] and more == dates[-2]
    page, more = service.records("default", after=more, limit=9, newest_first=True)
    assert [r.first_date for r in page] == dates[::-1][2:] and more is None
    page, _ = service.records("default", after=None, limit=9, since=dates[1], until=dates[3])
    assert [r.first_date for r in page] == dates[1:4]
    page, _ = service.records(
        "default", after=None, limit=9, since=dates[1], until=dates[3], newest_first=True
    )
    assert [r.first_date for r in page] == dates[3:0:-1]


@pytest.mark.parametrize(
    ("text", "date"),
    [
        ("1795670498.441", Decimal("1795670498.441")),
        ("2026-11-25", Decimal(1795564800)),
        ("2026-11-25T10:00:00Z", Decimal(1795600800)),
        ("2026-11-25T10:00:00.25+01:00", Decimal("1795597200.25")),
    ],
)
def test_a_date_in_a_query_is_epoch_or_iso_8601(text: str, date: Decimal) -> None:
    assert parse_when(text, "since") == date


@pytest.mark.parametrize("text", ["yesterday", "-1", "2026-13-01", "1e9", ""])
def test_a_malformed_date_in_a_query_says_what_to_send(text: str) -> None:
    with pytest.raises(InvalidMintRequest, match="since must be a date: seconds since 1970"):
        parse_when(text, "since")


def test_a_state_write_describes_its_reservation_on_the_state(store: MemoryMintStore) -> None:
    write = StateWrite("default", None, Decimal(5), "1", 1, requester="a", request_id="r1")
    assert store.advance(write) is None
    replaced = store.advance(replace(write, previous=Decimal(5), new=Decimal(9), requester="b"))
    assert replaced == Reservation(None, Decimal(5), "a", "r1", None)
    assert store.head("default") == Reservation(Decimal(5), Decimal(9), "b", "r1", None)
