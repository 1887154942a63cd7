"""Minting: hands out IBIs from an identification subsystem, never the same one twice.

Pure domain logic: the store, the clock and the sleeper are passed in.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from functions.minting.settings import MAX_COUNT
from functions.minting.store import (
    IdempotencyClaim,
    MintRecord,
    MintStore,
    StateConflict,
    StateWrite,
    StoreError,
)
from ibi.core.dates import format_date, iso_date
from ibi.core.distributor import Distribution, TemporalDistributor
from ibi.core.labels import ibip_suffix, rep_suffix
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


def record_answer(record: MintRecord) -> dict[str, Any]:
    """A record as the listing API shows it."""
    return {
        "subsystem": record.subsystem,
        "requester": record.requester,
        "request_id": record.request_id,
        "idempotency_key": record.idempotency_key,
        "recorded_at": iso_date(record.recorded_at),
        "previous_date": format_date(record.previous_date) if record.previous_date else None,
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


def recorded_answer(record: MintRecord) -> dict[str, Any]:
    """The answer a mint request got, rebuilt from its record."""
    return {"subsystem": record.subsystem, "ibis": record_answer(record)["ibis"]}


@dataclass(frozen=True, slots=True)
class MintResult:
    answer: dict[str, Any]
    replayed: bool = False


# ---------------------------------------------------------------------------- the service


class MintingService:
    """Runs Algorithm 4 against the state in the store, one conditional write per request."""

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
            answer = self._mint(subsystem, request, on_state_written=note)
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
        on_state_written: Callable[[Decimal], None] | None = None,
    ) -> dict[str, Any]:
        with store_unavailable():
            previous = self.store.last_date(subsystem.name)
        for attempt in range(self._max_attempts):
            now = self._clock()
            distributions = self._reserve(subsystem, previous, now, request.count)
            dates = tuple(d.date_for_suffix for d in distributions)
            try:
                with store_unavailable():
                    self.store.advance(
                        StateWrite(
                            subsystem.name,
                            previous,
                            dates[-1],
                            str(subsystem.granularity),
                            len(dates),
                        )
                    )
            except StateConflict as conflict:
                previous = self._after_conflict(subsystem, attempt, conflict)
                continue
            if on_state_written is not None:  # before the record: see _settle
                on_state_written(dates[0])
            record = MintRecord(
                subsystem=subsystem.name,
                rep_prefix=subsystem.rep_prefix,
                ibip_prefix=subsystem.ibip_prefix,
                dates=dates,
                previous_date=previous,
                requester=request.requester,
                request_id=request.request_id,
                recorded_at=now,
                idempotency_key=request.idempotency_key,
            )
            with store_unavailable():
                self.store.put_record(record)
            self._wait_until(distributions[-1].creation_date)
            return {
                "subsystem": subsystem.name,
                "ibis": [ibi_answer(subsystem, date) for date in dates],
            }
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
        self._on_conflict()
        if attempt == 0:  # the winner's date was just written: retry with it at once
            return conflict.current
        # Still contended: back off (full jitter), then read the newest date.
        self._sleep(self._rng.uniform(0, min(0.1, 0.002 * 2**attempt)))
        with store_unavailable():
            return self.store.last_date(subsystem.name)

    def _wait_until(self, creation_date: Decimal) -> None:
        """Algorithm 4, line 7: no label is issued before its creation date."""
        while (remaining := creation_date - self._clock()) > 0:
            self._sleep(float(remaining))

    def records(
        self, subsystem_name: str | None, *, after: Decimal | None, limit: int
    ) -> tuple[list[MintRecord], Decimal | None]:
        subsystem = self.subsystem(subsystem_name)
        with store_unavailable():
            return self.store.list_records(subsystem.name, after=after, limit=limit)


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
        raise StoreUnavailable(
            "the minting store is unavailable or throttled; retry shortly"
        ) from error
