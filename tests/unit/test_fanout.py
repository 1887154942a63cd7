"""The fan-out over in-memory fakes: every Archive at once, hints first, outcomes as answers."""

from __future__ import annotations

from typing import Any

import pytest

from functions.resolver.acknowledgments import AcknowledgmentFailed, Acknowledgments, Delivery
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut, LocationHints
from functions.resolver.resolution import Found, Patience, Resolver
from ibi.core.pairlist import PairList
from ibi.core.persistent_url import parse_persistent_url
from tests.fakes_resolver import MemoryRegistry, ScriptedTransport

A, B, C = "8JMKD3MGP8W/3FSUP4L", "J8LNKB5R7W/3FUQHC5", "LK47B6W/362SFKH"  # registry order
# A prefix no registered Archive owns (issue 24): the fan-out as before owners, hints and all
# (tests/unit/test_owner_first.py has the owners).
ITEM = "D7N2UA7W/35MMLL8"
SAME_PREFIX = "D7N2UA7W/35MMLL9"
ORIGINAL = (
    f"ibi {{ibip {ITEM}}}\nstate Original\ncontenttype Data\nurl http://a.example/doc.pdf\n"
    "urlkey 1427244889-5349022633744855"
)
PAIRS = [("parsedibiurl.ibi", ITEM)]


def enough(answer: PairList) -> bool:
    return answer.word("state") == "Original"


ORIGINAL_ONLY = Patience(usable=enough, preferred=enough)


def make(
    answers: dict[str, str | Exception], *addresses: tuple[str, str]
) -> tuple[FanOut, ScriptedTransport, MemoryRegistry]:
    registry = MemoryRegistry()
    for archive, address in addresses:
        registry.add(archive, address)
    transport = ScriptedTransport(answers=answers)
    fanout = FanOut(transport, ArchiveDirectory(registry), timeout=1.0, deadline=3.0)
    return fanout, transport, registry


ARCHIVES = ((A, "a.example:80"), (B, "b.example:80"), (C, "c.example:80"))


def test_every_included_archive_is_asked_in_one_round() -> None:
    fanout, transport, registry = make({A: ORIGINAL, B: "state Copy"}, *ARCHIVES)
    registry.add("8JMKD3MGP7W/3EPGUE5", "d.example:80", included=False)
    answers = fanout.ask(ITEM, PAIRS, None, correlation_id="req-1")
    assert transport.rounds == [[A, B, C]]
    assert {a.archive: (a.pairs is not None, a.problem) for a in answers} == {
        A: (True, None),
        B: (True, None),
        C: (False, "timeout"),
    }
    assert transport.correlation_ids == ["req-1"] * 3
    assert fanout.requests_made == 3
    assert sorted(registry.notes) == [(A, "answered"), (B, "answered"), (C, "timeout")]


def test_the_message_is_a_url_request_with_the_resolution_pairs() -> None:
    seen: list[Any] = []
    fanout, transport, _ = make({A: ORIGINAL}, ARCHIVES[0])
    original = transport.ask_all

    def spy(requests: Any, **options: Any) -> Any:
        seen.extend(requests.values())
        return original(requests, **options)

    transport.ask_all = spy  # type: ignore[method-assign]
    fanout.ask(ITEM, PAIRS, None)
    [request] = seen
    assert list(request.pairs) == [("servicesubject", "urlRequest"), *PAIRS]
    assert (request.endpoint.host, request.service_ibi) == ("a.example", A)


def test_an_unusable_address_is_an_answerless_archive_not_a_request() -> None:
    fanout, _, _ = make({A: ORIGINAL}, ARCHIVES[0], (B, "not an address/"))
    answers = fanout.ask(ITEM, PAIRS, None)
    assert [(a.archive, a.problem) for a in answers] == [(A, None), (B, "unusable address")]
    assert fanout.requests_made == 1


def test_archives_not_needed_are_left_out_of_the_answers() -> None:
    fanout, _, registry = make({A: ORIGINAL, B: ORIGINAL}, *ARCHIVES)
    answers = fanout.ask(ITEM, PAIRS, ORIGINAL_ONLY)
    assert [a.archive for a in answers] == [A]  # A settled the round; B and C not needed
    assert registry.notes == [(A, "answered")]


def test_a_hint_asks_the_likely_archive_alone_first() -> None:
    fanout, transport, _ = make({C: ORIGINAL}, *ARCHIVES)
    fanout.ask(ITEM, PAIRS, ORIGINAL_ONLY)
    assert transport.rounds == [[A, B, C]]  # no hint yet: everyone; C settles it
    transport.rounds.clear()
    answers = fanout.ask(ITEM, PAIRS, ORIGINAL_ONLY)  # the same IBI: likely C again
    assert transport.rounds == [[C]]
    assert [a.archive for a in answers] == [C]
    assert fanout.requests_made == 4
    transport.rounds.clear()
    fanout.ask(SAME_PREFIX, PAIRS, ORIGINAL_ONLY)  # issue 24: no hint by prefix
    assert transport.rounds == [[A, B, C]]


def test_a_missed_hint_asks_everyone_else_and_learns_again() -> None:
    fanout, transport, _ = make({C: ORIGINAL}, *ARCHIVES)
    fanout.ask(ITEM, PAIRS, ORIGINAL_ONLY)
    transport.answers = {A: ORIGINAL}  # the item moved to A
    transport.rounds.clear()
    answers = fanout.ask(ITEM, PAIRS, ORIGINAL_ONLY)
    assert transport.rounds == [[C], [A, B]]
    assert [(a.archive, a.pairs is not None) for a in answers] == [(C, False), (A, True)]
    assert fanout.hints.likely(ITEM) == A


def test_no_hint_when_every_claim_must_be_seen() -> None:
    fanout, transport, _ = make({C: ORIGINAL}, *ARCHIVES)
    fanout.ask(ITEM, PAIRS, ORIGINAL_ONLY)
    transport.rounds.clear()
    fanout.ask(ITEM, PAIRS, None)  # patience is None: required original, or a bare "+"
    assert transport.rounds == [[A, B, C]]


def test_a_hint_to_an_archive_no_longer_included_is_ignored() -> None:
    fanout, transport, _ = make({A: ORIGINAL}, ARCHIVES[0], ARCHIVES[1])
    fanout.hints.learn(ITEM, C)
    fanout.ask(ITEM, PAIRS, ORIGINAL_ONLY)
    assert transport.rounds == [[A, B]]


def test_the_fanout_is_the_resolutions_port() -> None:
    fanout, transport, _ = make({B: ORIGINAL}, *ARCHIVES)
    resolver = Resolver(fanout.for_request("req-9"))
    found = resolver.resolve(parse_persistent_url(f"/{ITEM}"), "192.0.2.99")
    assert isinstance(found, Found) and found.url == "http://a.example/doc.pdf"
    assert found.answer.archive == B and found.answer.address == "b.example:80"
    assert set(transport.correlation_ids) == {"req-9"}


def test_hints_are_bounded() -> None:
    hints = LocationHints(capacity=0)
    hints.learn(ITEM, A)
    assert hints.likely(ITEM) is None


def test_the_directory_reads_the_registry_every_few_seconds_or_when_told() -> None:
    now = [0.0]
    registry = MemoryRegistry()
    registry.add(A, "a.example:80")
    registry.add(B, "", included=True)  # no address: not asked
    directory = ArchiveDirectory(registry, cache_seconds=5, monotonic=lambda: now[0])
    assert [a.service_ibi for a in directory.included()] == [A]
    registry.add(C, "c.example:80")
    now[0] = 4.0
    assert [a.service_ibi for a in directory.included()] == [A]
    now[0] = 6.0
    assert [a.service_ibi for a in directory.included()] == [A, C]
    directory.forget()
    directory.included()
    assert registry.reads == 3
    directory.note(A, "answered")
    directory.note(A, "timeout")  # within a minute: not written again
    assert registry.notes == [(A, "answered")]


class ListQueue:
    """The acknowledgment queue as a list (queue.py's port)."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def send(self, body: str) -> None:
        self.bodies.append(body)


@pytest.mark.parametrize(
    ("reply", "retried"), [("notice {acknowledgment received}", False), ("notice no", True)]
)
def test_an_acknowledgment_goes_to_the_archive_that_gave_the_url(reply: str, retried: bool) -> None:
    fanout, transport, _ = make({B: ORIGINAL}, *ARCHIVES)
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{ITEM}"), "1.2.3.4")
    assert isinstance(found, Found)
    transport.answers[B] = reply
    queue = ListQueue()
    Acknowledgments(queue, fanout.directory).send(
        found, f"http://resolver.example/{ITEM}", "1.2.3.4", "r"
    )
    assert not transport.gets  # queued, not sent, in the request
    [body] = queue.bodies
    delivery = Delivery(transport, fanout.directory, timeout=1.0)
    if retried:  # raised: the queue delivers it again
        with pytest.raises(AcknowledgmentFailed, match="answered"):
            delivery.deliver(body)
    else:
        delivery.deliver(body)
    [(endpoint, archive, pairs)] = transport.gets
    assert (endpoint.host, archive) == ("b.example", B)
    assert dict(pairs)["servicesubject"] == "acknowledgment"
    assert dict(pairs)["urlkey"] == "1427244889-5349022633744855"


# ---------------------------------------------------------------------------- issue 12

COPY = (
    f"ibi {{ibip {ITEM}}}\nstate Copy\ncontenttype Data\nurl http://b.example/copy.pdf\n"
    "urlkey 1427244889-5349022633744856"
)
OTHER_ORIGINAL = ORIGINAL.replace("a.example", "b.example")


def slow_and_fast(
    answers: dict[str, str | Exception], delays: dict[str, float], *, grace: float
) -> tuple[FanOut, ScriptedTransport, MemoryRegistry]:
    """Archives answering on the fake clock of ScriptedTransport (seconds)."""
    fanout, transport, registry = make(answers, *ARCHIVES)
    transport.delays = delays
    fanout.grace = grace
    return fanout, transport, registry


def test_a_slow_original_is_not_waited_for_past_the_grace() -> None:
    """Issue 12, item 7: a plain resolution takes the fast Copy; the slow Original's answer
    is not awaited (not needed), however long its timeout."""
    fanout, _, registry = slow_and_fast({A: ORIGINAL, B: COPY}, {A: 0.9, B: 0.001}, grace=0.05)
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{ITEM}"), "1.2.3.4")
    assert isinstance(found, Found) and found.url == "http://b.example/copy.pdf"
    assert (A, "answered") not in registry.notes  # its outcome: not needed
    assert fanout.hints.likely(ITEM) is None  # a copy is no hint: the original may be elsewhere


def test_an_original_within_the_grace_is_preferred_to_a_copy() -> None:
    fanout, _, _ = slow_and_fast({A: ORIGINAL, B: COPY}, {A: 0.03, B: 0.001}, grace=0.05)
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{ITEM}"), "1.2.3.4")
    assert isinstance(found, Found) and found.url == "http://a.example/doc.pdf"
    assert fanout.hints.likely(ITEM) == A


def test_without_grace_the_first_usable_answer_wins() -> None:
    fanout, _, _ = slow_and_fast({A: ORIGINAL, B: COPY}, {A: 0.03, B: 0.001}, grace=0.0)
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{ITEM}"), "1.2.3.4")
    assert isinstance(found, Found) and found.url == "http://b.example/copy.pdf"


def test_two_originals_are_heard_named_and_never_hinted() -> None:
    """Issue 12, item 8, and issue 34, rule 2: the round waits the grace after the first
    original, so the second claim is heard on the first request too: named, the same one
    chosen every time (the first by service IBI), and the IBI never hinted."""
    fanout, transport, _ = slow_and_fast(
        {A: ORIGINAL, B: OTHER_ORIGINAL}, {A: 0.01, B: 0.001}, grace=0.05
    )
    for _ in range(3):
        found = Resolver(fanout.for_request("r")).resolve(
            parse_persistent_url(f"/{ITEM}"), "1.2.3.4"
        )
        assert isinstance(found, Found) and found.url == "http://a.example/doc.pdf"
        assert [c.archives for c in found.conflicts] == [(A, B)]
    assert fanout.hints.doubted(ITEM) and fanout.hints.likely(ITEM) is None
    fanout.hints.learn(SAME_PREFIX, A)  # even with a hint for its prefix
    transport.rounds.clear()
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{ITEM}"), "1.2.3.4")
    assert transport.rounds == [[A, B, C]]
    assert isinstance(found, Found) and [c.archives for c in found.conflicts] == [(A, B)]


def test_an_original_answering_first_waits_the_grace_for_a_second_claim() -> None:
    """The grace is what hearing a second claim costs; a copy answering in it is no conflict,
    and the next request asks the original's Archive alone (its hint)."""
    fanout, transport, registry = slow_and_fast(
        {A: ORIGINAL, B: COPY}, {A: 0.001, B: 0.01}, grace=0.05
    )
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{ITEM}"), "1.2.3.4")
    assert isinstance(found, Found) and found.url == "http://a.example/doc.pdf"
    assert (B, "answered") in registry.notes and found.conflicts == ()
    assert not fanout.hints.doubted(ITEM)  # a copy is no conflict
    transport.rounds.clear()
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{ITEM}"), "1.2.3.4")
    assert isinstance(found, Found) and transport.rounds == [[A]]


def test_the_conflict_is_a_response_header_and_a_metric() -> None:
    from functions.resolver import resolving
    from functions.resolver.resolving import Lookup, Redirect, ResolvingService

    fanout, transport, _ = slow_and_fast(
        {A: ORIGINAL, B: OTHER_ORIGINAL}, {A: 0.001, B: 0.01}, grace=0.05
    )
    acknowledgments = Acknowledgments(ListQueue(), fanout.directory)
    service = ResolvingService(fanout, acknowledgments)
    url = parse_persistent_url(f"/{ITEM}")
    service.resolve(Lookup(url, f"http://r.example/{ITEM}", "1.2.3.4", "c-0"))  # heard late
    resolving.metrics.clear_metrics()
    redirect = service.resolve(Lookup(url, f"http://r.example/{ITEM}", "1.2.3.4", "c-1"))
    assert isinstance(redirect, Redirect) and redirect.url == "http://a.example/doc.pdf"
    assert redirect.headers == {"IBI-Conflict": f'two-originals; ibi="{ITEM}"; archives="{A} {B}"'}
    assert resolving.metrics.metric_set["TwoOriginals"]["Value"] == [1.0]
    transport.answers[B] = COPY  # one original again: no header, nothing counted
    resolving.metrics.clear_metrics()
    redirect = service.resolve(Lookup(url, f"http://r.example/{ITEM}", "1.2.3.4", "c-2"))
    assert isinstance(redirect, Redirect) and redirect.headers == {}
    assert "TwoOriginals" not in resolving.metrics.metric_set
    resolving.metrics.clear_metrics()


@pytest.mark.parametrize(
    ("value", "grace"), [(None, 0.05), ("", 0.05), ("0", 0.0), ("120", 0.12), ("999", 0.999)]
)
def test_the_grace_is_a_setting_in_milliseconds(value: str | None, grace: float) -> None:
    from functions.resolver.settings import ResolverSettings

    env = {"IBI_RESOLVER_TABLE": "t", "IBI_PEPPER_FILE": "/p"}
    if value is not None:
        env["IBI_ORIGINAL_GRACE_MS"] = value
    assert ResolverSettings.from_environment(env).original_grace == grace


@pytest.mark.parametrize("value", ["-1", "1001", "50.5", "soon"])
def test_a_grace_out_of_bounds_is_refused(value: str) -> None:
    from functions.resolver.settings import ConfigurationError, ResolverSettings

    env = {"IBI_RESOLVER_TABLE": "t", "IBI_PEPPER_FILE": "/p", "IBI_ORIGINAL_GRACE_MS": value}
    with pytest.raises(ConfigurationError, match="IBI_ORIGINAL_GRACE_MS"):
        ResolverSettings.from_environment(env)
    short = {**env, "IBI_ORIGINAL_GRACE_MS": "500", "IBI_ARCHIVE_TIMEOUT_SECONDS": "0.5"}
    with pytest.raises(ConfigurationError, match="under IBI_ARCHIVE_TIMEOUT_SECONDS"):
        ResolverSettings.from_environment(short)
