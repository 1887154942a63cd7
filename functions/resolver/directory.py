"""The registry as /status and the fan-out see it: a snapshot, re-read only when it changed.

Per execution environment, one snapshot of every registered Archive. At most every
``cache_seconds`` (5 s) one GetItem reads the registry's generation, a counter bumped by every
registration, inclusion and exclusion; only when it moved is the whole list read again (one
Scan). The list is also read again when this environment changed the registry itself
(``forget``), and at least every ``max_age`` seconds (60 s), for when each Archive last
answered (noted at most once a minute per Archive, without bumping the generation). No
request ever scans the registry: a flood of requests, refused or not, costs the registry at
most one GetItem per 5 s per environment.

Each snapshot also knows who owns each prefix (``owner_of``, ``owners.py``): a registered
Archive, included or not (issue 24).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from aws_lambda_powertools import Logger

from functions.resolver.errors import RegistryError
from functions.resolver.owners import owners
from functions.resolver.registry import RegisteredArchive, Registry
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label

logger = Logger(service="resolver", child=True)

CACHE_SECONDS = 5.0  # how often the generation is checked
MAX_AGE_SECONDS = 60.0  # how often the list is read again anyway
NOTE_EVERY_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class _Snapshot:
    generation: int
    archives: list[RegisteredArchive]
    read_at: float
    checked_at: float
    owners: dict[str, RegisteredArchive] = field(default_factory=dict)  # prefix -> owner

    @classmethod
    def of(cls, generation: int, archives: list[RegisteredArchive], at: float) -> _Snapshot:
        return cls(generation, archives, at, at, owners(archives))


class ArchiveDirectory:
    def __init__(
        self,
        registry: Registry,
        *,
        cache_seconds: float = CACHE_SECONDS,
        max_age: float = MAX_AGE_SECONDS,
        note_every: float = NOTE_EVERY_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self._cache_seconds = cache_seconds
        self._max_age = max_age
        self._note_every = note_every
        self._monotonic = monotonic
        self._snapshot: _Snapshot | None = None
        self._noted: dict[str, float] = {}
        self._lock = threading.Lock()

    def archives(self) -> list[RegisteredArchive]:
        """Every registered Archive, included or not (for /status), from the snapshot."""
        now = self._monotonic()
        with self._lock:
            snapshot = self._snapshot
            if snapshot is None:
                snapshot = self._read(now, self.registry.generation())
            elif now - snapshot.read_at > self._max_age or now - snapshot.checked_at > (
                self._cache_seconds
            ):
                snapshot = self._refreshed(snapshot, now)
            self._snapshot = snapshot
            return list(snapshot.archives)

    def _refreshed(self, snapshot: _Snapshot, now: float) -> _Snapshot:
        """The snapshot after a check of the generation (and a read if it moved, or if the
        snapshot is too old); the one held, if the registry cannot be read just now."""
        try:
            generation = self.registry.generation()
            if generation != snapshot.generation or now - snapshot.read_at > self._max_age:
                return self._read(now, generation)
        except RegistryError as error:
            logger.warning(
                "registry unreadable: serving the last snapshot", extra={"reason": str(error)}
            )
        return _Snapshot(
            snapshot.generation, snapshot.archives, snapshot.read_at, now, snapshot.owners
        )

    def _read(self, now: float, generation: int) -> _Snapshot:
        """The whole list, read after its generation: a change made in between only makes
        the next check read it again."""
        return _Snapshot.of(generation, self.registry.archives(), now)

    def included(self) -> list[RegisteredArchive]:
        """The included Archives that have an address."""
        return [a for a in self.archives() if a.included and a.address]

    def find(self, service_ibi: str) -> RegisteredArchive | None:
        """The included Archive of that service IBI, if any."""
        return next((a for a in self.included() if a.service_ibi == service_ibi), None)

    def owner_of(self, ibi: str) -> RegisteredArchive | None:
        """The registered Archive that owns ``ibi``'s prefix (included or not), if any."""
        try:
            prefix = parse_label(ibi).prefix
        except InvalidInput:
            return None
        self.archives()  # the snapshot, fresh as :meth:`archives` keeps it
        with self._lock:
            snapshot = self._snapshot
        return snapshot.owners.get(prefix) if snapshot is not None else None

    def registered(self, label: str) -> RegisteredArchive | None:
        """The registered Archive whose service IBI is ``label`` (in either of its forms)."""
        try:
            canonical = parse_label(label).label
        except InvalidInput:
            return None
        return next(
            (
                a
                for a in self.archives()
                if a.service_ibi == canonical or canonical in a.forms.values()
            ),
            None,
        )

    def forget(self) -> None:
        """This environment changed the registry: read it again on the next request."""
        with self._lock:
            self._snapshot = None

    def note(self, archive: str, outcome: str) -> None:
        """When ``archive`` last answered (for /status), written at most once a minute."""
        now = self._monotonic()
        with self._lock:
            if now - self._noted.get(archive, -1e9) < self._note_every:
                return
            self._noted[archive] = now
        try:
            self.registry.note_answer(
                archive, at=iso_date(Decimal(int(time.time()))), outcome=outcome
            )
        except RegistryError:
            logger.warning("could not note an answer", extra={"archive": archive})
