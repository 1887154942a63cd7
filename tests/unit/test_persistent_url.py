"""Persistent URLs (spec §5.1, §5.2; seed 001 §6.1, Tables 6.1-6.8, Examples 6.1-6.8, §8)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import encode_query, encode_value, parse_forms, parse_pair_list
from ibi.core.persistent_url import (
    DEFAULT_MAX_PERSISTENT_URL,
    PersistentURL,
    Verb,
    parse_persistent_url,
)
from ibi.core.relations import (
    GET_FILE_LIST,
    ITEM_ITSELF,
    MODIFIERS,
    Hop,
    Relation,
    next_hop,
    parse_modifier,
)

from .test_pairlist import (
    QUERY_8_1_REQUEST,
    QUERY_8_2_FIRST_REQUEST,
    QUERY_8_2_SECOND_REQUEST,
    SECTION_8_2_FIRST,
    SECTION_8_2_SECOND,
)
from .test_relations import relations

IBIP = "8JMKD3MGP8W/35MME4E"
REP = "sid.inpe.br/mtc-m18@80/2009/07.21.13.23"

# (persistent URL path, IBI, modifier, file path, parsedibiurl.verblist, relation)
SPEC_EXAMPLES = [
    # Example 6.1
    ("/8JMKD3MGP8W/35MME4E", IBIP, "", None, "", ""),
    ("/8JMKD3MGP8W/35MMLL8", "8JMKD3MGP8W/35MMLL8", "", None, "", ""),
    ("/LK47B6W/362SFKH", "LK47B6W/362SFKH", "", None, "", ""),
    (
        "/iconet.com.br/banon/2009/09.09.22.01",
        "iconet.com.br/banon/2009/09.09.22.01",
        "",
        None,
        "",
        "",
    ),
    # Example 6.2
    ("/8JMKD3MGP8W/35MME4E:", IBIP, ":", None, "GetMetadata", ".metadata"),
    (
        "/8JMKD3MGP8W/35MME4E:(oai_dc)",
        IBIP,
        ":(oai_dc)",
        None,
        "GetMetadata(oai_dc)",
        ".metadata(oai_dc)",
    ),
    # Example 6.3
    ("/8JMKD3MGP8W/35MME4E+", IBIP, "+", None, "GetTranslation", ".translation"),
    ("/8JMKD3MGP8W/35MME4E+(pt)", IBIP, "+(pt)", None, "GetTranslation(pt)", ".translation(pt)"),
    # Example 6.4
    ("/8JMKD3MGP8W/35MMLL8!", "8JMKD3MGP8W/35MMLL8", "!", None, "GetLastEdition", ".lastedition"),
    (
        "/8JMKD3MGP8W/35MMLL8!:(oai_dc)",
        "8JMKD3MGP8W/35MMLL8",
        "!:(oai_dc)",
        None,
        "GetLastEdition GetMetadata(oai_dc)",
        ".lastedition.metadata(oai_dc)",
    ),
    # Example 6.5: the same, as a verb list
    (
        "/8JMKD3MGP8W/35MMLL8?ibiurl.verblist=GetLastEdition+GetMetadata(oai_dc)",
        "8JMKD3MGP8W/35MMLL8",
        "",
        None,
        "GetLastEdition GetMetadata(oai_dc)",
        ".lastedition.metadata(oai_dc)",
    ),
    # Example 6.6
    (
        "/LK47B6W/362SFKH?ibiurl.verblist=GetFileList",
        "LK47B6W/362SFKH",
        "",
        None,
        "GetFileList",
        "",
    ),
    # Example 6.7
    ("/LK47B6W/362SFKH/reference.bib", "LK47B6W/362SFKH", "", "/reference.bib", "", ""),
    # rep form, modifier with parameters, encoded file path
    (
        "/sid.inpe.br/mtc-m18@80/2009/07.21.13.23!+(pt-BR)/doc/a%20b.pdf",
        REP,
        "!+(pt-BR)",
        "/doc/a b.pdf",
        "GetLastEdition GetTranslation(pt-BR)",
        ".lastedition.translation(pt-BR)",
    ),
    (
        "/8JMKD3MGP8W/35MMLL8!:(oai_dc)/reference.bib?ibiurl.requireditemstatus=Original&x=1",
        "8JMKD3MGP8W/35MMLL8",
        "!:(oai_dc)",
        "/reference.bib",
        "GetLastEdition GetMetadata(oai_dc)",
        ".lastedition.metadata(oai_dc)",
    ),
]


@pytest.mark.parametrize(
    ("path", "ibi", "modifier", "file_path", "verb_list", "relation"), SPEC_EXAMPLES
)
def test_spec_examples(
    path: str, ibi: str, modifier: str, file_path: str | None, verb_list: str, relation: str
) -> None:
    url = parse_persistent_url(path)
    assert url.ibi == parse_label(ibi)
    assert url.modifier.modifier_text == modifier
    assert url.file_path == file_path
    assert url.verb_list == verb_list
    assert str(url.relation) == relation
    assert all(isinstance(verb, Verb) for verb in url.verbs)
    assert parse_persistent_url(url.path_and_query()) == url


def test_modifier_and_verb_list_are_equivalent() -> None:
    """Example 6.5 is equivalent to the second URL of Example 6.4."""
    modifier = parse_persistent_url("/8JMKD3MGP8W/35MMLL8!:(oai_dc)")
    query = parse_persistent_url(
        "/8JMKD3MGP8W/35MMLL8?ibiurl.verblist=GetLastEdition+GetMetadata(oai_dc)"
    )
    assert modifier.verbs == query.verbs
    assert modifier.relation == query.relation
    assert modifier.forwarded_pairs() == query.forwarded_pairs()
    assert modifier.verbs == (Verb("GetLastEdition"), Verb("GetMetadata", "oai_dc"))


def test_example_6_8() -> None:
    """Tables 6.7 and 6.8: what the resolver extracts from the URL."""
    url = parse_persistent_url(
        "/LK47B6W/362SFKH+?ibiurl.requireditemstatus=Original&ibiurl.verblist=GetMetadata"
    )
    assert url.ibi.label == "LK47B6W/362SFKH"
    assert url.file_path is None  # "(indefinido)"
    assert url.required_item_status == "Original"
    assert url.verb_list == "GetTranslation GetMetadata"
    assert str(url.relation) == ".translation.metadata"
    assert url.other_pairs == ()
    # requireditemstatus is captured but never forwarded to the Archives (Table 6.6).
    assert url.forwarded_pairs() == [
        ("parsedibiurl.ibi", "LK47B6W/362SFKH"),
        ("parsedibiurl.verblist", "GetTranslation GetMetadata"),
    ]


def test_forwarded_pairs_with_a_file_path() -> None:
    url = parse_persistent_url("/LK47B6W/362SFKH/reference.bib")
    assert url.forwarded_pairs() == [
        ("parsedibiurl.ibi", "LK47B6W/362SFKH"),
        ("parsedibiurl.filepath", "/reference.bib"),
    ]


def test_other_query_pairs_are_kept_as_written() -> None:
    url = parse_persistent_url(
        "/LK47B6W/362SFKH?a=x%20y&ibiurl.verblist=GetFileList&b=+&lang=pt%2Dbr&c"
    )
    assert url.other_pairs == (("a", "x%20y"), ("b", "+"), ("lang", "pt%2Dbr"), ("c", ""))
    assert url.passed_query == "a=x%20y&b=+&lang=pt%2Dbr&c="
    assert url.wants_file_list and url.relation == ITEM_ITSELF


# ---------------------------------------------------------------------------- section 8


def url_request(url: PersistentURL, ibi: str | None = None) -> str:
    """The urlRequest query of §8, its pairs in the seed's (alphabetical) order."""
    pairs = dict(url.forwarded_pairs())
    if ibi is not None:
        pairs["parsedibiurl.ibi"] = ibi
    pairs["clientinformation.ipaddress"] = "172.16.44.200 150.163.68.1"
    pairs["servicesubject"] = "urlRequest"
    return encode_query(sorted(pairs.items()))


def test_section_8_1_request() -> None:
    url = parse_persistent_url("/8JMKD3MGP8W/35MMLL8")
    assert url_request(url) == QUERY_8_1_REQUEST


def test_section_8_2_resolution() -> None:
    """The worked example of spec §5.3, from the persistent URL to the URL found."""
    url = parse_persistent_url("/8JMKD3MGP8W/35MMLL8!:(oai_dc)")
    assert url_request(url) == QUERY_8_2_FIRST_REQUEST
    first = parse_pair_list(SECTION_8_2_FIRST)
    assert url.relation.pair_name("url") not in first
    hop = next_hop(url.relation, first)
    assert hop == Hop("ibi.nextedition", url.relation)
    next_ibi = parse_forms(first[hop.pair_name])["rep"]
    assert url_request(url, next_ibi) == QUERY_8_2_SECOND_REQUEST
    second = parse_pair_list(SECTION_8_2_SECOND)
    assert second.word(url.relation.pair_name("url")) == (
        "http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18/2012/07.12.18.08.49/doc/"
        "metadata.cgi?choice=oai_dc"
    )
    assert second.word("urlkey") == "1426286454-36108967764060357"


def test_url_persistent_of_the_acknowledgment_parses() -> None:
    url = parse_persistent_url("/8JMKD3MGP8W/35MMLL8!:(oai_dc)")
    assert url.path_and_query() == "/8JMKD3MGP8W/35MMLL8!:(oai_dc)"


# ---------------------------------------------------------------------------- the 14 modifiers


def _with_parameters(shape: str) -> str:
    return shape.replace("+", "+(pt-BR)").replace(":", ":(oai_dc)")


@pytest.mark.parametrize("shape", MODIFIERS)
@pytest.mark.parametrize("ibi", [IBIP, REP])
@pytest.mark.parametrize("parameters", [False, True])
@pytest.mark.parametrize("file_path", ["", "/doc/reference.bib"])
def test_every_modifier(shape: str, ibi: str, parameters: bool, file_path: str) -> None:
    modifier = _with_parameters(shape) if parameters else shape
    url = parse_persistent_url(f"/{ibi}{modifier}{file_path}")
    assert url.ibi.label == ibi
    assert url.modifier.shape == shape
    assert url.modifier.modifier_text == modifier
    assert url.file_path == (file_path or None)
    assert url.relation == parse_modifier(modifier)
    assert len(url.verbs) == len(shape)
    # The same request as a verb list (Table 6.5 synonyms).
    verbs = "+".join(str(verb) for verb in url.verbs)
    same = parse_persistent_url(f"/{ibi}{file_path}?ibiurl.verblist={verbs}")
    assert same.verbs == url.verbs and same.relation == url.relation


INVALID_SHAPES = [
    "".join(symbols)
    for size in range(1, 6)
    for symbols in itertools.product("!+:", repeat=size)
    if "".join(symbols) not in MODIFIERS
]


def test_invalid_shapes_are_many() -> None:
    assert len(INVALID_SHAPES) == 3 + 9 + 27 + 81 + 243 - 14
    assert {"!!", "::", "+:+:", "++", ":!", "!+!", "+!+"} <= set(INVALID_SHAPES)


@pytest.mark.parametrize("shape", INVALID_SHAPES)
def test_invalid_modifiers_are_refused(shape: str) -> None:
    for ibi in (IBIP, REP):
        with pytest.raises(InvalidInput, match="not an allowed order") as caught:
            parse_persistent_url(f"/{ibi}{shape}")
        assert caught.value.part == "modifier"


@pytest.mark.parametrize(
    ("modifier", "error"),
    [
        ("!x", "is not a modifier"),
        ("+(pt", "is not a modifier"),
        ("+()", "ISO 639-1"),
        ("+(portuguese)", "ISO 639-1"),
        ("+(pt-BRA)", "ISO 639-1"),
        (":(marc)", "only oai_dc"),
        (":(oai_dc", "is not a modifier"),
        ("!(x)", "takes no parameter"),
        ("!%3F", "is not a modifier"),
        ("!:(oai_dc)x", "is not a modifier"),
    ],
)
def test_malformed_modifiers(modifier: str, error: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(error)) as caught:
        parse_persistent_url(f"/{IBIP}{modifier}")
    assert caught.value.part == "modifier"


_MODIFIER_PIECES = ["!", "+", ":", "(pt)", "(pt-BR)", "(oai_dc)", "(x)"]


@given(st.lists(st.sampled_from(_MODIFIER_PIECES), min_size=1, max_size=8).map("".join))
def test_modifier_validity_matches_the_grammar(modifier: str) -> None:
    try:
        url = parse_persistent_url(f"/{IBIP}{modifier}")
    except InvalidInput as error:
        assert error.part == "modifier"
        return
    assert url.modifier.shape in MODIFIERS


# ---------------------------------------------------------------------------- the IBI part


@pytest.mark.parametrize(
    ("path", "ibi", "modifier", "file_path"),
    [
        ("/8jmkd3mgp8w/35mme4e:(OAI_DC)", IBIP, ":(oai_dc)", None),
        ("/SID.INPE.BR/MTC-M18@80/2009/07.21.13.23+(PT-br)", REP, "+(pt-BR)", None),
        ("/8JMKD3MGP8W%2F35MME4E%21%3A(oai_dc)", IBIP, "!:(oai_dc)", None),
        ("/sid.inpe.br/mtc-m18%4080/2009/07.21.13.23", REP, "", None),
        ("/%38JMKD3MGP8W/35MME4E", IBIP, "", None),
        (
            "/sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
            "sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
            "",
            None,
        ),
        ("/sid.inpe.br/mtc-m18@80/2009/07.21.13.23.47:/x", REP + ".47", ":", "/x"),
        ("/8JMKD3MGP8W/35MME4EW3DP!", "8JMKD3MGP8W/35MME4EW3DP", "!", None),
        (
            "/iconet.com.br/banon/2009/09.09.22.01/",
            "iconet.com.br/banon/2009/09.09.22.01",
            "",
            None,
        ),
        ("/LK47B6W/362SFKH/doc/", "LK47B6W/362SFKH", "", "/doc/"),
        ("/LK47B6W/362SFKH/doc/a+b%2Bc%20d.pdf", "LK47B6W/362SFKH", "", "/doc/a+b+c d.pdf"),
        ("/LK47B6W/362SFKH/Relat%C3%B3rio.pdf", "LK47B6W/362SFKH", "", "/Relatório.pdf"),
        ("/LK47B6W/362SFKH/Relat%f3rio.pdf", "LK47B6W/362SFKH", "", "/Relatório.pdf"),
        ("/LK47B6W/362SFKH/what%3F%23.pdf", "LK47B6W/362SFKH", "", "/what?#.pdf"),
        ("/LK47B6W/362SFKH/a//b", "LK47B6W/362SFKH", "", "/a//b"),
        ("/LK47B6W/362SFKH/..x/x..", "LK47B6W/362SFKH", "", "/..x/x.."),
        ("/LK47B6W/362SFKH?", "LK47B6W/362SFKH", "", None),
    ],
)
def test_ibi_modifier_and_file_path(
    path: str, ibi: str, modifier: str, file_path: str | None
) -> None:
    url = parse_persistent_url(path)
    assert url.ibi.label == ibi
    assert url.modifier.modifier_text == modifier
    assert url.file_path == file_path
    assert parse_persistent_url(url.path_and_query()) == url


def test_where_the_ibi_ends_when_two_readings_exist() -> None:
    # An ibip followed by a path that is not a rep date: the ibip reading.
    url = parse_persistent_url("/LK47B6W/362SFKH/2009/07.21.13.23.pdf")
    assert (url.ibi.label, url.file_path) == ("LK47B6W/362SFKH", "/2009/07.21.13.23.pdf")
    url = parse_persistent_url("/LK47B6W/362SFKH/2009/13.21.13.23")
    assert (url.ibi.label, url.file_path) == ("LK47B6W/362SFKH", "/2009/13.21.13.23")
    # Four segments that are a valid rep IBI: the rep reading wins (module notes).
    url = parse_persistent_url("/LK47B6W/362SFKH/2009/07.21.13.23")
    assert (url.ibi.form, url.ibi.label, url.file_path) == (
        "rep",
        "lk47b6w/362sfkh/2009/07.21.13.23",
        None,
    )


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/", "holds no IBI"),
        ("/8JMKD3MGP8W", "does not start with an IBI"),
        ("/8JMKD3MGP8W/", "does not start with a valid IBI"),
        ("/8JMKD3MGP8W/35MME4EX", "does not start with a valid IBI"),
        ("/8JMKD3MGP8W/35MME4E0", "does not start with a valid IBI"),
        ("/sid.inpe.br/mtc-m18/2009/13.21.13.23", "not a calendar date"),
        ("/sid.inpe.br/mtc-m18/2009/07.21.13.23x", "does not start with a valid IBI"),
        ("/sid.inpe.br/mtc-m18.80/2009/07.21.13.23", "port 80"),
        ("/sid.inpe.br/mtc-m18/2009/07.21.13.23.00", "seconds 00"),
        ("/doc/reference.bib", "does not start with a valid IBI"),
        ("/!:", "does not start with an IBI"),
    ],
)
def test_bad_ibis(path: str, error: str) -> None:
    with pytest.raises(InvalidIBI, match=re.escape(error)) as caught:
        parse_persistent_url(path)
    assert caught.value.part == "ibi"


# ---------------------------------------------------------------------------- the query


@pytest.mark.parametrize(
    ("query", "status", "verb_list"),
    [
        ("ibiurl.requireditemstatus=Original", "Original", ""),
        ("ibiurl.requireditemstatus=original", "Original", ""),
        ("IBIURL.RequiredItemStatus=Original", "Original", ""),
        ("ibiurl.verblist=", None, ""),
        (
            "ibiurl.verblist=GetLastEdition%20GetMetadata(oai_dc)",
            None,
            "GetLastEdition GetMetadata(oai_dc)",
        ),
        ("ibiurl.verblist=GetFileList+GetLastEdition", None, "GetFileList GetLastEdition"),
        ("ibiurl.verblist=GetFileList+GetFileList", None, "GetFileList"),
        ("ibiurl.verblist=gettranslation(PT-br)", None, "GetTranslation(pt-BR)"),
        ("ibiurl%2Everblist=GetLastEdition", None, "GetLastEdition"),
        ("&&ibiurl.verblist=GetLastEdition&", None, "GetLastEdition"),
    ],
)
def test_query_pairs_of_the_resolver(query: str, status: str | None, verb_list: str) -> None:
    url = parse_persistent_url(f"/{IBIP}?{query}")
    assert url.required_item_status == status
    assert url.verb_list == verb_list
    assert url.other_pairs == ()


@pytest.mark.parametrize(
    ("path", "verb_list"),
    [
        (f"/{IBIP}!?ibiurl.verblist=GetMetadata(oai_dc)", "GetLastEdition GetMetadata(oai_dc)"),
        (f"/{IBIP}!:(oai_dc)?ibiurl.verblist=GetLastEdition", "GetLastEdition GetMetadata(oai_dc)"),
        (
            f"/{IBIP}!:(oai_dc)?ibiurl.verblist=GetMetadata(oai_dc)+GetLastEdition",
            "GetLastEdition GetMetadata(oai_dc)",
        ),
        (f"/{IBIP}+:+?ibiurl.verblist=GetTranslation", "GetTranslation GetMetadata GetTranslation"),
        (f"/{IBIP}+?ibiurl.verblist=GetFileList", "GetTranslation GetFileList"),
        (f"/{IBIP}:?ibiurl.verblist=GetTranslation(en)", "GetMetadata GetTranslation(en)"),
    ],
)
def test_verb_list_is_the_union(path: str, verb_list: str) -> None:
    assert parse_persistent_url(path).verb_list == verb_list


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("ibiurl.requireditemstatus=Copy", "only Original"),
        ("ibiurl.requireditemstatus=", "only Original"),
        ("ibiurl.requireditemstatus=Original&ibiurl.requireditemstatus=Original", "appears twice"),
        ("ibiurl.verblist=GetFileList&IBIURL.VERBLIST=GetFileList", "appears twice"),
        ("ibiurl.verblist=GetSomething", "is not a verb"),
        ("ibiurl.verblist=GetFilelList", "is not a verb"),
        ("ibiurl.verblist=GetLastEdition+GetLastEdition", "not an allowed order"),
        ("ibiurl.verblist=GetMetadata+GetLastEdition", "not an allowed order"),
        ("ibiurl.verblist=GetTranslation+GetTranslation(pt)", "not an allowed order"),
        ("ibiurl.verblist=GetMetadata(marc)", "only oai_dc"),
        ("ibiurl.verblist=%zz", "two hexadecimal digits"),
        ("ibiurl.verblist=GetFileList%00", "control character"),
        ("ibiurl.verbs=GetFileList", "not a pair the resolver knows"),
        ("=x", "without a name"),
    ],
)
def test_query_refusals(query: str, error: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(error)) as caught:
        parse_persistent_url(f"/{IBIP}?{query}")
    assert caught.value.part == "query"


def test_the_union_must_still_be_a_valid_order() -> None:
    with pytest.raises(InvalidInput, match="after the modifier ':'") as caught:
        parse_persistent_url(f"/{IBIP}:?ibiurl.verblist=GetLastEdition")
    assert caught.value.part == "query"
    with pytest.raises(InvalidInput, match="not an allowed order"):
        parse_persistent_url(
            f"/{IBIP}+:+?ibiurl.verblist=GetTranslation+GetTranslation+GetTranslation"
        )


# ---------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("", "does not start with '/'"),
        (IBIP, "does not start with '/'"),
        (f"/{IBIP}\x00", "raw character"),
        (f"/{IBIP}\n", "raw character"),
        (f"/{IBIP}/a b", "raw character"),
        (f"/{IBIP}/\t", "raw character"),
        (f"/{IBIP}/é", "raw character"),
        (f"/{IBIP}/\x7f", "raw character"),
        (f"/{IBIP}%00", "control character"),
        (f"/{IBIP}/a%00b", "control character"),
        (f"/{IBIP}/a%0Ab", "control character"),
        (f"/{IBIP}/a%0d%0aSet-Cookie:x", "control character"),
        (f"/{IBIP}/a%7F", "control character"),
        (f"/{IBIP}/a%85", "control character"),
        (f"/{IBIP}/a%C2%85", "control character"),
        (f"/{IBIP}/%zz", "two hexadecimal digits"),
        (f"/{IBIP}/a%", "two hexadecimal digits"),
        (f"/{IBIP}#top", "fragment"),
        (f"/{IBIP}?a=1#top", "fragment"),
        (f"/{IBIP}/../../etc/passwd", "'..'"),
        (f"/{IBIP}/%2e%2e/%2E%2E/etc/passwd", "'..'"),
        (f"/{IBIP}/doc/../x", "'..'"),
        (f"/{IBIP}/./x", "'.'"),
        (f"/{IBIP}/" + "a" * DEFAULT_MAX_PERSISTENT_URL, "longer than"),
    ],
)
def test_hostile_paths(path: str, error: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(error)) as caught:
        parse_persistent_url(path)
    assert caught.value.part == "path"


def test_size_limit_is_a_parameter() -> None:
    path = f"/{IBIP}/reference.bib"
    assert parse_persistent_url(path, max_length=len(path)).file_path == "/reference.bib"
    with pytest.raises(InvalidInput, match="longer than"):
        parse_persistent_url(path, max_length=len(path) - 1)


def test_long_verb_lists_stay_cheap() -> None:
    url = parse_persistent_url(f"/{IBIP}?ibiurl.verblist=" + "GetFileList+" * 600)
    assert url.verbs == (GET_FILE_LIST,)


def test_other_pairs_are_not_decoded() -> None:
    url = parse_persistent_url(f"/{IBIP}?q=%00%zz&x=%0A")
    assert url.other_pairs == (("q", "%00%zz"), ("x", "%0A"))


def test_not_text() -> None:
    with pytest.raises(InvalidInput):
        parse_persistent_url(b"/" + IBIP.encode())  # type: ignore[arg-type]


def test_direct_construction_is_checked() -> None:
    label = parse_label(IBIP)
    url = PersistentURL(label, Relation((Verb("GetLastEdition"),)), "/x", "Original")
    assert url.verbs == (Verb("GetLastEdition"),)
    with pytest.raises(InvalidInput, match="not an allowed order"):
        PersistentURL(
            label, Relation((Verb("GetMetadata"),)), query_verbs=(Verb("GetLastEdition"),)
        )
    for bad in ("x", "/", "/a/../b", "/a\x00"):
        with pytest.raises(InvalidInput) as caught:
            PersistentURL(label, file_path=bad)
        assert caught.value.part == "path"


_PIECES = [*"/!+:()%.?&=#8JMKDGPWL4ab2013+-_ ", "%00", "%2F", "ibiurl.verblist=", "GetLastEdition"]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_only_invalid_input_is_raised(text: str) -> None:
    for candidate in (text, "/" + text, f"/{IBIP}" + text, f"/{REP}" + text):
        try:
            url = parse_persistent_url(candidate)
        except InvalidInput as error:
            assert error.part in {"path", "ibi", "modifier", "query"}
            continue
        assert parse_persistent_url(url.path_and_query()) == url


# ---------------------------------------------------------------------------- round trip

_LABELS = [
    IBIP,
    REP,
    "LK47B6W/362SFKH",
    "iconet.com.br/banon/2009/09.09.22.01",
    "sid.inpe.br/mtc-m19/2013/09.04.12.27.57",
    "8JMKD3MGP8W/35MME4EW3DP",
    "example.org/ibi.8080/2010/10.20.15.21.55.047",
]
_SEGMENT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/"), max_size=8
).filter(lambda segment: segment not in {".", ".."})
_RAW = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8).map(encode_value)


@st.composite
def persistent_urls(draw: st.DrawFn) -> PersistentURL:
    modifier = draw(relations())
    segments = draw(st.lists(_SEGMENT, min_size=1, max_size=4))
    file_path = draw(st.sampled_from([None, "/" + "/".join(segments)]))
    if file_path == "/":
        file_path = None
    query_verbs = draw(
        st.sampled_from([(), modifier.verbs, (GET_FILE_LIST,), (*modifier.verbs, GET_FILE_LIST)])
    )
    names = _RAW.filter(lambda name: bool(name) and not name.lower().startswith("ibiurl"))
    others = tuple(draw(st.lists(st.tuples(names, _RAW), max_size=3)))
    return PersistentURL(
        ibi=parse_label(draw(st.sampled_from(_LABELS))),
        modifier=modifier,
        file_path=file_path,
        required_item_status=draw(st.sampled_from([None, "Original"])),
        query_verbs=query_verbs,
        other_pairs=others,
    )


@given(persistent_urls())
def test_round_trip(url: PersistentURL) -> None:
    text = url.path_and_query()
    assert parse_persistent_url(text) == url
    assert url.relation == url.modifier  # query verbs repeat the modifier or add GetFileList
