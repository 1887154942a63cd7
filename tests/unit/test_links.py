"""Issue 28 point 2: the items' external URLs checked politely (functions/archive/links.py).

Pure: a fake web answers each (method, URL), a fake clock paces the hosts; the real fetcher
(outbound.LinkFetcher) only where it refuses an address before any connection.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from functions.archive.errors import BadRequest, NotHeld, Unprocessable
from functions.archive.holdings import with_holdings
from functions.archive.links import (
    FetchFailed,
    LinkChecker,
    LinkChecks,
    Outcome,
    Problem,
    Reply,
    host_key,
    next_check,
    run_request,
)
from functions.archive.model import ContentType, Forms, Item, LinkCheck, LinkStatus, State
from functions.archive.outbound import LinkFetcher
from functions.resolver.holdings import Holding, HoldingsView
from functions.shared.addresses import AddressPolicy
from ibi.core.dates import iso_date
from ibi.core.holdings import REQUEST_PAIR, from_pairs
from ibi.core.pairlist import PairList
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryItemStore

BASE = "https://archive.example.org"
START = Decimal(1_800_000_000)
Answer = Reply | FetchFailed | Callable[[], Reply]


class FakeWeb:
    """Answers by (method, URL), else by URL; records each request and when it was sent."""

    def __init__(self, clock: FakeClock, answers: dict[Any, Answer]) -> None:
        self.clock = clock
        self.answers = answers
        self.sent: list[tuple[str, str, Decimal]] = []

    def __call__(self, method: str, url: str, *, timeout: float) -> Reply:
        self.sent.append((method, url, self.clock()))
        answer = self.answers.get((method, url), self.answers.get(url))
        if answer is None:
            raise AssertionError(f"unexpected request {method} {url}")
        if isinstance(answer, FetchFailed):
            raise answer
        return answer() if callable(answer) else answer


def checker(web: FakeWeb, clock: FakeClock, **options: Any) -> LinkChecker:
    return LinkChecker(web, clock=clock, sleep=clock.sleep, **options)


def check(web: FakeWeb, clock: FakeClock, url: str, **options: Any) -> Outcome:
    return checker(web, clock, **options).check(url, deadline=float(clock()) + 600)


def item(label: str, url: str | None, **fields: Any) -> Item:
    return Item(
        ibi=Forms(ibip=label),
        state=State.ORIGINAL,
        timestamp=START,
        content_type=ContentType.DATA,
        external_url=url,
        **fields,
    )


# ---------------------------------------------------------------------------- one URL


def test_a_url_answering_head_with_200_is_ok_after_one_request() -> None:
    clock = FakeClock(START)
    web = FakeWeb(clock, {"https://a.example/x": Reply(200)})
    assert check(web, clock, "https://a.example/x") == Outcome(True, http_status=200)
    assert [method for method, _, _ in web.sent] == ["HEAD"]


def test_a_head_refused_with_405_is_asked_again_with_get() -> None:
    clock = FakeClock(START)
    url = "https://a.example/x"
    web = FakeWeb(clock, {("HEAD", url): Reply(405), ("GET", url): Reply(200)})
    assert check(web, clock, url).ok
    assert [method for method, _, _ in web.sent] == ["HEAD", "GET"]


def test_a_head_dropped_by_the_server_is_asked_again_with_get() -> None:
    clock = FakeClock(START)
    url = "https://a.example/x"
    dropped = FetchFailed(Problem.UNREACHABLE, "cannot reach a.example: RemoteDisconnected")
    web = FakeWeb(clock, {("HEAD", url): dropped, ("GET", url): Reply(200)})
    assert check(web, clock, url).ok


def test_a_404_to_head_is_broken_without_a_get() -> None:
    clock = FakeClock(START)
    web = FakeWeb(clock, {"https://a.example/gone": Reply(404)})
    outcome = check(web, clock, "https://a.example/gone")
    assert outcome == Outcome(False, Problem.HTTP, "HTTP 404", 404)
    assert [method for method, _, _ in web.sent] == ["HEAD"]


def test_a_500_to_get_too_is_broken_with_its_status() -> None:
    clock = FakeClock(START)
    web = FakeWeb(clock, {"https://a.example/x": Reply(500)})
    outcome = check(web, clock, "https://a.example/x")
    assert (outcome.ok, outcome.problem, outcome.http_status) == (False, Problem.HTTP, 500)
    assert [method for method, _, _ in web.sent] == ["HEAD", "GET"]


def test_redirects_are_followed_up_to_five_hops() -> None:
    clock = FakeClock(START)
    hops = {f"https://a.example/{n}": Reply(301, f"/{n + 1}") for n in range(5)}
    web = FakeWeb(clock, {**hops, "https://a.example/5": Reply(200)})
    assert check(web, clock, "https://a.example/0").ok
    assert len(web.sent) == 6


def test_a_redirect_loop_is_broken_after_five_redirects() -> None:
    clock = FakeClock(START)
    web = FakeWeb(
        clock,
        {
            "https://a.example/ping": Reply(302, "https://a.example/pong"),
            "https://a.example/pong": Reply(302, "/ping"),
        },
    )
    outcome = check(web, clock, "https://a.example/ping")
    assert outcome.problem is Problem.TOO_MANY_REDIRECTS
    assert outcome.reason is not None and "more than 5 redirects" in outcome.reason
    assert len(web.sent) == 6  # the first request and five redirects, HEAD only
    assert {method for method, _, _ in web.sent} == {"HEAD"}


def test_a_redirect_to_another_scheme_is_broken_and_not_followed() -> None:
    clock = FakeClock(START)
    web = FakeWeb(clock, {"https://a.example/x": Reply(302, "ftp://a.example/x")})
    outcome = check(web, clock, "https://a.example/x")
    assert outcome.problem is Problem.NOT_A_URL
    assert len(web.sent) == 1


def test_a_redirect_to_a_malformed_url_is_broken_not_a_failed_run() -> None:
    """Issue 35: ``Location: http://[x/`` raised out of the checker (500 for the whole run)."""
    clock = FakeClock(START)
    web = FakeWeb(clock, {"https://a.example/x": Reply(302, "http://[x/")})
    outcome = check(web, clock, "https://a.example/x")
    assert (outcome.ok, outcome.problem, outcome.http_status) == (False, Problem.NOT_A_URL, 302)
    assert outcome.reason is not None and "malformed URL 'http://[x/'" in outcome.reason


def test_a_timeout_is_broken_and_not_asked_again() -> None:
    clock = FakeClock(START)
    slow = FetchFailed(Problem.TIMEOUT, "no answer from a.example within 10 s")
    web = FakeWeb(clock, {"https://a.example/x": slow})
    outcome = check(web, clock, "https://a.example/x")
    assert outcome.problem is Problem.TIMEOUT and len(web.sent) == 1


# ---------------------------------------------------------------------------- addresses


@pytest.fixture
def no_connection(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Any connection attempt is recorded (and refused): none must be made."""
    attempts: list[Any] = []

    def connect(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise AssertionError(f"contacted {args!r}")

    monkeypatch.setattr(socket, "create_connection", connect)
    return attempts


def fetcher(policy: AddressPolicy | None = None) -> LinkFetcher:
    return LinkFetcher(policy or AddressPolicy(), user_agent="ibi-link-checker/test", max_read=16)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:10.0.0.1]/",
        "http://192.168.1.1/",
    ],
)
def test_a_private_address_is_broken_as_refused_and_never_contacted(
    url: str, no_connection: list[Any]
) -> None:
    clock = FakeClock(START)
    outcome = LinkChecker(fetcher(), clock=clock, sleep=clock.sleep).check(
        url, deadline=float(START) + 60
    )
    assert outcome.problem is Problem.REFUSED_ADDRESS
    assert outcome.reason is not None and "not contacted" in outcome.reason
    assert no_connection == []


def test_a_redirect_to_a_private_address_is_refused_and_never_contacted(
    no_connection: list[Any],
) -> None:
    clock = FakeClock(START)
    real = fetcher()

    def web(method: str, url: str, *, timeout: float) -> Reply:
        if url == "https://public.example/doc":  # a public host (answered here, not fetched)
            return Reply(302, "http://169.254.169.254/latest/meta-data/")
        return real(method, url, timeout=timeout)  # the hop: vetted before any connection

    outcome = LinkChecker(web, clock=clock, sleep=clock.sleep).check(
        "https://public.example/doc", deadline=float(START) + 60
    )
    assert outcome.problem is Problem.REFUSED_ADDRESS
    assert outcome.http_status == 302
    assert no_connection == []


def test_a_host_that_does_not_resolve_is_broken_as_dns(
    monkeypatch: pytest.MonkeyPatch, no_connection: list[Any]
) -> None:
    def nowhere(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", nowhere)
    with pytest.raises(FetchFailed) as failed:
        fetcher()("HEAD", "https://no-such-host.example/x", timeout=5)
    assert failed.value.problem is Problem.DNS
    assert "does not resolve" in failed.value.reason


# ---------------------------------------------------------------------------- pacing


def test_one_host_gets_one_request_a_second_while_another_host_is_not_held_back() -> None:
    clock = FakeClock(START)
    web = FakeWeb(
        clock,
        {
            **{f"https://slow.example/{n}": Reply(200) for n in range(3)},
            "https://other.example/x": Reply(200),
        },
    )
    links = checker(web, clock)
    deadline = float(START) + 600
    for url in [*(f"https://slow.example/{n}" for n in range(3)), "https://other.example/x"]:
        assert links.check(url, deadline=deadline).ok
    times = {url: at for _, url, at in web.sent}
    slow = [times[f"https://slow.example/{n}"] for n in range(3)]
    assert [b - a for a, b in itertools.pairwise(slow)] == [1, 1]
    assert times["https://other.example/x"] == slow[-1]  # its host had no request: no wait
    assert clock.slept == [1.0, 1.0]


def test_one_address_is_one_host_however_a_url_spells_it() -> None:
    """Issue 35: seven spellings of one IP got seven requests within 10 ms; they are one host."""
    spellings = [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0x7f.0.0.1",
        "[::ffff:127.0.0.1]",
        "127.0.0.1.",
    ]
    assert {host_key(spelling) for spelling in spellings} == {"127.0.0.1"}
    assert host_key("Example.ORG.") == "example.org" and host_key("[2001:DB8::1]") == "2001:db8::1"
    clock = FakeClock(START)
    urls = [f"http://{spelling}/x" for spelling in spellings]
    web = FakeWeb(clock, dict.fromkeys(urls, Reply(200)))
    links = checker(web, clock)
    for url in urls:
        assert links.check(url, deadline=float(START) + 600).ok
    times = [at for _, _, at in web.sent]
    assert [b - a for a, b in itertools.pairwise(times)] == [1] * 6  # one a second


def test_a_host_paced_beyond_the_run_s_time_is_left_for_the_next_run() -> None:
    clock = FakeClock(START)
    store = MemoryItemStore()
    for n in range(3):
        store.create(item(f"8JMKD3MGP8W/35MME{n + 2}E", f"https://slow.example/{n}"))
    web = FakeWeb(clock, {f"https://slow.example/{n}": Reply(200) for n in range(3)})
    checks = LinkChecks(store, checker(web, clock, per_host=10.0), base_url=BASE, clock=clock)
    run = checks.run(seconds=15)  # room for two requests to the host, ten seconds apart
    assert (len(run.results), run.left) == (2, 1)
    assert len(web.sent) == 2


# ---------------------------------------------------------------------------- the items


def checks_over(
    store: MemoryItemStore, clock: FakeClock, answers: dict[Any, Answer]
) -> tuple[LinkChecks, FakeWeb]:
    web = FakeWeb(clock, answers)
    return LinkChecks(store, checker(web, clock), base_url=BASE, clock=clock, workers=1), web


def test_only_live_items_with_a_url_outside_the_archive_are_checked() -> None:
    clock = FakeClock(START)
    store = MemoryItemStore()
    store.create(item("8JMKD3MGP8W/35MME4E", "https://elsewhere.example/a"))
    store.create(item("8JMKD3MGP8W/35MME5E", f"{BASE}/col/8JMKD3MGP8W/35MME4E"))
    store.create(item("8JMKD3MGP8W/35MME6E", None))
    store.create(item("8JMKD3MGP8W/35MME7E", "https://elsewhere.example/b", pending=True))
    checks, web = checks_over(store, clock, {"https://elsewhere.example/a": Reply(200)})
    run = checks.run(seconds=60)
    assert [result.item.key for result in run.results] == ["8JMKD3MGP8W/35MME4E"]
    assert [url for _, url, _ in web.sent] == ["https://elsewhere.example/a"]


def test_a_run_resumes_with_the_items_checked_longest_ago() -> None:
    clock = FakeClock(START)
    store = MemoryItemStore()
    for n, checked in ((4, 300), (5, None), (6, 100)):
        label, url = f"8JMKD3MGP8W/35MME{n}E", f"https://h{n}.example/"
        store.create(item(label, url))
        if checked is not None:
            held = store.get(label)
            assert held is not None
            store.note_link_check(held, LinkCheck(url, LinkStatus.OK, int(START) - checked))
    checks, web = checks_over(
        store, clock, {f"https://h{n}.example/": Reply(200) for n in (4, 5, 6)}
    )
    assert [i.key for i in checks.due()] == [
        "8JMKD3MGP8W/35MME5E",  # never checked
        "8JMKD3MGP8W/35MME4E",  # checked 300 s ago
        "8JMKD3MGP8W/35MME6E",  # checked 100 s ago
    ]
    checks.run(seconds=60)
    assert [url for _, url, _ in web.sent] == [
        "https://h5.example/",
        "https://h4.example/",
        "https://h6.example/",
    ]
    # checked now: none is due for a pass that began before this run
    assert checks.due(checked_before=int(START)) == []


def test_a_broken_link_keeps_its_last_success_and_since_when_it_is_broken() -> None:
    clock = FakeClock(START)
    store = MemoryItemStore()
    label, url = "8JMKD3MGP8W/35MME4E", "https://a.example/x"
    store.create(item(label, url))
    answers: dict[Any, Answer] = {url: Reply(200)}
    checks, _ = checks_over(store, clock, answers)
    checks.run(seconds=60)
    answers[url] = Reply(404)
    clock.now += 86400
    checks.run(seconds=60)
    clock.now += 86400
    run = checks.run(seconds=60)
    held = store.get(label)
    assert held is not None and held.link is not None
    assert held.link.status is LinkStatus.BROKEN and held.link.reason == "HTTP 404"
    assert held.link.last_success == int(START)
    assert held.link.broken_since == int(START) + 86400
    assert held.link.checked == int(START) + 2 * 86400
    assert [result.item.key for result in run.broken] == [label]


def test_a_check_of_a_url_the_item_no_longer_has_is_not_kept() -> None:
    clock = FakeClock(START)
    store = MemoryItemStore()
    label = "8JMKD3MGP8W/35MME4E"
    store.create(item(label, "https://old.example/x"))

    def moved_meanwhile() -> Reply:  # the depositor changes the URL during the check
        held = store.get(label)
        assert held is not None
        store.replace(held.changed(START, external_url="https://new.example/y"), expected_version=0)
        return Reply(404)

    checks, _ = checks_over(store, clock, {"https://old.example/x": moved_meanwhile})
    run = checks.run(seconds=60)
    assert [result.recorded for result in run.results] == [False]
    held = store.get(label)
    assert held is not None and held.link is None


def test_a_check_survives_a_change_that_kept_the_url() -> None:
    clock = FakeClock(START)
    store = MemoryItemStore()
    label, url = "8JMKD3MGP8W/35MME4E", "https://a.example/x"
    store.create(item(label, url))

    def retitled_meanwhile() -> Reply:
        held = store.get(label)
        assert held is not None
        store.replace(held.changed(START, language="pt"), expected_version=0)
        return Reply(200)

    checks, _ = checks_over(store, clock, {url: retitled_meanwhile})
    assert [result.recorded for result in checks.run(seconds=60).results] == [True]
    held = store.get(label)
    assert held is not None and held.link is not None and held.link.status is LinkStatus.OK


def test_a_check_after_the_url_changed_starts_afresh() -> None:
    earlier = LinkCheck(
        "https://old.example/", LinkStatus.BROKEN, 5, last_success=1, broken_since=2
    )
    now = next_check(
        earlier, "https://new.example/", Outcome(False, Problem.HTTP, "HTTP 500", 500), 9
    )
    assert (now.last_success, now.broken_since) == (None, 9)


def test_named_items_are_checked_and_others_are_refused_with_what_to_send() -> None:
    clock = FakeClock(START)
    store = MemoryItemStore()
    store.create(item("8JMKD3MGP8W/35MME4E", "https://a.example/x"))
    store.create(item("8JMKD3MGP8W/35MME5E", None))
    checks, _ = checks_over(store, clock, {"https://a.example/x": Reply(200)})
    run = checks.run(seconds=60, labels=["8JMKD3MGP8W/35MME4E"])
    assert len(run.results) == 1 and run.left == 0
    with pytest.raises(Unprocessable, match="no url outside this Archive"):
        checks.run(seconds=60, labels=["8JMKD3MGP8W/35MME5E"])
    with pytest.raises(NotHeld):
        checks.run(seconds=60, labels=["8JMKD3MGP8W/35MME6E"])
    with pytest.raises(Unprocessable, match="not an IBI"):
        checks.run(seconds=60, labels=["nonsense"])


def test_the_broken_list_names_only_items_whose_current_url_is_broken() -> None:
    clock = FakeClock(START)
    store = MemoryItemStore()
    store.create(item("8JMKD3MGP8W/35MME4E", "https://a.example/ok"))
    store.create(item("8JMKD3MGP8W/35MME5E", "https://a.example/gone"))
    checks, _ = checks_over(
        store, clock, {"https://a.example/ok": Reply(200), "https://a.example/gone": Reply(410)}
    )
    checks.run(seconds=60)
    found, more = checks.broken(after=None, limit=100)
    assert [i.key for i in found] == ["8JMKD3MGP8W/35MME5E"] and more is None


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"ibis": "8JMKD3MGP8W/35MME4E"},
        {"ibis": [1]},
        {"checked_before": "x"},
        {"checked_before": -1},
        {"checked_before": None},
        {"ibis": None},
        {"other": 1},
    ],
)
def test_a_malformed_check_request_says_what_to_send(body: Any) -> None:
    with pytest.raises(BadRequest):
        run_request(body)


def test_a_check_request_reads_its_items_and_its_pass() -> None:
    assert run_request({}) == ([], None)
    assert run_request({"ibis": ["8JMKD3MGP8W/35MME4E"], "checked_before": 5}) == (
        ["8JMKD3MGP8W/35MME4E"],
        5,
    )


# ---------------------------------------------------------------------------- holdings


def test_a_broken_link_shows_in_the_holdings_views_with_since_when_and_why() -> None:
    url = "https://elsewhere.example/paper"
    check = LinkCheck(
        url,
        LinkStatus.BROKEN,
        int(START) + 86400,
        last_success=int(START) - 86400,
        broken_since=int(START),
        problem="http",
        reason="HTTP 404",
        http_status=404,
    )
    held = replace(item("8JMKD3MGP8W/35MME4E", url), link_check=check)
    pairs = with_holdings(PairList([("ibi", ("ibip", held.key))]), held, dict([REQUEST_PAIR]))
    report = from_pairs(pairs)
    assert report is not None
    assert (report.link, report.link_reason) == ("broken", "HTTP 404")
    assert report.link_broken_since == iso_date(START)
    holding = Holding("archive-a", "a.example", "Original", url=url, report=report)
    assert holding.to_mapping()["link"]["broken_since"] == iso_date(START)
    (problem,) = HoldingsView(held.key, [holding]).problems()
    assert problem == f"archive-a leads to a broken URL ({url}) since {iso_date(START)}: HTTP 404"


def test_a_check_of_a_url_the_item_no_longer_has_is_not_reported() -> None:
    check = LinkCheck("https://old.example/", LinkStatus.BROKEN, int(START), broken_since=1)
    held = replace(item("8JMKD3MGP8W/35MME4E", "https://new.example/"), link_check=check)
    pairs = with_holdings(PairList([("ibi", ("ibip", held.key))]), held, dict([REQUEST_PAIR]))
    report = from_pairs(pairs)
    assert report is not None and report.link is None


# ---------------------------------------------------------------------------- local mode


def test_local_mode_checks_each_archive_s_links_every_period(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from ibi.client import ArchiveClient
    from ibi_tools.local.federation import LocalFederation

    asked: list[str] = []
    done = threading.Event()

    def check_links(self: ArchiveClient, ibis: Any = ()) -> Any:
        asked.append(self.endpoint)
        if len(asked) >= 4:
            done.set()
        yield {"checked": 1, "broken": 0, "left": 0, "results": []}

    monkeypatch.setattr(ArchiveClient, "check_links", check_links)
    federation = LocalFederation(data_dir=tmp_path, archive_ports=(18810, 18820))
    federation.check_links_every = 0.01  # type: ignore[assignment]
    runner = threading.Thread(target=federation._check_links, daemon=True)
    runner.start()
    assert done.wait(10)
    federation._stopped.set()
    runner.join(10)
    assert not runner.is_alive()
    assert set(asked) == {"http://127.0.0.1:18810", "http://127.0.0.1:18820"}
