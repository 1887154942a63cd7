"""In-memory stand-ins for unit tests: a minting store, a clock that sleeping advances."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from functions.minting.store import (
    IdempotencyClaim,
    MintRecord,
    Reservation,
    StateConflict,
    StateWrite,
    StoreError,
)


@dataclass
class FakeClock:
    now: Decimal = Decimal("1287588115.3462")
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> Decimal:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += Decimal(str(seconds))


class MemoryMintStore:
    """The :class:`MintStore` contract, in memory, atomic under a lock."""

    def __init__(self) -> None:
        self.state: dict[str, Decimal] = {}
        self.heads: dict[str, Reservation] = {}  # each state's latest reservation
        self.records: list[MintRecord] = []
        self.claims: dict[str, IdempotencyClaim] = {}
        self.state_writes = 0
        self.fail_on: set[str] = set()
        self.conflicts_to_inject = 0
        self._lock = threading.Lock()

    def _maybe_fail(self, operation: str) -> None:
        if operation in self.fail_on:
            raise StoreError(f"{operation}: injected failure", throttled=True)

    def last_date(self, subsystem: str) -> Decimal | None:
        self._maybe_fail("last_date")
        return self.state.get(subsystem)

    def head(self, subsystem: str) -> Reservation | None:
        return self.heads.get(subsystem)

    def advance(self, write: StateWrite) -> Reservation | None:
        self._maybe_fail("advance")
        with self._lock:
            current = self.state.get(write.subsystem)
            if self.conflicts_to_inject:
                self.conflicts_to_inject -= 1
                raise StateConflict(current)
            if write.first is not None:  # as DynamoDB's "#last < :first"
                if current is not None and not current < write.first:
                    raise StateConflict(current)
            elif current != write.previous:
                raise StateConflict(current)
            self.state[write.subsystem] = write.new
            self.state_writes += 1
            replaced = self.heads.get(write.subsystem)
            self.heads[write.subsystem] = Reservation(
                current, write.new, write.requester, write.request_id, write.reserved_at
            )
            return replaced

    def put_record(self, record: MintRecord) -> None:
        self._maybe_fail("put_record")
        with self._lock:
            self.records.append(record)

    def list_records(
        self,
        subsystem: str,
        *,
        after: Decimal | None,
        limit: int,
        newest_first: bool = False,
        since: Decimal | None = None,
        until: Decimal | None = None,
    ) -> tuple[list[MintRecord], Decimal | None]:
        def wanted(date: Decimal) -> bool:
            if after is not None and (date >= after if newest_first else date <= after):
                return False
            return (since is None or since <= date) and (until is None or date <= until)

        chosen = sorted(
            (r for r in self.records if r.subsystem == subsystem and wanted(r.first_date)),
            key=lambda r: r.first_date,
            reverse=newest_first,
        )
        page = chosen[:limit]
        return page, (page[-1].first_date if len(chosen) > limit else None)

    def record_holding(self, subsystem: str, date: Decimal) -> MintRecord | None:
        found = [r for r in self.records if r.subsystem == subsystem and date in r.dates]
        return found[0] if found else None

    def claim(
        self, key_id: str, fingerprint: str, *, now: Decimal, lease_until: Decimal, expires_at: int
    ) -> IdempotencyClaim | None:
        self._maybe_fail("claim")
        with self._lock:
            existing = self.claims.get(key_id)
            if existing is None or (
                existing.status == "in_progress"
                and existing.lease_until < now
                and existing.minted is None
            ):
                self.claims[key_id] = IdempotencyClaim(
                    key_id, fingerprint, "in_progress", lease_until
                )
                return None
            return existing

    def note(self, key_id: str, subsystem: str, first_date: Decimal) -> None:
        self._maybe_fail("note")
        with self._lock:
            assert self.claims[key_id].status == "in_progress"
            self.claims[key_id].minted = (subsystem, first_date)

    def take_over(self, claim: IdempotencyClaim, *, lease_until: Decimal, expires_at: int) -> bool:
        with self._lock:
            existing = self.claims.get(claim.key_id)
            if existing is None or existing.lease_until != claim.lease_until:
                return False
            self.claims[claim.key_id] = IdempotencyClaim(
                claim.key_id, claim.fingerprint, "in_progress", lease_until
            )
            return True

    def find_record(self, subsystem: str, first_date: Decimal) -> MintRecord | None:
        self._maybe_fail("find_record")
        found = [r for r in self.records if (r.subsystem, r.first_date) == (subsystem, first_date)]
        return found[0] if found else None

    def complete(self, key_id: str, answer: dict[str, Any]) -> None:
        self._maybe_fail("complete")
        with self._lock:
            self.claims[key_id].status = "complete"
            self.claims[key_id].answer = answer

    def release(self, key_id: str) -> None:
        with self._lock:
            if self.claims.get(key_id) and self.claims[key_id].status == "in_progress":
                del self.claims[key_id]
