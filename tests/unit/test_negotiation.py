"""Content negotiation and Signposting at the resolver (issue 16).

Every representation is read back by a real consumer: the CSL-JSON rendered by citeproc-py,
the BibTeX parsed by bibtexparser, the JSON-LD expanded by pyld, the oai_dc parsed by
ElementTree; the Link headers read by ``signposting`` (the FAIR Signposting authors' library).

The resolver is the real handler over its registry (DynamoDB through moto, in-process) and
three scripted Archives (no socket): A holds the original of ITEM (whose next edition is NEXT),
B a copy of ITEM, C the original of NEXT.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import bibtexparser
import boto3
import pytest
from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle
from citeproc import formatter as citeproc_formatter
from citeproc.source.json import CiteProcJSON
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from pyld import jsonld
from signposting.linkheader import find_signposting_http_link

from functions.resolver import bibliography, handler, negotiation, wiring
from functions.resolver.network import Outcome, Request
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.core import citation
from ibi.core.holdings import Report, to_pairs
from ibi.core.pairlist import format_pair_list, parse_pair_list
from ibi.defaults import RESOLVER_SERVICE_IBI
from ibi_tools.local.gateway import LocalContext
from tests.fakes_resolver import ScriptedTransport
from tests.fuzzing import event

ROOT = Path(__file__).resolve().parents[2]

KEY = "1234567890-0987654321"
A, B, C = "8JMKD3MGP8W/3FSUP4A", "8JMKD3MGP8W/3FSUP4B", "8JMKD3MGP8W/3FSUP4C"
ITEM, NEXT = "8JMKD3MGP8W/35MME4E", "8JMKD3MGP8W/35MME4F"
FIREFOX = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
DC = {
    "title": ("Braces {and} 100% of $pecial_chars & a \\ backslash",),
    "creator": ("Câmara, Gilberto", "INPE"),
    "date": ("2024-05-01",),
    "publisher": ("Instituto Nacional de Pesquisas Espaciais",),
    "type": ("Technical report",),
    "subject": ("remote sensing", "persistent identifiers"),
    "description": ('An <abstract> with "quotes", commas; and semicolons.',),
    "rights": ("https://creativecommons.org/licenses/by/4.0/",),
    "language": ("pt-BR",),
}
NEXT_DC = {"title": ("Second edition",), "creator": ("Banon, Gerald",), "date": ("2025",)}
SCHEMA_ORG_CONTEXT = {"@context": {"@vocab": "http://schema.org/"}}  # its @vocab, offline


def holdings_text(state: str, dc: dict[str, tuple[str, ...]]) -> str:
    report = Report(state=state, timestamp="2024-05-01T12:00:00Z", file_count=0, dc=dc)
    return format_pair_list(to_pairs(report))


def answer(ibi: str, state: str, url: str, extra: str = "") -> str:
    return f"state {state}\r\nibi {{ibip {ibi}}}\r\nurl {url}\r\n{extra}"


class Archives(ScriptedTransport):
    """Answers keyed by (Archive, IBI asked); the holdings pairs only to who asked for them."""

    def __init__(self, by_ibi: dict[tuple[str, str], tuple[str, str]]) -> None:
        super().__init__(answers={a: "" for a, _ in by_ibi})
        self.by_ibi = by_ibi  # (archive, ibi) -> (ordinary answer, holdings pairs)
        self.asked: list[list[tuple[str, str]]] = []

    def _outcome(self, key: str, request: Request | None, settled: bool) -> Outcome:
        if request is None or settled:
            return super()._outcome(key, request, settled)
        pairs = dict(request.pairs)
        self.asked.append(list(request.pairs))
        ordinary, extension = self.by_ibi.get((key, pairs.get("parsedibiurl.ibi", "")), ("", ""))
        if pairs.get("extension.holdings") == "yes" and ordinary:
            ordinary += extension
        return Outcome.answered(key, parse_pair_list(ordinary), 0.0)


SCRIPT = {
    (A, ITEM): (
        answer(
            ITEM,
            "Original",
            f"https://a.example.org/col/{ITEM}",
            f"ibi.nextedition {{ibip {NEXT}}}\r\n",
        ),
        holdings_text("Original", DC),
    ),
    (B, ITEM): (
        answer(ITEM, "Copy", f"https://b.example.org/col/{ITEM}"),
        holdings_text("Copy", DC),
    ),
    (C, NEXT): (
        answer(NEXT, "Original", f"https://c.example.org/col/{NEXT}")
        + f"ibi.lastedition {{ibip {NEXT}}}\r\nstate.lastedition Original\r\n"
        + f"url.lastedition https://c.example.org/col/{NEXT}\r\n",
        holdings_text("Original", NEXT_DC),
    ),
}


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archives]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, "resolver")
        pepper = tmp_path_factory.mktemp("resolver") / "pepper"
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(pepper)}
        )
        runtime = wiring.build(settings, dynamodb=client)
        scripted = Archives(SCRIPT)
        for name in ("vet", "send", "ask_all"):  # the only network the resolver has
            setattr(runtime.transport, name, getattr(scripted, name))
        wiring.install(runtime)
        for archive in (A, B, C):
            register(archive)
        try:
            yield scripted
        finally:
            wiring.install(None)


def register(archive: str) -> None:
    body = json.dumps(
        {"archiveserviceibi": archive, "registrationkey": KEY, "share_prefix": True}
    ).encode()  # A, B and C share a prefix: none of them owns it
    assert invoke("POST", "/admin/archives", body=body)["statusCode"] == 200
    host = archive[-1].lower() + ".example.org"
    query = (
        f"servicesubject=inclusionRequest&archiveaddress={host}&archiveserviceibi={archive}"
        "&archiveip=192.0.2.20&archiveprotocol=HTTPS&archiveplatformversion=ibi-0.1"
        f"&archiveadmemailaddress=admin%40example.org&registrationkey={KEY}"
    )
    included = invoke("GET", "/" + RESOLVER_SERVICE_IBI, query)
    assert included["body"].startswith("status.archive included"), included["body"]


def invoke(method: str, path: str, query: str = "", body: bytes = b"", **headers: str) -> Any:
    request = event(method, path, query, body=body, headers=headers)
    context = LocalContext("negotiation", request["requestContext"]["requestId"])
    return handler.lambda_handler(request, context)


def get(path: str, accept: str | None) -> dict[str, Any]:
    headers = {} if accept is None else {"accept": accept}
    return invoke("GET", path, **headers)  # type: ignore[no-any-return]


def header(answer: dict[str, Any], name: str) -> str:
    found = {k.lower(): v for k, v in answer.get("headers", {}).items()}
    return str(found.get(name.lower(), ""))


# ---------------------------------------------------------------------------- choosing


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, None),
        ("", None),
        ("*/*", None),
        (FIREFOX, None),
        ("text/html", None),
        ("application/pdf", None),  # a file's own type: the redirect's business
        ("application/json", None),
        ("application/x-bibtex", citation.BIBTEX),
        ("application/vnd.citationstyles.csl+json", citation.CSL_JSON),
        ("application/citeproc+json", citation.CSL_JSON),
        ("application/ld+json", citation.JSON_LD),
        ("application/xml", citation.OAI_DC_XML),
        ("text/html;q=0.5, application/x-bibtex", citation.BIBTEX),
        ("application/x-bibtex;q=0.2, application/ld+json;q=0.9", citation.JSON_LD),
        ("application/x-bibtex, */*;q=0.1", citation.BIBTEX),
        ("application/x-bibtex;q=nan, text/html;q=0.1", None),
        ("application/x-bibtex;q=abc", None),
        ("text/turtle", negotiation.NotAcceptable("text/turtle")),
        ("text/x-bibliography", "text/x-bibliography; style=apa"),
        ("text/x-bibliography; style=IEEE", "text/x-bibliography; style=ieee"),
        (
            "text/x-bibliography; style=mla",
            "text/x-bibliography; style=modern-language-association",
        ),
        (
            'text/x-bibliography; style="apa"; locale=pt_br',
            "text/x-bibliography; style=apa; locale=pt-BR",
        ),
        ("text/x-bibliography; style=apa; locale=<script>", "text/x-bibliography; style=apa"),
        (
            "text/x-bibliography; style=no-such",
            negotiation.NotAcceptable("text/x-bibliography; style=no-such"),
        ),
        ("text/html, text/x-bibliography;q=0.9", None),
        ("application/x-bibtex;q=0.5, text/x-bibliography", "text/x-bibliography; style=apa"),
        ("text/turtle, application/x-bibtex;q=0.5", citation.BIBTEX),
    ],
)
def test_the_accept_header_chooses_a_type_or_keeps_the_redirect(
    accept: str | None, chosen: object
) -> None:
    assert negotiation.choose(accept) == chosen


# ---------------------------------------------------------------------------- consumers

RECORD = citation.Record(persistent_url=f"https://urlib.net/{ITEM}", ibi=ITEM, dc=DC)


def test_citeproc_renders_the_csl_json() -> None:
    items = json.loads(citation.csl_json(RECORD))
    source = CiteProcJSON(items)
    style = CitationStylesStyle("harvard-cite-them-right", validate=False)
    bibliography = CitationStylesBibliography(style, source, citeproc_formatter.plain)
    bibliography.register(Citation([CitationItem(ITEM)]))
    rendered = str(bibliography.bibliography()[0])
    assert "Câmara, G." in rendered
    assert "2024" in rendered
    assert DC["title"][0] in rendered
    assert items[0]["author"] == [{"family": "Câmara", "given": "Gilberto"}, {"literal": "INPE"}]
    assert items[0]["type"] == "report"


def test_bibtexparser_parses_the_bibtex() -> None:
    library = bibtexparser.parse_string(citation.bibtex(RECORD))
    assert not library.failed_blocks
    (entry,) = library.entries
    assert entry.entry_type == "misc"
    assert entry.key == "ibi_8JMKD3MGP8W_35MME4E"
    assert entry["year"] == "2024"
    assert entry["url"] == f"https://urlib.net/{ITEM}"
    assert entry["title"] == citation.bibtex_text(DC["title"][0])
    assert r"\textbraceleft{}and\textbraceright{}" in entry["title"]
    assert "100\\%" in entry["title"]
    assert entry["author"] == "Câmara, Gilberto and {INPE}"


def test_bibtex_braces_stay_balanced_whatever_the_metadata() -> None:
    nasty = {"title": ("}}} @misc{x, title={", "{{{"), "creator": ("\\", "}")}
    record = citation.Record(persistent_url="https://r.example/a{b}", ibi=ITEM, dc=nasty)
    library = bibtexparser.parse_string(citation.bibtex(record))
    assert not library.failed_blocks
    assert len(library.entries) == 1
    assert library.entries[0]["url"] == "https://r.example/a%7Bb%7D"


def test_pyld_expands_the_schema_org_json_ld() -> None:
    def offline(url: str, options: Any = None) -> dict[str, Any]:
        assert url.rstrip("/") == "https://schema.org"
        return {"contextUrl": None, "documentUrl": url, "document": SCHEMA_ORG_CONTEXT}

    document = json.loads(citation.schema_org(RECORD))
    (node,) = jsonld.expand(document, {"documentLoader": offline})
    assert node["@id"] == f"https://urlib.net/{ITEM}"
    assert node["@type"] == ["http://schema.org/Report"]
    assert node["http://schema.org/name"] == [{"@value": DC["title"][0]}]
    authors = node["http://schema.org/author"]
    names = [a["http://schema.org/name"][0]["@value"] for a in authors]
    assert names == list(DC["creator"])
    assert node["http://schema.org/license"] == [{"@value": DC["rights"][0]}]


def test_the_oai_dc_record_parses_and_leads_with_the_persistent_url() -> None:
    odd = {**DC, "title": ("a \x00 nul and \x1b escape",)}
    record = citation.Record(persistent_url=f"https://urlib.net/{ITEM}", ibi=ITEM, dc=odd)
    root = ElementTree.fromstring(citation.oai_dc(record).encode())
    assert root.tag == f"{{{citation.OAI_DC}}}dc"
    identifiers = [e.text for e in root.findall(f"{{{citation.DC}}}identifier")]
    assert identifiers[0] == f"https://urlib.net/{ITEM}"
    assert root.findtext(f"{{{citation.DC}}}title") == "a \ufffd nul and \ufffd escape"


# ---------------------------------------------------------------------------- the resolver


def test_a_citation_manager_gets_the_bibtex_of_the_original(archives: Archives) -> None:
    got = get(f"/{ITEM}", "application/x-bibtex")
    assert got["statusCode"] == 200, got["body"]
    assert header(got, "content-type") == "application/x-bibtex; charset=utf-8"
    assert header(got, "vary") == "Accept"
    (entry,) = bibtexparser.parse_string(got["body"]).entries
    assert entry["url"] == f"http://api.example.org/{ITEM}"
    assert entry["title"] == citation.bibtex_text(DC["title"][0])
    last = archives.asked[-1]
    assert ("extension.holdings", "yes") in last  # one resolution, the holdings pairs with it


@pytest.mark.parametrize("kind", negotiation.OFFERED)
def test_every_offered_type_answers_200_with_its_content_type(
    archives: Archives, kind: str
) -> None:
    got = get(f"/{ITEM}", kind)
    assert got["statusCode"] == 200, got["body"]
    assert header(got, "content-type").startswith(kind + ";")
    assert ITEM in got["body"]


def test_the_last_edition_modifier_cites_the_last_edition(archives: Archives) -> None:
    got = get(f"/{ITEM}!", citation.CSL_JSON)
    assert got["statusCode"] == 200, got["body"]
    (item,) = json.loads(got["body"])
    assert item["title"] == "Second edition"
    assert item["id"] == NEXT
    assert item["URL"] == f"http://api.example.org/{NEXT}"


def test_a_browser_keeps_the_302_with_vary_and_signposting(archives: Archives) -> None:
    got = get(f"/{ITEM}", FIREFOX)
    assert got["statusCode"] == 302
    assert header(got, "location") == f"https://a.example.org/col/{ITEM}"
    assert header(got, "vary") == "Accept"
    assert ("extension.holdings", "yes") not in archives.asked[-1]  # the redirect as before
    signposts = find_signposting_http_link([header(got, "link")], f"http://api.example.org/{ITEM}")
    assert str(signposts.citeAs.target) == f"http://api.example.org/{ITEM}"
    described = {str(s.type): str(s.target) for s in signposts.describedBy}
    assert set(described) == set(negotiation.DESCRIBED_BY)
    assert set(described.values()) == {f"http://api.example.org/{ITEM}"}


def test_no_accept_keeps_the_302(archives: Archives) -> None:
    got = get(f"/{ITEM}", None)
    assert got["statusCode"] == 302
    assert header(got, "location") == f"https://a.example.org/col/{ITEM}"


def test_a_type_not_offered_is_a_406_listing_the_offered_ones(archives: Archives) -> None:
    asked = len(archives.asked)
    got = get(f"/{ITEM}", "text/turtle")
    assert got["statusCode"] == 406
    assert header(got, "vary") == "Accept"
    for kind in negotiation.OFFERED:
        assert kind in got["body"]
    assert len(archives.asked) == asked  # refused before any Archive is asked


def test_an_archive_without_dublin_core_is_a_406(archives: Archives) -> None:
    archives.by_ibi[(A, "8JMKD3MGP8W/35MME4G")] = (
        answer("8JMKD3MGP8W/35MME4G", "Original", "https://a.example.org/col/x"),
        "",
    )
    got = get("/8JMKD3MGP8W/35MME4G", citation.BIBTEX)
    assert got["statusCode"] == 406
    assert "gives no Dublin Core" in got["body"]


def test_an_unknown_ibi_is_still_a_404_when_negotiating(archives: Archives) -> None:
    assert get("/8JMKD3MGP8W/35MME4H", citation.BIBTEX)["statusCode"] == 404


# ---------------------------------------------------------------------------- any input

ACCEPT_PARTS = st.sampled_from(
    [
        *negotiation.OFFERED,
        *negotiation.NOT_OFFERED,
        *negotiation.PAGES,
        "application/pdf",
        "",
        negotiation.BIBLIOGRAPHY,
        f"{negotiation.BIBLIOGRAPHY}; style=ieee; locale=de",
        f"{negotiation.BIBLIOGRAPHY}; style=x;y",
    ]
)
Q = st.one_of(st.none(), st.floats(allow_nan=True), st.text(max_size=5))


@settings(max_examples=300)
@given(st.lists(st.tuples(ACCEPT_PARTS, Q), max_size=6), st.text(max_size=40))
def test_any_accept_header_chooses_an_offered_type_refuses_or_redirects(
    ranges: list[tuple[str, object]], noise: str
) -> None:
    header = ", ".join(k if q is None else f"{k};q={q}" for k, q in ranges) + noise
    chosen = negotiation.choose(header)
    assert (
        chosen is None
        or chosen in negotiation.OFFERED
        or isinstance(chosen, negotiation.NotAcceptable)
        or chosen.startswith(f"{negotiation.BIBLIOGRAPHY}; style=")
    )


DC_VALUES = st.lists(st.text(max_size=60), max_size=3).map(tuple)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(citation.DC_ELEMENTS), DC_VALUES, max_size=8))
def test_whatever_the_dublin_core_every_consumer_reads_the_answer(
    dc: dict[str, tuple[str, ...]],
) -> None:
    record = citation.Record(persistent_url=f"http://api.example.org/{ITEM}", ibi=ITEM, dc=dc)
    library = bibtexparser.parse_string(citation.bibtex(record))
    assert not library.failed_blocks and len(library.entries) == 1
    (item,) = json.loads(citation.csl_json(record))
    assert item["URL"] == record.persistent_url
    assert json.loads(citation.schema_org(record))["@id"] == record.persistent_url
    root = ElementTree.fromstring(citation.oai_dc(record).encode())
    assert root.findtext(f"{{{citation.DC}}}identifier") == record.persistent_url


def test_the_resolver_offers_exactly_what_citation_renders() -> None:
    assert set(negotiation.OFFERED) == set(citation.RENDERERS)
    assert set(negotiation.DESCRIBED_BY) == set(citation.RENDERERS)


# ---------------------------------------------------------------------------- text/x-bibliography


@pytest.mark.parametrize("style", bibliography.STYLES)
def test_every_style_formats_the_citation_with_citeproc(archives: Archives, style: str) -> None:
    got = get(f"/{ITEM}", f"text/x-bibliography; style={style}")
    assert got["statusCode"] == 200, got["body"]
    assert header(got, "content-type") == "text/x-bibliography; charset=utf-8"
    assert header(got, "vary") == "Accept"
    body = got["body"]
    assert body.endswith("\n") and body.count("\n") == 1  # one entry, one line
    assert "mara" in body.lower()  # Câmara (ABNT writes family names in capitals)
    assert "Braces" in body and "2024" in body


def test_the_default_style_is_apa_in_the_style_s_locale(archives: Archives) -> None:
    got = get(f"/{ITEM}", "text/x-bibliography")
    assert got["statusCode"] == 200, got["body"]
    assert got["body"].startswith("Câmara, G., & INPE. (2024")
    assert f"https://urlib.net/{ITEM}" in got["body"] or ITEM in got["body"]


def test_the_locale_changes_the_words_of_the_citation() -> None:
    record = citation.Record(
        persistent_url=f"http://api.example.org/{ITEM}",
        ibi=ITEM,
        dc={"title": ("Sensores",), "creator": ("Banon, Gerald",), "date": ("2009-07-21",)},
    )
    english = bibliography.render(record, "modern-language-association", "en-US")
    portuguese = bibliography.render(record, "modern-language-association", "pt-BR")
    assert "July" in english and "julho" in portuguese
    # a locale citeproc-py lacks falls back to its language, then to the style's own
    assert bibliography.render(record, "modern-language-association", "pt") == portuguese
    assert bibliography.render(record, "modern-language-association", "xx-YY") == english


def test_an_unknown_style_is_a_406_listing_the_styles(archives: Archives) -> None:
    got = get(f"/{ITEM}", "text/x-bibliography; style=no-such-style")
    assert got["statusCode"] == 406
    assert "style=no-such-style" in got["body"]
    for style in bibliography.STYLES:
        assert style in got["body"]


def test_a_redirecting_cold_start_never_imports_citeproc() -> None:
    """The formatter (citeproc-py, lxml) loads only for a formatted citation."""
    code = (
        "import sys\n"
        "from functions.resolver import handler, negotiation\n"
        "assert negotiation.choose('text/x-bibliography; style=ieee')\n"
        "print(sorted(m for m in ('citeproc', 'lxml') if m in sys.modules))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert run.stdout.strip() == "[]"
