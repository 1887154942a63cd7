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
from functions.minting.store import MintRecord, MintStore, StateConflict, StoreError
from ibi.core.dates import format_date, iso_date
from ibi.core.distributor import TemporalDistributor
from ibi.core.labels import ibip_suffix, rep_suffix
from ibi.core.subsystem import Subsystem

Clock = Callable[[], Decimal]
Sleeper = Callable[[float], None]

_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/+=@")
MAX_KEY_LENGTH = 255


# ---------------------------------------------------------------------------- errors a caller meets


class MintingError(Exception):
    """An answer other than success; ``status`` is the HTTP status it maps to."""

    status = 400
    retry_after: int | None = None


class InvalidMintRequest(MintingError):
    status = 400


class UnknownSubsystem(MintingError):
    status = 404


class IdempotencyKeyReused(MintingError):
    status = 422


class IdempotencyInProgress(MintingError):
    status = 409
    retry_after = 1


class TooEarly(MintingError):
    """The labels would be dated further in the future than the service may wait."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Contention(MintingError):
    status = 503
    retry_after = 1


class StoreUnavailable(MintingError):
    status = 503
    retry_after = 1


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
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise InvalidMintRequest('the body must be a JSON object, e.g. {"count": 1}')
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
        idempotency_ttl_seconds: int = 7 * 24 * 3600,
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
        with store_unavailable():
            claim = self.store.claim(
                key_id,
                fingerprint,
                now=now,
                lease_until=now + self._max_wait + 60,
                expires_at=int(now) + self._ttl,
            )
        if claim is not None:
            if claim.fingerprint != fingerprint:
                raise IdempotencyKeyReused(
                    "this Idempotency-Key was used for a different request "
                    f"({claim.fingerprint.replace(':', ', count ')}); use a new key"
                )
            if claim.status == "complete" and claim.answer is not None:
                return MintResult(claim.answer, replayed=True)
            raise IdempotencyInProgress(
                "a request with this Idempotency-Key is still being served; retry shortly"
            )
        try:
            answer = self._mint(subsystem, request)
        except BaseException:
            with store_unavailable():
                self.store.release(key_id)
            raise
        with store_unavailable():
            self.store.complete(key_id, answer)
        return MintResult(answer)

    def _mint(self, subsystem: Subsystem, request: MintRequest) -> dict[str, Any]:
        with store_unavailable():
            previous = self.store.last_date(subsystem.name)
        for attempt in range(self._max_attempts):
            now = self._clock()
            distributor = TemporalDistributor(subsystem.granularity, previous)
            distributions = distributor.reserve(now, request.count)
            delay = distributions[-1].delay(now)
            if delay > self._max_wait:
                raise TooEarly(
                    f"{request.count} IBI(s) from {subsystem.name!r} at granularity "
                    f"{subsystem.granularity}s cannot be issued for {format_date(delay)}s; "
                    "ask for fewer, or retry later",
                    retry_after=max(1, math.ceil(delay - self._max_wait)),
                )
            dates = tuple(d.date_for_suffix for d in distributions)
            try:
                with store_unavailable():
                    self.store.advance(
                        subsystem.name,
                        previous,
                        dates[-1],
                        granularity=str(subsystem.granularity),
                        count=len(dates),
                    )
            except StateConflict as conflict:
                self._on_conflict()
                if attempt == 0:  # the winner's date was just written: retry with it at once
                    previous = conflict.current
                    continue
                # Still contended: back off (full jitter), then read the newest date.
                self._sleep(self._rng.uniform(0, min(0.1, 0.002 * 2**attempt)))
                with store_unavailable():
                    previous = self.store.last_date(subsystem.name)
                continue
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


@contextmanager
def store_unavailable() -> Iterator[None]:
    """Turn a failing store into a 503 the caller can retry."""
    try:
        yield
    except StoreError as error:
        raise StoreUnavailable(
            "the minting store is unavailable or throttled; retry shortly"
        ) from error
