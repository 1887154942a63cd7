"""The resolver's analysis over fake Archives: seed 001 §8.1, §8.2 and every row of spec §7.7."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from functions.resolver.acknowledgments import acknowledgment_pairs
from functions.resolver.authority import ArchiveAnswer
from functions.resolver.languages import (
    choose_language,
    lookup,
    parse_accept_language,
    prefix_match,
)
from functions.resolver.resolution import Alert, Found, Patience, Resolver, never, patience
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList, parse_pair_list
from ibi.core.persistent_url import parse_persistent_url

A, B, C = "archive-a", "archive-b", "archive-c"


class FakeArchives:
    """Answers by (archive, IBI); records every urlRequest."""

    def __init__(self, answers: dict[tuple[str, str], str], *, dead: Sequence[str] = ()) -> None:
        self.answers = {(k[0], parse_label(k[1]).label): v for k, v in answers.items()}
        self.dead = set(dead)
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.enough: list[object] = []
        self.archives = sorted({a for a, _ in answers} | self.dead)

    def __call__(
        self, ibi: str, pairs: Sequence[tuple[str, str]], enough: object = None
    ) -> list[ArchiveAnswer]:
        self.requests.append((ibi, dict(pairs)))
        self.enough.append(enough)
        result = []
        for archive in self.archives:
            if archive in self.dead:
                result.append(ArchiveAnswer(archive, f"{archive}.example", None, "timeout"))
                continue
            text = self.answers.get((archive, parse_label(ibi).label), "")
            result.append(ArchiveAnswer(archive, f"{archive}.example", parse_pair_list(text)))
        return result


def resolve(archives: FakeArchives, target: str, language: str | None = None) -> Found | Alert:
    return Resolver(archives, accept_language=language).resolve(
        parse_persistent_url(target), "172.16.44.200 150.163.68.1"
    )


SERVICE = "ibi.archiveservice {rep sid.inpe.br/mtc-m18@80/2008/03.17.15.17}\nibi.platformsoftware {rep dpi.inpe.br/banon/1998/08.02.08.56}\n"
EX_8_1 = (
    "archiveaddress mtc-m16c.sid.inpe.br\ncontenttype Data\n"
    "ibi {rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}\n"
    + SERVICE
    + "state Original\ntimestamp 2009-07-21T14:43:31Z\n"
    "url http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18@80/2009/07.21.14.43/doc/CCSDS%20650.0-B-1.pdf\n"
    "urlkey 1427244889-5349022633744855"
)


def test_seed_8_1_without_modifier() -> None:
    archives = FakeArchives({(A, "8JMKD3MGP8W/35MMLL8"): EX_8_1, (B, "LK47B6W/362SFKH"): EX_8_1})
    found = resolve(archives, "/8JMKD3MGP8W/35MMLL8")
    assert isinstance(found, Found) and found.answer.archive == A
    assert found.url.endswith("/doc/CCSDS%20650.0-B-1.pdf")
    _, pairs = archives.requests[0]
    assert pairs == {
        "clientinformation.ipaddress": "172.16.44.200 150.163.68.1",
        "parsedibiurl.ibi": "8JMKD3MGP8W/35MMLL8",
    }  # no verb list, no file path, never the language or the required status
    ack = dict(
        acknowledgment_pairs(
            found, "http://urlib.net:80/8JMKD3MGP8W/35MMLL8", "172.16.44.200 150.163.68.1"
        )
    )
    assert ack == {
        "servicesubject": "acknowledgment",
        "clientinformation.ipaddress": "172.16.44.200 150.163.68.1",
        "contenttype": "Data",
        "ibi": "rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8",
        "state": "Original",
        "url": found.url,
        "url.persistent": "http://urlib.net:80/8JMKD3MGP8W/35MMLL8",
        "urlkey": "1427244889-5349022633744855",
    }


def test_seed_8_2_with_modifier_chases_the_next_edition() -> None:
    first = (
        "archiveaddress mtc-m16c.sid.inpe.br\n"
        "ibi {rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}\n"
        + SERVICE
        + "ibi.nextedition {rep sid.inpe.br/mtc-m18/2012/07.12.18.08}"
    )
    second = (
        "archiveaddress mtc-m16c.sid.inpe.br\ncontenttype.lastedition.metadata(oai_dc) Metadata\n"
        "ibi {rep sid.inpe.br/mtc-m18/2012/07.12.18.08 ibip 8JMKD3MGP8W/3C9EP6P}\n"
        + SERVICE
        + "ibi.lastedition.metadata(oai_dc) {rep sid.inpe.br/mtc-m18/2012/07.12.18.08.49}\n"
        "state.lastedition.metadata(oai_dc) Original\ntimestamp.lastedition.metadata(oai_dc) 2014-04-04T17:36:01Z\n"
        "url.lastedition.metadata(oai_dc) http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18/2012/07.12.18.08.49/doc/metadata.cgi?choice=oai_dc\n"
        "urlkey 1426286454-36108967764060357"
    )
    archives = FakeArchives(
        {(A, "8JMKD3MGP8W/35MMLL8"): first, (A, "sid.inpe.br/mtc-m18/2012/07.12.18.08"): second}
    )
    found = resolve(archives, "/8JMKD3MGP8W/35MMLL8!:(oai_dc)")
    assert isinstance(found, Found)
    assert found.url.endswith("metadata.cgi?choice=oai_dc") and found.hops == 1
    assert [(ibi, p["parsedibiurl.verblist"]) for ibi, p in archives.requests] == [
        ("8JMKD3MGP8W/35MMLL8", "GetLastEdition GetMetadata(oai_dc)"),
        ("sid.inpe.br/mtc-m18/2012/07.12.18.08", "GetLastEdition GetMetadata(oai_dc)"),
    ]
    ack = dict(
        acknowledgment_pairs(found, "http://urlib.net:80/8JMKD3MGP8W/35MMLL8!:(oai_dc)", "1.2.3.4")
    )
    assert ack["contenttype"] == "Metadata"
    assert ack["ibi"] == "rep sid.inpe.br/mtc-m18/2012/07.12.18.08.49"
    assert ack["urlkey"] == "1426286454-36108967764060357"


def answer(state: str, url: str | None = "http://x.example/doc.pdf", relation: str = "") -> str:
    lines = ["ibi {ibip LK47B6W/362SFKH}", f"state{relation} {state}"]
    if url:
        lines += [
            f"url{relation} {url}",
            f"contenttype{relation} Data",
            "urlkey 1234567890-1234567890",
        ]
    return "\n".join(lines)


def test_two_originals_with_original_required_is_409_naming_the_suspects() -> None:
    archives = FakeArchives(
        {
            (A, "LK47B6W/362SFKH"): answer("Original", "http://a/x"),
            (B, "LK47B6W/362SFKH"): answer("Original", "http://b/x"),
            (C, "LK47B6W/362SFKH"): answer("Copy", "http://c/x"),
        }
    )
    alert = resolve(archives, "/LK47B6W/362SFKH?ibiurl.requireditemstatus=Original")
    assert isinstance(alert, Alert) and alert.status == 409
    assert {s.split()[0] for s in alert.suspects} == {A, B}
    assert all("requireditemstatus" not in p for _, p in archives.requests)  # never forwarded


def test_original_required_picks_the_one_original() -> None:
    archives = FakeArchives(
        {
            (A, "LK47B6W/362SFKH"): answer("Copy", "http://a/x"),
            (B, "LK47B6W/362SFKH"): answer("Original", "http://b/x"),
        }
    )
    found = resolve(archives, "/LK47B6W/362SFKH?ibiurl.requireditemstatus=Original")
    assert isinstance(found, Found) and found.url == "http://b/x"
    only_copies = FakeArchives({(A, "LK47B6W/362SFKH"): answer("Copy", "http://a/x")})
    alert = resolve(only_copies, "/LK47B6W/362SFKH?ibiurl.requireditemstatus=Original")
    assert isinstance(alert, Alert) and alert.status == 404 and "original" in alert.message


def test_without_requirement_an_original_is_preferred_over_a_copy() -> None:
    archives = FakeArchives(
        {
            (A, "LK47B6W/362SFKH"): answer("Copy", "http://a/x"),
            (B, "LK47B6W/362SFKH"): answer("Original", "http://b/x"),
        }
    )
    found = resolve(archives, "/LK47B6W/362SFKH")
    assert isinstance(found, Found) and found.url == "http://b/x"


def test_deleted_is_410_unless_a_copy_lives_elsewhere() -> None:
    tombstone = "ibi {ibip LK47B6W/362SFKH}\nstate Deleted\ntimestamp 2020-01-01T00:00:00Z"
    alert = resolve(FakeArchives({(A, "LK47B6W/362SFKH"): tombstone}), "/LK47B6W/362SFKH")
    assert isinstance(alert, Alert) and alert.status == 410
    found = resolve(
        FakeArchives(
            {
                (A, "LK47B6W/362SFKH"): tombstone,
                (B, "LK47B6W/362SFKH"): answer("Copy", "http://b/x"),
            }
        ),
        "/LK47B6W/362SFKH",
    )
    assert isinstance(found, Found) and found.url == "http://b/x"


def test_unknown_is_404_and_silence_is_504() -> None:
    alert = resolve(
        FakeArchives({(A, "8JMKD3MGP8W/35MME4E"): answer("Original")}), "/LK47B6W/362SFKH"
    )
    assert isinstance(alert, Alert) and alert.status == 404
    silent = FakeArchives({}, dead=[A, B])
    alert = resolve(silent, "/LK47B6W/362SFKH")
    assert isinstance(alert, Alert) and alert.status == 504
    partly = FakeArchives({(A, "8JMKD3MGP8W/35MME4E"): answer("Original")}, dead=[B])
    alert = resolve(partly, "/LK47B6W/362SFKH")
    assert isinstance(alert, Alert) and alert.status == 404


def test_a_dead_archive_does_not_stop_the_others() -> None:
    archives = FakeArchives({(A, "LK47B6W/362SFKH"): answer("Original", "http://a/x")}, dead=[B, C])
    found = resolve(archives, "/LK47B6W/362SFKH")
    assert isinstance(found, Found) and found.url == "http://a/x"


TRANSLATIONS = (
    "ibi {ibip LK47B6W/362SFKH}\nstate Original\n"
    "url.translation(en) http://a/en.pdf\nstate.translation(en) Original\nibi.translation(en) {ibip LK47B6W/362SFKH}\n"
    "ibi.translation(pt) {ibip LK47B6W/362SFKJ}\n"
    "urlkey 1234567890-1234567890"
)
PORTUGUESE = (
    "ibi {ibip LK47B6W/362SFKJ}\nstate Original\nurl http://b/pt.pdf\nurlkey 1234567890-1234567891"
)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("pt-BR,fr;q=0.8,en;q=0.5", "http://b/pt.pdf"),  # pt-BR -> pt, held by another Archive
        ("en-US,en;q=0.9", "http://a/en.pdf"),
        ("fr", "http://a/item.pdf"),  # no match: the item itself
        (None, "http://a/item.pdf"),
    ],
)
def test_bare_plus_negotiates_the_language(accept: str | None, expected: str) -> None:
    archives = FakeArchives(
        {
            (A, "LK47B6W/362SFKH"): TRANSLATIONS + "\nurl http://a/item.pdf",
            (B, "LK47B6W/362SFKJ"): PORTUGUESE,
        }
    )
    found = resolve(archives, "/LK47B6W/362SFKH+", accept)
    assert isinstance(found, Found) and found.url == expected
    assert all("clientinformation.languagepreference" not in p for _, p in archives.requests)


def test_translation_by_parameter_chases_its_ibi() -> None:
    archives = FakeArchives(
        {(A, "LK47B6W/362SFKH"): TRANSLATIONS, (B, "LK47B6W/362SFKJ"): PORTUGUESE}
    )
    found = resolve(archives, "/LK47B6W/362SFKH+(pt)")
    assert isinstance(found, Found) and found.url == "http://b/pt.pdf" and found.hops == 1
    assert archives.requests[1][1].get("parsedibiurl.verblist") is None  # the rest: the item itself


def test_chasing_is_bounded_and_never_asks_twice() -> None:
    loop = {
        (
            A,
            "LK47B6W/362SFKH",
        ): "ibi {ibip LK47B6W/362SFKH}\nstate Original\nibi.nextedition {ibip LK47B6W/362SFKJ}",
        (
            A,
            "LK47B6W/362SFKJ",
        ): "ibi {ibip LK47B6W/362SFKJ}\nstate Original\nibi.nextedition {ibip LK47B6W/362SFKH}",
    }
    archives = FakeArchives(loop)
    alert = resolve(archives, "/LK47B6W/362SFKH!")
    assert isinstance(alert, Alert) and alert.status == 404
    assert len(archives.requests) == 2


def test_file_path_and_file_list_are_forwarded() -> None:
    archives = FakeArchives({(A, "LK47B6W/362SFKH"): answer("Original", "http://a/reference.bib")})
    resolve(archives, "/LK47B6W/362SFKH/reference.bib")
    # Table 6.9: path-absolute, as its example "/reference.bib" (issue 12, item 9).
    assert archives.requests[0][1]["parsedibiurl.filepath"] == "/reference.bib"
    resolve(archives, "/LK47B6W/362SFKH/sub/b%20c.txt")
    assert archives.requests[1][1]["parsedibiurl.filepath"] == "/sub/b c.txt"
    resolve(archives, "/LK47B6W/362SFKH?ibiurl.verblist=GetFileList")
    assert archives.requests[2][1]["parsedibiurl.verblist"] == "GetFileList"
    assert "parsedibiurl.filepath" not in archives.requests[2][1]


def test_a_missing_file_is_named_once_with_its_slash() -> None:
    archives = FakeArchives({(A, "LK47B6W/362SFKH"): "ibi {ibip LK47B6W/362SFKH}\nstate Original"})
    alert = resolve(archives, "/LK47B6W/362SFKH/sub/b.txt")
    assert isinstance(alert, Alert) and alert.status == 404
    assert "(the item /sub/b.txt)" in alert.message


def test_accept_language_lookup() -> None:
    assert parse_accept_language("pt-BR,fr;q=0.8,en;q=0.5,pt;q=0.3") == ["pt-BR", "fr", "en", "pt"]
    assert parse_accept_language("*, en;q=0, de;q=x") == []
    assert lookup(["pt-BR"], ["en", "pt"]) == "pt"
    assert lookup(["zh-Hant-TW", "en"], ["zh", "en"]) == "zh"
    assert lookup(["fr"], ["en"]) is None


def test_answers_are_pair_lists_of_the_spec() -> None:
    assert isinstance(parse_pair_list(EX_8_1), PairList)


def test_languages_are_read_from_compound_relations() -> None:
    from functions.resolver.languages import languages_offered

    pairs = parse_pair_list(
        "url.translation(en).lastedition http://a/en\nibi.translation(pt-BR).metadata {ibip LK47B6W/362SFKH}\n"
        "url.metadata.translation http://a/m\nurl.translation(xx-yyy) http://bad"
    )
    assert languages_offered([pairs]) == ["en", "pt-BR"]


def test_the_first_usable_answer_may_end_a_round_unless_all_must_be_seen() -> None:
    """Seed 001 §6: outside a required original, the first non-empty answer will do (after
    the fan-out's short grace); the original's answer is the preferred one (issue 12, item 7)."""
    archives = FakeArchives({(A, "LK47B6W/362SFKH"): answer("Original", "http://a/x")})
    resolve(archives, "/LK47B6W/362SFKH")
    wait = archives.enough[-1]
    assert isinstance(wait, Patience)
    assert wait.usable(parse_pair_list(answer("Original", "http://a/x")))
    assert wait.usable(parse_pair_list(answer("Copy", "http://a/x")))  # a Copy ends it too
    assert not wait.usable(parse_pair_list(answer("Original", None)))
    assert wait.preferred(parse_pair_list(answer("Original", "http://a/x")))
    assert not wait.preferred(parse_pair_list(answer("Copy", "http://a/x")))
    resolve(archives, "/LK47B6W/362SFKH?ibiurl.requireditemstatus=Original")
    required = archives.enough[-1]  # two claimed originals must still be caught: every
    assert required is not None and required.usable is never  # Archive is waited for
    resolve(archives, "/LK47B6W/362SFKH+", "en")
    bare = archives.enough[-1]  # the language is chosen among every answer
    assert bare is not None and bare.usable is never


def test_location_hints_by_ibi_only_bounded() -> None:
    """Issue 24: no hint by prefix any more (one answer captured a whole prefix)."""
    from functions.resolver.fanout import LocationHints

    hints = LocationHints(capacity=2)
    assert hints.likely("LK47B6W/362SFKH") is None
    hints.learn("LK47B6W/362SFKH", A)
    assert hints.likely("lk47b6w/362sfkh") == A  # either case
    assert hints.likely("LK47B6W/3622222") is None  # same prefix: no hint
    assert hints.likely("8JMKD3MGP8W/35MME4E") is None
    hints.learn("8JMKD3MGP8W/35MME4E", B)
    hints.learn("8JMKD3MGP7W/3EPGUE5", C)  # capacity 2: the oldest entry goes
    assert hints.likely("LK47B6W/362SFKH") is None
    assert hints.likely("8JMKD3MGP7W/3EPGUE5") == C


class FilteringArchives(FakeArchives):
    """Archives that FILTER their answers by the verb list, as Archives may (spec §6)."""

    def __call__(
        self, ibi: str, pairs: Sequence[tuple[str, str]], enough: object = None
    ) -> list[ArchiveAnswer]:
        verbs = dict(pairs).get("parsedibiurl.verblist", "")
        answers = super().__call__(ibi, pairs, enough)
        keep = (
            (lambda name: ".translation" in name or name in {"ibi", "urlkey"})
            if verbs
            else (lambda name: ".translation" not in name)
        )
        return [
            ArchiveAnswer(a.archive, a.address, a.pairs.filter(keep) if a.pairs else a.pairs)
            for a in answers
        ]


@pytest.mark.parametrize(
    ("accept", "expected"), [(None, "http://a/item.pdf"), ("pt", "http://b/pt.pdf")]
)
def test_bare_plus_with_filtering_archives(accept: str | None, expected: str) -> None:
    archives = FilteringArchives(
        {
            (A, "LK47B6W/362SFKH"): TRANSLATIONS + "\nurl http://a/item.pdf",
            (B, "LK47B6W/362SFKJ"): PORTUGUESE,
        }
    )
    found = resolve(archives, "/LK47B6W/362SFKH+", accept)
    assert isinstance(found, Found) and found.url == expected


# ---------------------------------------------------------------------------- issue 12

ITEM, NEXT = "LK47B6W/362SFKH", "LK47B6W/362SFKJ"
# What the Archives answer to `!` (GetLastEdition), FILTERed as the real Archive does.
ORIGINAL_LEADS_ON = (  # the original of ITEM: its next edition is held elsewhere
    f"archiveaddress a\nibi {{ibip {ITEM}}}\nibi.nextedition {{ibip {NEXT}}}"
)
COPY_CLAIMS_LAST = (  # a copy of ITEM that knows no link: it calls itself the last edition
    f"archiveaddress b\nibi {{ibip {ITEM}}}\nibi.lastedition {{ibip {ITEM}}}\n"
    "url.lastedition http://b/copy-of-item\nstate.lastedition Copy\n"
    "contenttype.lastedition Data\nurlkey 1234567890-1234567890"
)
NEXT_IS_LAST = (
    f"archiveaddress b\nibi {{ibip {NEXT}}}\nibi.lastedition {{ibip {NEXT}}}\n"
    "url.lastedition http://b/next\nstate.lastedition Original\n"
    "contenttype.lastedition Data\nurlkey 1234567890-1234567891"
)


@pytest.mark.parametrize(("original", "copy"), [(A, B), (B, A)])  # either answers first
def test_last_edition_follows_the_originals_chain_not_a_copys_claim(
    original: str, copy: str
) -> None:
    """Issue 12, item 1: original in a, next edition and a copy of the item in b."""
    archives = FakeArchives(
        {
            (original, ITEM): ORIGINAL_LEADS_ON,
            (copy, ITEM): COPY_CLAIMS_LAST,
            (copy, NEXT): NEXT_IS_LAST,
        }
    )
    found = resolve(archives, f"/{ITEM}!")
    assert isinstance(found, Found) and found.url == "http://b/next"
    assert found.hops == 1 and found.answer.archive == copy
    assert [ibi for ibi, _ in archives.requests] == [ITEM, NEXT]
    found = resolve(archives, f"/{ITEM}!:")  # same chain for the last edition's metadata
    assert archives.requests[-1][0] == NEXT


def test_last_edition_the_originals_own_answer_comes_first() -> None:
    own = (
        f"ibi {{ibip {ITEM}}}\nibi.lastedition {{ibip {ITEM}}}\nurl.lastedition http://a/item\n"
        "state.lastedition Original\nurlkey 1234567890-1234567890"
    )
    odd_copy = f"ibi {{ibip {ITEM}}}\nibi.nextedition {{ibip {NEXT}}}"  # a link the original lacks
    archives = FakeArchives({(A, ITEM): odd_copy, (B, ITEM): own, (B, NEXT): NEXT_IS_LAST})
    found = resolve(archives, f"/{ITEM}!")
    assert isinstance(found, Found) and found.url == "http://a/item" and found.hops == 0


def test_last_edition_a_copys_claim_serves_when_the_original_is_silent() -> None:
    archives = FakeArchives({(B, ITEM): COPY_CLAIMS_LAST}, dead=[A])
    found = resolve(archives, f"/{ITEM}!")
    assert isinstance(found, Found) and found.url == "http://b/copy-of-item"


def test_a_copys_claim_to_be_the_last_edition_never_ends_a_round_early() -> None:
    wait = patience(parse_persistent_url(f"/{ITEM}!").relation, ITEM, required_original=False)
    assert wait is not None
    assert not wait.usable(parse_pair_list(COPY_CLAIMS_LAST))
    assert wait.usable(parse_pair_list(ORIGINAL_LEADS_ON))  # the chain goes on: chase it
    own = COPY_CLAIMS_LAST.replace("state.lastedition Copy", "state.lastedition Original")
    assert wait.usable(parse_pair_list(own)) and wait.preferred(parse_pair_list(own))
    assert not wait.preferred(parse_pair_list(COPY_CLAIMS_LAST))


def test_two_originals_without_requirement_redirect_and_say_so() -> None:
    """Issue 12, item 8: the 302 stays; the result names the Archives claiming the original."""
    archives = FakeArchives(
        {
            (A, ITEM): answer("Original", "http://a/x"),
            (B, ITEM): answer("Original", "http://b/x"),
            (C, ITEM): answer("Copy", "http://c/x"),
        }
    )
    found = resolve(archives, f"/{ITEM}")
    assert isinstance(found, Found) and found.url == "http://a/x"
    [conflict] = found.conflicts
    assert (conflict.ibi, conflict.archives) == (ITEM, (A, B))
    one = FakeArchives(
        {(A, ITEM): answer("Original", "http://a/x"), (B, ITEM): answer("Copy", "http://b/x")}
    )
    found = resolve(one, f"/{ITEM}")
    assert isinstance(found, Found) and found.conflicts == ()


PT_BR = (
    "ibi {ibip LK47B6W/362SFKH}\nstate Original\nurl http://a/item.pdf\n"
    "url.translation(en) http://a/item.pdf\nstate.translation(en) Original\n"
    "ibi.translation(pt-BR) {ibip LK47B6W/362SFKJ}\nurlkey 1234567890-1234567890"
)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("pt", "http://b/pt.pdf"),  # lookup finds no "pt"; "pt" is a prefix of pt-BR
        ("pt-PT,pt;q=0.9", "http://b/pt.pdf"),
        ("pt-PT", "http://b/pt.pdf"),  # the language alone, last
        ("pt-PT,en;q=0.5", "http://a/item.pdf"),  # lookup finds en first: it wins
        ("fr", "http://a/item.pdf"),
    ],
)
def test_bare_plus_falls_back_to_the_best_prefix_match(accept: str, expected: str) -> None:
    """Issue 12, item 10: `+` with Accept-Language pt and a pt-BR translation: Portuguese."""
    archives = FakeArchives({(A, ITEM): PT_BR, (B, NEXT): PORTUGUESE})
    found = resolve(archives, f"/{ITEM}+", accept)
    assert isinstance(found, Found) and found.url == expected


def test_language_choice_is_lookup_then_filtering() -> None:
    assert prefix_match(["pt"], ["en", "pt-PT", "pt-BR"]) == "pt-BR"  # not by arrival order
    assert prefix_match(["de", "pt"], ["en", "pt-BR"]) == "pt-BR"
    assert prefix_match(["pt-BR"], ["pt-PT"]) == "pt-PT"
    assert prefix_match(["fr"], ["en", "pt-BR"]) is None
    assert choose_language("pt-BR, pt;q=0.9", ["pt", "pt-BR"]) == "pt-BR"
    assert choose_language("pt", ["pt", "pt-BR"]) == "pt"
    assert choose_language(None, ["pt-BR"]) is None
    assert choose_language("*", ["pt-BR"]) is None
