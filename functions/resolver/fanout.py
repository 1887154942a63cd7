"""The fan-out: one urlRequest to every included Archive at once, location hints first.

:meth:`FanOut.for_request` gives the resolution its port (:data:`AskAll`): the Archives of the
directory are asked through the transport, concurrently, and their outcomes become
:class:`ArchiveAnswer` values. A round ends when every Archive answered, at the deadline, or
``grace`` seconds after the first usable answer (:class:`Patience`).

Owner first (issues 24 and 34): when a registered Archive owns the IBI's prefix, its answer is
the authority's (``authority.py``), so it is asked alone first, whatever the resolution asks
(also with the original required, and for a bare ``+``); its answer, whatever it says, ends
the round. If it names where the original moved (a transfer record, ``ibi.core.transfers``),
that Archive is asked alone next, and so on along the records, at most
:data:`MAX_RECORD_HOPS`. The owner is asked alone only for a head start (a hedged request,
:class:`OwnerPace`): if it has not answered by then, everyone else is asked too, in the same
round, which still ends with the owner's answer; an owner whose last request failed is asked
together with everyone, and waited for only a grace after their first answer, until it
answers again (an answer heard after its round ends counts: its head start is back).
Everyone else is asked after the owner only when it did not answer (failed, timed out,
switched off) and they were not asked yet, within a grace after the first of them: their
answers only name the claims heard and the copies offered, beside the owner's kept answer.
Every answer says what its Archive is for the IBI (:class:`Trust`); the owner's outcome is
among them even when it is switched off.

For a prefix no Archive owns, every Archive is asked, and the round waits the grace after the
first usable answer, so that a second claim of the original is heard; a location hint (where
this IBI was found lately) lets the likely Archive be asked alone first, never for an IBI two
Archives were seen claiming. Hints by prefix are gone: they let one Archive's answer capture
every IBI of a prefix.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import replace

from aws_lambda_powertools import Logger, Metrics, single_metric
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from functions.resolver.authority import MAX_RECORD_HOPS, ArchiveAnswer, Trust
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.network import Endpoint, Lead, Outcome, Request, Result, Transport
from functions.resolver.registry import RegisteredArchive
from functions.resolver.resolution import AskAll, Check, Patience, any_answer, never
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList
from ibi.core.transfers import moved_to

logger = Logger(service="resolver", child=True)
metrics = Metrics(namespace="ibi", service="resolver")  # one metric set per process

DEADLINE_SHARE = 0.8  # of the resolution's deadline, for one round
# The owner's head start (OwnerPace; measured in BENCHMARKS.md, "Owners at scale"): twice the
# slowest of its last 16 answers, within 0.5 s and 1 s; 1 s before it was heard from. Each
# hedge that fires costs a request to every other Archive, so the floor sits above an
# Archive's cold start (about 0.3-0.5 s on Lambda): with 50 ms, an owner with a cold start
# every 25 requests cost 40 more requests per resolution at 1,000 Archives.
HEAD_START_FACTOR = 2.0
HEAD_START_FLOOR = 0.5
HEAD_START_CEILING = 1.0
RECENT_ANSWERS = 16


class LocationHints:
    """Where IBIs of prefixes no Archive owns were found lately, by IBI.

    Kept in memory, per execution environment, bounded (least recently used out). A hint only
    reorders the asking: the hinted Archive is asked first, alone, and everyone else if it
    does not settle the round. It never replaces the full fan-out when every claim matters,
    nor for an IBI two Archives were seen claiming (:meth:`doubt`; as bounded).
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._where: OrderedDict[str, str] = OrderedDict()
        self._doubted: OrderedDict[str, None] = OrderedDict()  # IBIs claimed by two Archives
        self._lock = threading.Lock()

    def learn(self, ibi: str, archive: str) -> None:
        label = parse_label(ibi).label
        with self._lock:
            self._where[label] = archive
            self._where.move_to_end(label)
            while len(self._where) > self._capacity:
                self._where.popitem(last=False)

    def doubt(self, ibi: str) -> None:
        """Two Archives claim ``ibi``'s original: ask everyone for it from now on."""
        label = parse_label(ibi).label
        with self._lock:
            self._where.pop(label, None)
            self._doubted[label] = None
            self._doubted.move_to_end(label)
            while len(self._doubted) > self._capacity:
                self._doubted.popitem(last=False)

    def doubted(self, ibi: str) -> bool:
        """Whether two Archives were seen claiming ``ibi``'s original (here, lately)."""
        label = parse_label(ibi).label
        with self._lock:
            return label in self._doubted

    def likely(self, ibi: str) -> str | None:
        label = parse_label(ibi).label
        with self._lock:
            if label in self._doubted or label not in self._where:
                return None
            self._where.move_to_end(label)
            return self._where[label]


class OwnerPace:
    """How long each owner is asked alone before everyone else is asked too (a hedged
    request), per execution environment, bounded (least recently used out).

    ``factor`` times the slowest of its last ``recent`` answer times (a round that ended
    before it answered counts the time it had taken so far), within [``floor``,
    ``ceiling``]; ``ceiling`` before it was heard from. An owner that did not answer in its
    last round (it failed, timed out, or the round ended without it) is down: no head start
    (everyone is asked at once, the owner with them, its original still winning at once)
    until it answers again.
    """

    def __init__(
        self,
        *,
        factor: float = HEAD_START_FACTOR,
        floor: float = HEAD_START_FLOOR,
        ceiling: float = HEAD_START_CEILING,
        recent: int = RECENT_ANSWERS,
        capacity: int = 10_000,
    ) -> None:
        self.factor, self.floor, self.ceiling = factor, floor, ceiling
        self._recent = recent
        self._capacity = capacity
        self._times: OrderedDict[str, deque[float]] = OrderedDict()
        self._down: set[str] = set()
        self._revived: set[str] = set()  # heard late, before its round was noted
        self._lock = threading.Lock()

    def head_start(self, owner: str) -> float:
        with self._lock:
            if owner in self._down:
                return 0.0
            times = self._times.get(owner)
            if not times:
                return self.ceiling
            return min(self.ceiling, max(self.floor, self.factor * max(times)))

    def revived(self, owner: str) -> None:
        """``owner`` answered after a round that did not wait for it: up again (its head
        start back on the next round), so a slow moment never leaves it down for good."""
        with self._lock:
            self._down.discard(owner)
            self._revived.add(owner)

    def heard(self, outcome: Outcome) -> None:
        """The owner's part of a round: an answer, a failure, or the time it had taken when
        the round ended without it."""
        with self._lock:
            revived = outcome.key in self._revived
            self._revived.discard(outcome.key)
            if outcome.result is Result.ANSWERED:
                self._down.discard(outcome.key)
            elif not (revived and outcome.result is Result.NOT_NEEDED):
                self._down.add(outcome.key)  # (an answer heard late already said it is up)
            if outcome.result is Result.FAILED:
                return
            times = self._times.setdefault(outcome.key, deque(maxlen=self._recent))
            times.append(outcome.seconds)
            self._times.move_to_end(outcome.key)
            while len(self._times) > self._capacity:
                gone, _ = self._times.popitem(last=False)
                self._down.discard(gone)


def _meets(answer: ArchiveAnswer, check: Check) -> bool:
    return answer.pairs is not None and check(answer.pairs)


class FanOut:
    """Asks the directory's included Archives, all at once, through the transport."""

    def __init__(
        self,
        transport: Transport,
        directory: ArchiveDirectory,
        *,
        timeout: float,
        deadline: float,
        grace: float = 0.0,
        hints: LocationHints | None = None,
        pace: OwnerPace | None = None,
    ) -> None:
        self.transport = transport
        self.directory = directory
        self.timeout = timeout  # per Archive
        self.deadline = deadline  # per resolution
        self.grace = grace  # after the first usable answer, for the others (an Original's)
        self.hints = hints or LocationHints()
        self.pace = pace or OwnerPace()
        self.requests_made = 0  # urlRequests sent by this environment (for the benchmarks)

    def for_request(self, correlation_id: str) -> AskAll:
        """The resolution's port, for one request (its correlation id goes to the Archives)."""

        def ask(
            ibi: str, pairs: Sequence[tuple[str, str]], patience: Patience | None
        ) -> list[ArchiveAnswer]:
            return self.ask(ibi, pairs, patience, correlation_id=correlation_id)

        return ask

    def ask(
        self,
        ibi: str,
        pairs: Sequence[tuple[str, str]],
        patience: Patience | None = None,
        *,
        correlation_id: str = "",
    ) -> list[ArchiveAnswer]:
        """urlRequest ``pairs`` about ``ibi``; each answer says what its Archive is for ``ibi``.

        For an owned prefix (``patience`` given, not ``everyone``): the owner, then the
        Archives its transfer records name, each alone; the others only when the owner does
        not answer (module notes). With ``patience`` None, or ``everyone``: every included
        Archive at once, waited for as it says (None: every one).
        """
        archives = self.directory.included()
        owner = self.directory.owner_of(ibi)
        message = [("servicesubject", "urlRequest"), *pairs]
        if owner is not None and patience is not None and not patience.everyone:
            asked, everyone = self._owner_first(
                owner, archives, message=message, correlation_id=correlation_id, ibi=ibi
            )
            if everyone or any(a.trust is Trust.OWNER and a.pairs is not None for a in asked):
                return self._with_owner(ibi, owner, asked)
            # The authority did not answer: everyone else, for the claims and copies its kept
            # answer (or the 504) names; a grace after the first of them, never a silent one.
            done = {a.archive for a in asked}
            rest = [a for a in archives if a.service_ibi not in done]
            more = (
                self._round(rest, message, correlation_id, ibi, any_answer, grace=self.grace)
                if rest
                else []
            )
            return self._with_owner(ibi, owner, asked + more)
        if patience is not None and patience.everyone:
            enough = None if patience.usable is never else patience.usable
            answers = self._round(archives, message, correlation_id, ibi, enough, grace=self.grace)
            return self._with_owner(ibi, owner, answers) if owner is not None else answers
        asked = []
        # Only when one answer may settle the round (never when every claim must be seen).
        likely = self.hints.likely(ibi) if patience is not None and owner is None else None
        hinted = [a for a in archives if a.service_ibi == likely]
        if hinted and patience is not None:
            asked = self._round(hinted, message, correlation_id, ibi, patience.preferred, grace=0.0)
            metrics.add_metric(name="HintsTried", unit=MetricUnit.Count, value=1)
            if any(_meets(answer, patience.preferred) for answer in asked):
                metrics.add_metric(name="HintsHit", unit=MetricUnit.Count, value=1)
                return asked
            archives = [a for a in archives if a.service_ibi != likely]
        enough = patience.usable if patience is not None else None
        # Every claim of the original heard within the grace (two are a conflict, and the
        # choice between them is the same every time); a second one heard late is remembered.
        late = self._late_claims(ibi, patience.preferred) if patience is not None else None
        answers = asked + self._round(
            archives, message, correlation_id, ibi, enough, grace=self.grace, late=late
        )
        if owner is not None:  # every claim heard (patience None): each one checked
            return self._with_owner(ibi, owner, answers)
        if patience is not None:
            self._learn(ibi, answers, patience.preferred)
        return answers

    def _owner_first(
        self,
        owner: RegisteredArchive,
        archives: list[RegisteredArchive],
        *,
        message: list[tuple[str, str]],
        correlation_id: str,
        ibi: str,
    ) -> tuple[list[ArchiveAnswer], bool]:
        """The owner alone for its head start, and everyone else too if it has not answered
        by then; the owner's answer, whatever it is, ends the round. Then each Archive a
        trusted transfer record names, alone (at most :data:`MAX_RECORD_HOPS` records). The
        answers, and whether everyone was asked."""
        included = {a.service_ibi: a for a in archives}
        first = included.get(owner.service_ibi)
        if first is None:
            return [], False
        head_start = self.pace.head_start(first.service_ibi)
        lead = Lead(first.service_ibi, head_start, any_answer)
        round_ = [first, *(a for a in archives if a is not first)]
        # An owner that did not answer its last round (down) is not waited for beyond a grace
        # after the others' first answer (its kept answer is given); heard late, it is up again.
        down = head_start == 0.0 and len(round_) > 1
        owner_key = first.service_ibi

        def late(key: str, _: PairList) -> None:
            if key == owner_key:
                self.pace.revived(key)

        outcomes = self._exchange(
            round_,
            message,
            correlation_id,
            any_answer if down else None,
            self.grace if down else 0.0,
            lead=lead,
            late=late,
        )
        self._pace(first, outcomes)
        everyone = len(round_) > 1 and all(o.result is not Result.NOT_ASKED for o in outcomes)
        if everyone:
            metrics.add_metric(name="OwnerHedged", unit=MetricUnit.Count, value=1)
        asked = self._trusted(ibi, owner, self._answers(outcomes, round_, ibi))
        for _ in range(MAX_RECORD_HOPS):
            following = self._named(asked, included)
            if following is None:
                break
            more = self._round([following], message, correlation_id, ibi, None, grace=0.0)
            asked = self._trusted(ibi, owner, asked + more)
        if any(a.trust is Trust.OWNER and a.pairs is not None for a in asked):
            metrics.add_metric(name="OwnerFirstHit", unit=MetricUnit.Count, value=1)
        return asked, everyone

    def _with_owner(
        self, ibi: str, owner: RegisteredArchive, answers: list[ArchiveAnswer]
    ) -> list[ArchiveAnswer]:
        """``answers`` with their trust, and the owner's outcome among them even when it was
        not asked (switched off): the resolution knows whose word was missing."""
        answers = self._trusted(ibi, owner, answers)
        if any(a.archive == owner.service_ibi for a in answers):
            return answers
        problem = "switched off" if not owner.included else "not asked"
        missing = ArchiveAnswer(
            owner.service_ibi,
            owner.address or "",
            None,
            problem,
            trust=Trust.OWNER,
            owner=owner.service_ibi,
        )
        return [missing, *answers]

    def _pace(self, owner: RegisteredArchive, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            if outcome.key == owner.service_ibi:
                self.pace.heard(outcome)

    def _named(
        self, answers: list[ArchiveAnswer], included: dict[str, RegisteredArchive]
    ) -> RegisteredArchive | None:
        """The first included Archive a trusted answer's transfer record names that has not
        answered yet (None: none)."""
        heard = {a.archive for a in answers}
        for answer in answers:
            if not answer.trusted or answer.pairs is None:
                continue
            label = moved_to(answer.pairs)
            moved = self.directory.registered(label) if label else None
            if moved is not None and moved.service_ibi not in heard:
                return included.get(moved.service_ibi)
        return None

    def _trusted(
        self, ibi: str, owner: RegisteredArchive, answers: list[ArchiveAnswer]
    ) -> list[ArchiveAnswer]:
        """``answers``, each saying whether its Archive may claim ``ibi``'s original: the
        owner, and the Archives named by a transfer record of an Archive already trusted."""
        trusted = {owner.service_ibi: Trust.OWNER}
        for _ in range(MAX_RECORD_HOPS):
            named = {
                moved.service_ibi
                for a in answers
                if a.archive in trusted
                and a.pairs is not None
                and (label := moved_to(a.pairs)) is not None
                and (moved := self.directory.registered(label)) is not None
                and moved.service_ibi not in trusted
            }
            if not named:
                break
            trusted.update(dict.fromkeys(named, Trust.NAMED))
        return [
            replace(a, trust=trusted.get(a.archive, Trust.UNTRUSTED), owner=owner.service_ibi)
            for a in answers
        ]

    def _late_claims(self, ibi: str, preferred: Check) -> Callable[[str, PairList], None]:
        """What to do with an answer that came after its round ended: a second claim of the
        original is remembered (:meth:`LocationHints.doubt`), so the next rounds for ``ibi``
        wait the grace for every claim, and the conflict is named from then on."""

        def heard(archive: str, pairs: PairList) -> None:
            if preferred(pairs):
                self.hints.doubt(ibi)
                logger.warning(
                    "a claim of the original came late", extra={"ibi": ibi, "archive": archive}
                )

        return heard

    def _learn(self, ibi: str, answers: list[ArchiveAnswer], preferred: Check) -> None:
        """The hint: the one Archive whose answer is the best there is; none if two claim it."""
        best = [answer.archive for answer in answers if _meets(answer, preferred)]
        if len(best) == 1:
            self.hints.learn(ibi, best[0])
        elif best:
            self.hints.doubt(ibi)

    def _round(
        self,
        archives: list[RegisteredArchive],
        message: list[tuple[str, str]],
        correlation_id: str,
        ibi: str,
        enough: Check | None,
        *,
        grace: float,
        at_once: Check | None = None,
        late: Callable[[str, PairList], None] | None = None,
    ) -> list[ArchiveAnswer]:
        outcomes = self._exchange(
            archives, message, correlation_id, enough, grace, at_once=at_once, late=late
        )
        return self._answers(outcomes, archives, ibi)

    def _exchange(
        self,
        archives: list[RegisteredArchive],
        message: list[tuple[str, str]],
        correlation_id: str,
        enough: Check | None,
        grace: float,
        *,
        at_once: Check | None = None,
        late: Callable[[str, PairList], None] | None = None,
        lead: Lead | None = None,
    ) -> list[Outcome]:
        """One round through the transport: each Archive's outcome (the owner's pace noted)."""
        started = time.monotonic()
        requests = {a.service_ibi: _request(a, message, correlation_id) for a in archives}
        outcomes = self.transport.ask_all(
            requests,
            timeout=self.timeout,
            deadline=started + self.deadline * DEADLINE_SHARE,
            enough=enough,
            grace=grace,
            at_once=at_once,
            late=late,
            lead=lead,
        )
        self.requests_made += sum(
            1
            for outcome in outcomes
            if requests.get(outcome.key) is not None and outcome.result is not Result.NOT_ASKED
        )
        return outcomes

    def _answers(
        self, outcomes: list[Outcome], archives: list[RegisteredArchive], ibi: str
    ) -> list[ArchiveAnswer]:
        by_key = {a.service_ibi: a for a in archives}
        return [
            self._answer(outcome, by_key[outcome.key], ibi)
            for outcome in outcomes
            # settled first (it may still answer), or not asked: the lead answered in time
            if outcome.result not in (Result.NOT_NEEDED, Result.NOT_ASKED)
        ]

    def _answer(self, outcome: Outcome, archive: RegisteredArchive, ibi: str) -> ArchiveAnswer:
        self.directory.note(outcome.key, outcome.text)
        if outcome.result is Result.FAILED:
            logger.info(
                "archive did not answer",
                extra={"archive": outcome.key, "problem": outcome.problem, "ibi": ibi},
            )
            metrics.add_metric(name="ArchiveFailures", unit=MetricUnit.Count, value=1)
            archive_failure(outcome.key)
        return ArchiveAnswer(outcome.key, archive.address or "", outcome.pairs, outcome.problem)


def archive_failure(archive: str) -> None:
    """``ArchiveFailures`` by ``Archive`` too (its service IBI): the alarm of the stack watches
    the worst Archive (infra/operations.py), the dashboard names it. One EMF record per
    failure, printed at once; off where metrics are (tests, local mode)."""
    if is_metrics_disabled():
        return
    dimensions = {"service": "resolver", "Archive": archive}
    with single_metric(
        name="ArchiveFailures",
        unit=MetricUnit.Count,
        value=1,
        namespace="ibi",
        default_dimensions=dimensions,
    ):
        pass


def _request(
    archive: RegisteredArchive, message: list[tuple[str, str]], correlation_id: str
) -> Request | None:
    """The urlRequest to ``archive``, or None when its address is unusable."""
    endpoint = _endpoint(archive.address or "", archive.protocol)
    return Request(endpoint, archive.service_ibi, message, correlation_id) if endpoint else None


@functools.lru_cache(maxsize=8192)
def _endpoint(address: str, protocol: str) -> Endpoint | None:
    """An Archive's endpoint, parsed once per address (a round of 1,000 builds 1,000 requests,
    even when only the owner is asked: its lead)."""
    try:
        return Endpoint.parse(address, protocol)
    except InvalidInput:
        return None
