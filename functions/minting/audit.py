"""The mint record as an audit trail: a subsystem's record checked date by date.

Pure: it reads records and the state's latest reservation, nothing else. What it checks is
what docs/minting-api.md promises an auditor:

- every state write reserved the dates after the state it replaced up to the one it wrote
  (a :class:`Reservation`); the reservations chain from the subsystem's first date to the
  state's last date with no gap and no overlap. A reservation is on the record through the
  record of the request that made it (``claimed``), or, when that request was killed before
  its record was written, through the next write's record (``replaced``) or the state item
  (the latest one): then it is *unrecorded*, and its dates were never answered;
- every record's dates lie in the reservation it names, after the date it continued from,
  and no date is issued twice;
- every date of a reservation no record issued is *unused* (reserved, never answered).

A gap, an overlap or a date issued twice is a problem; unused and unrecorded dates are not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from functions.minting.store import MintRecord, Reservation
from ibi.core.dates import format_date

GAP, OVERLAP, TWICE = "gap", "overlap", "issued twice"


@dataclass(frozen=True, slots=True)
class Problem:
    """Dates after ``start`` up to ``end`` the record cannot account for (or accounts twice)."""

    kind: str  # GAP, OVERLAP or TWICE
    start: Decimal | None
    end: Decimal
    message: str


@dataclass(frozen=True, slots=True)
class Unused:
    """Dates after ``start`` up to ``end`` reserved by ``reservation`` and never issued."""

    start: Decimal | None
    end: Decimal
    reservation: Reservation
    recorded: bool  # False: the request that reserved them was killed before its record


@dataclass(slots=True)
class Verification:
    subsystem: str
    last_date: Decimal | None  # the state's, when the walk began
    records: int = 0
    ibis: int = 0
    reservations: int = 0
    unrecorded: list[Reservation] = field(default_factory=list)
    unused: list[Unused] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(subsystem: str, records: Iterable[MintRecord], head: Reservation | None) -> Verification:
    """Walk ``records`` (in order of first date) up to the state's latest reservation ``head``
    (read before them: records past it are requests still in flight, left out)."""
    last = head.end if head is not None else None
    found = Verification(subsystem, last)
    mints = [r for r in records if last is not None and r.last_date <= last]
    found.records = len(mints)
    reservations = _reservations(mints, head, found)
    found.reservations = len(reservations)
    _check_chain(reservations, last, found)
    _check_mints(mints, reservations, found)
    return found


def _reservation_of(record: MintRecord) -> Reservation:
    """The reservation a record made (a record from before reservations were recorded made
    its own, up to its last date)."""
    end = record.block_end if record.block_end is not None else record.last_date
    return Reservation(
        record.previous_date, end, record.requester, record.request_id, record.recorded_at
    )


def _block_end(record: MintRecord) -> Decimal:
    return record.block_end if record.block_end is not None else record.last_date


def _reservations(
    mints: list[MintRecord], head: Reservation | None, found: Verification
) -> dict[Decimal, tuple[Reservation, bool]]:
    """Every reservation on the record, by its end: (it, whether its own record made it)."""
    made: dict[Decimal, tuple[Reservation, bool]] = {}
    described: dict[Decimal, Reservation] = {}
    for record in mints:
        if record.claimed or record.block_end is None:
            reservation = _reservation_of(record)
            if reservation.end in made:
                found.problems.append(
                    Problem(
                        OVERLAP,
                        reservation.start,
                        reservation.end,
                        f"requests {made[reservation.end][0].request_id} and "
                        f"{record.request_id} both reserved dates up to {_text(reservation.end)}",
                    )
                )
                continue
            made[reservation.end] = (reservation, True)
        if record.replaced is not None and _described(record.replaced):
            described.setdefault(record.replaced.end, record.replaced)
    if head is not None and _described(head):
        described.setdefault(head.end, head)
    for end, reservation in described.items():
        if end not in made:
            made[end] = (reservation, False)
            found.unrecorded.append(reservation)
    return dict(sorted(made.items()))


def _described(reservation: Reservation) -> bool:
    """Whether the state described it (a state item older than the record of reservations
    names no one: such a reservation accounts for nothing)."""
    return bool(reservation.requester)


def _check_chain(
    reservations: dict[Decimal, tuple[Reservation, bool]],
    last: Decimal | None,
    found: Verification,
) -> None:
    """The reservations follow each other from the subsystem's first date to ``last``."""
    reached: Decimal | None = None
    for reservation, _ in reservations.values():
        start = reservation.start
        if start != reached:
            if start is not None and (reached is None or start > reached):
                found.problems.append(
                    Problem(
                        GAP,
                        reached,
                        start,
                        f"no reservation holds the dates after {_text(reached)} up to "
                        f"{_text(start)}: dates may have been issued outside the record",
                    )
                )
            else:
                assert reached is not None  # (start is before it)
                found.problems.append(
                    Problem(
                        OVERLAP,
                        start,
                        reached,
                        f"the reservation up to {_text(reservation.end)} by request "
                        f"{reservation.request_id} begins after {_text(start)}, inside the "
                        f"one before it (up to {_text(reached)})",
                    )
                )
        reached = reservation.end if reached is None else max(reached, reservation.end)
    if last is not None and reached != last:
        found.problems.append(
            Problem(
                GAP,
                reached,
                last,
                f"no reservation holds the dates after {_text(reached)} up to the state's "
                f"last date {_text(last)}",
            )
        )


def _check_mints(
    mints: list[MintRecord],
    reservations: dict[Decimal, tuple[Reservation, bool]],
    found: Verification,
) -> None:
    """Each record's dates: in its reservation, after what it continued from, never twice;
    what its reservation holds besides is unused."""
    seen: set[Decimal] = set()
    reached: dict[Decimal, Decimal | None] = {
        end: reservation.start for end, (reservation, _) in reservations.items()
    }
    previous: MintRecord | None = None
    for record in mints:
        _check_order(record, previous, seen, found)
        previous = record
        end = _block_end(record)
        held = reservations.get(end)
        if held is None:
            found.problems.append(
                Problem(
                    OVERLAP,
                    record.previous_date,
                    record.last_date,
                    f"request {record.request_id} names a reservation up to {_text(end)} "
                    "that no state write made",
                )
            )
            continue
        reservation, _ = held
        after = reached[end]
        inside = reservation.start is None or record.first_date > reservation.start
        if not inside or record.last_date > end:
            found.problems.append(
                Problem(
                    OVERLAP,
                    record.first_date,
                    record.last_date,
                    f"request {record.request_id}'s dates are not all in its reservation "
                    f"(after {_text(reservation.start)} up to {_text(end)})",
                )
            )
        elif record.previous_date != after and (
            record.previous_date is None or (after is not None and record.previous_date < after)
        ):
            found.problems.append(
                Problem(
                    OVERLAP,
                    record.previous_date,
                    after or record.first_date,
                    f"request {record.request_id} continued from {_text(record.previous_date)}, "
                    f"before a date issued earlier in its reservation ({_text(after)})",
                )
            )
        elif record.previous_date != after:
            _unused(found, after, record.previous_date, held)  # (a record lost: see _mint)
        reached[end] = record.last_date
    for end, held in reservations.items():
        if reached[end] != end:
            _unused(found, reached[end], end, held)


def _check_order(
    record: MintRecord, previous: MintRecord | None, seen: set[Decimal], found: Verification
) -> None:
    """A record's dates: none issued before (``seen``, updated), none inside the previous
    record's."""
    found.ibis += len(record.dates)
    counts = Counter(record.dates)
    twice = sorted(d for d in counts if d in seen or counts[d] > 1)
    seen.update(counts)
    if twice:
        found.problems.append(
            Problem(
                TWICE,
                twice[0],
                twice[-1],
                f"request {record.request_id} was issued {len(twice)} date(s) issued "
                f"before, from {_text(twice[0])}",
            )
        )
    elif previous is not None and record.first_date <= previous.last_date:
        found.problems.append(
            Problem(
                OVERLAP,
                record.first_date,
                previous.last_date,
                f"request {record.request_id}'s dates begin at {_text(record.first_date)}, "
                f"inside request {previous.request_id}'s (up to {_text(previous.last_date)})",
            )
        )


def _unused(
    found: Verification,
    start: Decimal | None,
    end: Decimal | None,
    held: tuple[Reservation, bool],
) -> None:
    if end is not None:
        found.unused.append(Unused(start, end, held[0], held[1]))


def _text(date: Decimal | None) -> str:
    return "the subsystem's first date" if date is None else format_date(date)
