"""The owner's head start (issue 24, item 7): a slow or silent owner is asked alone only for a
while, then everyone else too, in the same round; the round waits for the owner, whose answer
is the answer (issue 34), and an untrusted claim of the original is never followed.

Scripted Archives on a fake clock (``ScriptedTransport.delays``, seconds): no socket, no
sleeping.
"""

from __future__ import annotations

from typing import Any

from functions.resolver.authority import Trust
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut, OwnerPace
from functions.resolver.network import Lead, Outcome
from functions.resolver.resolution import Alert, Found, Resolver
from ibi.core.persistent_url import parse_persistent_url
from tests.fakes_resolver import MemoryRegistry, ScriptedTransport
from tests.unit.test_owner_first import (
    COPIER,
    HOSTILE,
    ITEM,
    OWNER,
    RECEIVER,
    copy,
    moved_to,
    original,
)

NOTHING = "servicesubject urlRequest\n"  # an Archive that holds nothing answers no item pairs


class Recording(ScriptedTransport):
    """Scripted Archives that also keep the lead of each round (None: no lead)."""

    def __init__(self, answers: dict[str, str], delays: dict[str, float]) -> None:
        super().__init__(answers=dict(answers), delays=dict(delays))
        self.leads: list[Lead | None] = []

    def ask_all(self, requests: Any, **options: Any) -> list[Outcome]:
        self.leads.append(options.get("lead"))
        return super().ask_all(requests, **options)


def federation(
    answers: dict[str, str], delays: dict[str, float], *, grace: float = 0.05
) -> tuple[FanOut, Recording]:
    registry = MemoryRegistry()
    for archive in (OWNER, RECEIVER, COPIER, HOSTILE):
        registry.add(archive, f"{archive[:4].lower()}.example:80")
    transport = Recording(answers, delays)
    fanout = FanOut(
        transport,
        ArchiveDirectory(registry),
        timeout=3.0,
        deadline=10.0,
        grace=grace,
        pace=OwnerPace(factor=2.0, floor=0.05, ceiling=1.0),
    )
    return fanout, transport


def resolve(fanout: FanOut, path: str = f"/{ITEM}") -> Found | Alert:
    return Resolver(fanout.for_request("r")).resolve(parse_persistent_url(path), "192.0.2.9")


EVERYONE_ELSE = [HOSTILE, RECEIVER, COPIER]  # (registry order)


def test_an_owner_answering_within_its_head_start_is_the_only_archive_asked() -> None:
    fanout, transport = federation({OWNER: original(ITEM, "owner")}, {OWNER: 0.9})
    found = resolve(fanout)
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"
    assert transport.rounds == [[OWNER]] and fanout.requests_made == 1
    assert [lead.head_start if lead else None for lead in transport.leads] == [1.0]


def test_a_slow_owner_has_everyone_else_asked_after_its_head_start() -> None:
    """The others are asked once the head start is over, in the same round, but the round
    waits for the owner: its word (it holds nothing) is the answer, not the copy's."""
    fanout, transport = federation(
        {OWNER: NOTHING, COPIER: copy(ITEM, "copier")}, {OWNER: 2.5, COPIER: 0.02}
    )
    alert = resolve(fanout)
    assert isinstance(alert, Alert) and alert.status == 404 and alert.title == "Unknown IBI"
    assert transport.rounds == [[OWNER], EVERYONE_ELSE]  # the owner, then the rest …
    assert len(transport.leads) == 1  # … in one round: the owner is still heard in it
    assert fanout.requests_made == 4 and alert.conflicts == ()


def test_the_owners_original_within_the_round_wins_over_a_copy() -> None:
    """The copy comes first (at 1.02 s), the owner's original during the grace (at 1.3 s):
    the owner's answer is the round's, trusted, and nobody else's claim is needed."""
    fanout, transport = federation(
        {OWNER: original(ITEM, "owner"), COPIER: copy(ITEM, "copier")},
        {OWNER: 1.3, COPIER: 0.02},
        grace=0.5,
    )
    found = resolve(fanout)
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"
    assert found.answer.trust is Trust.OWNER
    assert transport.rounds == [[OWNER], EVERYONE_ELSE]


def test_a_slow_owners_transfer_record_is_followed_in_the_same_round() -> None:
    fanout, transport = federation(
        {OWNER: copy(ITEM, "owner", moved_to(RECEIVER)), RECEIVER: original(ITEM, "receiver")},
        {OWNER: 1.4, RECEIVER: 0.02},
    )
    found = resolve(fanout)
    assert isinstance(found, Found) and found.url == f"http://receiver/{ITEM}"
    assert found.answer.trust is Trust.NAMED and found.conflicts == ()
    assert transport.rounds == [[OWNER], EVERYONE_ELSE]  # the receiver is not asked twice


def test_a_hostile_original_is_never_followed_while_the_owner_is_slow() -> None:
    """The hostile claim comes at once after the head start, the owner's word much later: the
    owner is waited for, its word is the answer, and the claim heard is named."""
    fanout, transport = federation(
        {OWNER: NOTHING, HOSTILE: original(ITEM, "hostile"), COPIER: copy(ITEM, "copier")},
        {OWNER: 2.5, COPIER: 0.03},
    )
    alert = resolve(fanout)
    assert isinstance(alert, Alert) and alert.status == 404
    assert [(c.kind, c.archives) for c in alert.conflicts] == [("untrusted-original", (HOSTILE,))]
    assert transport.rounds == [[OWNER], EVERYONE_ELSE]


def test_a_hostile_original_alone_with_the_owner_down_is_never_followed() -> None:
    fanout, _ = federation({HOSTILE: original(ITEM, "hostile")}, {})  # the owner never answers
    alert = resolve(fanout)
    assert isinstance(alert, Alert) and alert.status == 504
    assert [c.archives for c in alert.conflicts] == [(HOSTILE,)] and alert.copies == ()


def test_an_owner_that_did_not_answer_is_asked_with_everyone_until_it_answers() -> None:
    fanout, transport = federation({COPIER: copy(ITEM, "copier")}, {})  # the owner is down
    for _ in range(3):
        alert = resolve(fanout)  # nothing kept of it: the copy is named, not followed
        assert isinstance(alert, Alert) and alert.status == 504
    # 1 s alone the first time; then no head start: everyone at once, the owner with them.
    assert [lead.head_start if lead else None for lead in transport.leads] == [1.0, 0.0, 0.0]
    transport.answers[OWNER] = original(ITEM, "owner")  # back
    transport.delays[OWNER] = 0.0
    found = resolve(fanout)
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"  # at once: it wins
    transport.rounds.clear()
    found = resolve(fanout)
    assert transport.rounds == [[OWNER]]  # heard again: alone first, as before
    assert transport.leads[-1] is not None and transport.leads[-1].head_start == 0.05


def test_the_head_start_follows_the_owners_slowest_recent_answer() -> None:
    pace = OwnerPace(factor=2.0, floor=0.05, ceiling=1.0, recent=3)
    assert pace.head_start(OWNER) == 1.0  # not heard from yet
    for seconds in (0.01, 0.2, 0.02):
        pace.heard(Outcome.answered(OWNER, _pairs(), seconds))
    assert pace.head_start(OWNER) == 0.4
    for seconds in (0.01, 0.01, 0.01):  # the slow one is no longer recent
        pace.heard(Outcome.answered(OWNER, _pairs(), seconds))
    assert pace.head_start(OWNER) == 0.05  # the floor
    pace.heard(Outcome.not_needed(OWNER, 0.9))  # the round ended without it: down
    assert pace.head_start(OWNER) == 0.0
    pace.heard(Outcome.answered(OWNER, _pairs(), 0.01))
    assert pace.head_start(OWNER) == 1.0  # back; its 0.9 s still counts (capped)


def _pairs() -> Any:
    from ibi.core.pairlist import parse_pair_list

    return parse_pair_list(NOTHING)


def test_a_down_owner_is_waited_for_a_grace_only_and_is_up_again_once_heard_late() -> None:
    """Issue 34, rule 5: an owner that did not answer is not waited for beyond a grace after
    the others' first answer (nothing kept here: 504 at once, not its timeout); its answer
    heard after such a round puts it up again, so the next round waits for it and its word
    is the answer — one slow moment never leaves it down for good."""
    fanout, transport = federation({COPIER: copy(ITEM, "copier")}, {})  # the owner is down
    for _ in range(2):
        alert = resolve(fanout)
        assert isinstance(alert, Alert) and alert.status == 504
    transport.answers[OWNER] = original(ITEM, "owner")  # back, slower than the copy + grace
    transport.delays.update({OWNER: 0.2, COPIER: 0.0})
    alert = resolve(fanout)  # not waited for: its answer comes after the round, heard late
    assert isinstance(alert, Alert) and alert.status == 504
    found = resolve(fanout)  # up again: waited for
    assert isinstance(found, Found) and found.url == f"http://owner/{ITEM}"
