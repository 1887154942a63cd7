"""The temporal distributor (spec §1.3, seed 002 §6 Algorithm 4)."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from fractions import Fraction

import pytest

from ibi.core.distributor import (
    Distribution,
    Granularity,
    TemporalDistributor,
    next_date_for_suffix,
)
from ibi.core.errors import InvalidGranularity, InvalidInput
from ibi.core.labels import rep_suffix

from .test_vectors import TABLE_6_2

LADDER = ["60", "1", "0.1", "0.01", "0.001", "0.000001"]


def floor_to(value: Fraction, step: Fraction) -> Fraction:
    """``value`` rounded down to a multiple of ``step``."""
    return step * math.floor(value / step)


# G = {60, 1, 0.1, 0.01, ...}, down to the finest granularity the project accepts (1e-9)
G = [Fraction(60), *(Fraction(1, 10**k) for k in range(10))]


def reference(current: Fraction, last: Fraction | None, r: Fraction) -> tuple[Fraction, Fraction]:
    """(creation date, date for suffix) from the seed's definitions rather than its loop.

    Creation date (lines 1-5): t'_i = max(t(previous) + r, t_i(r)) on the grid of r, the
    previous date first rounded down to the grid of r (line 4, r may have changed).
    Date for suffix: t'_i rounded at r(t'_i, t(previous)) = max{g in G : t'_i(g) > t(previous)}.
    """
    rounded = floor_to(current, r)
    if last is None:
        last = rounded - r
    creation = max(floor_to(last, r) + r, rounded)
    coarsest = max(g for g in G if floor_to(creation, g) > last)
    return creation, floor_to(creation, coarsest)


# ---------------------------------------------------------------------------- granularity


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (60, "60"),
        ("60", "60"),
        ("60.0", "60"),
        (Decimal("6E+1"), "60"),
        (1, "1"),
        ("1.000", "1"),
        (Decimal(1), "1"),
        ("0.1", "0.1"),
        (0.1, "0.1"),
        (Decimal("0.01"), "0.01"),
        ("0.001", "0.001"),
        (0.001, "0.001"),
        (1e-6, "0.000001"),
        ("1E-9", "0.000000001"),
    ],
)
def test_granularity_accepts(value: object, expected: str) -> None:
    granularity = Granularity(value)  # type: ignore[arg-type]
    assert str(granularity) == expected
    assert granularity.value == Decimal(expected)
    assert granularity == Granularity(expected)
    assert hash(granularity) == hash(Granularity(expected))


@pytest.mark.parametrize(
    "value",
    [0, "0", -1, "-0.1", 2, 0.5, "0.5", 30, 10, 100, 120, "0.2", "0.25", "1e-10", "abc", "", "NaN",
     "Infinity", "-Infinity", None, True],
)  # fmt: skip
def test_granularity_rejects(value: object) -> None:
    with pytest.raises(InvalidGranularity) as error:
        Granularity(value)  # type: ignore[arg-type]
    assert error.value.part == "granularity"
    assert isinstance(error.value, InvalidInput)


def test_granularity_equality() -> None:
    assert Granularity(1) != Granularity("0.1")
    assert Granularity(60) != 60
    assert len({Granularity(1), Granularity("1.0"), Granularity(60)}) == 2


# ---------------------------------------------------------------------------- Table 6.2


def test_table_6_2_in_one_run() -> None:
    distributor = TemporalDistributor(Granularity(1))
    requests = [(Decimal(row[0]), None) for row in TABLE_6_2]
    answers = [
        (distribution.date_for_suffix, rep_suffix(distribution.date_for_suffix))
        for _, distribution in distributor.replay(requests)
    ]
    assert answers == [(Decimal(row[3]), row[4]) for row in TABLE_6_2]


@pytest.mark.parametrize(
    ("row", "delay"),
    [(0, "0"), (1, "0"), (2, "0"), (3, "0"), (4, "0.00377"), (5, "0.28"), (6, "0")],
)
def test_table_6_2_delays(row: int, delay: str) -> None:
    """Items g and f wait for the next second (seed 002, comments on Table 6.2)."""
    distributor = TemporalDistributor(Granularity(1))
    for request, *_ in TABLE_6_2[:row]:
        distributor.distribute(Decimal(request))
    current = Decimal(TABLE_6_2[row][0])
    assert distributor.distribute(current).delay(current) == Decimal(delay)


def test_table_6_2_from_a_stored_state() -> None:
    """The state may come from storage: continuing from item c's date gives g's and f's."""
    distributor = TemporalDistributor(Granularity(1), last_date=Decimal(1287588115))
    assert distributor.distribute(Decimal("1287588115.99623")).date_for_suffix == 1287588116
    assert distributor.distribute(Decimal("1287588116.72")).date_for_suffix == 1287588117
    assert distributor.last_date == 1287588117


# ---------------------------------------------------------------------------- first request


@pytest.mark.parametrize("r", LADDER)
def test_first_date_is_the_request_rounded_down(r: str) -> None:
    current = Decimal("1287588115.1862349")
    distribution = next_date_for_suffix(current, None, Granularity(r))
    expected = Decimal(r) * (current // Decimal(r))
    assert distribution.creation_date == distribution.date_for_suffix == expected
    assert distribution.delay(current) == 0


# ---------------------------------------------------------------------------- granularity changes


def test_granularity_changes_mid_sequence() -> None:
    """r = 1, then 0.01 (twice at one instant), then 60, then 1 (twice at one instant)."""
    distributor = TemporalDistributor(Granularity(1))
    steps = [
        ("1287587646.394023", None, "1287587646", "1287587646", "2010/10.20.15.14.06", "0"),
        ("1287587646.5", "0.01", "1287587646.5", "1287587646.5", "2010/10.20.15.14.06.5", "0"),
        ("1287587646.5", None, "1287587646.51", "1287587646.51", "2010/10.20.15.14.06.51", "0.01"),
        # line 4 rounds the last date down to the minute; line 5 moves on by a minute
        ("1287587646.6", "60", "1287587700", "1287587700", "2010/10.20.15.15", "53.4"),
        ("1287587700.2", "1", "1287587701", "1287587701", "2010/10.20.15.15.01", "0.8"),
        ("1287587700.2", None, "1287587702", "1287587702", "2010/10.20.15.15.02", "1.8"),
    ]
    requests = [(Decimal(c), Granularity(r) if r else None) for c, r, *_ in steps]
    for (current, distribution), step in zip(distributor.replay(requests), steps, strict=True):
        _, _, creation, date, suffix, delay = step
        assert distribution.creation_date == Decimal(creation)
        assert distribution.date_for_suffix == Decimal(date)
        assert rep_suffix(distribution.date_for_suffix) == suffix
        assert distribution.delay(current) == Decimal(delay)
    assert distributor.granularity == Granularity(1)


def test_coarser_granularity_after_a_fine_date() -> None:
    """From 15:21:55.047 with r = 60 the next date is the next minute, not 15:21."""
    distribution = next_date_for_suffix(
        Decimal("1287588115.3"), Decimal("1287588115.047"), Granularity(60)
    )
    assert distribution.date_for_suffix == 1287588120
    assert rep_suffix(distribution.date_for_suffix) == "2010/10.20.15.22"


def test_finer_granularity_keeps_the_short_date() -> None:
    """With r = 0.001 a request well after the last date still gets a minute label."""
    distribution = next_date_for_suffix(
        Decimal("1287588539.788342"), Decimal(1287588117), Granularity("0.001")
    )
    assert distribution.creation_date == Decimal("1287588539.788")
    assert distribution.date_for_suffix == 1287588480


def test_replay_is_lazy_and_none_keeps_the_granularity() -> None:
    distributor = TemporalDistributor(Granularity(1))
    runs = distributor.replay([(Decimal(10**9), Granularity("0.1")), (Decimal(10**9), None)])
    assert distributor.last_date is None
    assert next(runs)[1].date_for_suffix == 10**9
    assert distributor.granularity == Granularity("0.1")
    assert next(runs)[1].date_for_suffix == Decimal("1000000000.1")
    assert distributor.granularity == Granularity("0.1")


# ---------------------------------------------------------------------------- batches


def test_reserve_a_batch_at_one_instant() -> None:
    current = Decimal("1287588115.186234")
    distributor = TemporalDistributor(Granularity(1))
    batch = distributor.reserve(current, 5)
    assert [d.date_for_suffix for d in batch] == [1287588115 + k for k in range(5)]
    assert [d.delay(current) for d in batch] == [
        Decimal(0),
        *(Decimal(k) - Decimal("0.186234") for k in range(1, 5)),
    ]
    assert distributor.last_date == 1287588119


def test_reserve_with_a_fine_granularity() -> None:
    distributor = TemporalDistributor(Granularity("0.001"))
    batch = distributor.reserve(Decimal("1287588115.186234"), 4)
    assert [rep_suffix(d.date_for_suffix) for d in batch] == [
        "2010/10.20.15.21.55.186",
        "2010/10.20.15.21.55.187",
        "2010/10.20.15.21.55.188",
        "2010/10.20.15.21.55.189",
    ]


def test_reserve_starts_with_the_shortest_dates() -> None:
    """After a minute label, a batch gets the next minute first, then seconds."""
    distributor = TemporalDistributor(Granularity(1), last_date=Decimal(1287588000))
    batch = distributor.reserve(Decimal("1287588119.5"), 3)
    assert [rep_suffix(d.date_for_suffix) for d in batch] == [
        "2010/10.20.15.21",
        "2010/10.20.15.21.59",
        "2010/10.20.15.22",
    ]


def test_reserve_equals_successive_runs() -> None:
    current = Decimal("1287588115.3462")
    one = TemporalDistributor(Granularity("0.1"), last_date=Decimal(1287588060))
    other = TemporalDistributor(Granularity("0.1"), last_date=Decimal(1287588060))
    assert one.reserve(current, 7) == [other.distribute(current) for _ in range(7)]


def test_reserve_nothing() -> None:
    distributor = TemporalDistributor(Granularity(1), last_date=Decimal(5))
    assert distributor.reserve(Decimal(1287588115), 0) == []
    assert distributor.last_date == 5


# ---------------------------------------------------------------------------- the delay


@pytest.mark.parametrize(
    ("creation", "current", "delay"),
    [("10", "9.25", "0.75"), ("10", "10", "0"), ("10", "10.5", "0"), ("60", "0", "60")],
)
def test_delay_is_never_negative(creation: str, current: str, delay: str) -> None:
    distribution = Distribution(creation_date=Decimal(creation), date_for_suffix=Decimal(creation))
    assert distribution.delay(Decimal(current)) == Decimal(delay)


def test_a_clock_going_back_means_waiting() -> None:
    """Dates never go back with the clock: the caller waits until the creation date."""
    distributor = TemporalDistributor(Granularity(1), last_date=Decimal(1287588117))
    current = Decimal("1287588100.5")
    distribution = distributor.distribute(current)
    assert distribution.date_for_suffix == distribution.creation_date == 1287588118
    assert distribution.delay(current) == Decimal("17.5")


# ---------------------------------------------------------------------------- exactness


def test_many_digits_are_not_rounded() -> None:
    """INT(current/r) is exact: 31 significant digits do not round up to the next second."""
    current = Decimal("1287587646.999999999999999999999")
    distribution = next_date_for_suffix(current, None, Granularity(1))
    assert distribution.date_for_suffix == 1287587646
    assert distribution.delay(current) == 0


@pytest.mark.parametrize("r", LADDER)
def test_outputs_are_decimals_without_float_noise(r: str) -> None:
    distributor = TemporalDistributor(Granularity(r))
    for distribution in distributor.reserve(Decimal("1287588115.1"), 30):
        assert isinstance(distribution.date_for_suffix, Decimal)
        assert distribution.date_for_suffix % Decimal(r) == 0


# ---------------------------------------------------------------------------- invariants


def _walk(seed: int, steps: int) -> list[tuple[Decimal, Granularity | None]]:
    """A request sequence: clock ticks, bursts, equal times, clock going back, big jumps."""
    rng = random.Random(seed)
    current = Decimal(rng.randrange(807235200, 4102444800)) + Decimal(rng.randrange(10**6)) / 10**6
    requests: list[tuple[Decimal, Granularity | None]] = []
    for _ in range(steps):
        move = rng.random()
        if move < 0.3:
            delta = Decimal(0)
        elif move < 0.7:
            delta = Decimal(rng.randrange(2 * 10**6)) / 10**6
        elif move < 0.8:
            delta = -Decimal(rng.randrange(120 * 10**3)) / 10**3
        elif move < 0.9:
            delta = Decimal(rng.randrange(1, 200))
        else:
            delta = Decimal(rng.randrange(10**8))
        current = max(current + delta, Decimal(0))
        change = Granularity(rng.choice(LADDER)) if rng.random() < 0.2 else None
        requests.append((current, change))
    return requests


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("start", ["60", "1", "0.001"])
def test_algorithm_4_invariants(seed: int, start: str) -> None:
    distributor = TemporalDistributor(Granularity(start))
    previous: Decimal | None = None
    for current, distribution in distributor.replay(_walk(seed, 150)):
        r = distributor.granularity.value
        date = distribution.date_for_suffix
        creation = distribution.creation_date
        rounded = r * (current // r)
        # line 5: never before the rounded request, always after the rounded last date
        assert creation >= rounded
        if previous is not None:
            assert creation >= r * (previous // r) + r
            assert date > previous  # strictly increasing
        # lines 8-16: a rounding of the creation date, never later than it
        assert date <= creation
        assert date % r == 0
        assert creation % r == 0
        # line 6: the wait is at most r unless the clock went back
        delay = distribution.delay(current)
        assert delay >= 0
        if previous is None or current >= previous:
            assert delay <= r
        # the seed's definition, computed independently with fractions
        expected = reference(
            Fraction(current), None if previous is None else Fraction(previous), Fraction(r)
        )
        assert (Fraction(creation), Fraction(date)) == expected
        assert distributor.last_date == date
        previous = date
