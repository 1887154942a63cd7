"""Issue 24, item 4: ``!`` follows what the originals along the edition chain say.

O1 (original in archive-a) -> E2 (original in archive-b; an older copy of E2 in archive-a,
made before E3 existed) -> E3 (original in archive-a). archive-a answers ``O1!`` through its
copy of E2, which knows no next edition: ``url.lastedition`` is that copy's. ``O1!`` led to
E2's copy every time; the last edition is E3, as E2's original says. With archive-b down,
what archive-b said last answers (issue 34), never the old copy.
"""

from __future__ import annotations

from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut
from functions.resolver.kept import MemoryKept
from functions.resolver.resolution import AUTHORITY_DOWN, Alert, Found, Resolver
from ibi.core.persistent_url import parse_persistent_url
from tests.fakes_resolver import MemoryRegistry
from tests.unit.test_owner_first import PerIBI

ARCHIVE_A, ARCHIVE_B = "8JMKD3MGP8W/3FSUP4L", "J8LNKB5R7W/3FUQHC5"
O1, E2, E3 = "8JMKD3MGP8W/35MMLL8", "J8LNKB5R7W/35MMLL9", "8JMKD3MGP8W/35MMLLA"
KEY = "urlkey 1427244889-5349022633744855\n"


def last(ibi: str, url: str, state: str, *, item: str, following: str | None = None) -> str:
    """An answer to ``item!`` whose last edition is ``ibi`` at ``url`` in ``state``."""
    onward = f"ibi.nextedition {{ibip {following}}}\n" if following else ""
    return (
        f"ibi {{ibip {item}}}\n{onward}ibi.lastedition {{ibip {ibi}}}\n"
        f"url.lastedition {url}\nstate.lastedition {state}\ncontenttype.lastedition Data\n{KEY}"
    )


ANSWERS = {
    ARCHIVE_A: {
        # O1's original; its chain, through the old copy of E2 held here, ends at that copy.
        O1: last(E2, "http://a.example/e2-copy", "Copy", item=O1, following=E2),
        E2: last(E2, "http://a.example/e2-copy", "Copy", item=E2),  # the old copy: no next
        E3: last(E3, "http://a.example/e3", "Original", item=E3),
    },
    # E2's original: its next edition E3 is not held here, so only ibi.nextedition (FILTER).
    ARCHIVE_B: {E2: f"ibi {{ibip {E2}}}\nibi.nextedition {{ibip {E3}}}\n"},
}


def fanout_of(answers: dict[str, dict[str, str]], down: set[str] = frozenset()) -> FanOut:
    registry = MemoryRegistry()
    registry.add(ARCHIVE_A, "a.example:80")
    registry.add(ARCHIVE_B, "b.example:80")
    transport = PerIBI(answers, down)
    return FanOut(transport, ArchiveDirectory(registry), timeout=1.0, deadline=3.0, grace=0.05)


def test_the_last_edition_is_what_the_originals_say_not_a_middle_editions_copy() -> None:
    for _ in range(5):  # "every time"
        found = Resolver(fanout_of(ANSWERS).for_request("r")).resolve(
            parse_persistent_url(f"/{O1}!"), "192.0.2.9"
        )
        assert isinstance(found, Found) and found.url == "http://a.example/e3"
        assert found.ibi == E3


def test_with_e2s_authority_down_the_kept_chain_answers_never_the_old_copy() -> None:
    """Issue 34, rule 3: E2's authority (archive-b) down. The old copy of E2 in archive-a is
    never the answer (it knows no later edition): the resolver answers what archive-b said
    last, and says so; with nothing kept, 504 naming the copy it did not follow."""
    kept = MemoryKept()
    url = parse_persistent_url(f"/{O1}!")
    up = Resolver(fanout_of(ANSWERS).for_request("r"), kept=kept).resolve(url, "192.0.2.9")
    assert isinstance(up, Found) and up.url == "http://a.example/e3" and up.degraded == ()
    down = fanout_of(ANSWERS, down={ARCHIVE_B})
    found = Resolver(down.for_request("r"), kept=kept).resolve(url, "192.0.2.9")
    assert isinstance(found, Found) and found.url == "http://a.example/e3", found
    assert [(d.kind, d.ibi, d.authority) for d in found.degraded] == [
        (AUTHORITY_DOWN, E2, ARCHIVE_B)
    ]
    cold = Resolver(down.for_request("r"), kept=MemoryKept()).resolve(url, "192.0.2.9")
    assert isinstance(cold, Alert) and cold.status == 504, cold
    assert cold.copies == (f"{ARCHIVE_A} at a.example:80 (says it holds a copy; not verified)",)


def test_an_original_last_edition_is_taken_at_once() -> None:
    answers = {ARCHIVE_A: {O1: last(E3, "http://a.example/e3", "Original", item=O1)}}
    fanout = fanout_of(answers)
    found = Resolver(fanout.for_request("r")).resolve(parse_persistent_url(f"/{O1}!"), "1.2.3.4")
    assert isinstance(found, Found) and found.url == "http://a.example/e3"
    assert fanout.requests_made == 1  # archive-a owns O1's prefix and answered the original
