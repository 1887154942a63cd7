"""Every BibTeX field stays one field, whatever the Dublin Core (issue 23, item 4).

The ``application/x-bibtex`` answer (``ibi/core/citation.py``) is read three ways: by pybtex
(which, as BibTeX, counts every brace, escaped or not), by bibtexparser 2 (which skips ``\\{``
and ``\\}``), and by :func:`bibtex_fields`, BibTeX's own grammar for an entry of braced values.
Each must find one entry with exactly the fields the record gives, and the title, publisher,
creators and year must read back as the Dublin Core said them, once the documented escaping
(:data:`UNESCAPE`, docs/resolver.md) is undone. Also here: the space after the citation
number of the ``second-field-align`` styles (``text/x-bibliography; style=ieee``).
"""

from __future__ import annotations

import re

import bibtexparser
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pybtex.database import Person, parse_string

from functions.resolver import bibliography
from ibi.core import citation

ITEM = "8JMKD3MGP3W/3LM8ASP"
URL = f"http://urlib.net/ibi/{ITEM}"
KEY = "ibi_8JMKD3MGP3W_3LM8ASP"
ALWAYS = {"howpublished", "url", "note"}
INJECTION = 'Real Title}, url = "http://evil.example/", year = "1999'

# The escaping, undone: each command back to its character; in ``author``, the braces that
# keep a word ``and`` and a comma inside one part of one name.
UNESCAPE = {
    r"\textbackslash{}": "\\",
    r"\textbraceleft{}": "{",
    r"\textbraceright{}": "}",
    r"\textasciicircum{}": "^",
    r"\textasciitilde{}": "~",
    **{f"\\{c}": c for c in "%&#$_"},
}
_ESCAPED = re.compile("|".join(re.escape(e) for e in UNESCAPE))
_NAME_BRACES = re.compile(r"\{(and|,)\}", re.IGNORECASE)


def unescape(value: str) -> str:
    return _ESCAPED.sub(lambda match: UNESCAPE[match.group()], value)


def unescape_name_part(value: str) -> str:
    return unescape(_NAME_BRACES.sub(lambda match: match.group(1), value))


def said(value: str) -> str:
    """A Dublin Core value as the BibTeX says it: one line, control characters as U+FFFD."""
    return re.sub("[\x00-\x1f\x7f-\x9f]", "\ufffd", " ".join(value.split()))


FIELD = re.compile(r"([a-z]+) = \{")


def bibtex_fields(text: str) -> tuple[str, dict[str, str]]:
    """``(key, fields)`` of one ``@misc{key, name = {value}, …}`` by BibTeX's grammar: a
    value runs to the brace that balances its first, every brace counted (bibtex.web's
    ``scan_balanced_braces``, which knows no backslash escape)."""
    head = re.match(r"@misc\{([A-Za-z0-9_]+),\s*", text)
    assert head is not None, text
    fields: dict[str, str] = {}
    at = head.end()
    while text[at] != "}":
        name = FIELD.match(text, at)
        assert name is not None, text[at:]
        depth, start = 1, name.end()
        at = start
        while depth:
            depth += {"{": 1, "}": -1}.get(text[at], 0)
            at += 1
        assert name.group(1) not in fields, f"{name.group(1)} twice"
        fields[name.group(1)] = text[start : at - 1]
        at = len(text) - len(text[at:].lstrip(",").lstrip())
    assert text[at:] == "}\n", text[at:]
    return head.group(1), fields


def split_names(value: str) -> list[str]:
    """An ``author`` value's names: split at each `` and `` outside braces, in any case."""
    names, depth, start, at = [], 0, 0, 0
    while at < len(value):
        depth += {"{": 1, "}": -1}.get(value[at], 0)
        if depth == 0 and value[at : at + 5].lower() == " and ":
            names.append(value[start:at])
            start = at = at + 5
            continue
        at += 1
    return [*names, value[start:]]


def family_and_given(name: str) -> tuple[str, str]:
    """A name as the BibTeX says it: ``(family, given)``, a literal name as ``(name, "")``."""
    family, comma, given = name.partition(",")
    if comma and family.strip() and given.strip():
        return said(family), said(given)
    return said(name), ""


def one_group(value: str) -> bool:
    """Whether ``value`` is one brace group: its first ``{`` closed by its last character."""
    depth = 0
    for at, c in enumerate(value):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth == 0:
            return at == len(value) - 1 and at > 0
    return False


def read_back(name: str) -> tuple[str, str]:
    """One name of a bibtexparser ``author`` value, unescaped: ``(family, given)``."""
    if one_group(name):
        return unescape(name[1:-1]), ""
    family, _, given = name.partition(", ")
    return unescape_name_part(family), unescape_name_part(given)


def person_back(person: Person) -> tuple[str, str]:
    """A pybtex person, unescaped: ``(family, given)``."""
    family = " ".join([*person.prelast_names, *person.last_names])
    given = " ".join([*person.first_names, *person.middle_names])
    assert not person.lineage_names, person
    if not given and one_group(family):
        return unescape(family[1:-1]), ""
    return unescape_name_part(family), unescape_name_part(given)


def check(dc: dict[str, tuple[str, ...]]) -> None:
    """The three readings of the record's BibTeX agree with the Dublin Core (module doc)."""
    record = citation.Record(persistent_url=URL, ibi=ITEM, dc=dc)
    text = citation.bibtex(record)
    expected = set(ALWAYS)
    title, publisher = record.first("title"), record.first("publisher")
    creators = record.all("creator")
    parts = record.date_parts()
    expected |= {"title"} if title else set()
    expected |= {"publisher"} if publisher else set()
    expected |= {"author"} if creators else set()
    expected |= {"year", "month"} if parts and len(parts) > 1 else {"year"} if parts else set()

    assert r"\{" not in text and r"\}" not in text  # a brace is a brace to every reader
    key, raw = bibtex_fields(text)
    assert key == KEY and set(raw) == expected

    (entry,) = parse_string(text, "bibtex").entries.values()  # pybtex, BibTeX's grammar
    assert entry.key == KEY
    assert set(entry.fields) | set(entry.persons) == expected
    assert {name: entry.fields[name] for name in entry.fields} == {
        name: value for name, value in raw.items() if name != "author"
    }

    library = bibtexparser.parse_string(text)
    assert not library.failed_blocks and len(library.entries) == 1
    (parsed,) = library.entries
    assert parsed.key == KEY and {f.key for f in parsed.fields} == expected
    assert all(parsed[name] == raw[name] for name in expected - {"author"})

    assert parsed["url"] == URL and parsed["note"] == f"IBI: {ITEM}"
    if title:
        assert unescape(parsed["title"]) == said(title)
    if publisher:
        assert unescape(parsed["publisher"]) == said(publisher)
    if parts:
        assert parsed["year"] == str(parts[0])
    if creators:
        wanted = [family_and_given(creator) for creator in creators]
        assert [read_back(name) for name in split_names(raw["author"])] == wanted
        assert [person_back(person) for person in entry.persons["author"]] == wanted


SPECIALS = st.sampled_from(
    ["{", "}", "\\", "%", "#", "@", '"', "'", "$", "&", "_", "^", "~", ",", "=", " and ", "AND"]
)
TEXT = st.lists(st.one_of(SPECIALS, st.text(max_size=8)), max_size=10).map("".join)
DATES = st.one_of(
    st.from_regex(r"\d{4}(-\d{2}(-\d{2})?)?", fullmatch=True),
    st.from_regex(r"\A(1999|2020)[-/ ]?.{0,6}", fullmatch=True),
    TEXT,
)


@settings(max_examples=400, deadline=None)
@given(
    titles=st.lists(TEXT, max_size=2),
    creators=st.lists(
        st.one_of(TEXT, st.tuples(TEXT, TEXT).map(", ".join)),
        max_size=4,
    ),
    dates=st.lists(DATES, max_size=2),
    publishers=st.lists(TEXT, max_size=1),
)
@example(titles=[INJECTION], creators=["Câmara, Gilberto"], dates=["2020"], publishers=[])
@example(titles=["}"], creators=["x, y, z, w", "Research and Development"], dates=[], publishers=[])
def test_whatever_the_metadata_each_field_stays_one_field_for_every_reader(
    titles: list[str], creators: list[str], dates: list[str], publishers: list[str]
) -> None:
    dc = {"title": titles, "creator": creators, "date": dates, "publisher": publishers}
    check({element: tuple(values) for element, values in dc.items() if values})


def test_a_title_that_closes_its_field_does_not_add_a_url_or_a_year() -> None:
    for title in (INJECTION, "A}, url = {http://evil.example/}, year = {1999"):
        dc = {"title": (title,), "creator": ("Câmara, Gilberto",), "date": ("2020-03-01",)}
        text = citation.bibtex(citation.Record(persistent_url=URL, ibi=ITEM, dc=dc))
        (entry,) = parse_string(text, "bibtex").entries.values()
        assert entry.fields["url"] == URL and entry.fields["year"] == "2020"
        assert set(entry.fields) == {"title", "year", "month", *ALWAYS}
        assert unescape(entry.fields["title"]) == title
        check({key: value for key, value in dc.items()})


def test_a_creator_with_and_or_more_commas_stays_one_person_in_two_parts() -> None:
    creators = ("Research and Development, Dept, of Things", "Plain AND Simple", "x, y, z, w")
    text = citation.bibtex(citation.Record(persistent_url=URL, ibi=ITEM, dc={"creator": creators}))
    (entry,) = parse_string(text, "bibtex").entries.values()
    people = entry.persons["author"]
    assert [person_back(person) for person in people] == [
        ("Research and Development", "Dept, of Things"),
        ("Plain AND Simple", ""),
        ("x", "y, z, w"),
    ]
    assert people[0].last_names == ["Research", "{and}", "Development"]


def test_the_numbered_styles_put_a_space_after_the_citation_number() -> None:
    dc = {
        "title": ("Spatial data",),
        "creator": ("Câmara, Gilberto", "Monteiro, Antônio"),
        "date": ("2020-03",),
        "publisher": ("INPE",),
    }
    record = citation.Record(persistent_url=URL, ibi=ITEM, dc=dc)
    assert bibliography.render(record, "ieee", None).startswith("[1] G. Câmara and A. Monteiro,")
    assert bibliography.render(record, "nature", None).startswith("1. Câmara, G. & Monteiro, A.")
    assert bibliography.render(record, "apa", None).startswith("Câmara, G., & Monteiro, A.")
    bare = citation.Record(persistent_url=URL, ibi=ITEM, dc={})
    assert bibliography.render(bare, "nature", None) == "1.\n"
    assert bibliography.render(bare, "ieee", None) == f"[1] [Online]. Available: {URL}\n"
