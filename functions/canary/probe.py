"""One canary run: the resolver's redirect, then the Archive's file, as a browser follows them.

Pure: the HTTP transport is passed in (:class:`Transport`, which never follows a redirect
itself), and so is the clock. A run succeeds when the resolver answers the persistent URL with
a redirect and the chain of redirects it starts ends, within :data:`MAX_HOPS`, in a ``200``
with a body: the resolver, an Archive and its files all answered. Anything else is a failure
that names the step and what came back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urljoin, urlsplit

REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_HOPS = 5  # the resolver's redirect, the Archive's to its file, a presigned URL…


@dataclass(frozen=True, slots=True)
class Answer:
    """What one GET got: the status, the headers (lower-case names), how much body."""

    status: int
    headers: Mapping[str, str]
    body_bytes: int


class Transport(Protocol):
    def get(self, url: str, *, timeout: float) -> Answer: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended: ``resolved`` or not, at which ``step``, and why not."""

    resolved: bool
    step: str  # resolver | archive
    problem: str | None
    milliseconds: float
    urls: tuple[str, ...]


def persistent_url(resolver_url: str, ibi: str) -> str:
    """``<resolver>/<ibi>``: the address a reader follows."""
    return resolver_url.rstrip("/") + "/" + ibi


def probe(
    transport: Transport,
    resolver_url: str,
    ibi: str,
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> Outcome:
    """Resolve ``ibi`` at ``resolver_url`` and follow the redirects to the file."""
    started = clock()
    urls = [persistent_url(resolver_url, ibi)]

    def ended(resolved: bool, step: str, problem: str | None) -> Outcome:
        return Outcome(resolved, step, problem, (clock() - started) * 1000, tuple(urls))

    for hop in range(MAX_HOPS + 1):
        step = "resolver" if hop == 0 else "archive"
        try:
            answer = transport.get(urls[-1], timeout=timeout)
        except OSError as error:
            return ended(False, step, f"{urls[-1]}: {type(error).__name__}: {error}")
        if answer.status in REDIRECTS:
            location = answer.headers.get("location", "")
            target = urljoin(urls[-1], location)
            if not location or urlsplit(target).scheme not in {"http", "https"}:
                return ended(False, step, f"{urls[-1]}: {answer.status} without a usable Location")
            urls.append(target)
            continue
        if hop == 0:
            return ended(False, step, f"{urls[-1]}: {answer.status}, not a redirect")
        if answer.status != 200 or answer.body_bytes == 0:
            return ended(False, step, f"{urls[-1]}: {answer.status}, {answer.body_bytes} bytes")
        return ended(True, step, None)
    return ended(False, "archive", f"more than {MAX_HOPS} redirects")
