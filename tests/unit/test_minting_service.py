"""The minting logic over an in-memory store and a fake clock."""

from __future__ import annotations

from decimal import Decimal

import pytest

from functions.minting.service import (
    Contention,
    IdempotencyInProgress,
    IdempotencyKeyReused,
    InvalidMintRequest,
    MintingService,
    MintRequest,
    StoreUnavailable,
    TooEarly,
    UnknownSubsystem,
)
from functions.minting.store import MintRecord, StoreError
from ibi.core.distributor import Granularity, TemporalDistributor
from ibi.core.labels import parse_label
from tests.fakes import FakeClock, MemoryMintStore


def request(**fields: object) -> MintRequest:
    return MintRequest(requester="tester", request_id="r-1", **fields)  # type: ignore[arg-type]


def test_table_6_2_through_the_service(
    service: MintingService, clock: FakeClock, store: MemoryMintStore
) -> None:
    """The 'classic' subsystem (r = 1) issues the suffixes of seed 002, Table 6.2."""
    expected = [
        ("1287587646.394023", "2010/10.20.15.14.06"),
        ("1287588012.2930", "2010/10.20.15.20"),
        ("1287588115.186234", "2010/10.20.15.21"),
        ("1287588115.3462", "2010/10.20.15.21.55"),
        ("1287588115.99623", "2010/10.20.15.21.56"),
        ("1287588116.72", "2010/10.20.15.21.57"),
        ("1287588539.788342", "2010/10.20.15.28"),
    ]
    for at, suffix in expected:
        clock.now = Decimal(at)
        answer = service.mint(request(subsystem="classic")).answer
        assert answer["ibis"][0]["rep"] == f"sid.inpe.br/mtc-m18/{suffix}"
        assert (
            parse_label(answer["ibis"][0]["ibip"]).date
            == parse_label(answer["ibis"][0]["rep"]).date
        )
    assert store.state_writes == len(expected)
    assert len(store.records) == len(expected)


def test_waits_instead_of_dating_a_label_in_the_future(
    service: MintingService, clock: FakeClock
) -> None:
    """Table 6.2 rows 5-6: the request at .99623 gets ...116, so the service waits for it."""
    clock.now = Decimal("1287588115.3462")
    service.mint(request(subsystem="classic"))
    clock.now = Decimal("1287588115.99623")
    answer = service.mint(request(subsystem="classic")).answer
    assert answer["ibis"][0]["date"] == "1287588116"
    assert clock.now >= Decimal("1287588116")
    assert clock.slept and sum(clock.slept) == pytest.approx(0.00377, abs=1e-9)


def test_a_batch_is_one_state_write_and_one_record(
    service: MintingService, store: MemoryMintStore
) -> None:
    answer = service.mint(request(count=1000)).answer
    dates = [Decimal(ibi["date"]) for ibi in answer["ibis"]]
    assert len(dates) == 1000
    assert dates == sorted(set(dates))
    assert store.state_writes == 1
    assert len(store.records) == 1 and len(store.records[0].dates) == 1000
    assert store.state["default"] == dates[-1]


def test_too_far_in_the_future_is_429_with_retry_after(
    service: MintingService, store: MemoryMintStore
) -> None:
    with pytest.raises(TooEarly) as caught:
        service.mint(request(subsystem="classic", count=10))  # 10 s at r = 1 > 5 s bound
    assert caught.value.status == 429
    assert caught.value.retry_after is not None and caught.value.retry_after >= 1
    assert store.state_writes == 0 and not store.records


def test_conflicts_are_retried_then_answered_503(
    service: MintingService, store: MemoryMintStore
) -> None:
    store.conflicts_to_inject = 3
    answer = service.mint(request()).answer
    assert len(answer["ibis"]) == 1
    assert store.state_writes == 1
    store.conflicts_to_inject = 10_000
    with pytest.raises(Contention) as caught:
        service.mint(request())
    assert caught.value.status == 503 and caught.value.retry_after == 1
    assert len(store.records) == 1


def test_a_lost_write_continues_from_the_winners_date(
    service: MintingService, store: MemoryMintStore, clock: FakeClock
) -> None:
    first = service.mint(request()).answer["ibis"][0]
    store.state["default"] = Decimal(first["date"]) + Decimal(1)  # another minter went ahead
    second = service.mint(request()).answer["ibis"][0]
    assert Decimal(second["date"]) > Decimal(first["date"]) + Decimal(1)


def test_idempotency_key_replays_the_same_ibis(
    service: MintingService, store: MemoryMintStore, clock: FakeClock
) -> None:
    first = service.mint(request(count=3, idempotency_key="build-42"))
    clock.now += 10
    again = service.mint(request(count=3, idempotency_key="build-42"))
    assert again.replayed and not first.replayed
    assert again.answer == first.answer
    assert store.state_writes == 1 and len(store.records) == 1
    assert store.records[0].idempotency_key == "build-42"
    other = service.mint(request(count=3, idempotency_key="build-43"))
    assert other.answer != first.answer


def test_idempotency_key_is_scoped_by_requester(service: MintingService) -> None:
    mine = service.mint(request(idempotency_key="k"))
    theirs = service.mint(
        MintRequest(requester="someone-else", request_id="r-2", idempotency_key="k")
    )
    assert not theirs.replayed and theirs.answer != mine.answer


def test_idempotency_key_reused_for_another_request_is_422(service: MintingService) -> None:
    service.mint(request(count=1, idempotency_key="k"))
    with pytest.raises(IdempotencyKeyReused) as caught:
        service.mint(request(count=2, idempotency_key="k"))
    assert caught.value.status == 422


def test_idempotency_key_in_progress_is_409(
    service: MintingService, store: MemoryMintStore, clock: FakeClock
) -> None:
    from hashlib import sha256

    key_id = sha256(b"tester\nk").hexdigest()
    store.claim(key_id, "default:1", now=clock.now, lease_until=clock.now + 60, expires_at=0)
    with pytest.raises(IdempotencyInProgress) as caught:
        service.mint(request(idempotency_key="k"))
    assert caught.value.status == 409
    clock.now += 61  # the first attempt died: its lease runs out and a retry proceeds
    assert not service.mint(request(idempotency_key="k")).replayed


def test_a_failed_mint_releases_its_key(service: MintingService, store: MemoryMintStore) -> None:
    store.fail_on.add("put_record")
    with pytest.raises(StoreUnavailable):
        service.mint(request(idempotency_key="k"))
    assert not store.claims
    store.fail_on.clear()
    assert len(service.mint(request(idempotency_key="k")).answer["ibis"]) == 1


def test_a_key_never_mints_twice_when_the_answer_was_lost(
    service: MintingService, store: MemoryMintStore, clock: FakeClock
) -> None:
    """The Lambda died after the record, before completing the key: a retry gets those IBIs."""
    store.fail_on.add("complete")
    with pytest.raises(StoreUnavailable):
        service.mint(request(count=2, idempotency_key="k"))
    store.fail_on.clear()
    [claim] = store.claims.values()
    assert claim.status == "in_progress" and claim.minted == ("default", store.records[0].dates[0])
    with pytest.raises(IdempotencyInProgress):  # its lease has not run out: it may still answer
        service.mint(request(count=2, idempotency_key="k"))
    clock.now += 66
    again = service.mint(request(count=2, idempotency_key="k"))
    assert again.replayed
    assert [Decimal(ibi["date"]) for ibi in again.answer["ibis"]] == list(store.records[0].dates)
    assert store.state_writes == 1 and len(store.records) == 1
    assert service.mint(request(count=2, idempotency_key="k")).answer == again.answer


def test_a_key_whose_dates_were_never_recorded_mints_again(
    service: MintingService, store: MemoryMintStore, clock: FakeClock
) -> None:
    """Died between the state write and the record: those dates were never answered (a gap)."""
    from hashlib import sha256

    key_id = sha256(b"tester\nk").hexdigest()
    store.claim(key_id, "default:1", now=clock.now, lease_until=clock.now + 65, expires_at=0)
    store.note(key_id, "default", clock.now)
    store.state["default"] = clock.now  # the state write won, then the attempt died
    with pytest.raises(IdempotencyInProgress):
        service.mint(request(idempotency_key="k"))
    clock.now += 66
    result = service.mint(request(idempotency_key="k"))
    assert not result.replayed and Decimal(result.answer["ibis"][0]["date"]) > clock.now - 66
    assert [r.idempotency_key for r in store.records] == ["k"]
    assert store.claims[key_id].status == "complete" and store.claims[key_id].minted is not None


def test_a_failed_attempt_with_a_record_keeps_its_key(
    service: MintingService, store: MemoryMintStore
) -> None:
    """The record was written but the attempt failed later: the key keeps those IBIs."""
    original = store.put_record

    def recorded_then_failed(record: MintRecord) -> None:
        original(record)
        raise StoreError("put_item: timed out after the write", throttled=False)

    store.put_record = recorded_then_failed  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        service.mint(request(idempotency_key="k"))
    store.put_record = original  # type: ignore[method-assign]
    again = service.mint(request(idempotency_key="k"))
    assert again.replayed and store.state_writes == 1 and len(store.records) == 1


def test_store_failures_are_503(service: MintingService, store: MemoryMintStore) -> None:
    store.fail_on.add("last_date")
    with pytest.raises(StoreUnavailable) as caught:
        service.mint(request())
    assert caught.value.status == 503


def test_unknown_subsystem_names_the_known_ones(service: MintingService) -> None:
    with pytest.raises(UnknownSubsystem, match="classic"):
        service.mint(request(subsystem="nope"))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "JSON object"),
        ("count", "JSON object"),
        (None, "JSON object"),  # a `null` body: the docs refuse it
        ({"count": 10**4000}, "1 to 1000"),
        ({"count": 0}, "1 to 1000"),
        ({"count": 1001}, "1 to 1000"),
        ({"count": "3"}, "1 to 1000"),
        ({"count": True}, "1 to 1000"),
        ({"count": 1.5}, "1 to 1000"),
        ({"subsystem": 7}, "string"),
        ({"cuont": 2}, "unknown field"),
    ],
)
def test_bad_requests_say_what_to_fix(body: object, message: str) -> None:
    with pytest.raises(InvalidMintRequest, match=message):
        MintRequest.from_body(body, requester="t", request_id="r", idempotency_key=None)


@pytest.mark.parametrize("key", ["", "a b", "x" * 256, "naïve", "semi;colon"])
def test_bad_idempotency_keys(key: str) -> None:
    with pytest.raises(InvalidMintRequest, match="Idempotency-Key"):
        MintRequest.from_body({}, requester="t", request_id="r", idempotency_key=key)


def test_records_list_in_date_order(service: MintingService) -> None:
    for _ in range(5):
        service.mint(request(count=2))
    records, more = service.records(None, after=None, limit=3)
    assert len(records) == 3 and more == records[-1].first_date
    rest, none = service.records(None, after=more, limit=3)
    assert len(rest) == 2 and none is None
    dates = [d for r in records + rest for d in r.dates]
    assert dates == sorted(set(dates)) and len(dates) == 10


# ---------------------------------------------------------------------------- blocks of dates


def block_services(
    store: MemoryMintStore, subsystems: dict[str, object], clock: FakeClock, n: int
) -> list[MintingService]:
    """``n`` execution environments sharing one store, each with its own block."""
    return [
        MintingService(
            store,
            subsystems,  # type: ignore[arg-type]
            default_subsystem="default",
            clock=clock,
            sleep=clock.sleep,
            block_seconds=Decimal("0.05"),
        )
        for _ in range(n)
    ]


@pytest.mark.parametrize("environments", [2, 3, 4])
def test_environments_sharing_a_subsystem_rarely_write_and_never_repeat(
    environments: int, store: MemoryMintStore, subsystems: dict[str, object], clock: FakeClock
) -> None:
    """Seeded bursts over 2-4 environments: each date once, none early, fewer writes."""
    import random

    rng = random.Random(environments)
    services = block_services(store, subsystems, clock, environments)
    answered: list[Decimal] = []
    requests = 0
    for _ in range(40):
        service = rng.choice(services)
        for _ in range(rng.randint(5, 15)):
            clock.now += Decimal(rng.randint(1, 3)) / 1000
            started = clock.now
            dates = [Decimal(i["date"]) for i in service.mint(request()).answer["ibis"]]
            requests += 1
            assert all(date <= clock.now for date in dates)  # never issued before its date
            assert all(date > prior for date in dates for prior in answered)  # after all earlier
            assert started <= clock.now
            answered += dates
    assert len(set(answered)) == len(answered) == requests
    assert store.state_writes / requests <= 0.5  # one write per request before blocks
    assert sum(s.stats.state_writes for s in services) / requests <= 1.2
    assert store.state["default"] >= answered[-1]
    recorded = sorted(d for r in store.records for d in r.dates)
    assert recorded == answered


def test_a_request_from_the_block_writes_no_state_but_is_recorded(
    store: MemoryMintStore, subsystems: dict[str, object], clock: FakeClock
) -> None:
    [service] = block_services(store, subsystems, clock, 1)
    for _ in range(10):
        clock.now += Decimal("0.002")
        service.mint(request())
    assert store.state_writes < 4 and len(store.records) == 10
    assert service.stats.requests == 10 and service.stats.blocks == store.state_writes
    for record in store.records:  # Algorithm 4 from previous_date at recorded_at gives the dates
        again = TemporalDistributor(Granularity("0.001"), record.previous_date)
        assert again.distribute(record.recorded_at).date_for_suffix == record.dates[0]


def test_a_restarted_environment_leaves_a_gap_never_a_duplicate(
    store: MemoryMintStore, subsystems: dict[str, object], clock: FakeClock
) -> None:
    first, restarted = block_services(store, subsystems, clock, 2)
    before = []
    for _ in range(5):
        clock.now += Decimal("0.002")
        before.append(Decimal(first.mint(request()).answer["ibis"][0]["date"]))
    reserved = store.state["default"]
    assert reserved > before[-1]  # the rest of the block is reserved, not handed out
    after = Decimal(restarted.mint(request()).answer["ibis"][0]["date"])
    assert after > reserved  # the lost block is a gap
    later = Decimal(first.mint(request()).answer["ibis"][0]["date"])
    assert later > after and len({*before, after, later}) == 7


def test_a_lone_environment_with_no_block_matches_algorithm_4(
    store: MemoryMintStore, clock: FakeClock, service: MintingService
) -> None:
    """block_seconds 0: the state is the last date-for-suffix itself, as Algorithm 4 keeps it."""
    for _ in range(5):
        clock.now += Decimal("0.0004")
        date = Decimal(service.mint(request()).answer["ibis"][0]["date"])
        assert store.state["default"] == date


def test_a_key_replays_ibis_handed_out_from_a_block(
    store: MemoryMintStore, subsystems: dict[str, object], clock: FakeClock
) -> None:
    """No state write, yet the dates are noted before the record: a lost answer replays."""
    [service] = block_services(store, subsystems, clock, 1)
    for _ in range(3):
        clock.now += Decimal("0.002")
        service.mint(request())
    writes = store.state_writes
    store.fail_on.add("complete")
    clock.now += Decimal("0.002")
    with pytest.raises(StoreUnavailable):
        service.mint(request(idempotency_key="k"))
    store.fail_on.clear()
    assert store.state_writes == writes  # it came from the block
    clock.now += 70
    again = service.mint(request(idempotency_key="k"))
    assert again.replayed
    assert [Decimal(i["date"]) for i in again.answer["ibis"]] == list(store.records[-1].dates)


def _second_environment(service: MintingService, store: MemoryMintStore) -> MintingService:
    return MintingService(
        store,
        service.subsystems,
        default_subsystem="default",
        clock=service._clock,
        sleep=service._sleep,
        max_wait=Decimal(5),
    )


def test_a_mint_writes_the_state_without_reading_it_first(
    service: MintingService, clock: FakeClock, store: MemoryMintStore
) -> None:
    """Issue 14: after an environment's first request, a mint is one conditional write (the
    state earlier than its first date) and the record; the state is never read again while
    no other environment wins a write."""
    reads: list[str] = []
    real = store.last_date
    store.last_date = lambda name: reads.append(name) or real(name)  # type: ignore[method-assign]
    for step in range(5):
        clock.now = Decimal("1287588115") + step
        service.mint(request())
    assert reads == ["default"] and store.state_writes == 5


def test_two_environments_interleaved_write_once_each_and_chain_their_records(
    service: MintingService, clock: FakeClock, store: MemoryMintStore
) -> None:
    """Each environment computes from the last date it knows, which the other has passed: its
    write still wins when its date is later than the state, with Algorithm 4's own date (the
    one computed from the true state), and the record names the date the write replaced."""
    other = _second_environment(service, store)
    reads: list[str] = []
    real = store.last_date
    store.last_date = lambda name: reads.append(name) or real(name)  # type: ignore[method-assign]
    answers = []
    for step in range(10):
        clock.now = Decimal("1287588115") + Decimal(step) / 10
        answers.append((other if step % 2 else service).mint(request()).answer)
    assert store.state_writes == 10  # each environment's stale date was still earlier
    assert service.stats.state_writes + other.stats.state_writes == 10  # none lost
    assert len(reads) == 2  # each environment's first request only
    dates = [parse_label(a["ibis"][0]["rep"]).date for a in answers]
    assert dates == sorted(set(dates))  # strictly increasing, never twice
    replay = TemporalDistributor(Granularity("0.001"), None)
    for record in sorted(store.records, key=lambda r: r.first_date):
        assert record.previous_date == replay.last_date  # the chain of commits
        assert replay.distribute(record.recorded_at).date_for_suffix == record.first_date


def test_a_date_not_after_the_state_loses_and_retries_from_the_winner(
    service: MintingService, clock: FakeClock, store: MemoryMintStore
) -> None:
    other = _second_environment(service, store)
    clock.now = Decimal("1287588115.5")
    first = service.mint(request()).answer
    other.mint(request())  # other learns the state at its first request, then writes
    clock.now = Decimal("1287588115.5")  # the same instant: service's date would repeat
    second = service.mint(request()).answer
    dates = [parse_label(a["ibis"][0]["rep"]).date for a in (first, second)]
    assert dates[1] > dates[0] and len(store.records) == 3
    assert len({r.first_date for r in store.records}) == 3
