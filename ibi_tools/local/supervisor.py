"""``ibi local`` watching its own processes: a dead one is started again, a few times.

What is watched: the S3 server (SeaweedFS) and each API's worker processes (the tables are
SQLite in the workers themselves, ``tables.py``). A store that died (``kill -9``, a crash) is
started again on the same port and the same data directory, so the APIs' clients find it where they
left it and every object written before is still there (it keeps its data on disk, see
``stores.py``). A worker that died is forked again from ``ibi local``.

Restarts are bounded: a process that dies more than ``limit`` times within ``window``
seconds is not started again; ``ibi local`` then stops everything and exits non-zero with a
message naming the process and its log. A store that dies in a loop (its data damaged, its
port taken by someone else) ends the run instead of answering 503 forever.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ibi_tools.local.stores import LocalStoreError

RESTARTS = 5  # deaths forgiven within WINDOW, per store and per API worker
WINDOW = 60.0  # seconds
INTERVAL = 0.5  # seconds between two looks


class GaveUp(LocalStoreError):
    """A watched process kept dying: ``ibi local`` must stop."""


@dataclass
class Watched:
    """One thing to keep alive.

    ``dead`` says how each of its dead processes ended (an empty list: all alive);
    ``restart`` starts the dead ones again and raises :class:`LocalStoreError` if it cannot.
    """

    name: str
    dead: Callable[[], list[str]]
    restart: Callable[[], object]
    log: Path | None = None
    limit: int = RESTARTS
    window: float = WINDOW
    deaths: deque[float] = field(default_factory=deque)

    def where_to_look(self) -> str:
        return f"its log: {self.log}" if self.log else "the messages above"


class Supervisor:
    """Looks at every watched thing, in order, and restarts what died (see module docs).

    Order matters: stores come first, and the APIs' workers are looked at only once every
    store answers again (a worker built while its store is down would die at once).
    """

    def __init__(
        self,
        watched: list[Watched],
        *,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], object] | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.watched = watched
        self._clock = clock
        self._say = say or _to_stderr
        self._stopping = stopping  # once true, nothing is started again (it is being stopped)

    def check(self) -> int:
        """One look: restart what died. How many processes were restarted.

        Raises :class:`GaveUp` when one died more than its ``limit`` within its ``window``.
        """
        restarted = 0
        for watched in self.watched:
            if self._stopping():  # a stop's signal reached its processes too: not a death
                return restarted
            ended = watched.dead()
            if not ended:
                continue
            now = self._clock()
            while watched.deaths and watched.deaths[0] <= now - watched.window:
                watched.deaths.popleft()
            watched.deaths.extend([now] * len(ended))
            if len(watched.deaths) > watched.limit:
                raise GaveUp(
                    f"{watched.name} died {len(watched.deaths)} times within "
                    f"{watched.window:g} s (last: {'; '.join(ended)}); not restarting it "
                    f"again. Stopping ibi local. See {watched.where_to_look()}."
                )
            self._say(f"ibi local: {watched.name}: {'; '.join(ended)}; restarting")
            try:
                watched.restart()
            except (LocalStoreError, OSError) as error:
                name, look = watched.name, watched.where_to_look()
                self._say(f"ibi local: {name} did not start again ({error}); see {look}")
                return restarted  # tried again at the next look, within the same limit
            restarted += len(ended)
        return restarted


def _to_stderr(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
