"""Two and three Archives holding originals, copies, translations and editions of the same
items, spoken to through their protocol by the resolver's own resolution (issue 12).

Every Archive is whole and in memory (``tests.fakes_archive.ArchiveNode``: its item store, its
files, its deposit logic, its pages, its protocol); ``MemoryFederation`` asks all of them as the
fan-out does and sends the acknowledgment to the one that gave the URL. No socket.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import NamedTuple

import pytest

from functions.archive.errors import BadRequest, Conflict, Unprocessable
from functions.archive.model import State
from functions.archive.service import DiffersFromOriginal
from functions.archive.transfer import transfer
from functions.resolver.resolution import Alert, Found
from ibi.core.labels import IBI
from tests.fakes_archive import MemoryArchive, MemoryFederation


class Label(NamedTuple):
    rep: str
    ibip: str


def minted(date: Decimal) -> Label:
    """An IBI of the Archives' own subsystem (``MemoryFederation.OWN``), in both forms."""
    ibi = IBI.build(date, host="example.org", ip="192.0.2.10")
    assert ibi.rep is not None and ibi.ibip is not None
    return Label(ibi.rep, ibi.ibip)


DATE = Decimal(1795000000)
REPORT = minted(DATE)
TRANSLATION = minted(DATE + 60)
METADATA = minted(DATE + 120)
BYTES = {"report.txt": b"The report.\n", "sub/data.csv": b"a,b\n1,2\n"}
NOTICE = "notice {acknowledgment received}"


def both(label: Label) -> dict[str, str]:
    return {"rep": label.rep, "ibip": label.ibip}


def url_request(node_protocol: object, ibi: str, **pairs: str) -> str:
    query = (
        f"servicesubject=urlRequest&clientinformation.ipaddress=203.0.113.9&parsedibiurl.ibi={ibi}"
    )
    query += "".join(f"&{name}={value}" for name, value in pairs.items())
    return str(node_protocol.answer(query).pairs)  # type: ignore[attr-defined]


@pytest.fixture
def federation() -> MemoryFederation:
    return MemoryFederation("a", "b", "c")


def found(answer: Found | Alert) -> Found:
    assert isinstance(answer, Found), answer
    return answer


# ---------------------------------------------------------------- 2. a copy's checksums


def test_a_copy_takes_its_expected_files_from_the_original_and_refuses_other_bytes(
    federation: MemoryFederation,
) -> None:
    a, b = federation["a"], federation["b"]
    a.original(both(REPORT), BYTES)
    expected = a.public_files(REPORT.ibip)  # what the CLI reads from the original's Archive
    b.copy(both(REPORT), {}, original_files=expected)
    with pytest.raises(DiffersFromOriginal, match="not the original's"):
        b.commit(REPORT.ibip, {"report.txt": b"Other bytes.\n"})
    with pytest.raises(DiffersFromOriginal, match=r"the original has no file 'extra\.txt'"):
        b.commit(REPORT.ibip, {"extra.txt": b"x"})
    assert b.service.get(REPORT.ibip).files == ()  # nothing refused was published
    copy = b.commit(REPORT.ibip, BYTES)
    assert copy.state is State.COPY and copy.original_files == a.service.get(REPORT.ibip).files
    report = b.content.verify(REPORT.ibip, None)
    assert report.problems == [] and report.items[0]["original"] == "2 file(s) of the original"


def test_verify_reports_a_copy_that_disagrees_with_its_original(
    federation: MemoryFederation,
) -> None:
    a, b = federation["a"], federation["b"]
    a.original(both(REPORT), BYTES)
    b.copy(
        both(REPORT),
        {"report.txt": BYTES["report.txt"]},
        original_files=a.public_files(REPORT.ibip),
    )
    # An operator's revision on the copy (allowed, recorded) makes it differ from the original.
    b.files.upload(REPORT.ibip, "report.txt", b"Revised.\n")
    revised = {
        "path": "report.txt",
        "sha256": hashlib.sha256(b"Revised.\n").hexdigest(),
        "size": 9,
    }
    b.content.revise_files(REPORT.ibip, {"files": [revised], "reason": "test"})
    problems = b.content.verify(REPORT.ibip, None).problems
    assert {(p["path"], p["problem"]) for p in problems} == {
        ("report.txt", "differs from the original"),
        ("sub/data.csv", "missing from the copy"),
    }
    assert a.content.verify(REPORT.ibip, None).problems == []  # the original is fine


def test_a_copy_refuses_a_main_file_other_than_the_original_checksum(
    federation: MemoryFederation,
) -> None:
    """Older clients send one checksum: the copy's main file must have it."""
    b = federation["b"]
    original = hashlib.sha256(b"The original.\n").hexdigest()
    b.copy(REPORT.ibip, {}, original_sha256=original)
    with pytest.raises(DiffersFromOriginal, match=original):
        b.commit(REPORT.ibip, {"copy.txt": b"Other bytes.\n"})
    assert b.commit(REPORT.ibip, {"copy.txt": b"The original.\n"}).files


def test_original_files_are_checked_like_any_declared_file(federation: MemoryFederation) -> None:
    b = federation["b"]
    for wrong in ("x", [{"path": "../x", "sha256": "0" * 64, "size": 1}], [{"path": "a"}]):
        with pytest.raises(BadRequest, match="original_files"):
            b.copy(REPORT.ibip, {}, original_files=wrong)


def test_a_transfer_leaves_a_copy_that_knows_every_file_of_the_original() -> None:
    federation = MemoryFederation("a")
    a = federation["a"]
    a.original(REPORT.ibip, BYTES, transferable=True)
    receiver = MemoryArchive()
    moved = transfer(a.service, a.files, receiver, REPORT.ibip, leave="copy")
    assert moved.here.state is State.COPY
    assert {f.path for f in moved.here.original_files} == set(BYTES)
    assert a.content.verify(REPORT.ibip, None).problems == []


# ---------------------------------------------------------------- 3. a damaged original


def test_a_damaged_original_is_not_offered_and_readers_reach_the_good_copy(
    federation: MemoryFederation,
) -> None:
    a, b = federation["a"], federation["b"]
    a.original(both(REPORT), BYTES)
    b.copy(both(REPORT), BYTES, original_files=a.public_files(REPORT.ibip))
    persistent = f"/{REPORT.ibip}"
    assert found(federation.resolve(persistent)).url.startswith("https://a.example.org/col/")

    a.files.put(a.service.get(REPORT.ibip).key, "report.txt", b"Bit rot.\n")  # on disk
    served = a.content.serve_file(REPORT.ibip, "report.txt", None)
    assert served.status == 500 and served.damaged and served.page is not None
    page = str(served.page.body)
    assert page.startswith("<!doctype html>") and "<style>" in page and "integrity" in page
    assert a.service.get(REPORT.ibip).damaged == ("report.txt",)  # persisted

    for asked in (  # known, not offered: no URL, no urlkey (issue 34)
        url_request(a.protocol, REPORT.ibip),
        url_request(a.protocol, REPORT.rep, **{"parsedibiurl.filepath": "sub/data.csv"}),
    ):
        assert "state Original" in asked and "url" not in asked.replace("urlrequest", "")
    went = found(federation.resolve(persistent))
    assert went.url == f"https://b.example.org/col/{REPORT.ibip}/report.txt"
    assert isinstance(federation.resolve(persistent + "?ibiurl.requireditemstatus=Original"), Alert)


def test_verify_marks_damage_and_an_operators_repair_offers_the_item_again(
    federation: MemoryFederation,
) -> None:
    a, b = federation["a"], federation["b"]
    a.original(both(REPORT), BYTES)
    b.copy(both(REPORT), BYTES, original_files=a.public_files(REPORT.ibip))
    del a.files.files[(REPORT.ibip, "sub/data.csv")]  # a file lost on disk
    report = a.content.verify(REPORT.ibip, None)
    assert [(p["path"], p["problem"]) for p in report.problems] == [("sub/data.csv", "missing")]
    assert report.items[0]["damaged"] == ["sub/data.csv"]
    persistent = f"/{REPORT.ibip}"
    assert found(federation.resolve(persistent)).answer.archive == "b"

    a.files.upload(REPORT.ibip, "sub/data.csv", BYTES["sub/data.csv"])
    restored = {
        "path": "sub/data.csv",
        "sha256": hashlib.sha256(BYTES["sub/data.csv"]).hexdigest(),
        "size": len(BYTES["sub/data.csv"]),
    }
    a.content.revise_files(REPORT.ibip, {"files": [restored], "reason": "restored from b"})
    assert a.service.get(REPORT.ibip).damaged == ()
    assert found(federation.resolve(persistent)).answer.archive == "a"


def test_bytes_put_back_on_disk_are_found_intact_by_verify(federation: MemoryFederation) -> None:
    a = federation["a"]
    a.original(REPORT.ibip, BYTES)
    a.files.put(REPORT.ibip, "report.txt", b"Bit rot.\n")
    assert a.content.serve_file(REPORT.ibip, "report.txt", None).status == 500
    a.files.put(REPORT.ibip, "report.txt", BYTES["report.txt"])  # restored from a backup
    assert a.content.serve_file(REPORT.ibip, "report.txt", None).status == 500  # still marked
    assert a.content.verify(REPORT.ibip, None).problems == []
    assert a.content.serve_file(REPORT.ibip, "report.txt", None).status == 200
    assert url_request(a.protocol, REPORT.ibip) != ""


def test_a_damaged_translation_is_named_by_its_ibi_only(federation: MemoryFederation) -> None:
    a, b = federation["a"], federation["b"]
    a.original(REPORT.ibip, BYTES, language="en")
    a.original(TRANSLATION.ibip, {"relatorio.txt": b"O relatorio.\n"}, language="pt-BR")
    a.service.link(REPORT.ibip, {"translation": {"language": "pt-BR", "ibi": TRANSLATION.ibip}})
    b.copy(TRANSLATION.ibip, {"relatorio.txt": b"O relatorio.\n"}, language="pt-BR")
    a.files.put(TRANSLATION.ibip, "relatorio.txt", b"Bit rot.\n")
    assert a.content.verify(TRANSLATION.ibip, None).problems
    answer = url_request(
        a.protocol, REPORT.ibip, **{"parsedibiurl.verblist": "GetTranslation(pt-BR)"}
    )
    assert "ibi.translation(pt-BR)" in answer and "url.translation(pt-BR)" not in answer
    went = found(federation.resolve(f"/{REPORT.ibip}+(pt-BR)"))
    assert went.url == f"https://b.example.org/col/{TRANSLATION.ibip}/relatorio.txt"


def test_a_damaged_copy_still_names_its_next_edition(federation: MemoryFederation) -> None:
    """Issue 34: a damaged item answered empty, so the holdings view read "says next edition
    none" of it; it now answers its state and next edition, and no URL."""
    a, b = federation["a"], federation["b"]
    a.original(REPORT.ibip, BYTES)
    a.original(TRANSLATION.ibip, {"v2.txt": b"v2\n"})
    a.service.link(REPORT.ibip, {"next_edition": TRANSLATION.ibip})
    b.copy(REPORT.ibip, BYTES, original_files=a.public_files(REPORT.ibip))
    b.service.link(REPORT.ibip, {"next_edition": TRANSLATION.ibip})
    b.files.put(REPORT.ibip, "report.txt", b"Bit rot.\n")
    assert b.content.verify(REPORT.ibip, None).problems
    answer = url_request(b.protocol, REPORT.ibip)
    assert f"ibi.nextedition {{ibip {TRANSLATION.ibip}}}" in answer, answer
    assert "state Copy" in answer and "urlkey" not in answer and "\nurl " not in answer


# ---------------------------------------------------------------- 4. both forms


def test_a_copy_made_with_the_ibip_form_learns_the_rep_form(federation: MemoryFederation) -> None:
    a, b = federation["a"], federation["b"]
    a.original(both(REPORT), BYTES)
    b.copy(REPORT.ibip, BYTES, original_files=a.public_files(REPORT.ibip))
    assert url_request(b.protocol, REPORT.rep) == ""  # it does not know that form yet
    b.service.update(REPORT.ibip, {"ibi": both(REPORT)})
    answer = url_request(b.protocol, REPORT.rep)
    assert "state Copy" in answer and REPORT.rep in answer
    assert b.content.serve_file(REPORT.rep, "report.txt", None).status == 200
    a.service.delete(REPORT.ibip)  # the original is gone: its copy still answers to the rep
    assert found(federation.resolve(f"/{REPORT.rep}")).answer.archive == "b"


def test_another_form_is_added_only_to_the_same_ibi(federation: MemoryFederation) -> None:
    b = federation["b"]
    b.copy(REPORT.ibip, {})
    b.copy(TRANSLATION.rep, {})
    with pytest.raises(Unprocessable, match="keeps the item's IBI"):
        b.service.update(REPORT.ibip, {"ibi": both(TRANSLATION)})
    with pytest.raises(Conflict, match="stored under its rep form"):
        b.service.update(TRANSLATION.rep, {"ibi": both(TRANSLATION)})  # would re-key it
    with pytest.raises(BadRequest):
        b.service.update(REPORT.ibip, {"ibi": {"rep": TRANSLATION.rep, "ibip": REPORT.ibip}})


def test_related_items_are_found_by_any_of_their_forms(federation: MemoryFederation) -> None:
    a = federation["a"]
    a.original(REPORT.ibip, BYTES)
    a.original(TRANSLATION.rep, {"relatorio.txt": b"O relatorio.\n"}, language="pt")
    link = {"language": "pt", "ibi": both(TRANSLATION)}  # stored under its rep form only here
    a.service.link(REPORT.ibip, {"translation": link})
    answer = url_request(a.protocol, REPORT.ibip, **{"parsedibiurl.verblist": "GetTranslation(pt)"})
    assert "url.translation(pt) https://a.example.org/col/" in answer


# ---------------------------------------------------------------- 5. metadata formats


def test_oai_dc_is_never_answered_by_free_format_metadata(federation: MemoryFederation) -> None:
    a, b = federation["a"], federation["b"]
    a.original(REPORT.ibip, BYTES)
    b.original(METADATA.ibip, {"record.bib": b"@report{x}\n"}, content_type="Metadata")
    a.service.link(REPORT.ibip, {"metadata": {"ibi": METADATA.ibip}})  # free format, in b
    asked = url_request(a.protocol, REPORT.ibip, **{"parsedibiurl.verblist": "GetMetadata(oai_dc)"})
    assert "metadata(oai_dc)" not in asked
    persistent = f"/{REPORT.ibip}"
    assert isinstance(federation.resolve(persistent + ":(oai_dc)"), Alert)
    free = found(federation.resolve(persistent + ":"))
    assert free.url == f"https://b.example.org/col/{METADATA.ibip}/record.bib"

    a.original(TRANSLATION.ibip, {"record.bib": b"@report{y}\n"}, content_type="Metadata")
    a.service.link(REPORT.ibip, {"metadata": {"ibi": TRANSLATION.ibip}})  # held here, a file
    asked = url_request(a.protocol, REPORT.ibip, **{"parsedibiurl.verblist": "GetMetadata(oai_dc)"})
    assert "metadata(oai_dc)" not in asked

    a.service.update(REPORT.ibip, {"dc": {"title": "The report"}})  # a record of its own
    went = found(federation.resolve(persistent + ":(oai_dc)"))
    assert went.url == f"https://a.example.org/metadata/{REPORT.ibip}?format=oai_dc"


def test_an_oai_dc_link_answers_oai_dc_and_plain_metadata_too(federation: MemoryFederation) -> None:
    a, b = federation["a"], federation["b"]
    a.original(REPORT.ibip, BYTES)
    b.original(METADATA.ibip, {"oai.xml": b"<oai_dc:dc/>"}, content_type="Metadata")
    a.service.link(REPORT.ibip, {"metadata": {"ibi": METADATA.ibip, "format": "oai_dc"}})
    persistent = f"/{REPORT.ibip}"
    expected = f"https://b.example.org/col/{METADATA.ibip}/oai.xml"
    assert found(federation.resolve(persistent + ":(oai_dc)")).url == expected
    assert found(federation.resolve(persistent + ":")).url == expected


# ---------------------------------------------------------------- 9. file paths


@pytest.mark.parametrize("path", ["sub/data.csv", "/sub/data.csv", "//sub/data.csv"])
def test_a_file_path_is_taken_with_or_without_its_leading_slash(
    federation: MemoryFederation, path: str
) -> None:
    a, b = federation["a"], federation["b"]
    a.original(both(REPORT), BYTES)
    b.copy(both(REPORT), BYTES, original_files=a.public_files(REPORT.ibip))
    for node in (a, b):
        answer = url_request(node.protocol, REPORT.rep, **{"parsedibiurl.filepath": path})
        assert f"url https://{node.address}/col/{REPORT.ibip}/sub/data.csv" in answer
    served = b.content.serve_file(REPORT.rep, "sub/data.csv", None)
    assert served.status == 200 and served.page is not None and served.page.body == b"a,b\n1,2\n"


# ---------------------------------------------------------------- 11. access counts


def test_an_access_is_counted_on_the_item_the_reader_went_to(federation: MemoryFederation) -> None:
    a, b = federation["a"], federation["b"]
    a.original(both(REPORT), BYTES, language="en")
    a.original(TRANSLATION.ibip, {"relatorio.txt": b"O relatorio.\n"}, language="pt-BR")
    a.service.link(REPORT.ibip, {"translation": {"language": "pt-BR", "ibi": TRANSLATION.ibip}})
    b.copy(both(REPORT), BYTES, language="en", original_files=a.public_files(REPORT.ibip))
    for modifier in ("+(pt-BR)", "+(pt-BR)", ""):
        persistent = f"/{REPORT.rep}{modifier}"
        assert federation.acknowledge(found(federation.resolve(persistent)), persistent) == NOTICE
        a.clock.sleep(31)  # past the double-click window (issue 35)
    report, translation = a.service.get(REPORT.ibip), a.service.get(TRANSLATION.ibip)
    assert a.service.accesses(translation) == 2
    assert a.service.accesses(report) == 1  # asked by its rep form: counted on the item
    assert b.service.accesses(b.service.get(REPORT.ibip)) == 0


def test_a_transfer_carries_the_access_count(federation: MemoryFederation) -> None:
    a = federation["a"]
    a.original(REPORT.ibip, BYTES, transferable=True)
    persistent = f"/{REPORT.ibip}"
    for _ in range(3):
        federation.acknowledge(found(federation.resolve(persistent)), persistent)
        a.clock.sleep(31)  # past the double-click window (issue 35)
    receiver = MemoryArchive()
    transfer(a.service, a.files, receiver, REPORT.ibip, leave="tombstone")
    held = receiver.service.get(REPORT.ibip)
    assert held.state is State.ORIGINAL and receiver.service.accesses(held) == 3


@pytest.mark.parametrize("accesses", [-1, True, "3", 1.5, 10**16])
def test_a_carried_count_is_a_whole_number(accesses: object) -> None:
    receiver = MemoryArchive()
    with pytest.raises(BadRequest, match="accesses"):
        receiver.service.receive_transfer({"ibi": REPORT.ibip, "accesses": accesses})


# ---------------------------------------------------------------- 12. acknowledgments


def test_an_unknown_or_spent_urlkey_gets_the_constant_notice_and_counts_nothing(
    federation: MemoryFederation,
) -> None:
    a = federation["a"]
    a.original(REPORT.ibip, BYTES)
    persistent = f"/{REPORT.ibip}"
    went = found(federation.resolve(persistent))
    assert federation.acknowledge(went, persistent) == NOTICE
    assert federation.acknowledge(went, persistent) == NOTICE  # spent: no second count
    for urlkey in ("", "1426387214-9164566186556927", "nonsense"):
        answer = a.protocol.answer(f"servicesubject=acknowledgment&urlkey={urlkey}")
        assert str(answer.pairs) == NOTICE and answer.metric == "AcknowledgmentsIgnored"
    assert a.service.accesses(a.service.get(REPORT.ibip)) == 1
