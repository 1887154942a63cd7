"""External links checked: each item's ``url`` that points outside the Archive (issue 28).

Pure: the items (a port over the store), the fetcher (``outbound.LinkFetcher`` in a Lambda), the
clock and the sleep are passed in. A check is polite:

* ``HEAD`` first; ``GET`` (its body not read beyond a few KB: the fetcher's) only when ``HEAD``
  is refused (405, 501) or fails in a way a ``GET`` may not (another 4xx or 5xx but 404 and
  410, which are final; a connection dropped);
* redirects (301, 302, 303, 307, 308) followed up to :data:`MAX_REDIRECTS`, each hop a request
  of its own: paced, and its address vetted by the fetcher (a private address is refused, never
  contacted: the Archive's outbound policy, ``functions.shared.addresses``);
* at most one request per host every :data:`PER_HOST_SECONDS` (several hosts at once);
* each request with a timeout, and a User-Agent naming ibi's link checker (the fetcher's).

A run has a time budget (the Lambda's); it checks the items due oldest-checked first (never
checked before anything), so the next run resumes where this one stopped. An item's result
(ok, or broken with the problem: an HTTP status, DNS, a timeout, a refused address, too many
redirects…) is kept beside the item (``LinkCheck``) with its last success and since when it is
broken, unless the item's URL changed meanwhile.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

from functions.archive.errors import BadRequest, NotHeld, Unprocessable
from functions.archive.model import Item, LinkCheck, LinkStatus
from functions.archive.parsing import label_of
from ibi import __version__
from ibi.core.dates import iso_date

MAX_REDIRECTS = 5
PER_HOST_SECONDS = 1.0  # at most one request per host per this many seconds
REQUEST_TIMEOUT = 10.0  # seconds one request may take
MIN_REQUEST_SECONDS = 1.0  # a request needs at least this much of the run's time left
WORKERS = 4  # checks at once (of different hosts, mostly: the pacing holds one host back)
SCAN_PAGE = 500  # records one Scan page reads while the items due are gathered
MAX_IBIS = 50  # items one request may name
MAX_READ_BYTES = 4096  # of a GET's body, at most (the status is what is checked)
USER_AGENT = f"ibi-link-checker/{__version__} (an IBI Archive checking the URLs of its items)"
REDIRECTS = frozenset({301, 302, 303, 307, 308})
FINAL = frozenset({404, 410})  # answers to HEAD that a GET is not asked to confirm


class Problem(StrEnum):
    """Why a link is broken."""

    HTTP = "http"  # an answer that is not 2xx (nor a redirect)
    DNS = "dns"  # the host does not resolve
    TIMEOUT = "timeout"  # no answer within the request's timeout
    REFUSED_ADDRESS = "refused_address"  # a private address: never contacted
    TOO_MANY_REDIRECTS = "too_many_redirects"
    NOT_A_URL = "not_a_url"  # the URL, or a redirect's Location, is not an http(s) URL
    UNREACHABLE = "unreachable"  # connection refused or dropped, TLS failed


@dataclass(frozen=True, slots=True)
class Reply:
    """What one request got: its status, and where a redirect leads."""

    status: int
    location: str | None = None


class FetchFailed(Exception):
    """One request got no HTTP answer (or was never sent): why."""

    def __init__(self, problem: Problem, reason: str) -> None:
        super().__init__(reason)
        self.problem = problem
        self.reason = reason


class Fetch(Protocol):
    """One request, no redirect followed: its status, or :class:`FetchFailed`."""

    def __call__(self, method: str, url: str, *, timeout: float) -> Reply: ...


class Unfinished(Exception):
    """The run's time ran out before the check ended: the item is checked next run."""


Clock = Callable[[], Decimal]
Sleep = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one check found."""

    ok: bool
    problem: Problem | None = None
    reason: str | None = None
    http_status: int | None = None


def host_key(host: str) -> str:
    """One name for a host however a URL spells it (issue 35: seven spellings of one IP got
    seven requests within 10 ms): an IP address in its canonical form, also when written in
    the legacy forms ``inet_aton`` reads (``127.1``, ``2130706433``, ``0x7f.0.0.1``) or as an
    IPv4-mapped IPv6 address; a name in lower case, without its trailing dot."""
    name = host.strip().strip("[]").lower().rstrip(".")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        try:
            return (
                socket.inet_ntoa(socket.inet_aton(name)) if _LEGACY_IPV4.fullmatch(name) else name
            )
        except OSError:
            return name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


_LEGACY_IPV4 = re.compile(r"(?:0x[0-9a-f]+|[0-9]+)(?:\.(?:0x[0-9a-f]+|[0-9]+)){0,3}")


class HostPacer:
    """At most one request per host per ``interval`` seconds, across threads: a request takes
    its host's next free moment, which moves ``interval`` on."""

    def __init__(self, interval: float, clock: Clock) -> None:
        self._interval = interval
        self._clock = clock
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()

    def reserve(self, host: str) -> float:
        """The moment (seconds since 1970) a request to ``host`` may be sent: one host
        however it is spelled (:func:`host_key`)."""
        host = host_key(host)
        with self._lock:
            now = float(self._clock())
            moment = max(now, self._next.get(host, now))
            self._next[host] = moment + self._interval
            return moment


class LinkChecker:
    """Checks one URL: HEAD, then GET when HEAD is refused; redirects followed, each hop paced."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        clock: Clock,
        sleep: Sleep,
        per_host: float = PER_HOST_SECONDS,
        request_timeout: float = REQUEST_TIMEOUT,
        max_redirects: int = MAX_REDIRECTS,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._sleep = sleep
        self._pacer = HostPacer(per_host, clock)
        self.request_timeout = request_timeout
        self.max_redirects = max_redirects

    def check(self, url: str, *, deadline: float) -> Outcome:
        """What ``url`` answers; :class:`Unfinished` when ``deadline`` comes first."""
        outcome = self._follow("HEAD", url, deadline)
        if outcome.ok or not _ask_again(outcome):
            return outcome
        return self._follow("GET", url, deadline)

    def _follow(self, method: str, url: str, deadline: float) -> Outcome:
        status: int | None = None
        for _ in range(self.max_redirects + 1):
            try:
                reply = self._request(method, url, deadline)
            except FetchFailed as failed:
                return Outcome(False, failed.problem, failed.reason, status)
            status = reply.status
            if status not in REDIRECTS:
                if 200 <= status < 300:
                    return Outcome(True, http_status=status)
                return Outcome(False, Problem.HTTP, f"HTTP {status}", status)
            if not reply.location:
                return Outcome(False, Problem.HTTP, f"HTTP {status} without a Location", status)
            try:
                url = urljoin(url, reply.location)
            except ValueError:  # e.g. ``http://[x/``: this URL is broken, not the whole run
                reason = f"HTTP {status} to a malformed URL {reply.location[:200]!r}"
                return Outcome(False, Problem.NOT_A_URL, reason, status)
        reason = f"more than {self.max_redirects} redirects (the last to {url[:200]})"
        return Outcome(False, Problem.TOO_MANY_REDIRECTS, reason, status)

    def _request(self, method: str, url: str, deadline: float) -> Reply:
        try:
            split = urlsplit(url)
            scheme, host = split.scheme, (split.hostname or "").lower()
        except ValueError:
            scheme, host = "", ""
        if scheme not in {"http", "https"} or not host:
            raise FetchFailed(Problem.NOT_A_URL, f"{url[:200]!r} is not an http(s) URL")
        moment = self._pacer.reserve(host)
        if moment + MIN_REQUEST_SECONDS > deadline:
            raise Unfinished(url)
        wait = moment - float(self._clock())
        if wait > 0:
            self._sleep(wait)
        timeout = min(self.request_timeout, deadline - moment)
        try:
            return self._fetch(method, url, timeout=timeout)
        except FetchFailed as failed:
            if failed.problem is Problem.TIMEOUT and timeout < self.request_timeout:
                raise Unfinished(url) from None  # the run's time, not the host, ran out
            raise


def _ask_again(outcome: Outcome) -> bool:
    """Whether a HEAD's failure is worth a GET: refused or failed, not final."""
    if outcome.problem is Problem.UNREACHABLE:
        return True
    return outcome.problem is Problem.HTTP and outcome.http_status not in FINAL


def next_check(previous: LinkCheck | None, url: str, outcome: Outcome, now: int) -> LinkCheck:
    """The item's link check after ``outcome``: its last success and since when it is broken
    carried from ``previous`` when that checked the same URL."""
    before = previous if previous is not None and previous.url == url else None
    if outcome.ok:
        return LinkCheck(url, LinkStatus.OK, now, last_success=now, http_status=outcome.http_status)
    since = before.broken_since if before is not None and before.broken else None
    return LinkCheck(
        url,
        LinkStatus.BROKEN,
        now,
        last_success=before.last_success if before is not None else None,
        broken_since=since if since is not None else now,
        problem=outcome.problem.value if outcome.problem else None,
        reason=outcome.reason,
        http_status=outcome.http_status,
    )


# ---------------------------------------------------------------------------- the items


class LinkItems(Protocol):
    """What the checks need of the items' store (``store.DynamoItemStore``)."""

    def get(self, label: str) -> Item | None: ...
    def scan(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]: ...
    def note_link_check(self, item: Item, check: LinkCheck) -> bool: ...


def is_outside(url: str, base_url: str) -> bool:
    """Whether ``url`` points outside the Archive at ``base_url`` (another scheme or host)."""
    try:
        split, base = urlsplit(url), urlsplit(base_url)
    except ValueError:
        return True
    return (split.scheme, split.netloc.lower()) != (base.scheme, base.netloc.lower())


def checkable(item: Item, base_url: str) -> bool:
    """Whether the item has a URL outside the Archive that readers are led to."""
    url = item.external_url
    live = not item.deleted and not item.pending and not item.service
    return url is not None and live and is_outside(url, base_url)


@dataclass(frozen=True, slots=True)
class Result:
    """One item checked: what was found, and whether it was kept (not if its URL changed)."""

    item: Item
    check: LinkCheck
    recorded: bool

    def to_mapping(self) -> dict[str, Any]:
        return {
            "ibi": self.item.ibi.to_mapping(),
            **self.check.to_mapping(),
            "recorded": self.recorded,
        }


@dataclass(frozen=True, slots=True)
class Run:
    """One run: when it started (whole seconds), each item checked, and how many items due
    were left for the next run (its time ran out)."""

    started: int
    results: tuple[Result, ...]
    left: int

    @property
    def broken(self) -> list[Result]:
        return [result for result in self.results if result.check.broken]

    def to_mapping(self) -> dict[str, Any]:
        return {
            "started": iso_date(Decimal(self.started)),
            "started_at": self.started,  # whole seconds: the next call's "checked_before"
            "checked": len(self.results),
            "broken": len(self.broken),
            "left": self.left,
            "results": [result.to_mapping() for result in self.results],
        }


class LinkChecks:
    """The link checks of one Archive's items (at ``base_url``)."""

    def __init__(
        self,
        items: LinkItems,
        checker: LinkChecker,
        *,
        base_url: str,
        clock: Clock,
        workers: int = WORKERS,
        page: int = SCAN_PAGE,
    ) -> None:
        self._items = items
        self._checker = checker
        self._base_url = base_url
        self._clock = clock
        self._workers = workers
        self._page = page

    def _all(self) -> Iterator[Item]:
        after: str | None = None
        while True:
            items, after = self._items.scan(after=after, limit=self._page)
            yield from items
            if after is None:
                return

    def due(self, *, checked_before: int | None = None) -> list[Item]:
        """The items to check, oldest-checked first (never checked first of all): those not
        checked since ``checked_before`` (None: all)."""
        due = [
            item
            for item in self._all()
            if checkable(item, self._base_url)
            and (checked_before is None or item.link is None or item.link.checked < checked_before)
        ]
        return sorted(due, key=lambda item: (item.link.checked if item.link else -1, item.key))

    def item(self, label: str) -> Item:
        """The item ``label`` names, if it has a URL to check (else a 4xx)."""
        try:
            key = label_of(label)
        except BadRequest as error:
            raise Unprocessable(f'"ibis": {error}') from None
        item = self._items.get(key)
        if item is None:
            raise NotHeld(f"this Archive holds no item {label!r}")
        if not checkable(item, self._base_url):
            raise Unprocessable(
                f"{label} has no url outside this Archive to check (its files are checked by "
                "POST /api/verify); name items with such a url, or none to check them all"
            )
        return item

    def run(
        self, *, seconds: float, labels: Sequence[str] = (), checked_before: int | None = None
    ) -> Run:
        """Check the items ``labels`` name (default: every item due) for up to ``seconds``."""
        started = self._clock()
        deadline = float(started) + seconds
        if labels:
            items = [self.item(label) for label in dict.fromkeys(labels)]
        else:
            items = self.due(checked_before=checked_before)
        results: list[Result] = []
        with ThreadPoolExecutor(max_workers=self._workers) as pool:  # the requests only
            pending = [(item, pool.submit(self._outcome, item, deadline)) for item in items]
            for item, future in pending:  # the writes in this thread, in the order due
                outcome = future.result()
                if outcome is None:
                    continue
                url = item.external_url
                assert url is not None
                check = next_check(item.link, url, outcome, int(self._clock()))
                results.append(Result(item, check, self._record(item, check)))
        return Run(int(started), tuple(results), left=len(items) - len(results))

    def _outcome(self, item: Item, deadline: float) -> Outcome | None:
        """What the item's URL answers; None: the run's time ran out first."""
        assert item.external_url is not None
        try:
            return self._checker.check(item.external_url, deadline=deadline)
        except Unfinished:
            return None

    def _record(self, item: Item, check: LinkCheck) -> bool:
        """Keep ``check`` beside the item, unless its URL changed since it was read."""
        if self._items.note_link_check(item, check):
            return True
        current = self._items.get(item.key)  # it changed: its URL too?
        if current is None or current.external_url != check.url:
            return False
        if not checkable(current, self._base_url):
            return False
        return self._items.note_link_check(current, check)

    def broken(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]:
        """The items of one Scan page (``limit`` records read) whose URL is broken, and where
        the next page starts (None: the end)."""
        items, more = self._items.scan(after=after, limit=limit)
        found = [
            item
            for item in items
            if checkable(item, self._base_url) and item.link is not None and item.link.broken
        ]
        return found, more


def run_request(body: Any) -> tuple[list[str], int | None]:
    """What ``POST /api/links/check`` asks: the items (``ibis``: labels; none: every item
    due) and ``checked_before`` (whole seconds: only items not checked since; none: all)."""
    if not isinstance(body, dict) or set(body) - {"ibis", "checked_before"}:
        raise BadRequest('send {"ibis": [<IBI>, …]} or {"checked_before": <seconds>} or {}')
    labels = body.get("ibis", [])
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise BadRequest('"ibis" is a list of IBIs, e.g. ["8JMKD3MGP8W/35MME4E"]')
    if len(labels) > MAX_IBIS:
        raise BadRequest(f'"ibis": at most {MAX_IBIS} items a request')
    before = body.get("checked_before", 0)
    if isinstance(before, bool) or not isinstance(before, int) or before < 0:
        raise BadRequest('"checked_before" is whole seconds since 1970 (the "started_at" of a run)')
    return labels, before if "checked_before" in body else None
