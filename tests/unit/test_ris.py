"""RIS by content negotiation (issue 28, point 5): ``Accept: application/x-research-info-systems``.

Every reference is read back by rispy, the RIS reader reference-manager tooling uses; the
resolver is the real handler over scripted Archives (``test_negotiation.py``'s).
"""

from __future__ import annotations

import pytest
import rispy
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.resolver import negotiation
from ibi.core import citation
from tests.unit.test_negotiation import DC, ITEM, Archives, archives, get, header

__all__ = ["archives"]  # the resolver over scripted Archives, a fixture of this module too

URL = f"https://urlib.net/{ITEM}"


def record(**dc: tuple[str, ...]) -> citation.Record:
    return citation.Record(persistent_url=URL, ibi=ITEM, dc=dc)


def read(text: str) -> dict[str, object]:
    (entry,) = rispy.loads(text)
    return entry


def test_creators_with_commas_and_accents_and_a_title_with_a_newline_read_back() -> None:
    text = citation.ris(
        record(
            title=("Sensoriamento remoto:\r\numa introdução",),
            creator=("Câmara, Gilberto", "Banon, Gerald Jean Francis", "INPE"),
            date=("2024-05-01",),
            publisher=("Instituto Nacional de Pesquisas Espaciais",),
            description=("Line one.\nLine two;\tand a tab.",),
            subject=("remote sensing", "persistent identifiers"),
            language=("pt-BR",),
            type=("Technical report",),
        )
    )
    entry = read(text)
    assert entry["type_of_reference"] == "RPRT"
    assert entry["title"] == "Sensoriamento remoto: uma introdução"
    assert entry["authors"] == ["Câmara, Gilberto", "Banon, Gerald Jean Francis", "INPE"]
    assert (entry["year"], entry["date"]) == ("2024", "2024/05/01/")
    assert entry["publisher"] == "Instituto Nacional de Pesquisas Espaciais"
    assert entry["abstract"] == "Line one. Line two; and a tab."
    assert entry["keywords"] == ["remote sensing", "persistent identifiers"]
    assert entry["language"] == "pt-BR"
    assert entry["urls"] == [URL]
    assert entry["notes"] == [f"IBI: {ITEM}"]


def test_every_line_is_tag_two_spaces_dash_value_ended_by_crlf() -> None:
    text = citation.ris(record(title=("A\nB",), creator=("A, B",)))
    assert text.endswith("ER  - \r\n")
    lines = text.split("\r\n")
    assert lines[0] == "TY  - GEN" and lines[-1] == ""
    assert "\n" not in text.replace("\r\n", "")
    for line in lines[:-1]:
        assert line[:2].isalnum() and line[:2].isupper() and line[2:6] == "  - "


@pytest.mark.parametrize(
    ("kind", "ris_type"),
    [
        ("Dataset", "DATA"),
        ("Software", "COMP"),
        ("Master's thesis", "THES"),
        ("Doctoral dissertation", "THES"),
        ("Technical report", "RPRT"),
        ("Journal article", "JOUR"),
        ("Book", "BOOK"),
        ("Image", "FIGURE"),
        ("Text", "GEN"),
    ],
)
def test_the_reference_type_comes_from_dc_type(kind: str, ris_type: str) -> None:
    assert read(citation.ris(record(type=(kind,))))["type_of_reference"] == ris_type


@pytest.mark.parametrize(
    ("date", "year", "da"),
    [
        ("2024-05-01", "2024", "2024/05/01/"),
        ("2024-05", "2024", "2024/05//"),
        ("2024", "2024", "2024///"),
    ],
)
def test_the_date_is_ris_year_and_slashed_date(date: str, year: str, da: str) -> None:
    entry = read(citation.ris(record(date=(date,))))
    assert (entry["year"], entry["date"]) == (year, da)


def test_a_date_that_is_no_date_is_left_out() -> None:
    entry = read(citation.ris(record(date=("sometime",))))
    assert "year" not in entry and "date" not in entry


@pytest.mark.parametrize(
    "identifier",
    ["10.1000/xyz-123", "doi:10.1000/xyz-123", "https://doi.org/10.1000/xyz-123"],
)
def test_a_doi_among_the_identifiers_is_the_do_field(identifier: str) -> None:
    entry = read(citation.ris(record(identifier=("urn:isbn:123", identifier))))
    assert entry["doi"] == "10.1000/xyz-123"


def test_no_doi_no_do_field() -> None:
    assert "doi" not in read(citation.ris(record(identifier=("https://example.org/x",))))


def test_a_note_is_one_more_n1_after_the_ibis() -> None:
    text = citation.ris(record(title=("T",)), note="Withdrawn:\nthe item was deleted")
    assert read(text)["notes"] == [f"IBI: {ITEM}", "Withdrawn: the item was deleted"]


def test_control_characters_become_the_replacement_character() -> None:
    assert read(citation.ris(record(title=("a\x00b\x07c",))))["title"] == "a\ufffdb\ufffdc"


TEXT = st.text(max_size=80).filter(lambda text: text.strip() != "")


@settings(max_examples=300, deadline=None)
@given(TEXT, st.lists(TEXT, min_size=1, max_size=4))
def test_rispy_reads_back_any_title_and_creators(title: str, creators: list[str]) -> None:
    entry = read(citation.ris(record(title=(title,), creator=tuple(creators))))
    assert entry["title"] == citation.one_line(title)
    assert entry["authors"] == [citation.one_line(c) for c in creators]
    assert entry["urls"] == [URL]


# ---------------------------------------------------------------------------- the resolver


def test_the_resolver_answers_ris_to_its_accept(archives: Archives) -> None:
    got = get(f"/{ITEM}", citation.RIS)
    assert got["statusCode"] == 200, got["body"]
    assert header(got, "content-type") == "application/x-research-info-systems; charset=utf-8"
    assert header(got, "vary") == "Accept"
    entry = read(got["body"])
    assert entry["title"] == DC["title"][0]
    assert entry["authors"] == list(DC["creator"])
    assert entry["urls"] == [f"http://api.example.org/{ITEM}"]
    assert ("extension.holdings", "yes") in archives.asked[-1]


def test_ris_is_chosen_as_the_other_offered_types() -> None:
    assert negotiation.choose(citation.RIS) == citation.RIS
    assert negotiation.choose(f"text/html;q=0.5, {citation.RIS}") == citation.RIS
    assert negotiation.choose(f"{citation.RIS};q=0.4, */*;q=0.5") is None
    assert citation.RIS in negotiation.DESCRIBED_BY
