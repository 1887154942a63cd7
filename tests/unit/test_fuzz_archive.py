"""An Archive's Lambda under fuzzed requests: the deposit API (``/api/…``), the public pages
(``/col/``, ``/list/``, ``/metadata/``) and the service protocol (issue 11, finding 8).

The real handler over its real stores (DynamoDB and S3 through moto, in-process, no socket);
the minter and the receiving Archive are fakes. Besides a normal item, the Archive holds one
stored before the deposit API refused control characters and lone surrogates: its pages and
its oai_dc record must be served all the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree

import boto3
import pytest
from botocore.config import Config
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from functions.archive import wiring
from functions.archive.content import Receivers
from functions.archive.errors import BadRequest, Unavailable
from functions.archive.files import MAX_SINGLE_PUT, S3FileStore
from functions.archive.handler import app as archive_app
from functions.archive.handler import lambda_handler
from functions.archive.model import Forms, Item, State
from functions.archive.parsing import MAX_FILE_BYTES
from functions.archive.service import ArchiveService
from functions.archive.settings import ArchiveSettings
from functions.archive.store import DynamoItemStore, ensure_table
from functions.archive.views import oai_dc
from ibi.core.pairlist import parse_pair_list
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryMinter
from tests.fuzzing import (
    FUZZ,
    FUZZ_MORE,
    bodies,
    check_answer,
    event,
    json_values,
    mutations,
    numbers,
    objects,
    path_segments,
    query_strings,
    texts,
)

SERVICE = Forms(ibip="8JMKD3MGP8W/3FSUP4L")
ITEM = "8JMKD3MGP8W/35MME4E"
LEGACY = "8JMKD3MGP8W/35MMLL8"
SHA = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"  # of "hello world"
LABELS = [ITEM, LEGACY, SERVICE.key, "LK47B6W/362SFKH", "sid.inpe.br/mtc-m18/2009/07.21.13.23"]
NASTY_TITLE = "Tab\tline\nbell\x07 esc\x1b nul\x00 lone\ud800 surrogate \ufffe end"

ibis = (
    st.sampled_from(LABELS)
    | texts
    | st.fixed_dictionaries(
        {},
        optional={"rep": st.sampled_from(LABELS) | texts, "ibip": st.sampled_from(LABELS) | texts},
    )
)
dc = st.dictionaries(
    st.sampled_from(["title", "creator", "description", "language", "identifier"]) | texts,
    texts | st.lists(texts, max_size=3),
    max_size=3,
)
ITEM_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "ibi": ibis,
    "subsystem": st.sampled_from(["default", "nope"]) | texts,
    "url": st.sampled_from(["https://example.org/x", "http://a b", "javascript:x"]) | texts,
    "content_type": st.sampled_from(["Data", "Metadata"]) | texts,
    "language": st.sampled_from(["en", "pt-BR", "x", "PT-br"]) | texts,
    "transferable": st.booleans(),
    "listable": st.booleans(),
    "dc": dc,
    "default_file": st.sampled_from(["hello.txt", "missing"]) | texts,
    "original_sha256": st.sampled_from([SHA, "zz"]) | texts,
}
FILE_ENTRY = {"path": "hello.txt", "sha256": SHA, "size": 11}
files = st.lists(
    mutations(
        FILE_ENTRY,
        {
            "path": st.sampled_from(["hello.txt", "a/b.txt", "../x", "/", "é" * 400]) | texts,
            "sha256": st.sampled_from([SHA, SHA.upper(), "0" * 63]) | texts,
            "size": st.sampled_from([11, "12", 1.5, True, MAX_FILE_BYTES + 1, -1]) | numbers,
            "content_type": st.sampled_from(["text/plain", "text/html\r\nX: y"]) | texts,
        },
    ),
    min_size=1,
    max_size=3,
)
FILE_FIELDS = {"files": files, "default_file": st.sampled_from(["hello.txt"]) | texts}
DEPOSIT = {"ibi": ITEM, "language": "en", "dc": {"title": "Hello"}}
LINK_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "next_edition": ibis,
    "translation": objects(
        {"language": st.sampled_from(["pt-BR"]) | texts, "ibi": ibis, "url": texts}
    ),
    "metadata": objects({"ibi": ibis, "format": st.sampled_from(["oai_dc", ""]) | texts}),
}
TRANSFER_FIELDS = {"to": st.just("https://archive.example.org") | texts, "leave": texts}

# The bodies the deposit API's routes take; a route not named here gets objects of any of
# these fields (the route list is read from the handler, so that a new route is fuzzed too).
ANY_FIELDS = {**ITEM_FIELDS, **FILE_FIELDS, **LINK_FIELDS, **TRANSFER_FIELDS, "reason": texts}
ROUTE_BODIES: dict[tuple[str, str], st.SearchStrategy[Any]] = {
    ("POST", "/api/items"): mutations(DEPOSIT, ITEM_FIELDS),
    ("POST", "/api/copies"): mutations(DEPOSIT, {**ITEM_FIELDS, "original_files": files}),
    ("POST", "/api/transfers"): mutations(DEPOSIT, {**ITEM_FIELDS, "accesses": numbers}),
    ("POST", "/api/imports"): mutations(DEPOSIT, ANY_FIELDS),
    ("PATCH", "/api/item"): mutations({"listable": True}, ITEM_FIELDS),
    ("POST", "/api/item/links"): mutations({"next_edition": LEGACY}, LINK_FIELDS),
    ("POST", "/api/item/uploads"): mutations({"files": [FILE_ENTRY]}, FILE_FIELDS),
    ("POST", "/api/item/files"): mutations({"files": [FILE_ENTRY]}, FILE_FIELDS),
    ("POST", "/api/item/files/replace"): mutations(
        {"files": [FILE_ENTRY], "reason": "typo"}, {**FILE_FIELDS, "reason": texts}
    ),
    ("POST", "/api/item/transfer"): mutations({"to": "https://b.example.org"}, TRANSFER_FIELDS),
}
API_ROUTES = sorted(
    (route.method, route.path)
    for route in archive_app._static_routes
    if route.path.startswith("/api/")
)


@pytest.fixture(scope="module")
def archive() -> Iterator[S3FileStore]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        s3 = boto3.client("s3", region_name="us-east-1", config=Config(signature_version="s3v4"))
        ensure_table(dynamodb, "archive-items")
        s3.create_bucket(Bucket="archive-files")
        store = DynamoItemStore(dynamodb, "archive-items")
        store.claim_service_item(SERVICE)
        clock = FakeClock(Decimal(1795473000))
        files = S3FileStore(s3, "archive-files", trust_stored_checksum=False)
        store.create(legacy_item(clock()))
        wiring.install(
            wiring.Runtime(
                service=ArchiveService(
                    store, clock=clock, mint=MemoryMinter(), own_prefixes={"8JMKD3MGP8W"}
                ),
                store=store,
                settings=ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "archive-items"}),
                clock=clock,
                files=files,
                receivers=Receivers(connect=no_receiver),
            )
        )
        deposit(files)
        yield files
        wiring.uninstall()


def no_receiver(url: str) -> Any:
    """Transfers are fuzzed up to the receiver: none is reachable from a unit test."""
    raise BadRequest(f'"to": {url[:50]!r} is not reachable from here')


def legacy_item(now: Decimal) -> Item:
    """An item as the deposit API used to store it: text no page nor XML can carry."""
    return Item(
        ibi=Forms.of(LEGACY),
        state=State.ORIGINAL,
        timestamp=now,
        dc={"title": (NASTY_TITLE,), "creator": ("\x0c\x7f\x85\udfff",)},
    )


def api(method: str, path: str, query: str = "", body: Any = None) -> dict[str, Any]:
    payload = b"" if body is None else json.dumps(body).encode()
    request = event(method, path, query, body=payload)
    return check_answer(lambda_handler, request, json_api=True)


def deposit(files: S3FileStore) -> None:
    """An item with one file, ``hello.txt``, through the deposit API."""
    created = api("POST", "/api/items", body={"ibi": ITEM, "dc": {"title": "Hello"}})
    assert created["statusCode"] == 201, created["body"]
    declared = {"files": [{"path": "hello.txt", "sha256": SHA, "size": 11}]}
    assert api("POST", "/api/item/uploads", f"ibi={ITEM}", declared)["statusCode"] == 200
    files.put(ITEM, "hello.txt", b"hello world", "text/plain", announced=SHA)  # the PUT
    assert api("POST", "/api/item/files", f"ibi={ITEM}", declared)["statusCode"] == 200


def refusal(answer: dict[str, Any]) -> str:
    assert answer["statusCode"] == 400, answer["body"]
    error = json.loads(answer["body"])["error"]
    assert error["code"] == "BadRequest"
    return str(error["message"])


# ---------------------------------------------------------------------------- what broke


@pytest.mark.parametrize(
    ("size", "says"),
    [
        pytest.param(MAX_FILE_BYTES + 1, "from 0 to 5368709120", id="over-5-GiB"),
        pytest.param("12", "not '12'", id="string"),
        pytest.param(1.5, "not 1.5", id="float"),
        pytest.param(True, "not True", id="true"),
        pytest.param(None, "not None", id="null"),
        pytest.param(-1, "from 0", id="negative"),
    ],
)
@pytest.mark.parametrize("route", ["/api/item/uploads", "/api/item/files"])
def test_a_size_is_a_json_integer_up_to_5_gib(
    archive: S3FileStore, route: str, size: Any, says: str
) -> None:
    body = {"files": [{"path": "big.bin", "sha256": SHA, "size": size}]}
    message = refusal(api("POST", route, f"ibi={ITEM}", body))
    assert '"size" must be a whole number of bytes' in message and says in message


def test_the_size_limit_is_s3s_single_put_limit() -> None:
    assert MAX_FILE_BYTES == MAX_SINGLE_PUT == 5 * 1024**3


def test_a_file_of_exactly_5_gib_may_be_uploaded(archive: S3FileStore) -> None:
    body = {"files": [{"path": "big.bin", "sha256": SHA, "size": MAX_FILE_BYTES}]}
    answer = api("POST", "/api/item/uploads", f"ibi={ITEM}", body)
    assert answer["statusCode"] == 200, answer["body"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        pytest.param({"path": 12, "sha256": SHA, "size": 1}, '"path" and "sha256" are strings'),
        pytest.param({"path": ["a"], "sha256": SHA, "size": 1}, '"path" and "sha256" are'),
        pytest.param({"path": "a", "sha256": 7, "size": 1}, '"path" and "sha256" are strings'),
        pytest.param({"path": "a\ud800", "sha256": SHA, "size": 1}, "U+D800"),
        pytest.param({"path": "a\x85b", "sha256": SHA, "size": 1}, "U+0085"),
        pytest.param({"path": "é" * 385, "sha256": SHA, "size": 1}, "at most 768 bytes"),
        pytest.param({"path": "a" * 769, "sha256": SHA, "size": 1}, "at most 768 bytes"),
        pytest.param(
            {"path": "a", "sha256": SHA, "size": 1, "content_type": "text/html\r\nX-A: b"},
            '"content_type" must be a media type',
        ),
        pytest.param(
            {"path": "a", "sha256": SHA, "size": 1, "content_type": "text/html\tx"},
            '"content_type" must be a media type',
        ),
        pytest.param(
            {"path": "a", "sha256": SHA, "size": 1, "content_type": 5},
            '"content_type" must be a media type',
        ),
    ],
)
def test_declared_files_are_checked_not_converted(
    archive: S3FileStore, entry: dict[str, Any], says: str
) -> None:
    message = refusal(api("POST", "/api/item/uploads", f"ibi={ITEM}", {"files": [entry]}))
    assert says in message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        pytest.param({"dc": {"title": "a\x00b"}}, "dc.title: character U+0000 at position 1"),
        pytest.param({"dc": {"title": ["ok", "\ud83d"]}}, "dc.title[1]: character U+D83D"),
        pytest.param({"dc": {"creator": "\x1b[31m"}}, "dc.creator: character U+001B"),
        pytest.param({"dc": {"title": "\uffff"}}, "U+FFFF"),
        pytest.param({"dc": {"title\x07": "x"}}, "a field name in dc: character U+0007"),
        pytest.param({"language": "p\u0000t"}, "language: character U+0000"),
        pytest.param({"language": 12}, '"language" must be a string'),
        pytest.param({"url": ["https://x"]}, '"url" must be a string'),
        pytest.param({"content_type": 1}, '"content_type" must be "Data" or "Metadata"'),
        pytest.param({"ibi": 12}, "an IBI is a label"),
        pytest.param({"ibi": {"rep": 12}}, "an IBI is a label"),
    ],
)
def test_metadata_with_unsafe_text_or_types_is_refused(
    archive: S3FileStore, body: dict[str, Any], says: str
) -> None:
    message = refusal(api("POST", "/api/items", body=body))
    assert says in message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        pytest.param({"dc": {"description": "a\ud800"}}, "U+D800"),
        pytest.param({"language": 7}, '"language" must be a string'),
        pytest.param({"default_file": 7}, '"default_file" must be a string'),
    ],
)
def test_updates_are_checked_as_deposits(
    archive: S3FileStore, body: dict[str, Any], says: str
) -> None:
    assert says in refusal(api("PATCH", "/api/item", f"ibi={ITEM}", body))


def test_a_translation_link_needs_string_fields(archive: S3FileStore) -> None:
    body = {"translation": {"language": "pt-BR", "url": 7}}
    message = refusal(api("POST", "/api/item/links", f"ibi={ITEM}", body))
    assert '"translation.url" must be a string' in message


def test_tab_and_line_breaks_stay_allowed_in_metadata(archive: S3FileStore) -> None:
    body = {"dc": {"description": "two\nlines\r\nand\ta tab"}}
    answer = api("PATCH", "/api/item", f"ibi={ITEM}", body)
    assert answer["statusCode"] == 200, answer["body"]


def test_a_record_stored_with_unsafe_text_is_still_well_formed_oai_dc(
    archive: S3FileStore,
) -> None:
    answer = check_answer(
        lambda_handler, event("GET", f"/metadata/{LEGACY}", "format=oai_dc"), json_api=False
    )
    assert answer["statusCode"] == 200
    record = ElementTree.fromstring(answer["body"].encode())
    title = record.find("{http://purl.org/dc/elements/1.1/}title")
    assert title is not None
    assert title.text == "Tab\tline\nbell\ufffd esc\ufffd nul\ufffd lone\ufffd surrogate \ufffd end"


def test_oai_dc_keeps_every_character_xml_can_carry() -> None:
    text = "é漢😀 <&> \t\n \x7f\x85"
    item = Item(
        ibi=Forms.of(ITEM), state=State.ORIGINAL, timestamp=Decimal(1), dc={"title": (text,)}
    )
    record = ElementTree.fromstring(oai_dc(item).encode())
    assert record.findtext("{http://purl.org/dc/elements/1.1/}title") == text


@pytest.mark.parametrize("path", [f"/metadata/{LEGACY}", f"/list/{LEGACY}"])
def test_pages_of_a_record_stored_with_a_lone_surrogate_can_be_sent(
    archive: S3FileStore, path: str
) -> None:
    answer = check_answer(lambda_handler, event("GET", path), json_api=False)
    assert answer["statusCode"] in {200, 404}
    answer["body"].encode("utf-8")


# ---------------------------------------------------------------------------- the fuzzers


# Most requests name an item the Archive holds, so that they get past the lookup.
item_queries = st.one_of(
    st.sampled_from([ITEM, ITEM, LEGACY, SERVICE.key]).map(lambda label: f"ibi={label}"),
    query_strings(["ibi", "limit", "after"], LABELS),
)


@FUZZ_MORE
@given(
    data=st.data(),
    route=st.sampled_from(API_ROUTES),
    query=item_queries,
    key=st.none() | st.sampled_from(["deposit-1"]) | texts,
)
def test_the_deposit_api_never_fails_with_a_500(
    archive: S3FileStore,
    data: st.DataObject,
    route: tuple[str, str],
    query: str,
    key: str | None,
) -> None:
    method, path = route
    fields = ROUTE_BODIES.get(route, objects(ANY_FIELDS))
    body = data.draw(bodies(fields), label="body")
    headers = {"content-type": "application/json"}
    if key is not None and key.isascii() and key.isprintable():
        headers["idempotency-key"] = key
    request = event(method, path, query, body=body, headers=headers)
    check_answer(lambda_handler, request, json_api=True, server_errors=frozenset({502, 503}))


@FUZZ
@given(
    prefix=st.sampled_from(["/col/", "/list/", "/metadata/", "/", "/api/", "/API/items/"]),
    rest=path_segments(LABELS),
    query=query_strings(["format", "servicesubject", "ibi"], ["oai_dc", "urlRequest"]),
    method=st.sampled_from(["GET", "GET", "HEAD", "POST", "OPTIONS"]),
    body=st.one_of(st.just(b""), json_values.map(lambda v: json.dumps(v).encode())),
)
def test_public_pages_never_fail_with_a_500(
    archive: S3FileStore, prefix: str, rest: str, query: str, method: str, body: bytes
) -> None:
    request = event(method, prefix + rest, query, body=body)
    json_api = prefix.startswith("/api/")
    check_answer(lambda_handler, request, json_api=json_api, file_types=("application/", "text/"))


PROTOCOL_NAMES = [
    "servicesubject",
    "clientinformation.ipaddress",
    "parsedibiurl.ibi",
    "parsedibiurl.verblist",
    "parsedibiurl.metadatafieldlist",
    "urlkey",
    "requiredsite",
]
PROTOCOL_VALUES = [
    "urlRequest",
    "inclusionConfirmation",
    "acknowledgment",
    "GetFileList",
    "1.2.3.4",
    ITEM,
    LEGACY,
]


@FUZZ
@given(query=query_strings(PROTOCOL_NAMES, PROTOCOL_VALUES))
def test_the_service_protocol_never_fails_with_a_500(archive: S3FileStore, query: str) -> None:
    request = event("GET", f"/{SERVICE.key}", query)
    answer = check_answer(lambda_handler, request, json_api=False)
    assert answer["headers"]["Content-Type"].startswith("text/plain")


# The protocol's own inputs, built as a resolver (or a confused one) sends them: verb lists in
# any order, with parameters good and bad, separated by spaces or '+'; modifiers where verbs
# belong; file paths with and without their leading slash; IBIs in both forms; the pairs of an
# acknowledgment (issue 12, finding 6).
VERBS = [
    "GetLastEdition",
    "GetTranslation",
    "GetTranslation(pt-BR)",
    "GetTranslation(pt)",
    "GetTranslation(xx-yy-zz)",
    "GetTranslation()",
    "GetMetadata",
    "GetMetadata(oai_dc)",
    "GetMetadata(marc)",
    "GetFileList",
    "getlastedition",
    "GetNothing",
    "!",
    ":(oai_dc)",
    "+(pt-BR)",
    ".lastedition",
]
verb_lists = st.builds(
    lambda verbs, separator: separator.join(verbs),
    st.lists(st.sampled_from(VERBS) | texts, max_size=5),
    st.sampled_from([" ", "+", "  ", " + ", ","]),
)
PROTOCOL_PAIRS: dict[str, st.SearchStrategy[str]] = {
    "servicesubject": st.sampled_from(["urlRequest", "acknowledgment"]) | texts,
    "clientinformation.ipaddress": st.sampled_from(["1.2.3.4", "1.2.3.4 5.6.7.8", ""]) | texts,
    "parsedibiurl.ibi": st.sampled_from(LABELS) | texts,
    "parsedibiurl.verblist": verb_lists,
    "parsedibiurl.filepath": st.sampled_from(["/hello.txt", "hello.txt", "//", "/../x", ""])
    | texts,
    "urlkey": st.sampled_from(["1426387214-9164566186556927", ""]) | texts,
    "url": st.sampled_from([f"https://api.example.org/col/{ITEM}/hello.txt"]) | texts,
    "ibi": st.sampled_from([f"ibip {ITEM}", ITEM, "rep"]) | texts,
}


@st.composite
def protocol_requests(draw: st.DrawFn) -> str:
    names = draw(st.lists(st.sampled_from(sorted(PROTOCOL_PAIRS)), max_size=8))
    pairs = [("servicesubject", draw(PROTOCOL_PAIRS["servicesubject"]))]
    pairs += [(name, draw(PROTOCOL_PAIRS[name], label=name)) for name in names]
    return "&".join(
        f"{quote(k, errors='surrogatepass')}={quote(v, safe=' /', errors='surrogatepass')}"
        for k, v in pairs
    )


@FUZZ_MORE
@given(query=protocol_requests())
def test_every_protocol_request_gets_a_pair_list_never_a_500(
    archive: S3FileStore, query: str
) -> None:
    request = event("GET", f"/{SERVICE.key}", query)
    answer = check_answer(lambda_handler, request, json_api=False)
    assert answer["headers"]["Content-Type"].startswith("text/plain")
    assert answer["statusCode"] in {200, 400}, answer["body"]
    text = answer["body"]
    if answer["statusCode"] == 400:
        assert text.startswith("error {") or text.startswith("error "), text
    else:
        parse_pair_list(text)  # whatever was asked, a pair list of the spec
        if "servicesubject=acknowledgment" in query.split("&"):
            assert text.strip() == "notice {acknowledgment received}"


@pytest.mark.parametrize(
    "verbs",
    [
        "GetMetadata GetLastEdition",
        "GetMetadata+GetTranslation+GetLastEdition",
        "! :",
        "GetFileList GetFileList GetMetadata GetMetadata",
    ],
)
def test_a_verb_order_outside_the_14_modifiers_is_refused_with_an_error_pair(
    archive: S3FileStore, verbs: str
) -> None:
    query = (
        "servicesubject=urlRequest&clientinformation.ipaddress=1.2.3.4"
        f"&parsedibiurl.ibi={ITEM}&parsedibiurl.verblist={quote(verbs)}"
    )
    answer = check_answer(lambda_handler, event("GET", f"/{SERVICE.key}", query), json_api=False)
    assert answer["statusCode"] == 400 and parse_pair_list(answer["body"]).words("error")


@pytest.mark.parametrize(
    ("status", "refusal"),
    [(400, BadRequest), (404, BadRequest), (422, BadRequest), (429, Unavailable), (0, Unavailable)],
)
def test_a_minting_refusal_is_the_depositors_400_or_a_503(
    monkeypatch: pytest.MonkeyPatch, status: int, refusal: type[Exception]
) -> None:
    """In AWS an Archive mints through the minting API: its errors must not become 500s."""
    from ibi.client import ApiError, MintingClient

    def refuse(self: MintingClient, **_: Any) -> dict[str, Any]:
        raise ApiError(status, "no identification subsystem is named 'nope'", "UnknownSubsystem")

    monkeypatch.setattr(MintingClient, "mint", refuse)
    mint = wiring.mint_through("https://mint.example.org", None)
    with pytest.raises(refusal, match="minting service"):
        mint("nope", None)


@pytest.mark.parametrize(
    ("route", "extra"),
    [
        ("/api/item/uploads", {"default_file": "a.txt"}),  # takes "files" only
        ("/api/item/uploads", {"x-unknown": 42}),
        ("/api/item/files", {"reason": "r"}),  # takes "files" and "default_file"
    ],
)
def test_a_files_body_with_a_field_it_does_not_take_is_refused(
    archive: S3FileStore, route: str, extra: dict[str, object]
) -> None:
    """As the OpenAPI document says (additionalProperties: false; Schemathesis, issue 15)."""
    body = {"files": [{"path": "a.txt", "sha256": SHA, "size": 1}], **extra}
    answer = api("POST", route, f"ibi={ITEM}", body)
    assert answer["statusCode"] == 400 and "unknown fields" in answer["body"], answer["body"]
