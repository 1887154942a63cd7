"""One persistent URL, end to end: the resolution over the fan-out, the answer, its effects.

The resolution (``resolution.py``) decides; this service runs it for one request, checks the
URL it found before anyone is sent there, queues the acknowledgment (before it answers), and
logs and counts what happened. The route only parses the request and answers what this returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from functions.resolver.acknowledgments import Acknowledgments
from functions.resolver.authority import UNTRUSTED_ORIGINAL, ArchiveAnswer, Conflict
from functions.resolver.fanout import FanOut
from functions.resolver.resolution import Alert, Degraded, KeptAnswers, Patience, Resolver
from ibi.core.pairlist import PairList
from ibi.core.persistent_url import PersistentURL

logger = Logger(service="resolver", child=True)
metrics = Metrics(namespace="ibi", service="resolver")  # one metric set per process

MAX_LOCATION = 4096
CONFLICT_HEADER = "IBI-Conflict"  # claims of the original heard (docs/resolver.md)
DEGRADED_HEADER = "IBI-Degraded"  # answered without the authority's word of now
BAD_ANSWER = Alert(502, "Bad answer", "The Archive holding this item answered an unusable URL.")
# The metric each alert of a resolution counts, by its status. Written out: infra/operations.py
# alarms on Resolution409 and Resolution504, and a test finds each alarmed name here.
ALERT_METRICS = {
    404: "Resolution404",
    409: "Resolution409",
    410: "Resolution410",
    502: "Resolution502",
    504: "Resolution504",
}


@dataclass(frozen=True, slots=True)
class Lookup:
    """One request to resolve."""

    url: PersistentURL
    persistent_url: str  # absolute, as the client asked for it
    client_ips: str  # the client's IP then its proxies (Table 6.6)
    correlation_id: str
    accept_language: str | None = None
    holdings: bool = False  # also ask for the holdings pairs (a negotiated answer, issue 16)
    user_agent: str | None = None  # the reader's (None: not known); acknowledged only (issue 35)


@dataclass(frozen=True, slots=True)
class Redirect:
    url: str
    headers: dict[str, str] = field(default_factory=dict)  # besides Location
    ibi: str = ""  # the IBI whose answer gave the URL
    pairs: PairList | None = None  # that answer (with the holdings pairs, when asked for)


def conflict_header(conflicts: tuple[Conflict, ...]) -> str:
    """``two-originals; ibi="…"; archives="A B"`` or ``untrusted-original; ibi="…";
    archives="H"; owner="A"``, one per conflict, comma-separated.

    Labels and service IBIs hold no ``"``, ``\\``, comma or space: the value needs no escaping.
    """
    return ", ".join(
        f'{c.kind}; ibi="{c.ibi}"; archives="{" ".join(c.archives)}"'
        + (f'; owner="{c.owner}"' if c.owner else "")
        for c in conflicts
    )


def degraded_header(degraded: tuple[Degraded, ...]) -> str:
    """``authority-down; ibi="…"; archive="A"; kept="<when>"`` or ``verified-copy; ibi="…";
    archive="A"; copy="B"``, one per degraded step, comma-separated (no value needs escaping:
    labels, service IBIs and ISO dates hold no ``"``, ``\\``, comma or space)."""
    return ", ".join(
        f'{d.kind}; ibi="{d.ibi}"; archive="{d.authority}"'
        + (f'; kept="{d.at}"' if d.at else "")
        + (f'; copy="{d.copy}"' if d.copy else "")
        for d in degraded
    )


def degraded_note(degraded: tuple[Degraded, ...]) -> str:
    """The line a page shows for a degraded answer."""
    notes = []
    for d in degraded:
        if d.copy:
            notes.append(
                f"{d.ibi}: its Archive ({d.authority}) offers no location now; a copy at "
                f"{d.copy} whose files it lists with the same SHA-256 is given instead."
            )
        else:
            notes.append(
                f"{d.ibi}: its Archive ({d.authority}) did not answer; this answer is what it "
                f"said last ({d.at})."
            )
    return " ".join(notes)


def answer_headers(
    conflicts: tuple[Conflict, ...], degraded: tuple[Degraded, ...]
) -> dict[str, str]:
    """The headers that say what a resolution heard and how it answered."""
    headers = {}
    if conflicts:
        headers[CONFLICT_HEADER] = conflict_header(conflicts)
    if degraded:
        headers[DEGRADED_HEADER] = degraded_header(degraded)
    return headers


@dataclass(frozen=True, slots=True)
class Refusal:
    alert: Alert
    persistent_url: str | None  # shown with the alert, when the resolution itself answered

    @property
    def headers(self) -> dict[str, str]:
        return answer_headers(self.alert.conflicts, self.alert.degraded)


def safe_location(url: str) -> bool:
    """Whether ``url`` may go in a Location header: http(s), short, ASCII, no whitespace."""
    return (
        url.startswith(("http://", "https://"))
        and len(url) <= MAX_LOCATION
        and not any(c in url for c in "\r\n\t ")
        and url.isascii()
    )


class ResolvingService:
    def __init__(
        self,
        fanout: FanOut,
        acknowledgments: Acknowledgments,
        kept: KeptAnswers | None = None,
    ) -> None:
        self.fanout = fanout
        self.acknowledgments = acknowledgments
        self.kept = kept  # what each authority last said (kept.py)

    def owner_of(self, ibi: str) -> str | None:
        owner = self.fanout.directory.owner_of(ibi)
        return owner.service_ibi if owner is not None else None

    def _resolver(self, ask: Callable[..., list[ArchiveAnswer]], lookup: Lookup) -> Resolver:
        return Resolver(
            ask, accept_language=lookup.accept_language, kept=self.kept, owner_of=self.owner_of
        )

    def resolve(self, lookup: Lookup) -> Redirect | Refusal:
        plain = self.fanout.for_request(lookup.correlation_id)

        def with_holdings(
            ibi: str, pairs: Sequence[tuple[str, str]], wait: Patience | None
        ) -> list[ArchiveAnswer]:
            from ibi.core.holdings import REQUEST_PAIR  # here: not for a cold start's redirect

            return plain(ibi, [*pairs, REQUEST_PAIR], wait)

        ask = with_holdings if lookup.holdings else plain
        resolver = self._resolver(ask, lookup)
        started = time.monotonic()
        result = resolver.resolve(lookup.url, lookup.client_ips)
        tombstone = result.tombstone if isinstance(result, Alert) else None
        if tombstone is not None and not tombstone.described and not lookup.holdings:
            # A 410 asked without the holdings pairs (a browser): once more with them, for
            # what the tombstone says was there. Only a deleted IBI pays for this round.
            asked = resolver.trace.rounds
            resolver = self._resolver(with_holdings, lookup)
            result = resolver.resolve(lookup.url, lookup.client_ips)
            resolver.trace.rounds[:0] = asked
        elapsed_ms = (time.monotonic() - started) * 1000
        logger.info(
            "resolved",
            extra={
                "ibi": lookup.url.ibi.label,
                "rounds": resolver.trace.rounds,
                "status": result.status,
                "ms": round(elapsed_ms, 1),
            },
        )
        metrics.add_metric(name="ResolutionMs", unit=MetricUnit.Milliseconds, value=elapsed_ms)
        if isinstance(result, Alert):
            metrics.add_metric(
                name=ALERT_METRICS[result.status],
                unit=MetricUnit.Count,
                value=1,
            )
            self._count(result.conflicts, result.degraded)
            return Refusal(result, lookup.persistent_url)
        if not safe_location(result.url):
            logger.warning(
                "archive answered an unusable URL", extra={"archive": result.answer.archive}
            )
            return Refusal(BAD_ANSWER, None)
        self.acknowledgments.send(
            result,
            lookup.persistent_url,
            lookup.client_ips,
            lookup.correlation_id,
            lookup.user_agent,
        )
        metrics.add_metric(name="Resolution302", unit=MetricUnit.Count, value=1)
        self._count(result.conflicts, result.degraded)  # the 302 stays (spec §5.3)
        headers = answer_headers(result.conflicts, result.degraded)
        return Redirect(result.url, headers, ibi=result.ibi, pairs=result.answer.pairs)

    @staticmethod
    def _count(conflicts: tuple[Conflict, ...], degraded: tuple[Degraded, ...]) -> None:
        """Claims heard and degraded answers: said (the headers), logged and counted."""
        if degraded:
            metrics.add_metric(name="DegradedAnswers", unit=MetricUnit.Count, value=1)
            logger.warning(
                "answered without the authority", extra={"degraded": degraded_header(degraded)}
            )
        if not conflicts:
            return
        metrics.add_metric(name="TwoOriginals", unit=MetricUnit.Count, value=1)
        if any(c.kind == UNTRUSTED_ORIGINAL for c in conflicts):
            metrics.add_metric(name="UntrustedOriginals", unit=MetricUnit.Count, value=1)
        logger.warning(
            "two archives claim the original",
            extra={
                "conflict": conflict_header(conflicts),
                "relations": [str(c.relation) for c in conflicts],
            },
        )
