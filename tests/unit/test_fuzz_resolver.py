"""The resolver's Lambda under fuzzed requests: persistent URLs (``GET /<anything>``), the
landing page, ``/inspect``, ``/status``, the registration protocol's query strings, and the
administration API (issue 11, finding 8).

The real handler over its real registry (DynamoDB through moto, in-process); the transport to
the Archives is scripted (no socket, no DNS): one registered Archive answers ``Original``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from functions.resolver import handler, wiring
from functions.resolver.network import Outcome, Request
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.core.errors import InvalidInput
from ibi.defaults import RESOLVER_SERVICE_IBI
from tests.fakes_resolver import ScriptedTransport
from tests.fuzzing import (
    FUZZ,
    bodies,
    check_answer,
    event,
    objects,
    path_segments,
    query_strings,
    texts,
)

ARCHIVE = "8JMKD3MGP8W/3FSUP4L"
KEY = "1234567890-0987654321"
LABELS = [
    "8JMKD3MGP8W/35MME4E",
    "8JMKD3MGP8W/35MMLL8!:(oai_dc)",
    "LK47B6W/362SFKH",
    "sid.inpe.br/mtc-m18/2009/07.21.13.23",
    ARCHIVE,
    RESOLVER_SERVICE_IBI,
]
ORIGINAL = (
    "state Original\r\nibi {ibip 8JMKD3MGP8W/35MME4E}\r\n"
    "url https://archive.example.org/col/8JMKD3MGP8W/35MME4E\r\n"
)
INCLUSION = (
    f"servicesubject=inclusionRequest&archiveaddress=archive.example.org&archiveserviceibi={ARCHIVE}"
    "&archiveip=192.0.2.20&archiveprotocol=HTTPS&archiveplatformversion=ibi-0.1"
    f"&archiveadmemailaddress=admin%40example.org&registrationkey={KEY}"
)
SWITCH_NAMES = [
    "servicesubject",
    "archiveaddress",
    "archiveserviceibi",
    "archiveip",
    "archiveprotocol",
    "archiveplatformversion",
    "archiveadmemailaddress",
    "registrationkey",
]
SWITCH_VALUES = [
    "inclusionRequest",
    "exclusionRequest",
    "archive.example.org",
    ARCHIVE,
    "192.0.2.20",
    "HTTPS",
    KEY,
    "admin@example.org",
]


class Archives(ScriptedTransport):
    """The scripted Archives, with a malformed answer a failed outcome, as ``ArchiveTransport``
    reports it (the fake would raise)."""

    def _outcome(self, key: str, request: Request | None, settled: bool) -> Outcome:
        try:
            return super()._outcome(key, request, settled)
        except InvalidInput as error:
            return Outcome.failed(key, f"malformed answer: {error}", 0.0)


@pytest.fixture(scope="module")
def resolver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScriptedTransport]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, "resolver")
        pepper = tmp_path_factory.mktemp("resolver") / "pepper"
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(pepper)}
        )
        runtime = wiring.build(settings, dynamodb=client)
        scripted = Archives(answers={ARCHIVE: ORIGINAL})
        for name in ("vet", "send", "ask_all"):  # the only network the resolver has
            setattr(runtime.transport, name, getattr(scripted, name))
        wiring.install(runtime)
        registered = invoke(
            "POST",
            "/admin/archives",
            body=json.dumps({"archiveserviceibi": ARCHIVE, "registrationkey": KEY}).encode(),
        )
        assert registered["statusCode"] == 200, registered["body"]
        included = invoke("GET", "/" + RESOLVER_SERVICE_IBI, INCLUSION)
        assert included["body"].startswith("status.archive included"), included["body"]
        try:
            yield scripted
        finally:
            wiring.install(None)


def invoke(method: str, path: str, query: str = "", body: bytes = b"", **headers: str) -> Any:
    """The answer, checked; a JSON route's as JSON (another method gets the not-found page)."""
    request = event(method, path, query, body=body, headers=headers)
    json_route = (path == "/admin/archives" and method in {"GET", "POST"}) or path == "/inspect"
    return check_answer(
        handler.lambda_handler,
        request,
        json_api=json_route,
        server_errors=frozenset({502, 503, 504}),
    )


def test_a_registration_body_past_the_json_limits_is_a_400(resolver: ScriptedTransport) -> None:
    for body in (b"[" * 50_000 + b"]" * 50_000, b'{"archiveserviceibi": ' + b"1" * 5000 + b"}"):
        answer = invoke("POST", "/admin/archives", body=body)
        assert answer["statusCode"] == 400
        assert json.loads(answer["body"])["error"]["code"] == "BadRequest"


@FUZZ
@given(
    rest=path_segments(LABELS),
    query=query_strings(["ibiurl.verblist", "ibiurl.language", "ibi"], ["GetFileList", "pt-BR"]),
    method=st.sampled_from(["GET", "GET", "HEAD"]),
    accept=st.sampled_from(["text/html", "text/plain", "*/*", ""]) | texts.filter(str.isprintable),
)
def test_persistent_urls_never_fail_with_a_500(
    resolver: ScriptedTransport, rest: str, query: str, method: str, accept: str
) -> None:
    headers = {"accept": accept} if accept.isascii() else {}
    invoke(method, "/" + rest, query, **headers)


@FUZZ
@given(
    path=st.sampled_from(["/", "/status", "/inspect", "/favicon.ico", "/admin/archives"]),
    query=query_strings(["ibi", "format"], LABELS),
    accept=st.sampled_from(["text/html", "text/plain", "application/json", ""]),
    forwarded=st.sampled_from(["", "198.51.100.7", "::1, 10.0.0.1", "x" * 300]) | texts,
)
def test_the_resolvers_pages_never_fail_with_a_500(
    resolver: ScriptedTransport, path: str, query: str, accept: str, forwarded: str
) -> None:
    headers = {"accept": accept}
    if forwarded.isascii() and forwarded.isprintable():
        headers["x-forwarded-for"] = forwarded
    invoke("GET", path, query, **headers)


@FUZZ
@given(query=query_strings(SWITCH_NAMES, SWITCH_VALUES))
def test_registration_query_strings_never_fail_with_a_500(
    resolver: ScriptedTransport, query: str
) -> None:
    answer = invoke("GET", "/" + RESOLVER_SERVICE_IBI, query)
    assert answer["headers"]["Content-Type"].startswith("text/plain")


@FUZZ
@given(
    body=bodies(
        objects({"archiveserviceibi": st.sampled_from(LABELS) | texts, "registrationkey": texts})
    ),
    method=st.sampled_from(["POST", "GET", "PUT", "DELETE"]),
)
def test_the_administration_api_never_fails_with_a_500(
    resolver: ScriptedTransport, body: bytes, method: str
) -> None:
    invoke(method, "/admin/archives", body=body)


ARCHIVE_WORDS = ["state", "Original", "Copy", "Deleted", "url", "ibi", "{", "}", "timestamp"]


@FUZZ
@given(
    answer=st.one_of(
        st.lists(st.sampled_from(ARCHIVE_WORDS) | texts, max_size=12).map(" ".join),
        st.sampled_from([ORIGINAL, ORIGINAL.replace("https://", "javascript:")]),
        texts,
    ),
    rest=st.sampled_from(LABELS) | path_segments(LABELS),
)
def test_whatever_an_archive_answers_resolution_never_fails_with_a_500(
    resolver: ScriptedTransport, answer: str, rest: str
) -> None:
    resolver.answers[ARCHIVE] = answer
    try:
        invoke("GET", "/" + rest)
    finally:
        resolver.answers[ARCHIVE] = ORIGINAL
