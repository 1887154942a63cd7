"""Issue 23 through the real handlers: malformed requests get a 4xx saying what to send (the
Archive over moto); a reader of a damaged original, following redirects from the persistent
URL, ends at the good copy and never sees a 5xx (a resolver and two Archives on loopback).

The pieces in memory: ``tests/unit/test_archive_robustness.py``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws

from functions.archive import wiring
from functions.archive.content import ContentService
from functions.archive.files import S3FileStore
from functions.archive.handler import lambda_handler
from functions.archive.model import Forms
from functions.archive.service import ArchiveService
from functions.archive.settings import ArchiveSettings
from functions.archive.store import DynamoItemStore, ensure_table
from functions.archive.views import ArchiveViews
from ibi import defaults
from ibi.client import ResolverClient
from ibi.core.pairlist import encode_query
from ibi_tools.local.gateway import LocalContext, LocalGateway
from ibi_tools.local.stores import free_port
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore, MemoryMinter
from tests.fuzzing import event

SERVICE = Forms(ibip="8JMKD3MGP8W/3FSUP4L")
OTHER_SERVICE = Forms(ibip="LK47B6W/362SFKH")
ITEM = "8JMKD3MGP8W/35MME4E"
REPORT = b"The report, as deposited.\n"
KEY = "1234567890-0987654321"
OAI = "{http://www.openarchives.org/OAI/2.0/}"

# ---------------------------------------------------------------------------- malformed requests


@pytest.fixture(scope="module")
def archive() -> Iterator[None]:
    """The Archive's handler over moto, with the transfers' own receivers (no network)."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        s3 = boto3.client("s3", region_name="us-east-1", config=Config(signature_version="s3v4"))
        ensure_table(dynamodb, "archive-items")
        s3.create_bucket(Bucket="archive-files")
        store = DynamoItemStore(dynamodb, "archive-items")
        store.claim_service_item(SERVICE)
        clock = FakeClock(Decimal(1795473000))
        service = ArchiveService(
            store, clock=clock, mint=MemoryMinter(), own_prefixes={"8JMKD3MGP8W"}
        )
        service.create_original({"ibi": ITEM})
        wiring.install(
            wiring.Runtime(
                service=service,
                store=store,
                settings=ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "archive-items"}),
                clock=clock,
                files=S3FileStore(s3, "archive-files", trust_stored_checksum=False),
            )
        )
        yield
        wiring.uninstall()


def call(method: str, path: str, query: str = "", body: bytes = b"") -> dict[str, Any]:
    request = event(method, path, query, body=body, headers={"content-type": "application/json"})
    answer: dict[str, Any] = lambda_handler(request, LocalContext("archive", "t"))
    if answer.get("isBase64Encoded"):
        answer["body"] = base64.b64decode(answer["body"]).decode()
    return answer


def test_an_oai_form_body_that_is_not_utf8_is_a_400_saying_what_to_send(archive: None) -> None:
    answer = call("POST", "/oai", body=b"verb=Identify&set=\x81")
    assert answer["statusCode"] == 400, answer["body"]
    assert answer["headers"]["Content-Type"].startswith("text/xml")
    error = ElementTree.fromstring(answer["body"]).find(f"{OAI}error")
    assert error is not None and error.get("code") == "badArgument"
    assert "not UTF-8" in str(error.text) and "application/x-www-form-urlencoded" in str(error.text)
    fine = call("POST", "/oai", body=b"verb=Identify")
    assert fine["statusCode"] == 200 and "<Identify>" in fine["body"]


def test_a_transfer_to_a_url_no_parser_reads_is_a_400(archive: None) -> None:
    sent = json.dumps({"to": "http://[::1"}).encode()
    answer = call("POST", "/api/item/transfer", f"ibi={ITEM}", sent)
    assert answer["statusCode"] == 400, answer["body"]
    error = json.loads(answer["body"])["error"]
    assert error["code"] == "BadRequest" and "is not a URL" in error["message"]
    assert "https://host" in error["message"]


@pytest.mark.parametrize("offer", ["ibioffer1.gYGB.AAAA", "ibioffer1.!!!!.AAAA", "ibioffer1.x"])
def test_an_offer_that_does_not_decode_is_a_422_saying_what_to_send(
    archive: None, offer: str
) -> None:
    answer = call("POST", "/api/transfers/accept", body=json.dumps({"offer": offer}).encode())
    assert answer["statusCode"] == 422, answer["body"]
    message = json.loads(answer["body"])["error"]["message"]
    assert "`ibi archive offer` printed" in message and "codec" not in message


# ---------------------------------------------------------------------------- a damaged original


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers={"Accept": "text/html"})
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def follow(url: str) -> list[tuple[int, str]]:
    """A browser from ``url`` on: (status, URL) of every answer until one is not a redirect."""
    seen: list[tuple[int, str]] = []
    for _ in range(8):
        status, headers, _ = get(url)
        seen.append((status, url))
        if status not in {301, 302, 303, 307, 308}:
            return seen
        url = {k.lower(): v for k, v in headers.items()}["location"]
    raise AssertionError(f"a redirect loop: {seen}")


def start_resolver(tables: Any, tmp_path: Path) -> LocalGateway:
    from functions.resolver import wiring as resolver_wiring
    from functions.resolver.settings import ResolverSettings

    resolver_wiring.ensure_tables(tables.client(), "resolver")
    settings = ResolverSettings.from_environment(
        {
            "IBI_RESOLVER_TABLE": "resolver",
            "IBI_PEPPER_FILE": str(tmp_path / "pepper"),
            "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
            "IBI_ARCHIVE_TIMEOUT_SECONDS": "2",
            "IBI_RESOLUTION_DEADLINE_SECONDS": "4",
            "IBI_ORIGINAL_GRACE_MS": "500",
        }
    )

    def handler() -> Any:  # in the worker
        from functions.resolver.handler import lambda_handler as resolve

        resolver_wiring.install(resolver_wiring.build(settings, dynamodb=tables.client()))
        return resolve

    return LocalGateway("resolver", handler, free_port(), workers=2).start()


def start_archive(
    name: str, service: Forms, tables: Any, resolver: str, *, state: str, damaged: bool
) -> LocalGateway:
    """An Archive holding ``ITEM`` (``state``: original or copy) in a table of local mode's tables, its
    file in memory (one worker: the fork's copy is the only one); ``damaged``: bit rot."""
    table, port = f"{name}-items", free_port()
    ensure_table(tables.client(), table)
    store = DynamoItemStore(tables.client(), table)
    store.claim_service_item(service)
    files = MemoryFileStore()
    deposit = ArchiveService(
        store, clock=FakeClock(Decimal(1795473000)), own_prefixes={"8JMKD3MGP8W"}
    )
    if state == "original":
        deposit.create_original({"ibi": ITEM})
    else:
        deposit.add_copy({"ibi": ITEM})
    files.upload(ITEM, "report.txt", REPORT)
    declared = {
        "path": "report.txt",
        "sha256": hashlib.sha256(REPORT).hexdigest(),
        "size": len(REPORT),
    }
    content = ContentService(
        deposit, views=ArchiveViews("http://x"), files=files, serve_inline_bytes=1 << 20
    )
    content.commit_files(ITEM, {"files": [declared]})
    if damaged:
        files.files[(ITEM, "report.txt")] = REPORT.replace(b"report", b"rep0rt")
    settings = ArchiveSettings.from_environment(
        {
            "IBI_ARCHIVE_TABLE": table,
            "IBI_ARCHIVE_BASE_URL": f"http://127.0.0.1:{port}",
            "IBI_RESOLVER_URL": resolver,
            "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
        }
    )

    def handler() -> Any:  # in the worker
        from functions.archive.handler import lambda_handler as serve

        runtime = wiring.build(settings, dynamodb=tables.client())
        runtime.files = files
        wiring.install(runtime)
        return serve

    return LocalGateway(name, handler, port, workers=1).start()


def include(resolver: str, service: Forms, archive: LocalGateway) -> None:
    ResolverClient(resolver, sign=False).register(str(service.ibip), KEY, share_prefix=True)
    pairs = [
        ("servicesubject", "inclusionRequest"),
        ("archiveaddress", archive.url.split("://", 1)[1]),
        ("archiveserviceibi", str(service.ibip)),
        ("archiveip", "127.0.0.1"),
        ("archiveprotocol", "HTTP"),
        ("archiveplatformversion", "ibi-test"),
        ("archiveadmemailaddress", "admin@example.org"),
        ("registrationkey", KEY),
    ]
    status, _, body = get(f"{resolver}/{defaults.RESOLVER_SERVICE_IBI}?{encode_query(pairs)}")
    assert status == 200 and b"status.archive included" in body, body


@pytest.mark.parametrize("good_copy", [True, False], ids=["good-copy", "no-good-copy"])
def test_a_reader_of_a_damaged_original_never_sees_a_5xx_while_a_good_copy_exists(
    local_tables: Any, tmp_path: Path, good_copy: bool
) -> None:
    tables, _ = local_tables
    gateways = [resolver := start_resolver(tables, tmp_path)]
    try:
        a = start_archive("a", SERVICE, tables, resolver.url, state="original", damaged=True)
        gateways.append(a)
        include(resolver.url, SERVICE, a)
        if good_copy:
            b = start_archive("b", OTHER_SERVICE, tables, resolver.url, state="copy", damaged=False)
            gateways.append(b)
            include(resolver.url, OTHER_SERVICE, b)
        first = follow(f"{resolver.url}/{ITEM}")
        if good_copy:
            assert [status for status, _ in first] == [302, 307, 302, 200], first
            assert first[1][1].startswith(f"{a.url}/col/{ITEM}")
            assert first[-1][1].startswith(f"{b.url}/col/{ITEM}")
            status, _, body = get(first[-1][1])
            assert status == 200 and body == REPORT
            later = follow(f"{resolver.url}/{ITEM}")  # the resolver goes to the copy at once
            assert [status for status, _ in later] == [302, 200], later
        else:  # the styled page, once; then the damaged item is offered to no one
            assert [status for status, _ in first] == [302, 500], first
            _, headers, page = get(first[-1][1])
            assert b"integrity check" in page and "content-security-policy" in headers
            assert [status for status, _ in follow(f"{resolver.url}/{ITEM}")] == [404]
    finally:
        for gateway in gateways:
            gateway.shutdown()
