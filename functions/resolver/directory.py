"""The included Archives as the fan-out sees them: the registry, read every few seconds.

Per execution environment: the list of Archives is cached for ``cache_seconds`` (forgotten at
once when a registration or a switch changes it), and when each Archive last answered is
written back to the registry (for /status) at most once a minute per Archive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from decimal import Decimal

from aws_lambda_powertools import Logger

from functions.resolver.registry import RegisteredArchive, Registry, RegistryError
from ibi.core.dates import iso_date

logger = Logger(service="resolver", child=True)

CACHE_SECONDS = 5.0
NOTE_EVERY_SECONDS = 60.0


class ArchiveDirectory:
    def __init__(
        self,
        registry: Registry,
        *,
        cache_seconds: float = CACHE_SECONDS,
        note_every: float = NOTE_EVERY_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self._cache_seconds = cache_seconds
        self._note_every = note_every
        self._monotonic = monotonic
        self._archives: tuple[float, list[RegisteredArchive]] | None = None
        self._noted: dict[str, float] = {}
        self._lock = threading.Lock()

    def included(self) -> list[RegisteredArchive]:
        """The included Archives that have an address, re-read every few seconds."""
        now = self._monotonic()
        with self._lock:
            if self._archives is None or now - self._archives[0] > self._cache_seconds:
                self._archives = (now, self.registry.archives())
            archives = self._archives[1]
        return [a for a in archives if a.included and a.address]

    def find(self, service_ibi: str) -> RegisteredArchive | None:
        """The included Archive of that service IBI, if any."""
        return next((a for a in self.included() if a.service_ibi == service_ibi), None)

    def forget(self) -> None:
        """The registry changed: read it again on the next request."""
        with self._lock:
            self._archives = None

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
