"""In-memory stand-ins for the resolver's ports: the registry, the throttle, the Archive
transport, the pepper.

No socket, no DynamoDB: unit tests of the registration service and the fan-out use only these.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from functions.resolver.network import Endpoint, Lead, Outcome, Request, Result, UnsafeAddress
from functions.resolver.registry import Contact, PrefixTaken, RegisteredArchive
from functions.resolver.throttle import Tally
from ibi.core.pairlist import PairList, parse_pair_list


class MemoryRegistry:
    """The :class:`Registry` contract, in memory, atomic under a lock."""

    def __init__(self) -> None:
        self.items: dict[str, RegisteredArchive] = {}
        self.notes: list[tuple[str, str]] = []
        self.reads = 0  # how many times the whole registry was listed (a Scan in DynamoDB)
        self.generation_reads = 0  # how many times the generation was read (a GetItem)
        self.changes = 0  # the generation
        self.owners: dict[str, str] = {}  # prefix -> its owner's service IBI (the claims)
        self._lock = threading.Lock()

    def get(self, service_ibi: str) -> RegisteredArchive | None:
        with self._lock:
            return self.items.get(service_ibi)

    def register(self, service_ibi: str, forms: dict[str, str], key_hash: str) -> None:
        with self._lock:
            known = self.items.get(service_ibi)
            included = known.included if known else False
            base = known or RegisteredArchive(service_ibi, forms, key_hash)
            self.items[service_ibi] = replace(
                base, forms=forms, key_hash=key_hash, included=included
            )
            self.changes += 1

    def include(self, service_ibi: str, contact: Contact, *, at: str, confirmed: bool) -> None:
        with self._lock:
            self.items[service_ibi] = replace(
                self.items[service_ibi],
                included=True,
                changed_at=at,
                address=contact.address,
                protocol=contact.protocol or "HTTP",
                ip=contact.ip,
                platform_version=contact.platform_version,
                admin_email=contact.admin_email,
                confirmed=confirmed,
            )
            self.changes += 1

    def exclude(self, service_ibi: str, *, at: str) -> None:
        with self._lock:
            self.items[service_ibi] = replace(
                self.items[service_ibi], included=False, changed_at=at
            )
            self.changes += 1

    def note_answer(self, service_ibi: str, *, at: str, outcome: str) -> None:
        with self._lock:
            self.notes.append((service_ibi, outcome))
            if service_ibi in self.items:
                self.items[service_ibi] = replace(
                    self.items[service_ibi], last_answer_at=at, last_outcome=outcome[:200]
                )

    def archives(self) -> list[RegisteredArchive]:
        with self._lock:
            self.reads += 1
            return sorted(self.items.values(), key=lambda a: a.service_ibi)

    def generation(self) -> int:
        with self._lock:
            self.generation_reads += 1
            return self.changes

    def claim_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None:
        with self._lock:
            for prefix in prefixes:
                owner = self.owners.get(prefix, service_ibi)
                if owner != service_ibi:
                    raise PrefixTaken(prefix, owner)
            self.owners.update(dict.fromkeys(prefixes, service_ibi))

    def set_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None:
        with self._lock:
            self.items[service_ibi] = replace(self.items[service_ibi], prefixes=tuple(prefixes))
            self.changes += 1

    def release_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None:
        with self._lock:
            for prefix in prefixes:
                if self.owners.get(prefix) == service_ibi:
                    del self.owners[prefix]

    def add(
        self,
        service_ibi: str,
        address: str,
        *,
        included: bool = True,
        prefixes: Sequence[str] = (),
    ) -> None:
        """An Archive registered and switched on directly (for fan-out tests), owning
        ``prefixes`` (none by default: the fan-out as before owners)."""
        with self._lock:
            self.items[service_ibi] = RegisteredArchive(
                service_ibi,
                {"ibip": service_ibi},
                "hash",
                included=included,
                address=address,
                prefixes=tuple(prefixes),
            )
            self.owners.update(dict.fromkeys(prefixes, service_ibi))
            self.changes += 1


class MemoryThrottle:
    """The :class:`Throttle` contract, in memory: the same fixed windows as DynamoDB's."""

    def __init__(self) -> None:
        self.items: dict[str, Tally] = {}
        self.expires_at: dict[str, int] = {}  # each item's TTL, as the table keeps it
        self.reads = 0
        self._lock = threading.Lock()

    def tally(self, counter: str, *, now: int) -> Tally:
        with self._lock:
            self.reads += 1
            return self.items.get(counter, Tally())

    def count_failure(self, counter: str, *, now: int, window: int, weight: int = 1) -> Tally:
        with self._lock:
            held = self.items.get(counter)
            if held is not None and held.window_ends > now:
                counted = Tally(held.failures + weight, held.window_ends)
            else:
                counted = Tally(weight, now + window)
                self.expires_at[counter] = now + window
            self.items[counter] = counted
            return counted


@dataclass
class ScriptedTransport:
    """The :class:`Transport` contract over scripted Archives, keyed by their service IBI.

    ``answers[ibi]`` is the pair-list text an Archive answers, or an exception it fails with;
    an Archive not in ``answers`` times out. ``delays[ibi]`` is when it answers (seconds on a
    fake clock; 0 by default): answers arrive by delay, then in request order. ``ask_all``
    reports the Archives that answer after the first ``enough`` answer, plus ``grace`` (none
    when it also passes ``at_once``), as not needed, and gives their answers to ``late``, as
    the real transport does. With a ``lead``, that Archive is asked first (a round of its
    own in ``rounds``); the others only if it answers at or after the head start (their
    delays counted from it: a second entry in ``rounds``), else they are not asked.
    """

    answers: dict[str, str | Exception] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)
    refused_hosts: set[str] = field(default_factory=set)
    rounds: list[list[str]] = field(default_factory=list)  # the service IBIs of each round
    gets: list[tuple[Endpoint, str, list[tuple[str, str]]]] = field(default_factory=list)
    correlation_ids: list[str | None] = field(default_factory=list)

    def vet(self, endpoint: Endpoint) -> str:
        if endpoint.host in self.refused_hosts:
            raise UnsafeAddress(f"{endpoint.host} resolves to a non-public address")
        return "192.0.2.1"

    def send(self, request: Request, *, timeout: float) -> PairList:
        self.gets.append((request.endpoint, request.service_ibi, list(request.pairs)))
        answer = self.answers.get(request.service_ibi, TimeoutError("timeout"))
        if isinstance(answer, Exception):
            raise answer
        return parse_pair_list(answer)

    def ask_all(
        self,
        requests: Mapping[str, Request | None],
        *,
        timeout: float,
        deadline: float,
        enough: Callable[[PairList], bool] | None = None,
        grace: float = 0.0,
        at_once: Callable[[PairList], bool] | None = None,
        late: Callable[[str, PairList], None] | None = None,
        lead: Lead | None = None,
    ) -> list[Outcome]:
        start = dict.fromkeys(requests, 0.0)  # when each is asked, on the fake clock
        first = requests.get(lead.key) if lead is not None else None
        if lead is not None and first is not None:
            self.rounds.append([lead.key])
            others = [key for key in requests if key != lead.key]
            if self._when(lead.key) < lead.head_start:
                self.correlation_ids.append(first.correlation_id)
                unusable = [
                    Outcome.failed(k, "unusable address", 0.0)
                    for k in others
                    if requests[k] is None
                ]
                asked = [Outcome.not_asked(k) for k in others if requests[k] is not None]
                return [*unusable, self._outcome(lead.key, first, False), *asked]
            self.rounds.append(others)
            start.update(dict.fromkeys(others, lead.head_start))
        else:
            self.rounds.append(list(requests))
        outcomes: list[Outcome] = []
        until: float | None = None  # the fake clock's time when the round ends

        def when(key: str) -> float:
            return start[key] + self._when(key)

        for key, request in sorted(requests.items(), key=lambda item: when(item[0])):
            if request is not None:
                self.correlation_ids.append(request.correlation_id)
            after = until is not None and when(key) >= until
            outcomes.append(self._outcome(key, request, after))
            pairs = outcomes[-1].pairs
            if pairs is not None and lead is not None and key == lead.key and lead.settles(pairs):
                until = when(key) if until is None else min(until, when(key))
            elif until is None and pairs is not None and enough is not None and enough(pairs):
                best = at_once is not None and at_once(pairs)
                until = when(key) + (0.0 if best else grace)
        for outcome in outcomes:  # not needed, yet answering: heard late, as the real one does
            answer = self.answers.get(outcome.key)
            if late is not None and outcome.result is Result.NOT_NEEDED and isinstance(answer, str):
                late(outcome.key, parse_pair_list(answer))
        return outcomes

    def _when(self, key: str) -> float:
        """When the Archive answers on the fake clock (never, if it times out)."""
        return self.delays.get(key, 0.0) if key in self.answers else float("inf")

    def _outcome(self, key: str, request: Request | None, settled: bool) -> Outcome:
        if request is None:
            return Outcome.failed(key, "unusable address", 0.0)
        if settled:
            return Outcome.not_needed(key, 0.0)
        answer = self.answers.get(key)
        if answer is None:
            return Outcome.failed(key, "timeout", 1.0)
        if isinstance(answer, Exception):
            return Outcome.failed(key, f"unreachable: {type(answer).__name__}", 0.0)
        return Outcome.answered(key, parse_pair_list(answer), 0.0)


@dataclass(frozen=True)
class FixedPepper:
    """The :class:`PepperSource` contract: always the same bytes."""

    value: bytes = b"a pepper for tests"

    def load(self) -> bytes:
        return self.value


@dataclass
class MemorySecrets:
    """A Secrets Manager client holding secrets in memory (``get_secret_value`` only)."""

    secrets: dict[str, str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def get_secret_value(self, *, SecretId: str) -> dict[str, Any]:
        self.calls.append(SecretId)
        return {"SecretString": self.secrets[SecretId]}
