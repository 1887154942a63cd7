"""The one way a Lambda holds what it builds once per execution environment.

Each function's ``wiring.py`` keeps its runtime (settings, clients, services) in a
:class:`Holder`: built from the environment on the first request, by one thread while the
others wait, then returned without a lock; ``install`` puts one in place instead (local mode,
tests) and ``reset`` forgets it (tests, and SnapStart's after-restore hook, so that a restored
environment builds its clients again). The Archive holds its site, bootstrapped at the first
request's base URL, in one too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar, overload

T = TypeVar("T")


class Holder(Generic[T]):
    """One ``T`` per process: ``build()`` once on first use, or the one installed."""

    def __init__(self, build: Callable[[], T] | None = None) -> None:
        self._build = build
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(
        self, build: Callable[[], T] | None = None, *, then: Callable[[T], None] | None = None
    ) -> T:
        """The held value; built now (by ``build``, else the holder's own) if there is none.

        ``then`` runs once, after a build, in the thread that built, with the value already
        held: other threads get it meanwhile (the Archive's join, whose resolver calls the
        Archive back, runs so).
        """
        value = self._value
        if value is not None:  # every call after the first: no lock
            return value
        with self._lock:
            value = self._value
            if value is None:
                make = build or self._build
                if make is None:
                    raise RuntimeError("nothing is held and there is nothing to build it with")
                value = self._value = make()
                if then is not None:
                    then(value)
            return value

    def peek(self) -> T | None:
        """The held value, or None: never builds."""
        return self._value

    @overload
    def install(self, value: T) -> T: ...
    @overload
    def install(self, value: None) -> None: ...
    def install(self, value: T | None) -> T | None:
        """Hold ``value`` from now on (None: build again on the next :meth:`get`)."""
        with self._lock:
            self._value = value
        return value

    def reset(self) -> None:
        """Forget the held value: the next :meth:`get` builds one."""
        self.install(None)
