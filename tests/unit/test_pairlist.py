"""Pair lists, %hh escaping and query strings (spec §3, §7.10; seed 001 Tables 4.1, 4.2).

The fixtures are the answers and messages printed in seed 001 (Examples 4.1, 4.2, 6.9,
7.2-7.12 and the exchanges of §8), with the OCR repaired and nothing else changed:
``mtc-m18080`` / ``mtc-m180@80`` -> ``mtc-m18@80``, ``mtc-mi6c`` / ``mtc-ml6c`` ->
``mtc-m16c``, ``Relat'f3rio`` -> ``Relat%f3rio``, ``14:32:147Z`` -> ``14:32:14Z``,
``o0ai_dc`` -> ``oai_dc``, ``mtc-ml6c ... br`` (an elided line) -> ``mtc-m16c.sid.inpe.br``,
``CCSDSY%20`` -> ``CCSDS%20``, ``RTC-07 .pdf`` -> ``RTC-07.pdf``, and the scrambled
columns of Example 4.2 put back in their nine lines.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import (
    DEFAULT_MAX_PAIR_LIST,
    PairList,
    decode_value,
    encode_query,
    encode_value,
    format_pair_list,
    forms_value,
    parse_forms,
    parse_pair_list,
    parse_query,
    split_query,
)


def crlf(*lines: str) -> str:
    return "\r\n".join(lines)


# ---------------------------------------------------------------------------- seed fixtures

EXAMPLE_4_2 = crlf(
    "archiveaddress mtc-m16d.sid.inpe.br",
    "contenttype Data",
    "ibi {rep sid.inpe.br/mtc-m19/2013/09.04.12.27.57 ibip 8JMKD3MGP7W/3EPGUE5}",
    "ibi.archiveservice {rep sid.inpe.br/mtc-m19@80/2009/08.21.17.02}",
    "ibi.platformsoftware {rep dpi.inpe.br/banon/1998/08.02.08.56}",
    "state Original",
    "timestamp 2013-10-04T14:32:14Z",
    "url http://mtc-m16d.sid.inpe.br/col/sid.inpe.br/mtc-m19/2013/09.04.12.27.57/doc/"
    "Relat%f3rio%20Final.pdf",
    "urlkey 1426203276-5985125171467764",
)

_COL = "http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18@80/2009"
_REP_ITEM = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"
_REP_METADATA = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47"
EXAMPLE_7_2 = crlf(
    "archiveaddress mtc-m16c.sid.inpe.br",
    "contenttype Data",
    "contenttype.lastedition Data",
    "contenttype.lastedition.metadata Metadata",
    "contenttype.lastedition.metadata(oai_dc) Metadata",
    "contenttype.metadata Metadata",
    "contenttype.metadata(oai_dc) Metadata",
    "contenttype.metadata.translation Metadata",
    "contenttype.translation(en) Data",
    "contenttype.translation(pt) Data",
    f"ibi {{rep {_REP_ITEM} ibip 8JMKD3MGP8W/35MME4E}}",
    "ibi.archiveservice {rep sid.inpe.br/mtc-m18@80/2008/03.17.15.17}",
    f"ibi.lastedition {{rep {_REP_ITEM} ibip 8JMKD3MGP8W/35MME4E}}",
    f"ibi.lastedition.metadata {{rep {_REP_METADATA}}}",
    f"ibi.lastedition.metadata(oai_dc) {{rep {_REP_METADATA}}}",
    f"ibi.metadata {{rep {_REP_METADATA}}}",
    f"ibi.metadata(oai_dc) {{rep {_REP_METADATA}}}",
    f"ibi.metadata.translation {{rep {_REP_METADATA}}}",
    "ibi.platformsoftware {rep dpi.inpe.br/banon/1998/08.02.08.56}",
    f"ibi.translation(en) {{rep {_REP_ITEM}}}",
    "ibi.translation(pt) {rep sid.inpe.br/mtc-m18@80/2009/08.25.19.43}",
    "state Original",
    "state.lastedition Original",
    "state.lastedition.metadata Original",
    "state.lastedition.metadata(oai_dc) Original",
    "state.metadata Original",
    "state.metadata(oai_dc) Original",
    "state.metadata.translation Original",
    "state.translation(en) Original",
    "state.translation(pt) Original",
    "timestamp 2009-07-21T13:23:45Z",
    "timestamp.lastedition 2009-07-21T13:23:45Z",
    "timestamp.lastedition.metadata 2014-04-04T17:39:54Z",
    "timestamp.lastedition.metadata(oai_dc) 2014-04-04T17:39:54Z",
    "timestamp.metadata 2014-04-04T17:39:54Z",
    "timestamp.metadata(oai_dc) 2014-04-04T17:39:54Z",
    "timestamp.metadata.translation 2014-04-04T17:39:54Z",
    "timestamp.translation(en) 2009-07-21T13:23:45Z",
    "timestamp.translation(pt) 2011-09-22T14:45:11Z",
    f"url {_COL}/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf",
    f"url.lastedition {_COL}/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf",
    f"url.lastedition.metadata {_COL}/07.21.13.23.47/doc/metadata.cgi",
    f"url.lastedition.metadata(oai_dc) {_COL}/07.21.13.23.47/doc/metadata.cgi?choice=oai_dc",
    f"url.metadata {_COL}/07.21.13.23.47/doc/metadata.cgi",
    f"url.metadata(oai_dc) {_COL}/07.21.13.23.47/doc/metadata.cgi?choice=oai_dc",
    f"url.metadata.translation {_COL}/07.21.13.23.47/doc/metadata.cgi",
    f"url.translation(en) {_COL}/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf",
    f"url.translation(pt) {_COL}/08.25.19.43/doc/RTC-07.pdf",
    "urlkey 1426387214-9164566186556927",
)

# FILTRARLISTADEURL(Example 7.2, "GetTranslation").
EXAMPLE_7_3 = crlf(
    "archiveaddress mtc-m16c.sid.inpe.br",
    "contenttype.translation(en) Data",
    "contenttype.translation(pt) Data",
    f"ibi {{rep {_REP_ITEM} ibip 8JMKD3MGP8W/35MME4E}}",
    "ibi.archiveservice {rep sid.inpe.br/mtc-m18@80/2008/03.17.15.17}",
    "ibi.platformsoftware {rep dpi.inpe.br/banon/1998/08.02.08.56}",
    f"ibi.translation(en) {{rep {_REP_ITEM}}}",
    "ibi.translation(pt) {rep sid.inpe.br/mtc-m18@80/2009/08.25.19.43}",
    "state.translation(en) Original",
    "state.translation(pt) Original",
    "timestamp.translation(en) 2009-07-21T13:23:45Z",
    "timestamp.translation(pt) 2011-09-22T14:45:11Z",
    f"url.translation(en) {_COL}/07.21.13.23/doc/CCSDS%20643.0-B-1.pdf",
    f"url.translation(pt) {_COL}/08.25.19.43/doc/RTC-07.pdf",
    "urlkey 1426387214-9164566186556927",
)

EXAMPLE_7_4 = "state Original"
EXAMPLE_7_6 = (
    "ibi.lastedition {rep sid.inpe.br/mtc-m19/2013/09.04.12.27.57 ibip 8JMKD3MGP7W/3EPGUE5}"
)
EXAMPLE_7_7 = "archiveaddress mtc-m16d.sid.inpe.br state Original"  # JUNTAR joins with SP
EXAMPLE_7_8 = "ibi.metadata {rep sid.inpe.br/mtc-m19/2013/09.04.12.27.58}"
_ICONET = "http://mtc-m16d.sid.inpe.br/col/iconet.com.br/banon/2009/09.09.22.01/doc"
EXAMPLE_7_9 = f"url {_ICONET}/@relatorio.pdf"
# ".metadados" is how the seed prints it (a Portuguese slip for ".metadata").
EXAMPLE_7_10 = (
    "url.metadados http://mtc-m16d.sid.inpe.br/col/sid.inpe.br/mtc-m19/2013/09.04.12.27.58/"
    "doc/metadata.cgi"
)
EXAMPLE_7_11 = f"url {_ICONET}/reference.bib"
EXAMPLE_7_12 = (
    "url http://mtc-m16d.sid.inpe.br/displaydoccontent.cgi/LK47B6W/362SFKH?displaytype=FileList"
)

# §8.1: the first non-empty answer for 8JMKD3MGP8W/35MMLL8.
SECTION_8_1_ANSWER = crlf(
    "archiveaddress mtc-m16c.sid.inpe.br",
    "contenttype Data",
    "ibi {rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}",
    "ibi.archiveservice {rep sid.inpe.br/mtc-m18@80/2008/03.17.15.17}",
    "ibi.platformsoftware {rep dpi.inpe.br/banon/1998/08.02.08.56}",
    "state Original",
    "timestamp 2009-07-21T14:43:31Z",
    f"url {_COL}/07.21.14.43/doc/CCSDS%20650.0-B-1.pdf",
    "urlkey 1427244889-5349022633744855",
)
# §8.2 (the worked example of spec §5.3): first answer, then the answer for the next edition.
SECTION_8_2_FIRST = crlf(
    "archiveaddress mtc-m16c.sid.inpe.br",
    "ibi {rep sid.inpe.br/mtc-m18@80/2009/07.21.14.43 ibip 8JMKD3MGP8W/35MMLL8}",
    "ibi.archiveservice {rep sid.inpe.br/mtc-m18@80/2008/03.17.15.17}",
    "ibi.nextedition {rep sid.inpe.br/mtc-m18/2012/07.12.18.08}",
    "ibi.platformsoftware {rep dpi.inpe.br/banon/1998/08.02.08.56}",
)
SECTION_8_2_SECOND = crlf(
    "archiveaddress mtc-m16c.sid.inpe.br",
    "contenttype.lastedition.metadata(oai_dc) Metadata",
    "ibi {rep sid.inpe.br/mtc-m18/2012/07.12.18.08 ibip 8JMKD3MGP8W/3C9EP6P}",
    "ibi.archiveservice {rep sid.inpe.br/mtc-m18@80/2008/03.17.15.17}",
    "ibi.lastedition.metadata(oai_dc) {rep sid.inpe.br/mtc-m18/2012/07.12.18.08.49}",
    "ibi.platformsoftware {rep dpi.inpe.br/banon/1998/08.02.08.56}",
    "state.lastedition.metadata(oai_dc) Original",
    "timestamp.lastedition.metadata(oai_dc) 2014-04-04T17:36:01Z",
    "url.lastedition.metadata(oai_dc) http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18/"
    "2012/07.12.18.08.49/doc/metadata.cgi?choice=oai_dc",
    "urlkey 1426286454-36108967764060357",
)
# §8.2: what the resolver captured from http://urlib.net/8JMKD3MGP8W/35MMLL8!:(oai_dc).
SECTION_8_2_CAPTURED = crlf(
    "clientinformation.ipaddress {172.16.44.200 150.163.68.1}",
    "clientinformation.languagepreference pt-BR,fr;q=0.8,en;q=0.5,pt;q=0.3",
    "parsedibiurl.ibi 8JMKD3MGP8W/35MMLL8",
    "parsedibiurl.verblist {GetLastEdition GetMetadata(oai_dc)}",
)

# Queries of the seed's messages (the repaired one-line copies the seed itself prints).
QUERY_4_1 = (
    "servicesubject=urlRequest&clientinformation.ipaddress=150.163.2.175"
    "&parsedibiurl.ibi=8JMKD3MGP7W/3EPGUE5"
)
QUERY_6_9 = (
    "servicesubject=acknowledgment&clientinformation.ipaddress=150.163.2.175&contenttype=Data"
    "&ibi=rep%20sid.inpe.br/mtc-m19/2013/09.04.12.27.57%20ibip%208JMKD3MGP7W/3EPGUE5"
    "&url=http://mtc-m16d.sid.inpe.br/col/sid.inpe.br/mtc-m19/2013/09.04.12.27.57/doc/"
    "Relat%f3rio%20Final.pdf"
    "&url.persistent=http://mtc-m16d.sid.inpe.br:80/8JMKD3MGP7W/3EPGUE5"
    "&urlkey=1424636122-5331490054869684"
)
QUERY_8_1_REQUEST = (
    "clientinformation.ipaddress=172.16.44.200%20150.163.68.1"
    "&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8&servicesubject=urlRequest"
)
QUERY_8_1_ACKNOWLEDGMENT = (
    "clientinformation.ipaddress=172.16.44.200%20150.163.68.1&contenttype=Data"
    "&ibi=rep%20sid.inpe.br/mtc-m18@80/2009/07.21.14.43%20ibip%208JMKD3MGP8W/35MMLL8"
    "&servicesubject=acknowledgment&state=Original"
    "&url=http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18@80/2009/07.21.14.43/doc/"
    "CCSDS%20650.0-B-1.pdf"
    "&url.persistent=http://urlib.net:80/8JMKD3MGP8W/35MMLL8"
    "&urlkey=1427244889-5349022633744855"
)
QUERY_8_2_FIRST_REQUEST = (
    "clientinformation.ipaddress=172.16.44.200%20150.163.68.1"
    "&parsedibiurl.ibi=8JMKD3MGP8W/35MMLL8"
    "&parsedibiurl.verblist=GetLastEdition%20GetMetadata(oai_dc)&servicesubject=urlRequest"
)
QUERY_8_2_SECOND_REQUEST = (
    "clientinformation.ipaddress=172.16.44.200%20150.163.68.1"
    "&parsedibiurl.ibi=sid.inpe.br/mtc-m18/2012/07.12.18.08"
    "&parsedibiurl.verblist=GetLastEdition%20GetMetadata(oai_dc)&servicesubject=urlRequest"
)
QUERY_8_2_ACKNOWLEDGMENT = (
    "clientinformation.ipaddress=172.16.44.200%20150.163.68.1&contenttype=Metadata"
    "&ibi=rep%20sid.inpe.br/mtc-m18/2012/07.12.18.08.49&servicesubject=acknowledgment"
    "&state=Original"
    "&url=http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18/2012/07.12.18.08.49/doc/"
    "metadata.cgi%3Fchoice%3Doai_dc"
    "&url.persistent=http://urlib.net:80/8JMKD3MGP8W/35MMLL8!:(oai_dc)"
    "&urlkey=1426286454-36108967764060357"
)

ALL_ANSWERS = {
    "4.2": EXAMPLE_4_2,
    "7.2": EXAMPLE_7_2,
    "7.3": EXAMPLE_7_3,
    "7.4": EXAMPLE_7_4,
    "7.6": EXAMPLE_7_6,
    "7.7": EXAMPLE_7_7,
    "7.8": EXAMPLE_7_8,
    "7.9": EXAMPLE_7_9,
    "7.10": EXAMPLE_7_10,
    "7.11": EXAMPLE_7_11,
    "7.12": EXAMPLE_7_12,
    "8.1": SECTION_8_1_ANSWER,
    "8.2 first": SECTION_8_2_FIRST,
    "8.2 second": SECTION_8_2_SECOND,
    "8.2 captured": SECTION_8_2_CAPTURED,
    "confirmation": "confirmation yes",
    "notice": "notice {acknowledgment received}",
    "included": "status.archive included status.confirmation successful",
    "excluded": "status.archive excluded",
}
SEED_QUERIES = [
    QUERY_4_1,
    QUERY_8_1_REQUEST,
    QUERY_8_1_ACKNOWLEDGMENT,
    QUERY_8_2_FIRST_REQUEST,
    QUERY_8_2_SECOND_REQUEST,
    QUERY_8_2_ACKNOWLEDGMENT,
]


# ---------------------------------------------------------------------------- seed answers


def test_example_4_2() -> None:
    answer = parse_pair_list(EXAMPLE_4_2)
    assert len(answer) == 9  # "dispostos ao longo de 9 linhas"
    assert answer.names()[0] == "archiveaddress"
    assert answer["archiveaddress"] == "mtc-m16d.sid.inpe.br"
    assert answer["contenttype"] == "Data"
    assert answer["state"] == "Original"
    assert answer["timestamp"] == "2013-10-04T14:32:14Z"
    assert answer["urlkey"] == "1426203276-5985125171467764"
    assert answer["ibi"] == (
        "rep",
        "sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
        "ibip",
        "8JMKD3MGP7W/3EPGUE5",
    )
    assert answer.words("ibi.archiveservice") == ("rep", "sid.inpe.br/mtc-m19@80/2009/08.21.17.02")
    # The URL is a word kept as sent: its %f3 (ISO 8859-1 ó) and %20 belong to the URL.
    url = answer.word("url")
    assert url is not None and url.endswith("/doc/Relat%f3rio%20Final.pdf")
    assert decode_value(url).endswith("/doc/Relatório Final.pdf")


def test_example_4_2_forms_are_one_item() -> None:
    forms = parse_forms(parse_pair_list(EXAMPLE_4_2)["ibi"])
    assert forms == {
        "rep": "sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
        "ibip": "8JMKD3MGP7W/3EPGUE5",
    }
    assert parse_label(forms["rep"]).date == parse_label(forms["ibip"]).date


def test_example_7_2() -> None:
    answer = parse_pair_list(EXAMPLE_7_2)
    assert len(answer) == 49
    assert answer.names()[10] == "ibi"  # "o décimo primeiro par"
    assert answer["archiveaddress"] == "mtc-m16c.sid.inpe.br"
    assert answer["contenttype.lastedition.metadata(oai_dc)"] == "Metadata"
    assert answer["contenttype.translation(pt)"] == "Data"
    assert parse_forms(answer["ibi"]) == {"rep": _REP_ITEM, "ibip": "8JMKD3MGP8W/35MME4E"}
    assert answer["ibi.lastedition"] == answer["ibi"]  # no next edition: the item itself
    assert parse_forms(answer["ibi.translation(pt)"]) == {
        "rep": "sid.inpe.br/mtc-m18@80/2009/08.25.19.43"
    }
    assert answer["timestamp.translation(pt)"] == "2011-09-22T14:45:11Z"
    assert answer["url.lastedition.metadata(oai_dc)"] == (
        f"{_COL}/07.21.13.23.47/doc/metadata.cgi?choice=oai_dc"
    )
    assert answer["url.translation(pt)"] == f"{_COL}/08.25.19.43/doc/RTC-07.pdf"
    assert answer.word("urlkey") == "1426387214-9164566186556927"
    assert "ibi.nextedition" not in answer


def test_example_7_2_every_ibi_value_is_forms() -> None:
    answer = parse_pair_list(EXAMPLE_7_2)
    ibi_names = [name for name in answer.names() if name.split(".")[0] == "ibi"]
    assert len(ibi_names) == 11
    for name in ibi_names:
        assert parse_forms(answer[name])  # valid labels, rep and/or ibip


def test_example_7_3_is_example_7_2_filtered_by_get_translation() -> None:
    full = parse_pair_list(EXAMPLE_7_2)
    filtered = parse_pair_list(EXAMPLE_7_3)
    identification = {"archiveaddress", "ibi", "ibi.archiveservice", "ibi.platformsoftware"}

    def keep(name: str) -> bool:  # identification pairs, urlkey, and "<x>.translation…"
        qualifier = name.partition(".")[2]
        return name in identification or name == "urlkey" or qualifier.startswith("translation")

    assert full.filter(keep) == filtered
    assert all(full[name] == value for name, value in filtered)


@pytest.mark.parametrize(
    ("text", "name", "value"),
    [
        (EXAMPLE_7_4, "state", "Original"),
        (
            EXAMPLE_7_6,
            "ibi.lastedition",
            ("rep", "sid.inpe.br/mtc-m19/2013/09.04.12.27.57", "ibip", "8JMKD3MGP7W/3EPGUE5"),
        ),
        (EXAMPLE_7_8, "ibi.metadata", ("rep", "sid.inpe.br/mtc-m19/2013/09.04.12.27.58")),
        (EXAMPLE_7_9, "url", f"{_ICONET}/@relatorio.pdf"),
        (
            EXAMPLE_7_10,
            "url.metadados",
            "http://mtc-m16d.sid.inpe.br/col/sid.inpe.br/mtc-m19/2013/09.04.12.27.58/doc/"
            "metadata.cgi",
        ),
        (EXAMPLE_7_11, "url", f"{_ICONET}/reference.bib"),
        (
            EXAMPLE_7_12,
            "url",
            "http://mtc-m16d.sid.inpe.br/displaydoccontent.cgi/LK47B6W/362SFKH"
            "?displaytype=FileList",
        ),
        ("notice {acknowledgment received}", "notice", ("acknowledgment", "received")),
        ("confirmation yes", "confirmation", "yes"),
    ],
)
def test_one_pair_examples(text: str, name: str, value: str | tuple[str, ...]) -> None:
    answer = parse_pair_list(text)
    assert answer.pairs == ((name, value),)


def test_example_7_7_pairs_joined_by_a_space() -> None:
    answer = parse_pair_list(EXAMPLE_7_7)
    assert answer.pairs == (("archiveaddress", "mtc-m16d.sid.inpe.br"), ("state", "Original"))
    assert format_pair_list(answer, newline=" ") == EXAMPLE_7_7


def test_registration_answers() -> None:
    included = parse_pair_list("status.archive included status.confirmation successful")
    assert included.word("status.archive") == "included"
    assert included.word("status.confirmation") == "successful"
    assert parse_pair_list("status.archive excluded").word("status.archive") == "excluded"


def test_section_8_answers() -> None:
    first = parse_pair_list(SECTION_8_2_FIRST)
    assert first.names()[3] == "ibi.nextedition"  # "o quarto par"
    assert parse_forms(first["ibi.nextedition"]) == {"rep": "sid.inpe.br/mtc-m18/2012/07.12.18.08"}
    assert "url.lastedition.metadata(oai_dc)" not in first
    second = parse_pair_list(SECTION_8_2_SECOND)
    assert second.names()[8] == "url.lastedition.metadata(oai_dc)"  # "o nono par"
    forms = parse_forms(second["ibi"])
    assert parse_label(forms["rep"]).date == parse_label(forms["ibip"]).date
    answer = parse_pair_list(SECTION_8_1_ANSWER)
    assert answer.names()[7] == "url"  # "no oitavo par"
    forms = parse_forms(answer["ibi"])
    assert forms["ibip"] == "8JMKD3MGP8W/35MMLL8"
    assert parse_label(forms["rep"]).date == parse_label(forms["ibip"]).date


def test_section_8_2_captured_pairs() -> None:
    captured = parse_pair_list(SECTION_8_2_CAPTURED)
    assert captured.words("clientinformation.ipaddress") == ("172.16.44.200", "150.163.68.1")
    assert captured.word("clientinformation.languagepreference") == (
        "pt-BR,fr;q=0.8,en;q=0.5,pt;q=0.3"
    )
    assert captured.words("parsedibiurl.verblist") == ("GetLastEdition", "GetMetadata(oai_dc)")


@pytest.mark.parametrize("key", sorted(ALL_ANSWERS))
@pytest.mark.parametrize("newline", ["\r\n", "\n", " "])
def test_seed_answers_round_trip(key: str, newline: str) -> None:
    answer = parse_pair_list(ALL_ANSWERS[key])
    text = format_pair_list(answer, newline=newline)
    assert parse_pair_list(text) == answer
    if newline == "\r\n" and "\r\n" in ALL_ANSWERS[key]:
        assert text == ALL_ANSWERS[key]  # the seed's lines, exactly


def test_lf_and_final_line_end_and_blank_lines_are_accepted() -> None:
    expected = parse_pair_list(EXAMPLE_4_2)
    assert parse_pair_list(EXAMPLE_4_2.replace("\r\n", "\n")) == expected
    assert parse_pair_list(EXAMPLE_4_2 + "\r\n") == expected
    assert parse_pair_list("\n\n" + EXAMPLE_4_2.replace("\r\n", "\r\n\r\n") + "\n") == expected
    assert parse_pair_list("state   Original") == parse_pair_list("state Original")
    assert parse_pair_list(b"state Original") == parse_pair_list("state Original")


def test_empty_answer() -> None:
    assert len(parse_pair_list("")) == 0
    assert len(parse_pair_list("\r\n")) == 0
    assert format_pair_list(PairList()) == ""


# ---------------------------------------------------------------------------- malformed lists


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("state", "'state' has no value"),
        ("archiveaddress a.b state", "'state' has no value"),
        ("contenttype\nData", "'contenttype' has no value"),
        ("state {Original", "not closed"),
        ("ibi {rep a\nibip b}", "not closed"),
        ("state Original}", "closes no"),
        ("state }", "closes no"),
        ("ibi {rep {a} b}", "braces nest"),
        ("ibi {{}}", "braces nest"),
        ("ibi {rep a}{ibip b}", "brace inside a word"),
        ("ibi rep{a}", "brace inside a word"),
        ("{a b} c", "a name must be a word"),
        ("state Original\nstate Copy", "appears twice"),
        ("state\tOriginal", "not printable"),
        ("state Original\x00", "not printable"),
        ("state Original\rurl x", "not printable"),
        ("url http://x/Relatório", "not printable"),
        ("state Original\x7f", "not printable"),
    ],
)
def test_malformed_pair_lists_are_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)) as caught:
        parse_pair_list(text)
    assert caught.value.part == "pair list"


def test_non_ascii_bytes_are_refused() -> None:
    with pytest.raises(InvalidInput, match="not ASCII"):
        parse_pair_list("url http://x/Relatório".encode("latin-1"))


def test_size_limit() -> None:
    text = "".join(f"n{i} v{i}\r\n" for i in range(DEFAULT_MAX_PAIR_LIST // 16))
    assert len(text) <= DEFAULT_MAX_PAIR_LIST
    assert len(parse_pair_list(text)) == DEFAULT_MAX_PAIR_LIST // 16
    with pytest.raises(InvalidInput, match="longer than"):
        parse_pair_list("a b " * (DEFAULT_MAX_PAIR_LIST // 4 + 1))
    with pytest.raises(InvalidInput, match="longer than 10"):
        parse_pair_list("state Original", max_length=10)
    with pytest.raises(InvalidInput, match="longer than 10"):
        parse_pair_list(b"state Original", max_length=10)


def test_a_word_may_hold_escapes_of_anything() -> None:
    # %00 is harmless text in a word; it only becomes a NUL if someone decodes it.
    answer = parse_pair_list("note a%00b%7Bc%7D")
    assert answer["note"] == "a%00b%7Bc%7D"
    assert decode_value(answer.word("note") or "") == "a\x00b{c}"


# ---------------------------------------------------------------------------- PairList


def test_pair_list_api() -> None:
    pairs = PairList([("state", "Original"), ("ibi", ["rep", "a.b/c/2009/07.21.13.23"])])
    assert pairs.names() == ("state", "ibi")
    assert "state" in pairs and "url" not in pairs
    assert pairs["ibi"] == ("rep", "a.b/c/2009/07.21.13.23")
    assert pairs.get("url") is None and pairs.get("url", "x") == "x"
    assert pairs.word("state") == "Original" and pairs.word("url") is None
    assert pairs.words("state") == ("Original",) and pairs.words("url") == ()
    with pytest.raises(InvalidInput, match="braced list"):
        pairs.word("ibi")
    with pytest.raises(KeyError):
        pairs["url"]
    assert list(pairs) == [("state", "Original"), ("ibi", ("rep", "a.b/c/2009/07.21.13.23"))]
    longer = pairs.with_pair("urlkey", "1-2")
    assert longer.names() == ("state", "ibi", "urlkey") and len(pairs) == 2
    assert longer.filter(lambda name: name != "ibi").names() == ("state", "urlkey")
    assert str(pairs) == "state Original\r\nibi {rep a.b/c/2009/07.21.13.23}"
    assert PairList({"state": "Original"}) == PairList([("state", "Original")])
    assert PairList(pairs) == pairs
    assert hash(PairList(pairs)) == hash(pairs)


def test_empty_values() -> None:
    pairs = PairList([("ibi.platformsoftware", ""), ("list", []), ("one", ["x"])])
    assert pairs["ibi.platformsoftware"] == () and pairs["list"] == ()
    text = format_pair_list(pairs)
    assert text == "ibi.platformsoftware {}\r\nlist {}\r\none {x}"
    assert parse_pair_list(text) == pairs
    assert parse_pair_list("ibi.platformsoftware {}")["ibi.platformsoftware"] == ()


@pytest.mark.parametrize(
    "pairs",
    [
        [("state", "Orig inal")],
        [("sta te", "Original")],
        [("", "Original")],
        [("state", "{Original}")],
        [("ibi", ["rep", "a b"])],
        [("ibi", ["rep", ""])],
        [("url", "http://x/é")],
        [("state", "a\nb")],
        [("state", 3)],
        [("state", "x"), ("state", "y")],
        [("state",)],
    ],
)
def test_pair_list_refuses_what_it_could_not_write(pairs: list[tuple[object, ...]]) -> None:
    with pytest.raises(InvalidInput):
        PairList(pairs)  # type: ignore[arg-type]


def test_format_refuses_an_unknown_separator() -> None:
    with pytest.raises(InvalidInput, match="separator"):
        format_pair_list(PairList(), newline="\t")


# ---------------------------------------------------------------------------- forms of IBI


def test_forms_value() -> None:
    assert forms_value(
        rep="SID.INPE.BR/MTC-M19/2013/09.04.12.27.57", ibip="8jmkd3mgp7w/3epgue5"
    ) == [
        "rep",
        "sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
        "ibip",
        "8JMKD3MGP7W/3EPGUE5",
    ]
    assert forms_value(rep="sid.inpe.br/mtc-m19@80/2009/08.21.17.02") == [
        "rep",
        "sid.inpe.br/mtc-m19@80/2009/08.21.17.02",
    ]
    assert forms_value(ibip="LK47B6W/362SFKH") == ["ibip", "LK47B6W/362SFKH"]
    pairs = PairList([("ibi", forms_value(rep=_REP_ITEM, ibip="8JMKD3MGP8W/35MME4E"))])
    assert format_pair_list(pairs) == f"ibi {{rep {_REP_ITEM} ibip 8JMKD3MGP8W/35MME4E}}"


def test_forms_value_refusals() -> None:
    with pytest.raises(InvalidInput, match="rep form, the ibip form or both"):
        forms_value()
    with pytest.raises(InvalidIBI, match="not a rep label"):
        forms_value(rep="LK47B6W/362SFKH")
    with pytest.raises(InvalidIBI, match="not a ibip label"):
        forms_value(ibip=_REP_ITEM)
    with pytest.raises(InvalidIBI):
        forms_value(rep="sid.inpe.br/mtc-m19/2013/13.04.12.27.57")


def test_parse_forms() -> None:
    assert parse_forms(()) == {}
    assert parse_forms([]) == {}
    assert parse_forms("rep sid.inpe.br/mtc-m19/2013/09.04.12.27.57 ibip 8JMKD3MGP7W/3EPGUE5") == {
        "rep": "sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
        "ibip": "8JMKD3MGP7W/3EPGUE5",
    }
    # The acknowledgment sends the same value in a query (Example 6.9).
    decoded = dict(parse_query(QUERY_6_9))["ibi"]
    assert parse_forms(decoded)["ibip"] == "8JMKD3MGP7W/3EPGUE5"
    assert parse_forms(("ibip", "lk47b6w/362sfkh")) == {"ibip": "LK47B6W/362SFKH"}


@pytest.mark.parametrize(
    ("words", "error"),
    [
        (("rep",), "is not rep R"),
        (("rep", _REP_ITEM, "ibip"), "is not rep R"),
        (("doi", "10.1/x"), "not a form of IBI"),
        (("rep", _REP_ITEM, "rep", _REP_ITEM), "given twice"),
        (("rep", "not-a-label"), "neither"),
        (("ibip", _REP_ITEM), "not a ibip label"),
    ],
)
def test_parse_forms_refusals(words: tuple[str, ...], error: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(error)):
        parse_forms(words)


# ---------------------------------------------------------------------------- %hh escaping


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("1997-07-16T19:20+01:00", "1997-07-16T19:20%2B01:00"),  # Table 4.1's example
        (" %&+=?", "%20%25%26%2B%3D%3F"),  # Table 4.1
        ("{a b}", "%7Ba%20b%7D"),
        ("#", "%23"),
        ("Relatório Final.pdf", "Relat%C3%B3rio%20Final.pdf"),
        ("\x00\n\x7f", "%00%0A%7F"),
        ("GetLastEdition GetMetadata(oai_dc)", "GetLastEdition%20GetMetadata(oai_dc)"),
        ("172.16.44.200 150.163.68.1", "172.16.44.200%20150.163.68.1"),
        ("metadata.cgi?choice=oai_dc", "metadata.cgi%3Fchoice%3Doai_dc"),
        (
            "http://urlib.net:80/8JMKD3MGP8W/35MMLL8!:(oai_dc)",
            "http://urlib.net:80/8JMKD3MGP8W/35MMLL8!:(oai_dc)",
        ),
        ("sid.inpe.br/mtc-m18@80/2009", "sid.inpe.br/mtc-m18@80/2009"),
        ("", ""),
        ("日本", "%E6%97%A5%E6%9C%AC"),
    ],
)
def test_encode_value(text: str, encoded: str) -> None:
    assert encode_value(text) == encoded
    assert decode_value(encoded) == text


@pytest.mark.parametrize(
    ("word", "text"),
    [
        ("a+b", "a b"),  # a bare + is a space (Table 4.1)
        ("a%2Bb", "a+b"),
        ("Relat%f3rio", "Relatório"),  # not UTF-8: ISO 8859-1, as in Example 4.2
        ("Relat%c3%b3rio", "Relatório"),
        ("%7b%7D", "{}"),
        ("%00", "\x00"),
    ],
)
def test_decode_value(word: str, text: str) -> None:
    assert decode_value(word) == text


def test_decode_value_plus_literal() -> None:
    assert decode_value("a+b", plus_as_space=False) == "a+b"


@pytest.mark.parametrize("word", ["%", "a%2", "%zz", "%%20", "a%g0", "a b", "a\x00", "é"])
def test_decode_value_refusals(word: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_value(word, "query")
    assert caught.value.part == "query"


def test_encode_value_refuses_lone_surrogates_and_non_text() -> None:
    with pytest.raises(InvalidInput, match="surrogate"):
        encode_value("a\udcf3")
    with pytest.raises(InvalidInput):
        encode_value(b"a")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        decode_value(None)  # type: ignore[arg-type]


_SPECIAL = st.sampled_from([*" %&+=?#{}\r\n\t\x00\x7fé日\U0001f600", "%20", "%zz", "+"])
_TEXT = st.lists(st.one_of(st.characters(codec="utf-8"), _SPECIAL), max_size=30).map("".join)


@given(_TEXT)
def test_encode_decode_round_trip(text: str) -> None:
    encoded = encode_value(text)
    assert decode_value(encoded) == text
    assert decode_value(encoded, plus_as_space=False) == text
    assert re.fullmatch(r"(?:[A-Za-z0-9\-._~!$'()*,;:@/]|%[0-9A-F]{2})*", encoded)
    if text:  # an escaped value is always one word of a pair list
        pairs = PairList([("note", encoded)])
        assert decode_value(parse_pair_list(format_pair_list(pairs)).word("note") or "") == text


# ---------------------------------------------------------------------------- queries


@pytest.mark.parametrize("query", SEED_QUERIES)
def test_seed_queries_round_trip_exactly(query: str) -> None:
    assert encode_query(parse_query(query)) == query


def test_example_4_1_query() -> None:
    assert parse_query(QUERY_4_1) == [
        ("servicesubject", "urlRequest"),
        ("clientinformation.ipaddress", "150.163.2.175"),
        ("parsedibiurl.ibi", "8JMKD3MGP7W/3EPGUE5"),
    ]


def test_section_8_2_queries() -> None:
    request = dict(parse_query(QUERY_8_2_FIRST_REQUEST))
    assert request["clientinformation.ipaddress"] == "172.16.44.200 150.163.68.1"
    assert request["parsedibiurl.verblist"] == "GetLastEdition GetMetadata(oai_dc)"
    acknowledgment = dict(parse_query(QUERY_8_2_ACKNOWLEDGMENT))
    assert acknowledgment["url"].endswith("/doc/metadata.cgi?choice=oai_dc")
    assert acknowledgment["url.persistent"] == "http://urlib.net:80/8JMKD3MGP8W/35MMLL8!:(oai_dc)"
    assert acknowledgment["ibi"] == "rep sid.inpe.br/mtc-m18/2012/07.12.18.08.49"


def test_example_6_9_query_with_a_latin_1_escape() -> None:
    # The seed sent the URL's own %f3 and %20 without escaping their %: read as text, the
    # value is the file name; this project escapes %, so its own URLs survive (next test).
    acknowledgment = dict(parse_query(QUERY_6_9))
    assert acknowledgment["url"].endswith("/doc/Relatório Final.pdf")
    assert acknowledgment["contenttype"] == "Data"


def test_a_url_value_survives_a_query() -> None:
    url = "http://x.org/doc/Relat%f3rio%20Final.pdf?a=1&b=2+3"
    query = encode_query([("servicesubject", "acknowledgment"), ("url", url)])
    assert query == (
        "servicesubject=acknowledgment"
        "&url=http://x.org/doc/Relat%25f3rio%2520Final.pdf%3Fa%3D1%26b%3D2%2B3"
    )
    assert parse_query(query) == [("servicesubject", "acknowledgment"), ("url", url)]


def test_query_leniency() -> None:
    assert parse_query("") == []
    assert parse_query("a=1&&b=&c") == [("a", "1"), ("b", ""), ("c", "")]
    assert parse_query("a=1=2") == [("a", "1=2")]
    assert parse_query("a=1&a=2") == [("a", "1"), ("a", "2")]
    assert split_query("a=x%20y&b=+") == [("a", "x%20y"), ("b", "+")]


@pytest.mark.parametrize("query", ["=x", "a=1&=2", "a=%zz", "a=b c", "a=\x00", "a=é"])
def test_query_refusals(query: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_query(query)
    assert caught.value.part == "query"


def test_query_size_limit() -> None:
    with pytest.raises(InvalidInput, match="longer than"):
        parse_query("a=" + "x" * 20_000)
    assert parse_query("a=xx", max_length=4) == [("a", "xx")]
    with pytest.raises(InvalidInput, match="longer than 3"):
        parse_query("a=xx", max_length=3)


def test_encode_query_refuses_nameless_pairs() -> None:
    with pytest.raises(InvalidInput, match="needs a name"):
        encode_query([("", "x")])


@given(st.lists(st.tuples(_TEXT.filter(bool), _TEXT), max_size=6))
def test_query_round_trip(pairs: list[tuple[str, str]]) -> None:
    query = encode_query(pairs)
    assert parse_query(query) == pairs
    assert all(char not in query for char in " #{}") or not pairs


# ---------------------------------------------------------------------------- properties

_WORD_TEXT = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="{}"),
    min_size=1,
    max_size=12,
)
_VALUES = st.one_of(_WORD_TEXT, st.lists(_WORD_TEXT, max_size=4).map(tuple))


@given(
    st.dictionaries(_WORD_TEXT, _VALUES, max_size=8),
    st.sampled_from(["\r\n", "\n", " "]),
)
def test_format_parse_round_trip(pairs: dict[str, str | tuple[str, ...]], newline: str) -> None:
    pair_list = PairList(pairs)
    assert parse_pair_list(format_pair_list(pair_list, newline=newline)) == pair_list


_NOISE = st.text(st.sampled_from(list("ab{} \r\n\t%=x\x00é")), max_size=40)


@settings(max_examples=300)
@given(_NOISE)
def test_parse_never_fails_otherwise(text: str) -> None:
    try:
        answer = parse_pair_list(text)
    except InvalidInput as error:
        assert error.part == "pair list"
        return
    assert parse_pair_list(format_pair_list(answer)) == answer
