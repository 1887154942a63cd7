"""A round with a lead (issue 24, item 7), through the real transport to scripted servers on
loopback: the lead alone for its head start, then everyone; its settling answer ends the round.
"""

from __future__ import annotations

import time

from functions.resolver.network import ArchiveTransport, Lead, Request, Result
from ibi.core.pairlist import PairList
from tests.integration.test_archive_transport import LOOPBACK_ONLY, PAIRS, SERVICE, ok, scripted


def original(pairs: PairList) -> bool:
    return pairs.word("state") == "Original"


def test_a_lead_answering_within_its_head_start_is_the_only_archive_asked() -> None:
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: ok(b"state Copy\r\n")) as lead, scripted(lambda n: ok()) as other:
        outcomes = transport.ask_all(
            {
                "lead": Request(lead.endpoint, SERVICE, PAIRS),
                "other": Request(other.endpoint, SERVICE, PAIRS),
                "broken": None,
            },
            timeout=2.0,
            deadline=time.monotonic() + 3,
            lead=Lead("lead", 1.0, original),
        )
        assert {o.key: o.result for o in outcomes} == {
            "lead": Result.ANSWERED,  # not the original: the caller decides what next
            "other": Result.NOT_ASKED,
            "broken": Result.FAILED,
        }
        assert other.requests == []


def test_a_slow_lead_has_the_others_asked_and_its_original_still_ends_the_round() -> None:
    """The lead answers after its head start, with the original: the round ends then, with the
    copy heard and the Archive that takes 2.5 s not needed."""
    slow_original = lambda n: (time.sleep(0.6), ok())[1]  # noqa: E731
    slower = lambda n: (time.sleep(2.5), ok(b"state Copy\r\n"))[1]  # noqa: E731
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with (
        scripted(slow_original) as lead,
        scripted(lambda n: ok(b"state Original\r\n")) as claimant,
        scripted(slower) as late,
    ):
        outcomes = transport.ask_all(
            {
                "lead": Request(lead.endpoint, SERVICE, PAIRS),
                "claimant": Request(claimant.endpoint, SERVICE, PAIRS),
                "late": Request(late.endpoint, SERVICE, PAIRS),
            },
            timeout=3.0,
            deadline=time.monotonic() + 4,
            enough=lambda pairs: pairs.word("state") == "Copy",  # a claim settles nothing
            grace=0.05,
            lead=Lead("lead", 0.1, original),
        )
        by_key = {o.key: o for o in outcomes}
        assert by_key["claimant"].result is Result.ANSWERED  # asked after the head start
        assert by_key["lead"].result is Result.ANSWERED and by_key["lead"].pairs is not None
        assert by_key["late"].result is Result.NOT_NEEDED  # the lead's original ended it
        assert [o.key for o in outcomes][:2] == ["claimant", "lead"]
