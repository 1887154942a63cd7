"""Verbs, modifiers, relations and chasing related IBIs (spec §5.1-§5.3, §6; Tables 6.2,
6.4, 6.5, 7.5; Examples 7.2, 7.3, 7.5, 7.10 and the worked example of §8.2)."""

from __future__ import annotations

import contextlib
import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, parse_forms, parse_pair_list
from ibi.core.relations import (
    GET_FILE_LIST,
    GET_LAST_EDITION,
    ITEM_ITSELF,
    MODIFIERS,
    RELATION_KINDS,
    Hop,
    Relation,
    RelationKind,
    Verb,
    format_verb_list,
    hops,
    involves_editions,
    language_tag,
    metadata_format,
    next_hop,
    parse_modifier,
    parse_pair_name,
    parse_relation,
    parse_verb,
    parse_verb_list,
    present_hops,
    relation_for_verbs,
    relation_pair_index,
    union_of_verbs,
    wants_file_list,
)

from .test_pairlist import (
    EXAMPLE_4_2,
    EXAMPLE_7_2,
    EXAMPLE_7_3,
    EXAMPLE_7_10,
    SECTION_8_2_CAPTURED,
    SECTION_8_2_FIRST,
    SECTION_8_2_SECOND,
)

LE = Verb("GetLastEdition")
T = Verb("GetTranslation")
M = Verb("GetMetadata")
T_PT = Verb("GetTranslation", "pt")
T_PT_BR = Verb("GetTranslation", "pt-BR")
M_DC = Verb("GetMetadata", "oai_dc")
LAST_OAI = Relation((LE, M_DC))


def grammar_orders() -> set[str]:
    """Table 7.5 spelled out: ([u [t]] | [t [u]]) [m [t]]."""
    first = {"", "!", "!+", "+", "+!"}
    second = {"", ":", ":+"}
    return {a + b for a in first for b in second}


# ---------------------------------------------------------------------------- the 14 orders


def test_the_14_modifiers_are_the_grammar() -> None:
    assert len(MODIFIERS) == len(set(MODIFIERS)) == 14
    assert set(MODIFIERS) == grammar_orders() - {""}


@pytest.mark.parametrize(
    "shape",
    ["".join(p) for n in range(1, 6) for p in itertools.product("!+:", repeat=n)],
)
def test_every_order_of_up_to_five_symbols(shape: str) -> None:
    if shape in MODIFIERS:
        assert parse_modifier(shape).shape == shape
    else:
        with pytest.raises(InvalidInput, match="not an allowed order") as caught:
            parse_modifier(shape)
        assert caught.value.part == "modifier"


# ---------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("text", "tag"),
    [("pt", "pt"), ("PT", "pt"), ("pt-BR", "pt-BR"), ("pt-br", "pt-BR"), ("EN-gb", "en-GB")],
)
def test_language_tag(text: str, tag: str) -> None:
    assert language_tag(text) == tag


@pytest.mark.parametrize(
    "text", ["", "p", "por", "pt-", "pt-B", "pt-BRA", "pt_BR", "p1", "pt-B1", "pt BR", "é"]
)
def test_language_tag_refusals(text: str) -> None:
    with pytest.raises(InvalidInput, match="ISO 639-1"):
        language_tag(text)


def test_metadata_format() -> None:
    assert metadata_format("oai_dc") == metadata_format("OAI_DC") == "oai_dc"
    with pytest.raises(InvalidInput, match="only oai_dc"):
        metadata_format("marc")


# ---------------------------------------------------------------------------- verbs


@pytest.mark.parametrize(
    ("text", "verb"),
    [
        ("GetLastEdition", LE),
        ("GetTranslation", T),
        ("GetTranslation(pt)", T_PT),
        ("GetTranslation(pt-BR)", T_PT_BR),
        ("GetTranslation(PT-br)", T_PT_BR),
        ("GetMetadata", M),
        ("GetMetadata(oai_dc)", M_DC),
        ("GetFileList", GET_FILE_LIST),
        ("getlastedition", LE),
        ("GETMETADATA(OAI_DC)", M_DC),
    ],
)
def test_parse_verb(text: str, verb: Verb) -> None:
    assert parse_verb(text) == verb
    assert parse_verb(str(verb)) == verb


@pytest.mark.parametrize(
    "text",
    [
        "",
        "GetFoo",
        "GetFilelList",  # the seed's own typo (Example 6.6 prose)
        "GetLastEdition(x)",
        "GetFileList(x)",
        "GetMetadata(marc)",
        "GetMetadata()",
        "GetTranslation()",
        "GetTranslation(portuguese)",
        "GetTranslation(pt",
        "GetTranslation(pt)x",
        "GetTranslation((pt))",
        "Get Metadata",
        ":",
    ],
)
def test_parse_verb_refusals(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_verb(text)
    assert caught.value.part == "verb list"


def test_verb_properties() -> None:
    assert str(T_PT_BR) == "GetTranslation(pt-BR)"
    assert (T_PT_BR.language, T_PT_BR.country) == ("pt", "BR")
    assert (T_PT.language, T_PT.country) == ("pt", None)
    assert (T.language, M_DC.language, M_DC.country) == (None, None, None)
    assert [v.symbol for v in (LE, T_PT_BR, M, M_DC, GET_FILE_LIST)] == [
        "!",
        "+(pt-BR)",
        ":",
        ":(oai_dc)",
        "",
    ]
    assert [v.qualifier for v in (LE, T, T_PT_BR, M_DC)] == [
        ".lastedition",
        ".translation",
        ".translation(pt-BR)",
        ".metadata(oai_dc)",
    ]
    with pytest.raises(InvalidInput, match="not a relation"):
        _ = GET_FILE_LIST.qualifier
    assert Verb.last_edition() == GET_LAST_EDITION == LE
    assert Verb.translation("pt-br") == T_PT_BR and Verb.translation() == T
    assert Verb.metadata("oai_dc") == M_DC and Verb.metadata() == M
    assert Verb.file_list() == GET_FILE_LIST
    with pytest.raises(InvalidInput, match="takes no parameter"):
        Verb("GetLastEdition", "x")
    with pytest.raises(InvalidInput, match="is not one of"):
        Verb("GetNothing")  # type: ignore[arg-type]


def test_parse_verb_list() -> None:
    assert parse_verb_list("") == ()
    assert parse_verb_list("GetLastEdition GetMetadata(oai_dc)") == (LE, M_DC)
    assert parse_verb_list("GetLastEdition+GetMetadata(oai_dc)") == (LE, M_DC)  # Table 6.4
    assert parse_verb_list(" GetFileList  GetTranslation(pt) ") == (GET_FILE_LIST, T_PT)
    assert format_verb_list((LE, M_DC)) == "GetLastEdition GetMetadata(oai_dc)"
    assert format_verb_list(()) == ""
    assert wants_file_list((LE, GET_FILE_LIST)) and not wants_file_list((LE,))
    with pytest.raises(InvalidInput, match="'GetSomething' is not a verb"):
        parse_verb_list("GetLastEdition GetSomething")


# ---------------------------------------------------------------------------- relations

# Example 7.5, every relation and what it means.
EXAMPLE_7_5 = [
    (".lastedition", (LE,), "!"),
    (".translation", (T,), "+"),
    (".translation(pt-BR)", (T_PT_BR,), "+(pt-BR)"),
    (".metadata", (M,), ":"),
    (".metadata(oai_dc)", (M_DC,), ":(oai_dc)"),
    (".lastedition.translation", (LE, T), "!+"),
    (".lastedition.translation(pt-BR)", (LE, T_PT_BR), "!+(pt-BR)"),
    (".lastedition.metadata", (LE, M), "!:"),
    (".lastedition.metadata(oai_dc)", (LE, M_DC), "!:(oai_dc)"),
    (".translation(pt-BR).lastedition", (T_PT_BR, LE), "+(pt-BR)!"),
    (".translation(en).metadata", (Verb("GetTranslation", "en"), M), "+(en):"),
    (".metadata.translation(en)", (M, Verb("GetTranslation", "en")), ":+(en)"),
]


@pytest.mark.parametrize(("text", "steps", "modifier"), EXAMPLE_7_5)
def test_example_7_5(text: str, steps: tuple[Verb, ...], modifier: str) -> None:
    relation = parse_relation(text)
    assert relation.steps == relation.verbs == steps
    assert str(relation) == text
    assert relation.modifier_text == modifier
    assert parse_modifier(modifier) == relation
    assert relation_for_verbs(steps) == relation
    assert relation_for_verbs(format_verb_list(steps)) == relation


def test_the_empty_relation_is_the_item_itself() -> None:
    assert parse_relation("") == Relation() == ITEM_ITSELF
    assert str(ITEM_ITSELF) == "" and ITEM_ITSELF.shape == "" and not ITEM_ITSELF
    assert [ITEM_ITSELF.pair_name(kind) for kind in RELATION_KINDS] == list(RELATION_KINDS)
    assert parse_modifier("") == ITEM_ITSELF
    assert relation_for_verbs(()) == relation_for_verbs([GET_FILE_LIST]) == ITEM_ITSELF


def test_relation_accepts_any_case_and_normalises() -> None:
    relation = parse_relation(".LastEdition.Translation(PT-br).METADATA(OAI_DC)")
    assert str(relation) == ".lastedition.translation(pt-BR).metadata(oai_dc)"
    assert relation.shape == "!+:"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (".metadata.lastedition", "not an allowed order"),
        (".lastedition.lastedition", "not an allowed order"),
        (".translation.translation", "not an allowed order"),
        (".metadata.metadata", "not an allowed order"),
        (".translation.metadata.translation.metadata", "not an allowed order"),
        (".lastedition.translation.lastedition", "not an allowed order"),
        ("lastedition", "is not a qualifier"),
        (".foo", "is not a qualifier"),
        (".metadados", "is not a qualifier"),  # Example 7.10's slip
        (".metadata(marc)", "only oai_dc"),
        (".translation(pt_BR)", "ISO 639-1"),
        (".translation()", "ISO 639-1"),
        (".lastedition(x)", "takes no parameter"),
        (".lastedition.", "is not a qualifier"),
        (".translation(pt", "is not a qualifier"),
        (".lastedition ", "is not a qualifier"),
    ],
)
def test_relation_refusals(text: str, error: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(error)) as caught:
        parse_relation(text)
    assert caught.value.part == "relation"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("!x", "is not a modifier"),
        ("+(pt", "is not a modifier"),
        ("+()", "ISO 639-1"),
        ("+(pt-BRA)", "ISO 639-1"),
        ("+(p)", "ISO 639-1"),
        (":(marc)", "only oai_dc"),
        ("!(x)", "takes no parameter"),
        ("::(oai_dc)", "not an allowed order"),
        ("?", "is not a modifier"),
        (" !", "is not a modifier"),
    ],
)
def test_modifier_refusals(text: str, error: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(error)) as caught:
        parse_modifier(text)
    assert caught.value.part == "modifier"


def test_relation_refuses_what_is_not_a_relation() -> None:
    with pytest.raises(InvalidInput, match="GetFileList is not a relation"):
        Relation((GET_FILE_LIST,))
    with pytest.raises(InvalidInput, match="not an allowed order"):
        Relation((M, LE))
    with pytest.raises(InvalidInput, match="not a verb"):
        Relation(("GetLastEdition",))  # type: ignore[arg-type]


def test_pair_names() -> None:
    assert LAST_OAI.pair_name("url") == "url.lastedition.metadata(oai_dc)"
    assert Relation((T_PT_BR,)).pair_name("ibi") == "ibi.translation(pt-BR)"
    assert Relation((M,)).pair_name("contenttype") == "contenttype.metadata"
    assert Relation((LE,)).pair_name("state") == "state.lastedition"
    assert Relation((T, LE)).pair_name("timestamp") == "timestamp.translation.lastedition"
    with pytest.raises(InvalidInput, match="is not one of"):
        LAST_OAI.pair_name("urlkey")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- verbs <-> relation


@pytest.mark.parametrize(
    ("verbs", "relation"),
    [
        ("GetLastEdition", ".lastedition"),
        ("GetTranslation(pt)", ".translation(pt)"),
        ("GetMetadata(oai_dc)", ".metadata(oai_dc)"),
        ("GetLastEdition GetMetadata(oai_dc)", ".lastedition.metadata(oai_dc)"),
        ("GetFileList GetLastEdition GetMetadata(oai_dc)", ".lastedition.metadata(oai_dc)"),
        ("GetLastEdition GetFileList GetMetadata(oai_dc)", ".lastedition.metadata(oai_dc)"),
        ("GetTranslation GetMetadata", ".translation.metadata"),  # Example 6.8
        ("GetFileList", ""),
        ("", ""),
    ],
)
def test_relation_for_verbs(verbs: str, relation: str) -> None:
    assert str(relation_for_verbs(verbs)) == relation


def test_section_8_2_captured_verb_list() -> None:
    captured = parse_pair_list(SECTION_8_2_CAPTURED)
    verbs = tuple(parse_verb(word) for word in captured.words("parsedibiurl.verblist"))
    assert relation_for_verbs(verbs) == LAST_OAI
    assert relation_for_verbs(verbs).modifier_text == "!:(oai_dc)"


@pytest.mark.parametrize(
    "verbs",
    ["GetMetadata GetLastEdition", "GetLastEdition GetLastEdition", "GetMetadata GetMetadata"],
)
def test_relation_for_verbs_refuses_bad_orders(verbs: str) -> None:
    with pytest.raises(InvalidInput, match="not an allowed order") as caught:
        relation_for_verbs(verbs)
    assert caught.value.part == "verb list"


@pytest.mark.parametrize(
    ("modifier", "query", "union"),
    [
        ((), (LE, M_DC), (LE, M_DC)),
        ((T,), (M,), (T, M)),  # Example 6.8: + and GetMetadata
        ((LE, M_DC), (LE, M_DC), (LE, M_DC)),  # no repetition
        ((LE,), (M_DC,), (LE, M_DC)),
        ((T, M, T), (T,), (T, M, T)),  # +:+ keeps both of its own translations
        ((T, M, T), (T, T), (T, M, T)),
        ((T, M), (T,), (T, M)),
        ((T_PT,), (T,), (T_PT, T)),  # different verbs: both kept (then refused as ++)
        ((), (GET_FILE_LIST, GET_FILE_LIST), (GET_FILE_LIST,)),
        ((LE,), (GET_FILE_LIST,), (LE, GET_FILE_LIST)),
        ((M,), (LE,), (M, LE)),  # order refused later
    ],
)
def test_union_of_verbs(
    modifier: tuple[Verb, ...], query: tuple[Verb, ...], union: tuple[Verb, ...]
) -> None:
    assert union_of_verbs(modifier, query) == union


# ---------------------------------------------------------------------------- pair names


def test_every_relation_pair_of_example_7_2() -> None:
    answer = parse_pair_list(EXAMPLE_7_2)
    relations = set()
    others = []
    for name, _ in answer:
        try:
            kind, relation = parse_pair_name(name)
        except InvalidInput:
            others.append(name)
            continue
        assert relation.pair_name(kind) == name
        relations.add(str(relation))
    assert others == ["archiveaddress", "ibi.archiveservice", "ibi.platformsoftware", "urlkey"]
    assert relations == {
        "",
        ".lastedition",
        ".lastedition.metadata",
        ".lastedition.metadata(oai_dc)",
        ".metadata",
        ".metadata(oai_dc)",
        ".metadata.translation",
        ".translation(en)",
        ".translation(pt)",
    }


def test_example_7_2_last_edition_convention() -> None:
    """No next edition: every ``x.lastedition<r>`` equals ``x<r>`` (seed 001 §7.2)."""
    index = relation_pair_index(parse_pair_list(EXAMPLE_7_2))
    checked = 0
    for (kind, relation), value in index.items():
        if relation.steps[:1] == (LE,):
            assert index[kind, Relation(relation.steps[1:])] == value
            checked += 1
    assert checked == 3 * 4 + 3  # contenttype, state, timestamp, url x3; ibi x3


def test_example_7_2_oai_dc_differs_only_in_url() -> None:
    index = relation_pair_index(parse_pair_list(EXAMPLE_7_2))
    for kind in ("contenttype", "ibi", "state", "timestamp"):
        assert index[kind, Relation((M_DC,))] == index[kind, Relation((M,))]
    assert index["url", Relation((M_DC,))] != index["url", Relation((M,))]


@pytest.mark.parametrize(
    ("name", "kind", "relation"),
    [
        ("url", "url", ""),
        ("ibi", "ibi", ""),
        ("url.lastedition.metadata(oai_dc)", "url", ".lastedition.metadata(oai_dc)"),
        ("ibi.translation(pt-BR)", "ibi", ".translation(pt-BR)"),
        ("contenttype.metadata", "contenttype", ".metadata"),
        ("state.translation(en)", "state", ".translation(en)"),
        ("timestamp.lastedition", "timestamp", ".lastedition"),
        ("url.translation(pt-br)", "url", ".translation(pt-BR)"),
    ],
)
def test_parse_pair_name(name: str, kind: RelationKind, relation: str) -> None:
    assert parse_pair_name(name) == (kind, parse_relation(relation))


@pytest.mark.parametrize(
    "name",
    [
        "archiveaddress",
        "urlkey",
        "ibi.archiveservice",
        "ibi.platformsoftware",
        "ibi.nextedition",
        "url.persistent",
        "url.metadados",  # Example 7.10, as printed
        "urlx",
        "url.metadata.lastedition",
        "",
    ],
)
def test_parse_pair_name_refusals(name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_pair_name(name)
    assert caught.value.part == "pair name"


def test_example_7_10_parses_but_names_no_relation() -> None:
    answer = parse_pair_list(EXAMPLE_7_10)
    assert relation_pair_index(answer) == {}


def test_relation_pair_index_finds_any_spelling() -> None:
    answer = PairList([("url.translation(pt-br)", "http://a/x"), ("url.translation(pt-BR)", "y")])
    assert relation_pair_index(answer) == {("url", Relation((T_PT_BR,))): "http://a/x"}


# ---------------------------------------------------------------------------- chasing IBIs


def test_hops_of_the_worked_example() -> None:
    assert hops(LAST_OAI) == (
        Hop("ibi.lastedition.metadata(oai_dc)", ITEM_ITSELF),
        Hop("ibi.lastedition", Relation((M_DC,))),
        Hop("ibi.nextedition", LAST_OAI),
    )
    assert hops(Relation((LE,))) == (
        Hop("ibi.lastedition", ITEM_ITSELF),
        Hop("ibi.nextedition", Relation((LE,))),
    )
    assert hops(Relation((T_PT,))) == (Hop("ibi.translation(pt)", ITEM_ITSELF),)
    assert hops(Relation((T_PT, LE))) == (
        Hop("ibi.translation(pt).lastedition", ITEM_ITSELF),
        Hop("ibi.translation(pt)", Relation((LE,))),
    )
    assert hops(ITEM_ITSELF) == ()


def test_worked_example_section_8_2() -> None:
    """``!:(oai_dc)``: the first answer leads to the next edition, whose answer has the URL."""
    wanted = relation_for_verbs("GetLastEdition GetMetadata(oai_dc)")
    first = parse_pair_list(SECTION_8_2_FIRST)
    assert wanted.pair_name("url") not in first
    hop = next_hop(wanted, first)
    assert hop == Hop("ibi.nextedition", wanted)  # same verb list, next edition's IBI
    assert parse_forms(first[hop.pair_name]) == {"rep": "sid.inpe.br/mtc-m18/2012/07.12.18.08"}
    second = parse_pair_list(SECTION_8_2_SECOND)
    assert second.word(wanted.pair_name("url")) == (
        "http://mtc-m16c.sid.inpe.br/col/sid.inpe.br/mtc-m18/2012/07.12.18.08.49/doc/"
        "metadata.cgi?choice=oai_dc"
    )
    assert second.word(wanted.pair_name("contenttype")) == "Metadata"
    assert second.word(wanted.pair_name("state")) == "Original"


def test_get_translation_chases_the_translation() -> None:
    wanted = relation_for_verbs("GetTranslation(pt)")
    filtered = parse_pair_list(EXAMPLE_7_3)
    without_url = filtered.filter(lambda name: name != "url.translation(pt)")
    assert next_hop(wanted, without_url) == Hop("ibi.translation(pt)", ITEM_ITSELF)
    assert parse_forms(without_url["ibi.translation(pt)"]) == {
        "rep": "sid.inpe.br/mtc-m18@80/2009/08.25.19.43"
    }


def test_next_hop_prefers_the_longest_known_relation() -> None:
    answer = parse_pair_list(EXAMPLE_7_2)
    assert next_hop(LAST_OAI, answer) == Hop("ibi.lastedition.metadata(oai_dc)", ITEM_ITSELF)
    fewer = answer.filter(lambda name: not name.startswith("ibi.lastedition.metadata"))
    assert next_hop(LAST_OAI, fewer) == Hop("ibi.lastedition", Relation((M_DC,)))


def test_next_hop_finds_nothing() -> None:
    assert next_hop(Relation((LE,)), parse_pair_list(EXAMPLE_4_2)) is None
    assert next_hop(ITEM_ITSELF, parse_pair_list(EXAMPLE_4_2)) is None
    assert (
        next_hop(Relation((T_PT,)), parse_pair_list(EXAMPLE_7_2).filter(lambda n: "(pt)" not in n))
        is None
    )


def test_next_hop_keeps_the_answers_spelling_and_skips_empty_values() -> None:
    answer = PairList([("ibi.translation(PT)", ["rep", "sid.inpe.br/mtc-m18/2009/08.25.19.43"])])
    assert next_hop(Relation((T_PT,)), answer) == Hop("ibi.translation(PT)", ITEM_ITSELF)
    empty = PairList(
        [("ibi.lastedition", ""), ("ibi.nextedition", ["rep", "a.b/c/2012/07.12.18.08"])]
    )
    assert next_hop(Relation((LE,)), empty) == Hop("ibi.nextedition", Relation((LE,)))


def test_present_hops_lists_every_way_onward_best_first() -> None:
    """The resolver weighs all of them (issue 12: a copy naming itself as its last edition
    and the original's ibi.nextedition are both hops of `!`)."""
    answer = PairList(
        [
            ("ibi.lastedition", ["ibip", "LK47B6W/362SFKH"]),
            ("ibi.nextedition", ["rep", "a.b/c/2012/07.12.18.08"]),
        ]
    )
    assert present_hops(Relation((LE,)), answer) == (
        Hop("ibi.lastedition", ITEM_ITSELF),
        Hop("ibi.nextedition", Relation((LE,))),
    )
    assert present_hops(ITEM_ITSELF, answer) == ()
    assert present_hops(Relation((T_PT,)), answer) == ()


def test_relations_that_involve_editions() -> None:
    assert involves_editions(Relation((LE,))) and involves_editions(Relation((T_PT, LE)))
    assert involves_editions(LAST_OAI)
    assert not involves_editions(ITEM_ITSELF) and not involves_editions(Relation((T_PT,)))


# ---------------------------------------------------------------------------- properties


def _steps(symbol: str, draw: st.DrawFn) -> Verb:
    if symbol == "!":
        return LE
    if symbol == "+":
        language = draw(st.sampled_from([None, "pt", "en", "wa", "pt-BR", "en-GB"]))
        return Verb("GetTranslation", language)
    return Verb("GetMetadata", draw(st.sampled_from([None, "oai_dc"])))


@st.composite
def relations(draw: st.DrawFn) -> Relation:
    shape = draw(st.sampled_from(sorted(grammar_orders())))
    return Relation(tuple(_steps(symbol, draw) for symbol in shape))


@given(relations(), st.sampled_from(RELATION_KINDS))
def test_relation_round_trips(relation: Relation, kind: RelationKind) -> None:
    assert parse_relation(str(relation)) == relation
    assert parse_relation(str(relation).upper().replace("OAI_DC", "oai_dc")) == relation
    assert parse_modifier(relation.modifier_text) == relation
    assert relation_for_verbs(relation.verbs) == relation
    assert relation_for_verbs(format_verb_list(relation.verbs)) == relation
    assert parse_pair_name(relation.pair_name(kind)) == (kind, relation)
    for hop in hops(relation):
        assert hop.pair_name.startswith("ibi")
        assert len(hop.relation) <= len(relation)


@given(st.text(st.sampled_from(list(".()-_ !+:abcdeilmnoprstuBR")), max_size=30))
def test_relation_parsers_only_raise_invalid_input(text: str) -> None:
    for parse in (parse_relation, parse_modifier, parse_verb_list, parse_pair_name):
        with contextlib.suppress(InvalidInput):
            parse(text)
