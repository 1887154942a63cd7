"""The corpus (tests/corpus_files.py) through the deposit API, over moto's S3 and SeaweedFS.

The Archive's real handler in process, its items in local mode's tables, its files in moto's
S3 server (as AWS S3 answers) or in local mode's SeaweedFS, each on loopback, so that each
presigned PUT and GET is a real request (issue 23: names with ``; , # ? & + =`` could not be
published on s3rver, local mode's S3 before SeaweedFS). Every file is announced, sent through
its presigned URL, committed, then
fetched back as the persistent URL leads to it (the service protocol's ``urlRequest`` with
``parsedibiurl.filepath``, the URL it answers, then S3's presigned URL for a large file): the
same bytes, its type, an attachment unless its type is shown inline.
``tests/e2e/test_corpus.py`` deposits the same corpus on a running ``ibi local``, through
``ibi deposit`` and the resolver.
"""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import boto3
import pytest
from botocore.config import Config
from moto.server import ThreadedMotoServer

from functions.archive import wiring
from functions.archive.files import S3FileStore
from functions.archive.handler import lambda_handler
from functions.archive.service import ArchiveService
from functions.archive.settings import ArchiveSettings
from functions.archive.store import DynamoItemStore, ensure_table
from functions.archive.wiring import Runtime
from ibi.core.pairlist import encode_query, parse_pair_list
from ibi_tools.local.gateway import LocalContext
from ibi_tools.local.s3 import LocalS3
from ibi_tools.local.stores import LOOPBACK, free_port, free_ports
from ibi_tools.local.tables import LocalTables
from tests.corpus_files import IMPOSSIBLE, CorpusFile, corpus
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryMinter
from tests.fuzzing import event

SIGV4 = Config(signature_version="s3v4", s3={"addressing_style": "path"})
BASE = "http://api.example.org"  # the host (and scheme) tests.fuzzing.event sends


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address=LOOPBACK, port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def local_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    with LocalS3(tmp_path_factory.mktemp("corpus-s3") / "s3", port=free_ports(10)) as server:
        yield server


def s3_client(backend: str, request: pytest.FixtureRequest) -> Any:
    if backend == "seaweedfs":
        return request.getfixturevalue("local_s3").client()
    return boto3.client(
        "s3",
        endpoint_url=request.getfixturevalue("moto_s3"),
        region_name="us-east-1",
        config=SIGV4,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture(params=["moto-server", "seaweedfs"])
def archive(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    """The Archive over moto's S3 server (as AWS S3 answers) or local mode's SeaweedFS."""
    dynamodb = LocalTables(tmp_path / "tables.sqlite3").client()
    ensure_table(dynamodb, "archive-items")
    s3 = s3_client(request.param, request)
    bucket = f"corpus-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    clock = FakeClock(Decimal(1795473000))
    store = DynamoItemStore(dynamodb, "archive-items")
    runtime = Runtime(
        service=ArchiveService(store, clock=clock, mint=MemoryMinter()),
        store=store,
        settings=ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "archive-items"}),
        clock=clock,
        # moto keeps the checksum a client claims without checking it: hash what arrived
        files=S3FileStore(s3, bucket, trust_stored_checksum=False),
    )
    wiring.install(runtime)
    yield runtime
    wiring.uninstall()


def call(method: str, path: str, body: Any = None, query: str = "") -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    answer: dict[str, Any] = lambda_handler(
        event(method, path, query, body=data, headers={"content-type": "application/json"}),
        LocalContext("archive", "t"),
    )
    return answer


def fetch(url: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> Any:
    method = "GET" if data is None else "PUT"
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    return urllib.request.urlopen(request, timeout=60)


def deposit(files: list[CorpusFile]) -> str:
    """What ``ibi deposit`` does through the API: create, announce, PUT each, commit."""
    created = call("POST", "/api/items", {})
    assert created["statusCode"] == 201, created["body"]
    label = str(json.loads(created["body"])["ibi"]["ibip"])
    declared = [
        {
            "path": file.path,
            "sha256": hashlib.sha256(file.data).hexdigest(),
            "size": len(file.data),
            "content_type": file.content_type,
        }
        for file in files
    ]
    granted = call("POST", "/api/item/uploads", {"files": declared}, f"ibi={label}")
    assert granted["statusCode"] == 200, granted["body"]
    uploads = json.loads(granted["body"])["uploads"]
    assert [upload["path"] for upload in uploads] == [file.path for file in files]
    for upload, file in zip(uploads, files, strict=True):
        with fetch(upload["url"], upload["headers"], file.data) as answer:
            assert answer.status == 200, file.path
    committed = call("POST", "/api/item/files", {"files": declared}, f"ibi={label}")
    assert committed["statusCode"] == 200, committed["body"]
    return label


def service_ibi() -> str:
    return str(json.loads(call("GET", "/api/service")["body"])["archiveserviceibi"]["ibip"])


def located(label: str, path: str) -> str:
    """Where the persistent URL ``/<label>/<path>`` leads: the URL the Archive answers the
    resolver's ``urlRequest`` with (``parsedibiurl.filepath`` as the resolver sends it)."""
    query = encode_query(
        [
            ("servicesubject", "urlRequest"),
            ("clientinformation.ipaddress", "198.51.100.7"),
            ("parsedibiurl.ibi", label),
            ("parsedibiurl.filepath", "/" + path),
        ]
    )
    answer = call("GET", f"/{service_ibi()}", query=query)
    assert answer["statusCode"] == 200, answer["body"]
    url = parse_pair_list(answer["body"]).word("url")
    assert url is not None, f"no URL for {path!r}: {answer['body']}"
    return url


def check_served(label: str, file: CorpusFile) -> None:
    url = located(label, file.path)
    assert url.startswith(f"{BASE}/col/"), url
    assert urlsplit(url).path == f"/col/{label}/{quote(file.path)}"
    answer = call("GET", urlsplit(url).path)
    headers = answer["headers"]
    if answer["statusCode"] == 302:  # a large file: S3's presigned URL, saved as the file
        with fetch(headers["Location"]) as got:
            assert got.read() == file.data, file.path
            assert got.headers["Content-Type"] == file.content_type
            assert got.headers["Content-Disposition"].startswith("attachment;")
        return
    assert answer["statusCode"] == 200, (file.path, answer["body"][:300])
    body = base64.b64decode(answer["body"]) if answer["isBase64Encoded"] else answer["body"]
    assert body == file.data, file.path
    assert headers["Content-Type"] == file.content_type, file.path
    disposition = headers.get("Content-Disposition", "")
    assert disposition.startswith("attachment;") != file.inline, (file.path, disposition)
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_the_corpus_deposited_through_the_api_is_served_back_byte_for_byte(
    archive: Runtime,
) -> None:
    files = corpus(large=True)
    assert len(files) >= 60
    label = deposit(files)
    item = json.loads(call("GET", "/api/item", query=f"ibi={label}")["body"])
    assert sorted(f["path"] for f in item["files"]) == sorted(f.path for f in files)
    for file in files:
        check_served(label, file)


@pytest.mark.parametrize("name", sorted(IMPOSSIBLE), ids=repr)
def test_an_impossible_name_is_refused_with_a_400_naming_the_file(
    archive: Runtime, name: str
) -> None:
    created = call("POST", "/api/items", {})
    label = json.loads(created["body"])["ibi"]["ibip"]
    declared = [{"path": name, "sha256": "0" * 64, "size": 1, "content_type": "text/plain"}]
    answer = call("POST", "/api/item/uploads", {"files": declared}, f"ibi={label}")
    assert answer["statusCode"] == 400
    assert repr(name)[1:-1] in json.loads(answer["body"])["error"]["message"]
