"""Minting: hands out IBIs from an identification subsystem, never the same one twice.

Pure domain logic: the store, the clock and the sleeper are passed in.
"""

from __future__ import annotations

import calendar
import hashlib
import math
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from functions.minting.audit import Verification, verify
from functions.minting.settings import MAX_COUNT
from functions.minting.store import (
    IdempotencyClaim,
    MintRecord,
    MintStore,
    Reservation,
    StateConflict,
    StateWrite,
    StoreError,
)
from functions.shared.dynamo import full_disk
from ibi.core.dates import format_date, iso_date, parse_date
from ibi.core.distributor import Distribution, TemporalDistributor
from ibi.core.errors import InvalidInput
from ibi.core.labels import ibip_suffix, parse_label, rep_suffix
from ibi.core.subsystem import Subsystem
from ibi.defaults import IDEMPOTENCY_TTL_SECONDS

Clock = Callable[[], Decimal]
Sleeper = Callable[[float], None]

_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/+=@")
MAX_KEY_LENGTH = 255


# ---------------------------------------------------------------------------- errors a caller meets


class MintingError(Exception):
    """An answer other than success; ``status`` is the HTTP status it maps to."""

    status = 400
    retry_after: int | None = None

    def __init_subclass__(cls, *, status: int = 400, retry_after: int | None = None) -> None:
        super().__init_subclass__()
        cls.status, cls.retry_after = status, retry_after


class InvalidMintRequest(MintingError, status=400):
    """The body, the query or the key is malformed."""


class UnknownSubsystem(MintingError, status=404):
    """No identification subsystem has that name."""


class NotRecorded(MintingError, status=404):
    """No record of this service issued that IBI."""


class IdempotencyKeyReused(MintingError, status=422):
    """The key was used before for a different request."""


class IdempotencyInProgress(MintingError, status=409, retry_after=1):
    """A request with the key is still being served."""


class TooEarly(MintingError, status=429):
    """The labels would be dated further in the future than the service may wait."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Contention(MintingError, status=503, retry_after=1):
    """Too many conflicting writes on the subsystem."""


class StoreUnavailable(MintingError, status=503, retry_after=1):
    """The store is throttled or unreachable."""


# ---------------------------------------------------------------------------- requests and answers


@dataclass(frozen=True, slots=True)
class MintRequest:
    requester: str
    request_id: str
    subsystem: str | None = None
    count: int = 1
    idempotency_key: str | None = None

    @classmethod
    def from_body(
        cls,
        body: Any,
        *,
        requester: str,
        request_id: str,
        idempotency_key: str | None,
    ) -> MintRequest:
        """The request in ``body``: a JSON object (``{}`` for an empty body), never ``null``."""
        if not isinstance(body, dict):
            raise InvalidMintRequest('the body must be a JSON object (or empty), e.g. {"count": 1}')
        unknown = set(body) - {"subsystem", "count"}
        if unknown:
            raise InvalidMintRequest(
                f"unknown field(s) {sorted(unknown)}: a mint request has only "
                '"subsystem" (a name) and "count" (1-1000)'
            )
        subsystem = body.get("subsystem")
        if subsystem is not None and not isinstance(subsystem, str):
            raise InvalidMintRequest('"subsystem" must be a string naming a subsystem')
        count = body.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
            raise InvalidMintRequest(f'"count" must be an integer from 1 to {MAX_COUNT}')
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
        return cls(
            requester=requester,
            request_id=request_id,
            subsystem=subsystem,
            count=count,
            idempotency_key=idempotency_key,
        )


def check_idempotency_key(key: str) -> str:
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not set(key) <= _KEY_CHARS:
        raise InvalidMintRequest(
            f"the Idempotency-Key must be 1-{MAX_KEY_LENGTH} characters of "
            "letters, digits and - _ . : / + = @"
        )
    return key


def ibi_answer(subsystem: Subsystem, date: Decimal) -> dict[str, str]:
    ibi = subsystem.ibi(date)
    return {
        "rep": ibi.rep or "",
        "ibip": ibi.ibip or "",
        "date": format_date(date),
        "iso": iso_date(date),
    }


def _date(date: Decimal | None) -> str | None:
    return format_date(date) if date is not None else None


def reservation_answer(reservation: Reservation) -> dict[str, Any]:
    """A reservation (a block of dates one state write reserved) as the API shows it."""
    return {
        "after": _date(reservation.start),
        "until": format_date(reservation.end),
        "requester": reservation.requester,
        "request_id": reservation.request_id,
        "reserved_at": iso_date(reservation.reserved_at)
        if reservation.reserved_at is not None
        else None,
    }


def record_answer(record: MintRecord) -> dict[str, Any]:
    """A record as the listing API shows it."""
    return {
        "subsystem": record.subsystem,
        "requester": record.requester,
        "request_id": record.request_id,
        "idempotency_key": record.idempotency_key,
        "recorded_at": iso_date(record.recorded_at),
        "previous_date": _date(record.previous_date),
        # The reservation its dates came from (``until``: its end); ``reserved``: this
        # request's state write made it, replacing ``replaced``.
        "block": _date(record.block_end),
        "reserved": record.claimed,
        "replaced": reservation_answer(record.replaced) if record.replaced else None,
        "ibis": [
            {
                "rep": f"{record.rep_prefix}/{rep_suffix(date)}",
                "ibip": f"{record.ibip_prefix}/{ibip_suffix(date)}",
                "date": format_date(date),
                "iso": iso_date(date),
            }
            for date in record.dates
        ],
    }


def verification_answer(found: Verification) -> dict[str, Any]:
    """A verification as ``GET /mints/verify`` answers it (``ok``: no problem found)."""
    return {
        "subsystem": found.subsystem,
        "ok": found.ok,
        "last_date": _date(found.last_date),
        "records": found.records,
        "ibis": found.ibis,
        "reservations": found.reservations,
        "problems": [
            {
                "kind": problem.kind,
                "after": _date(problem.start),
                "until": format_date(problem.end),
                "message": problem.message,
            }
            for problem in found.problems
        ],
        "unrecorded": [reservation_answer(r) for r in found.unrecorded],
        "unused": [
            {
                "after": _date(span.start),
                "until": format_date(span.end),
                "recorded": span.recorded,
                "block": reservation_answer(span.reservation),
            }
            for span in found.unused
        ],
    }


def parse_when(text: str, name: str) -> Decimal:
    """A date in a query: seconds since 1970 (``1795670498.441``) or ISO 8601 in UTC
    (``2026-11-25``, ``2026-11-25T10:00:00Z``)."""
    try:
        if text[:1].isdigit() and "-" not in text:
            return parse_date(text, name)
        moment = datetime.fromisoformat(text)
    except (InvalidInput, ValueError):
        raise InvalidMintRequest(
            f"{name} must be a date: seconds since 1970 (e.g. 1795670498.441) or ISO 8601 "
            f"in UTC (e.g. 2026-11-25 or 2026-11-25T10:00:00Z), not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return Decimal(calendar.timegm(moment.utctimetuple())) + Decimal(moment.microsecond) / 10**6


def recorded_answer(record: MintRecord) -> dict[str, Any]:
    """The answer a mint request got, rebuilt from its record."""
    return {"subsystem": record.subsystem, "ibis": record_answer(record)["ibis"]}


@dataclass(frozen=True, slots=True)
class _Chosen:
    """The dates chosen for one request and where they came from (its record says so)."""

    previous: Decimal | None  # the date Algorithm 4 continued from
    distributions: list[Distribution]
    now: Decimal  # the request date
    block_end: Decimal  # the end of the reservation holding the dates
    replaced: Reservation | None = None  # when this request's write reserved them: the one
    claimed: bool = False  # it replaced


@dataclass(frozen=True, slots=True)
class MintResult:
    answer: dict[str, Any]
    replayed: bool = False


# ---------------------------------------------------------------------------- the service


@dataclass(slots=True)
class MintStats:
    """What this execution environment did, for benchmarks and metrics."""

    requests: int = 0
    state_writes: int = 0  # conditional writes sent, lost ones included
    conflicts: int = 0
    blocks: int = 0  # conditional writes won
    waited_seconds: float = 0.0  # in Algorithm 4's WAIT and in back-off


BLOCK_REQUESTS = 8  # a block is sized for this many of the environment's recent requests


@dataclass(slots=True)
class _Block:
    """One subsystem's block in this execution environment: the dates in (``last``, ``high``].

    ``high`` is the state this environment last wrote (or read, or lost to: then the block is
    empty, ``last == high``); ``last`` the last date it handed out. Other environments claim
    only dates after the state, so every date in the block is this environment's alone.
    """

    loaded: bool = False
    last: Decimal | None = None
    high: Decimal | None = None
    unwritten: int = 0  # IBIs handed out from the block since the state write
    contended: bool = False  # a write was lost: read the state before the next one
    arrival: Decimal | None = None
    waited: Decimal = Decimal(0)
    gap: Decimal | None = None  # recent time between requests, waits left out

    def start_from(self, state: Decimal | None) -> None:
        """An empty block at the subsystem's state."""
        self.loaded, self.last, self.high = True, state, state

    def forget(self) -> None:
        self.loaded, self.last, self.high = False, None, None

    def claimed(self, last: Decimal, high: Decimal) -> None:
        self.last, self.high, self.unwritten = last, high, 0

    def owns(self, creation_date: Decimal) -> bool:
        """Whether a label created at ``creation_date`` can come from the block.

        Its creation date, not only its date, must be in the block: then no other environment
        can have answered a later date before this request began (its date would be at most
        the request date, which is at most ``high``, and theirs are all after ``high``).
        """
        return self.high is not None and creation_date <= self.high

    def window(self, now: Decimal, most: Decimal) -> Decimal:
        """How far past a request's date to claim: room for the next BLOCK_REQUESTS requests.

        Measured on this environment's recent pace (waits left out), at most ``most``; 0, a
        block of one request, when they come too seldom for two to share ``most`` seconds.
        """
        if self.arrival is not None:
            gap = max(now - self.arrival - self.waited, Decimal(0))
            self.gap = gap if self.gap is None else (3 * self.gap + gap) / 4
        self.arrival, self.waited = now, Decimal(0)
        if most <= 0 or self.gap is None:
            return Decimal(0)
        return min(BLOCK_REQUESTS * self.gap, most) if self.gap < most else Decimal(0)


def _block_end(
    subsystem: Subsystem, distributions: list[Distribution], window: Decimal, known: Decimal | None
) -> Decimal:
    """The state a new block writes: its last date plus ``window`` (on the r grid).

    With no window that is Algorithm 4's own ``last-date-for-suffix``. Always past ``known``,
    the state it replaces: a shortest date may fall back inside the environment's old block.
    """
    r = subsystem.granularity.value
    end = distributions[-1].date_for_suffix + r * (window // r)
    if known is not None and end <= known:
        return distributions[-1].creation_date  # past ``known``: else the block would be owned
    return end


class MintingService:
    """Runs Algorithm 4 against the state in the store by blocks of dates.

    Each execution environment claims a block with one conditional write on the subsystem's
    state and hands its dates out, as their time comes, with no further state write.
    """

    def __init__(
        self,
        store: MintStore,
        subsystems: Mapping[str, Subsystem],
        *,
        default_subsystem: str,
        clock: Clock,
        sleep: Sleeper,
        max_wait: Decimal = Decimal(5),
        max_attempts: int = 50,
        idempotency_ttl_seconds: int = IDEMPOTENCY_TTL_SECONDS,
        on_conflict: Callable[[], None] | None = None,
        rng: random.Random | None = None,
        block_seconds: Decimal = Decimal(0),
    ) -> None:
        self.store = store
        self.subsystems = dict(subsystems)
        self.default_subsystem = default_subsystem
        self._clock = clock
        self._sleep = sleep
        self._max_wait = max_wait
        self._max_attempts = max_attempts
        self._ttl = idempotency_ttl_seconds
        self._on_conflict = on_conflict or (lambda: None)
        self._rng = rng or random.SystemRandom()
        self._block_seconds = block_seconds
        self._blocks: dict[str, _Block] = {}
        self._lock = threading.Lock()  # one block per subsystem, shared by this process's threads
        self.stats = MintStats()

    def subsystem(self, name: str | None) -> Subsystem:
        chosen = self.default_subsystem if name is None else name
        try:
            return self.subsystems[chosen]
        except KeyError:
            raise UnknownSubsystem(
                f"no identification subsystem is named {chosen!r}; "
                f"this service has {sorted(self.subsystems)}"
            ) from None

    def mint(self, request: MintRequest) -> MintResult:
        subsystem = self.subsystem(request.subsystem)
        if request.idempotency_key is None:
            return MintResult(self._mint(subsystem, request))
        key_id = hashlib.sha256(
            f"{request.requester}\n{request.idempotency_key}".encode()
        ).hexdigest()
        fingerprint = f"{subsystem.name}:{request.count}"
        now = self._clock()
        lease_until, expires_at = now + self._max_wait + 60, int(now) + self._ttl
        with store_unavailable():
            claim = self.store.claim(
                key_id, fingerprint, now=now, lease_until=lease_until, expires_at=expires_at
            )
            if claim is not None:
                answer = self._settle(claim, fingerprint, now, request)
                if answer is not None:
                    return MintResult(answer, replayed=True)
                if not self.store.take_over(claim, lease_until=lease_until, expires_at=expires_at):
                    raise IdempotencyInProgress(IN_PROGRESS_MESSAGE)
        noted: list[Decimal] = []

        def note(first_date: Decimal) -> None:
            with store_unavailable():
                self.store.note(key_id, subsystem.name, first_date)
            noted.append(first_date)

        try:
            answer = self._mint(subsystem, request, on_dates_chosen=note)
        except BaseException:
            self._give_back(key_id, subsystem.name, noted, request)
            raise
        with store_unavailable():
            self.store.complete(key_id, answer)
        return MintResult(answer)

    def _settle(
        self, claim: IdempotencyClaim, fingerprint: str, now: Decimal, request: MintRequest
    ) -> dict[str, Any] | None:
        """The answer to a key already claimed, or None: its attempt died and recorded nothing.

        422 if the key was used for another request, 409 while its attempt may still run.
        """
        answer = _replay(claim, fingerprint, expired=claim.lease_until < now)
        if answer is None and claim.minted is not None:  # the attempt won its state write
            record = self.store.find_record(*claim.minted)
            if record is not None and _made_by(record, request):
                answer = recorded_answer(record)
                self.store.complete(claim.key_id, answer)
        return answer

    def _give_back(
        self, key_id: str, subsystem: str, noted: list[Decimal], request: MintRequest
    ) -> None:
        """After a failed attempt: the key is free again, unless its dates were recorded."""
        with store_unavailable():
            record = self.store.find_record(subsystem, noted[0]) if noted else None
            if record is not None and _made_by(record, request):
                self.store.complete(key_id, recorded_answer(record))
            else:
                self.store.release(key_id)

    def _mint(
        self,
        subsystem: Subsystem,
        request: MintRequest,
        *,
        on_dates_chosen: Callable[[Decimal], None] | None = None,
    ) -> dict[str, Any]:
        with self._lock:
            self.stats.requests += 1
            chosen = self._choose(subsystem, request)
        dates = tuple(d.date_for_suffix for d in chosen.distributions)
        record = MintRecord(
            subsystem=subsystem.name,
            rep_prefix=subsystem.rep_prefix,
            ibip_prefix=subsystem.ibip_prefix,
            dates=dates,
            previous_date=chosen.previous,
            requester=request.requester,
            request_id=request.request_id,
            recorded_at=chosen.now,
            idempotency_key=request.idempotency_key,
            block_end=chosen.block_end,
            claimed=chosen.claimed,
            replaced=chosen.replaced,
        )
        try:
            if on_dates_chosen is not None:  # before the record: see _settle
                on_dates_chosen(dates[0])
            with store_unavailable():
                self.store.put_record(record)
        except BaseException:
            # Its block may now lack the record of its reservation: read the state next time.
            with self._lock:
                self._blocks[subsystem.name].forget()
            raise
        self._wait_until(chosen.distributions[-1].creation_date, self._blocks[subsystem.name])
        return {
            "subsystem": subsystem.name,
            "ibis": [ibi_answer(subsystem, date) for date in dates],
        }

    def _choose(self, subsystem: Subsystem, request: MintRequest) -> _Chosen:
        """The dates for one request: from this environment's block, else from a new block."""
        block = self._blocks.setdefault(subsystem.name, _Block())
        now = self._clock()
        window = block.window(now, self._block_seconds)
        if not block.loaded:
            with store_unavailable():
                block.start_from(self.store.last_date(subsystem.name))
        distributions = self._reserve(subsystem, block.last, now, request.count)
        if block.owns(distributions[-1].creation_date):  # no state write: the block holds them
            assert block.high is not None  # (owned)
            previous, block.last = block.last, distributions[-1].date_for_suffix
            block.unwritten += request.count
            return _Chosen(previous, distributions, now, block_end=block.high)
        return self._claim(subsystem, block, request, window)

    def _claim(
        self, subsystem: Subsystem, block: _Block, request: MintRequest, window: Decimal
    ) -> _Chosen:
        """One conditional write: the state from ``block.high`` to a new block's end.

        A lost write names the winner's date: the next attempt starts after it at once; only
        repeated losses back off. Never a date already handed out: the dates are computed from
        the state this environment last knew (its own last write, or the winner's), so that
        they all lie in the reservation the write makes, which the record names.
        """
        count = request.count
        known = block.high
        if block.contended and window:  # others may write: read the state (not a write)
            with store_unavailable():
                newest = self.store.last_date(subsystem.name)
            if newest != known:
                known = newest
            else:  # nobody wrote since this environment did: the contention is over
                block.contended = False
        for attempt in range(self._max_attempts):
            now = self._clock()
            distributions = self._reserve(subsystem, known, now, count)
            high = _block_end(subsystem, distributions, window, known)
            self.stats.state_writes += 1
            # Without blocks, the write is conditional on the state being earlier than the
            # first date (StateWrite.first): computed from any date the state held, the dates
            # are Algorithm 4's own if it wins, and no read comes before it.
            first = None if window else distributions[0].date_for_suffix
            try:
                with store_unavailable():
                    replaced = self.store.advance(
                        StateWrite(
                            subsystem.name,
                            known,
                            high,
                            str(subsystem.granularity),
                            count + block.unwritten,
                            first,
                            requester=request.requester,
                            request_id=request.request_id,
                            reserved_at=now,
                        )
                    )
            except StateConflict as conflict:
                waited = self.stats.waited_seconds
                known = self._after_conflict(subsystem, attempt, conflict)
                block.waited += Decimal(str(self.stats.waited_seconds - waited))
                block.start_from(known)  # this environment owns nothing until it writes again
                block.contended = True
                continue
            except StoreUnavailable:
                block.forget()  # the write may have won or not: read the state next time
                raise
            block.claimed(distributions[-1].date_for_suffix, high)
            self.stats.blocks += 1
            previous = replaced.end if replaced is not None else None
            return _Chosen(previous, distributions, now, high, replaced, claimed=True)
        raise Contention(
            f"subsystem {subsystem.name!r} is busy ({self._max_attempts} conflicting writes); "
            "retry, or spread the load over several subsystems"
        )

    def _reserve(
        self, subsystem: Subsystem, previous: Decimal | None, now: Decimal, count: int
    ) -> list[Distribution]:
        """Algorithm 4 for ``count`` labels at ``now``; :class:`TooEarly` past the wait bound."""
        distributions = TemporalDistributor(subsystem.granularity, previous).reserve(now, count)
        delay = distributions[-1].delay(now)
        if delay > self._max_wait:
            raise TooEarly(
                f"{count} IBI(s) from {subsystem.name!r} at granularity "
                f"{subsystem.granularity}s cannot be issued for {format_date(delay)}s; "
                "ask for fewer, or retry later",
                retry_after=max(1, math.ceil(delay - self._max_wait)),
            )
        return distributions

    def _after_conflict(
        self, subsystem: Subsystem, attempt: int, conflict: StateConflict
    ) -> Decimal | None:
        """The date to retry from after a lost write."""
        self.stats.conflicts += 1
        self._on_conflict()
        if attempt == 0:  # the winner's date was just written: retry with it at once
            return conflict.current
        # Still contended: back off (full jitter), then read the newest date.
        pause = self._rng.uniform(0, min(0.1, 0.002 * 2**attempt))
        self.stats.waited_seconds += pause
        self._sleep(pause)
        with store_unavailable():
            return self.store.last_date(subsystem.name)

    def _wait_until(self, creation_date: Decimal, block: _Block) -> None:
        """Algorithm 4, line 7: no label is issued before its creation date."""
        started = self._clock()
        while (remaining := creation_date - self._clock()) > 0:
            self._sleep(float(remaining))
        waited = self._clock() - started
        block.waited += waited
        self.stats.waited_seconds += float(waited)

    def records(
        self,
        subsystem_name: str | None,
        *,
        after: Decimal | None,
        limit: int,
        newest_first: bool = False,
        since: Decimal | None = None,
        until: Decimal | None = None,
    ) -> tuple[list[MintRecord], Decimal | None]:
        subsystem = self.subsystem(subsystem_name)
        with store_unavailable():
            return self.store.list_records(
                subsystem.name,
                after=after,
                limit=limit,
                newest_first=newest_first,
                since=since,
                until=until,
            )

    def record_of(self, ibi: str) -> MintRecord:
        """The record that issued ``ibi`` (either form): its subsystem is the one whose prefix
        it has, its record the one holding its date (a Query on the record's key)."""
        try:
            label = parse_label(ibi)
        except InvalidInput as error:
            raise InvalidMintRequest(str(error)) from None
        for subsystem in self.subsystems.values():
            if label.prefix in (subsystem.rep_prefix, subsystem.ibip_prefix):
                with store_unavailable():
                    record = self.store.record_holding(subsystem.name, label.date)
                if record is None:
                    raise NotRecorded(
                        f"no record issued {label.label}: subsystem {subsystem.name!r} never "
                        f"handed out its date ({format_date(label.date)})"
                    )
                return record
        raise UnknownSubsystem(
            f"{label.label} is not from this service: its prefix {label.prefix} is none of "
            f"{sorted(p for s in self.subsystems.values() for p in (s.rep_prefix, s.ibip_prefix))}"
        )

    def records_of(
        self,
        ibi: str,
        *,
        subsystem: str | None,
        after: Decimal | None,
        newest_first: bool,
        since: Decimal | None,
        until: Decimal | None,
    ) -> list[MintRecord]:
        """The record that issued ``ibi``, if it is also one of the records the other
        parameters of a listing ask for (else none)."""
        record = self.record_of(ibi)
        first = record.first_date
        wanted = (
            subsystem in (None, record.subsystem)
            and (since is None or since <= first)
            and (until is None or first <= until)
            and (after is None or (first < after if newest_first else first > after))
        )
        return [record] if wanted else []

    def verify(self, subsystem_name: str | None) -> Verification:
        """Walk the subsystem's whole record (see :mod:`functions.minting.audit`)."""
        subsystem = self.subsystem(subsystem_name)
        with store_unavailable():
            head = self.store.head(subsystem.name)  # first: later records are in flight
            return verify(subsystem.name, self._every_record(subsystem.name), head)

    def _every_record(self, subsystem: str) -> Iterator[MintRecord]:
        after: Decimal | None = None
        while True:
            page, after = self.store.list_records(subsystem, after=after, limit=VERIFY_PAGE)
            yield from page
            if after is None:
                return


VERIFY_PAGE = 1000  # records per Query while verifying (each page at most 1 MB)


IN_PROGRESS_MESSAGE = "a request with this Idempotency-Key is still being served; retry shortly"


def _replay(claim: IdempotencyClaim, fingerprint: str, *, expired: bool) -> dict[str, Any] | None:
    """The first answer to a claimed key; None if its attempt died (``expired``) unfinished."""
    if claim.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            "this Idempotency-Key was used for a different request "
            f"({claim.fingerprint.replace(':', ', count ')}); use a new key"
        )
    if claim.status == "complete" and claim.answer is not None:
        return claim.answer
    if not expired:
        raise IdempotencyInProgress(IN_PROGRESS_MESSAGE)
    return None


def _made_by(record: MintRecord, request: MintRequest) -> bool:
    return (record.requester, record.idempotency_key) == (
        request.requester,
        request.idempotency_key,
    )


@contextmanager
def store_unavailable() -> Iterator[None]:
    """Turn a failing store into a 503 the caller can retry."""
    try:
        yield
    except StoreError as error:
        disk = full_disk(error)  # local mode: its tables' disk (DynamoDB has none)
        if disk is not None:
            raise StoreUnavailable(f"the minting store cannot write: {disk}") from error
        raise StoreUnavailable(
            "the minting store is unavailable or throttled; retry shortly"
        ) from error
