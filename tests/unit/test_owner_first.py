"""Owner first (issue 24): the owner of an IBI's prefix is asked alone first, a transfer record
leads to where the original went, and a claim from anyone else is never followed; the owner's
answer is the answer (issue 34): a stranger's claim changes nothing, also with the original
required, and with the owner down what it said last is given, said so."""

from __future__ import annotations

from functions.resolver import resolving
from functions.resolver.acknowledgments import Acknowledgments
from functions.resolver.authority import Trust
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut
from functions.resolver.kept import MemoryKept
from functions.resolver.resolution import AUTHORITY_DOWN, Alert, Found, Resolver
from functions.resolver.resolving import Lookup, Redirect, Refusal, ResolvingService
from ibi.core.persistent_url import parse_persistent_url
from tests.fakes_resolver import MemoryRegistry, ScriptedTransport

# Service IBIs of four Archives, each of its own prefix (so each owns it).
OWNER = "8JMKD3MGP8W/3FSUP4L"  # owns 8JMKD3MGP8W, ITEM's prefix
RECEIVER = "J8LNKB5R7W/3FUQHC5"
COPIER = "LK47B6W/362SFKH"
HOSTILE = "D7N2UA7W/3EPGUE5"
ITEM = "8JMKD3MGP8W/35MMLL8"
FRESH = [f"8JMKD3MGP8W/35MML{c}" for c in "23456789ABCDEFGHJKLMNPQR"]  # 24 IBIs of the prefix
UNOWNED = "3SJEG8DTKW/35MMLL8"  # a prefix no registered Archive owns


def original(ibi: str, where: str, extra: str = "") -> str:
    return (
        f"ibi {{ibip {ibi}}}\nstate Original\ncontenttype Data\nurl http://{where}/{ibi}\n"
        f"urlkey 1427244889-5349022633744855\n{extra}"
    )


def copy(ibi: str, where: str, extra: str = "") -> str:
    return original(ibi, where, extra).replace("state Original", "state Copy")


def moved_to(receiver: str) -> str:
    return f"transfer.archiveservice {{ibip {receiver}}}\ntransfer.timestamp 2024-05-01T12:00:00Z\n"


class PerIBI(ScriptedTransport):
    """Scripted Archives answering by IBI: ``by_ibi[archive][ibi]`` (else nothing held)."""

    def __init__(self, by_ibi: dict[str, dict[str, str]], down: set[str] = frozenset()) -> None:
        super().__init__()
        self.by_ibi = by_ibi
        self.down = set(down)
        self.asked: list[tuple[str, str]] = []  # (archive, ibi) of each urlRequest

    def ask_all(self, requests, **options):  # type: ignore[no-untyped-def]
        ibi = next(dict(r.pairs)["parsedibiurl.ibi"] for r in requests.values() if r)
        self.asked += [(key, ibi) for key in requests]
        self.answers = {
            key: self.by_ibi.get(key, {}).get(ibi, "") for key in requests if key not in self.down
        }
        return super().ask_all(requests, **options)


def federation(
    by_ibi: dict[str, dict[str, str]], down: set[str] = frozenset()
) -> tuple[FanOut, PerIBI]:
    registry = MemoryRegistry()
    for archive in (OWNER, RECEIVER, COPIER, HOSTILE):
        registry.add(archive, f"{archive[:4].lower()}.example:80")
    transport = PerIBI(by_ibi, down)
    fanout = FanOut(transport, ArchiveDirectory(registry), timeout=1.0, deadline=3.0, grace=0.05)
    return fanout, transport


def resolve(fanout: FanOut, path: str) -> Found | Alert:
    return Resolver(fanout.for_request("r")).resolve(parse_persistent_url(path), "192.0.2.9")


def test_the_owner_of_a_prefix_is_its_service_ibis() -> None:
    fanout, _ = federation({})
    owner = fanout.directory.owner_of(ITEM)
    assert owner is not None and owner.service_ibi == OWNER
    assert fanout.directory.owner_of(UNOWNED) is None


def test_a_owner_holding_the_original_costs_one_request() -> None:
    fanout, transport = federation({OWNER: {ITEM: original(ITEM, "owner")}})
    found = resolve(fanout, f"/{ITEM}")
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"
    assert transport.rounds == [[OWNER]] and fanout.requests_made == 1
    assert found.answer.trust is Trust.OWNER and found.conflicts == ()


def test_b_an_original_transferred_once_costs_two_requests() -> None:
    fanout, transport = federation(
        {
            OWNER: {ITEM: copy(ITEM, "owner", moved_to(RECEIVER))},
            RECEIVER: {ITEM: original(ITEM, "receiver")},
            HOSTILE: {ITEM: original(ITEM, "hostile")},
        }
    )
    found = resolve(fanout, f"/{ITEM}")
    assert isinstance(found, Found) and found.url == f"http://receiver/{ITEM}"
    assert transport.rounds == [[OWNER], [RECEIVER]] and fanout.requests_made == 2
    assert found.answer.trust is Trust.NAMED


def test_a_chain_of_transfer_records_is_followed_from_the_owner() -> None:
    fanout, transport = federation(
        {
            OWNER: {ITEM: copy(ITEM, "owner", moved_to(RECEIVER))},
            RECEIVER: {ITEM: copy(ITEM, "receiver", moved_to(COPIER))},
            COPIER: {ITEM: original(ITEM, "third")},
        }
    )
    found = resolve(fanout, f"/{ITEM}")
    assert isinstance(found, Found) and found.url == f"http://third/{ITEM}"
    assert transport.rounds == [[OWNER], [RECEIVER], [COPIER]]


def test_c_the_owner_down_answers_what_it_said_last_never_a_strangers_copy() -> None:
    """Issue 34, rule 3: the owner down. Nothing kept: 504, naming the copy it did not follow
    (nothing vouches for it). Kept from when the owner answered: that answer, said so."""
    answers = {OWNER: {ITEM: original(ITEM, "owner")}, COPIER: {ITEM: copy(ITEM, "copier")}}
    fanout, transport = federation(answers, down={OWNER})
    alert = resolve(fanout, f"/{ITEM}")
    assert isinstance(alert, Alert) and alert.status == 504
    assert alert.copies == (f"{COPIER} at lk47.example:80 (says it holds a copy; not verified)",)
    assert transport.rounds == [[OWNER], [HOSTILE, RECEIVER, COPIER]]  # (registry order)
    kept = MemoryKept()
    up, _ = federation(answers)
    url = parse_persistent_url(f"/{ITEM}")
    assert isinstance(Resolver(up.for_request("r"), kept=kept).resolve(url, "1.2.3.4"), Found)
    found = Resolver(fanout.for_request("r"), kept=kept).resolve(url, "1.2.3.4")
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"
    assert [(d.kind, d.authority) for d in found.degraded] == [(AUTHORITY_DOWN, OWNER)]
    assert found.answer.pairs is not None and "urlkey" not in found.answer.pairs  # no count


def test_d_a_prefix_without_owner_fans_out_as_before() -> None:
    fanout, transport = federation({COPIER: {UNOWNED: original(UNOWNED, "copier")}})
    found = resolve(fanout, f"/{UNOWNED}")
    assert isinstance(found, Found) and found.url == f"http://copier/{UNOWNED}"
    assert transport.rounds == [[OWNER, HOSTILE, RECEIVER, COPIER]]
    assert found.answer.trust is Trust.UNOWNED


def test_a_hostile_claim_never_changes_the_owners_answer() -> None:
    """Issue 34, rule 2: the owner holds nothing yet (minted, not deposited); a stranger holds
    a "copy" and the hostile Archive claims the original: the owner's word is the answer (404),
    and the others are not even asked."""
    fanout, transport = federation(
        {COPIER: {ITEM: copy(ITEM, "copier")}, HOSTILE: hostile_answers()}
    )
    alert = resolve(fanout, f"/{ITEM}")
    assert isinstance(alert, Alert) and alert.status == 404 and alert.title == "Unknown IBI"
    assert transport.rounds == [[OWNER]]


def test_with_the_original_required_the_authoritys_original_is_served() -> None:
    """Issue 34, rule 2: a stranger's claim never turns the owner's answer into a 409."""
    fanout, transport = federation(
        {OWNER: {ITEM: original(ITEM, "owner")}, HOSTILE: hostile_answers()}
    )
    found = resolve(fanout, f"/{ITEM}?ibiurl.requireditemstatus=Original")
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"
    assert transport.rounds == [[OWNER]]


def test_with_the_original_required_the_owners_original_is_found() -> None:
    fanout, _ = federation({OWNER: {ITEM: original(ITEM, "owner")}})
    found = resolve(fanout, f"/{ITEM}?ibiurl.requireditemstatus=Original")
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"


def hostile_answers() -> dict[str, str]:
    return {ibi: original(ibi, "hostile") for ibi in [ITEM, *FRESH, UNOWNED]}


class Queue:
    def __init__(self) -> None:
        self.bodies: list[str] = []

    def send(self, body: str) -> None:
        self.bodies.append(body)


def test_the_issues_24_resolutions_never_end_at_the_hostile_archive() -> None:
    """Issue 24, item 1: after the hostile Archive alone answered for one fresh IBI of the
    owner's prefix, 23 of 24 resolutions went to it (a prefix hint). Now none does: each is
    the owner's 404 (it holds none of them), then the owner's original once deposited."""
    fanout, transport = federation({HOSTILE: hostile_answers()})
    service = ResolvingService(fanout, Acknowledgments(Queue(), fanout.directory))
    outcomes = []
    for ibi in FRESH:
        url = parse_persistent_url(f"/{ibi}")
        outcomes.append(service.resolve(Lookup(url, f"http://r.example/{ibi}", "1.2.3.4", "c")))
    assert all(isinstance(o, Refusal) and o.alert.status == 404 for o in outcomes)
    assert fanout.hints.likely(FRESH[0]) is None  # nothing learned from an untrusted claim
    transport.by_ibi[OWNER] = {ibi: original(ibi, "owner") for ibi in FRESH}  # deposited
    for ibi in FRESH:
        url = parse_persistent_url(f"/{ibi}")
        answer = service.resolve(Lookup(url, f"http://r.example/{ibi}", "1.2.3.4", "c"))
        assert isinstance(answer, Redirect) and answer.url == f"http://owner/{ibi}"
    assert transport.rounds == [[OWNER]] * (2 * len(FRESH))  # the hostile one is never asked


def test_a_claim_heard_while_the_owner_is_down_is_named_in_the_header() -> None:
    """With the owner down everyone is asked: the hostile claim is heard, named in
    ``IBI-Conflict`` and counted, and changes nothing (the owner's kept answer)."""
    kept = MemoryKept()
    answers = {OWNER: {ITEM: original(ITEM, "owner")}, HOSTILE: hostile_answers()}
    up, _ = federation(answers)
    ResolvingService(up, Acknowledgments(Queue(), up.directory), kept).resolve(
        Lookup(parse_persistent_url(f"/{ITEM}"), f"http://r.example/{ITEM}", "1.2.3.4", "c")
    )
    fanout, _ = federation(answers, down={OWNER})
    service = ResolvingService(fanout, Acknowledgments(Queue(), fanout.directory), kept)
    resolving.metrics.clear_metrics()
    url = parse_persistent_url(f"/{ITEM}")
    answer = service.resolve(Lookup(url, f"http://r.example/{ITEM}", "1.2.3.4", "c"))
    assert isinstance(answer, Redirect) and answer.url == f"http://owner/{ITEM}"
    assert answer.headers["IBI-Conflict"] == (
        f'untrusted-original; ibi="{ITEM}"; archives="{HOSTILE}"; owner="{OWNER}"'
    )
    assert answer.headers["IBI-Degraded"].startswith(
        f'authority-down; ibi="{ITEM}"; archive="{OWNER}"; kept="'
    )
    assert resolving.metrics.metric_set["TwoOriginals"]["Value"] == [1.0]
    assert resolving.metrics.metric_set["UntrustedOriginals"]["Value"] == [1.0]
    resolving.metrics.clear_metrics()


def test_a_record_naming_an_archive_not_registered_is_not_followed() -> None:
    stranger = "3SJEG8DTKW/3EPGUE5"
    fanout, transport = federation(
        {OWNER: {ITEM: copy(ITEM, "owner", moved_to(stranger))}, HOSTILE: hostile_answers()}
    )
    found = resolve(fanout, f"/{ITEM}")
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"  # the owner's copy
    assert transport.rounds == [[OWNER]] and found.conflicts == ()


def test_only_a_trusted_archives_record_is_followed() -> None:
    """An untrusted Archive's record cannot make another Archive trusted: with the owner
    down and nothing kept, COPIER's claim stays a suspect, and nothing is followed."""
    fanout, _ = federation(
        {
            COPIER: {ITEM: original(ITEM, "copier")},
            RECEIVER: {ITEM: copy(ITEM, "receiver", moved_to(COPIER))},
        },
        down={OWNER},
    )
    alert = resolve(fanout, f"/{ITEM}")
    assert isinstance(alert, Alert) and alert.status == 504
    assert [c.archives for c in alert.conflicts] == [(COPIER,)]


def test_the_holdings_view_names_the_untrusted_claim() -> None:
    from functions.resolver.holdings import HoldingsService

    fanout, _ = federation({OWNER: {ITEM: original(ITEM, "owner")}, HOSTILE: hostile_answers()})
    view = HoldingsService(fanout, deadline=3.0).view(ITEM, client_ips="1.2.3.4").to_mapping()
    assert view["verdict"]["originals"] == [OWNER]
    assert view["verdict"]["untrusted_originals"] == [HOSTILE]
    assert view["verdict"]["conflict"] and not view["verdict"]["ok"]
    trust = {a["archive"]: a["trust"] for a in view["archives"]}
    assert trust[OWNER] == "owner" and trust[HOSTILE] == "untrusted"
