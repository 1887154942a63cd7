"""The fan-out: one urlRequest to every included Archive at once, location hints first.

:meth:`FanOut.for_request` gives the resolution its port (:data:`AskAll`): the Archives of the
directory are asked through the transport, concurrently, and their outcomes become
:class:`ArchiveAnswer` values. A round ends when every Archive answered, at the deadline, or
``grace`` seconds after the first usable answer (:class:`Patience`): the first non-empty
answer of seed 001 §6, with a short chance for the original's. When the first usable answer
is already the preferred one (the original's), the round ends at once: nothing better can
come, and a slow Archive costs nothing.

Owner first (issue 24): when one answer may settle the round and a registered, included
Archive owns the IBI's prefix, the owner is asked alone first; if its answer is the
original's, that is the round (one request). If it names where the original moved (a transfer
record, ``ibi.core.transfers``), that Archive is asked alone next, and so on along the
records, at most :data:`MAX_RECORD_HOPS`. Otherwise everyone else is asked, and a claim of the
original from them is never what ends the round early (it is not trusted: ``resolution.py``).
Every answer says whether its Archive is trusted for the IBI (:class:`Trust`). For a prefix no
Archive owns, a location hint (where this IBI was found lately) lets the likely Archive be
asked alone first; never for an IBI two Archives were seen claiming. Hints by prefix are gone:
they let one Archive's answer capture every IBI of a prefix.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from functions.resolver.directory import ArchiveDirectory
from functions.resolver.network import Endpoint, Outcome, Request, Result, Transport
from functions.resolver.registry import RegisteredArchive
from functions.resolver.resolution import ArchiveAnswer, AskAll, Check, Patience, Trust
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList
from ibi.core.transfers import moved_to

logger = Logger(service="resolver", child=True)
metrics = Metrics(namespace="ibi", service="resolver")  # one metric set per process

DEADLINE_SHARE = 0.8  # of the resolution's deadline, for one round
MAX_RECORD_HOPS = 4  # transfer records followed from the owner, one Archive each


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
    ) -> None:
        self.transport = transport
        self.directory = directory
        self.timeout = timeout  # per Archive
        self.deadline = deadline  # per resolution
        self.grace = grace  # after the first usable answer, for the others (an Original's)
        self.hints = hints or LocationHints()
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
        """urlRequest ``pairs`` to every included Archive; the owner (then the Archives its
        transfer records name), or else the hinted one, first and alone (module notes).

        With ``patience`` None every Archive is waited for (up to the deadline). Each answer
        says whether its Archive is trusted for ``ibi``.
        """
        archives = self.directory.included()
        owner = self.directory.owner_of(ibi)
        message = [("servicesubject", "urlRequest"), *pairs]
        if patience is not None and owner is not None:
            asked = self._owner_first(
                owner,
                archives,
                message=message,
                correlation_id=correlation_id,
                ibi=ibi,
                patience=patience,
            )
            if any(_meets(a, patience.preferred) and a.trusted for a in asked):
                return asked
            done = {a.archive for a in asked}
            archives = [a for a in archives if a.service_ibi not in done]
            # The original's answer is not to come from anyone else: a claim of it ends no
            # round, and only a usable answer of another kind (a copy's) starts the grace.
            usable, preferred = patience.usable, patience.preferred

            def other(answer: PairList) -> bool:
                return usable(answer) and not preferred(answer)

            more = self._round(archives, message, correlation_id, ibi, other, grace=self.grace)
            return self._trusted(ibi, owner, asked + more)
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
        # The original's answer ends the round at once, unless two Archives were seen claiming
        # it: then the others get the grace, so that the conflict is heard and named.
        best, late = None, None
        if patience is not None:
            late = self._late_claims(ibi, patience.preferred)
            if not self.hints.doubted(ibi):
                best = patience.preferred
        answers = asked + self._round(
            archives,
            message,
            correlation_id,
            ibi,
            enough,
            grace=self.grace,
            at_once=best,
            late=late,
        )
        if owner is not None:  # every claim heard (patience None): each one checked
            return self._trusted(ibi, owner, answers)
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
        patience: Patience,
    ) -> list[ArchiveAnswer]:
        """The owner alone, then each Archive a transfer record names, alone, while the
        answers are not the original's (at most :data:`MAX_RECORD_HOPS` records)."""
        included = {a.service_ibi: a for a in archives}
        asked: list[ArchiveAnswer] = []
        following: RegisteredArchive | None = included.get(owner.service_ibi)
        for _ in range(MAX_RECORD_HOPS + 1):
            if following is None:
                break
            answers = self._trusted(
                ibi,
                owner,
                asked + self._round([following], message, correlation_id, ibi, None, grace=0.0),
            )
            if len(answers) == len(asked):
                break
            asked, last = answers, answers[-1]
            if _meets(last, patience.preferred):
                metrics.add_metric(name="OwnerFirstHit", unit=MetricUnit.Count, value=1)
                break
            named = moved_to(last.pairs) if last.pairs is not None else None
            moved = self.directory.registered(named) if named else None
            following = None
            if moved is not None and moved.service_ibi not in {a.archive for a in asked}:
                following = included.get(moved.service_ibi)
        return asked

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
        started = time.monotonic()
        requests = {a.service_ibi: _request(a, message, correlation_id) for a in archives}
        self.requests_made += sum(1 for request in requests.values() if request is not None)
        outcomes = self.transport.ask_all(
            requests,
            timeout=self.timeout,
            deadline=started + self.deadline * DEADLINE_SHARE,
            enough=enough,
            grace=grace,
            at_once=at_once,
            late=late,
        )
        by_key = {a.service_ibi: a for a in archives}
        return [
            self._answer(outcome, by_key[outcome.key], ibi)
            for outcome in outcomes
            if outcome.result is not Result.NOT_NEEDED  # settled first; it may still answer
        ]

    def _answer(self, outcome: Outcome, archive: RegisteredArchive, ibi: str) -> ArchiveAnswer:
        self.directory.note(outcome.key, outcome.text)
        if outcome.result is Result.FAILED:
            logger.info(
                "archive did not answer",
                extra={"archive": outcome.key, "problem": outcome.problem, "ibi": ibi},
            )
            metrics.add_metric(name="ArchiveFailures", unit=MetricUnit.Count, value=1)
        return ArchiveAnswer(outcome.key, archive.address or "", outcome.pairs, outcome.problem)


def _request(
    archive: RegisteredArchive, message: list[tuple[str, str]], correlation_id: str
) -> Request | None:
    """The urlRequest to ``archive``, or None when its address is unusable."""
    try:
        endpoint = Endpoint.parse(archive.address or "", archive.protocol)
    except InvalidInput:
        return None
    return Request(endpoint, archive.service_ibi, message, correlation_id)
