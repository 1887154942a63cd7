"""A deposited file's bytes, served as they are whatever their type (issue 23, item 1), and
what ``ibi deposit`` declares and does when the files of a new item fail (item 2).

The Archive's real handler over in-memory stores: every ``application/json`` file answered
500, because Powertools serialises as JSON a body that is not a ``str`` when the content type
starts with ``application/json``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from functions.archive import wiring
from functions.archive.handler import lambda_handler
from functions.archive.service import ArchiveService
from functions.archive.settings import ArchiveSettings
from functions.archive.wiring import Runtime
from functions.shared import edge
from ibi import client as ibi_client
from ibi_tools.cli.common import read_upload
from ibi_tools.local.gateway import LocalContext
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore, MemoryItemStore, MemoryMinter
from tests.fuzzing import event
from tests.unit.test_cli_commands import ITEM, REAL, A, Federation, run

DEPOSITOR = "anonymous:198.51.100.7"  # who the events below come from
JSON_FILE = b'{"station": "Cachoeira Paulista", "rain_mm": [0.0, 12.5]}\n'

# (path, content type, bytes): JSON and its relatives, and types Powertools never touched.
FILES = [
    ("data.json", "application/json", JSON_FILE),
    ("utf8.json", "application/json; charset=utf-8", '{"nome": "São José"}'.encode()),
    ("empty.json", "application/json", b""),
    ("not-json.json", "application/json", b"\xff\xfe not even UTF-8"),
    ("records.jsonl", "application/jsonl", b'{"a": 1}\n{"a": 2}\n'),
    ("seq.json-seq", "application/json-seq", b'\x1e{"a": 1}\n'),
    ("context.jsonld", "application/ld+json", b'{"@context": "https://schema.org/"}'),
    ("table.csv", "text/csv", b"a,b\n1,2\n"),
    ("page.xml", "application/xml", b"<?xml version='1.0'?><a/>"),
    ("blob.bin", "application/octet-stream", bytes(range(256))),
]


@pytest.fixture
def archive() -> Iterator[Runtime]:
    """The Archive's handler over memory stores (no AWS, no socket), an item holding FILES."""
    store = MemoryItemStore()
    files = MemoryFileStore()
    clock = FakeClock(Decimal(1795473000))
    runtime = Runtime(
        service=ArchiveService(store, clock=clock, mint=MemoryMinter()),
        store=cast(Any, store),
        settings=ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "archive-items"}),
        clock=clock,
        files=files,
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


def deposited(runtime: Runtime) -> str:
    """An original holding FILES (uploaded to the memory store, then committed); its IBI."""
    created = call("POST", "/api/items", {})
    assert created["statusCode"] == 201, created["body"]
    label = json.loads(created["body"])["ibi"]["ibip"]
    store = cast(MemoryFileStore, runtime.files)
    declared = []
    for path, content_type, data in FILES:
        sha256 = hashlib.sha256(data).hexdigest()
        store.upload(label, path, data)
        declared.append(
            {"path": path, "sha256": sha256, "size": len(data), "content_type": content_type}
        )
    committed = call("POST", "/api/item/files", {"files": declared}, f"ibi={label}")
    assert committed["statusCode"] == 200, committed["body"]
    return str(label)


def served(answer: dict[str, Any]) -> bytes:
    body = answer["body"]
    return base64.b64decode(body) if answer["isBase64Encoded"] else str(body).encode()


@pytest.mark.parametrize(("path", "content_type", "data"), FILES, ids=[f[0] for f in FILES])
def test_a_file_is_served_with_its_own_bytes_and_type_whatever_the_type(
    archive: Runtime, path: str, content_type: str, data: bytes
) -> None:
    label = deposited(archive)
    answer = call("GET", f"/col/{label}/{path}")
    assert answer["statusCode"] == 200, answer["body"]
    assert answer["headers"]["Content-Type"] == content_type
    assert served(answer) == data
    assert answer["headers"]["ETag"] == f'"{hashlib.sha256(data).hexdigest()}"'


def test_a_json_file_answers_a_head_request(archive: Runtime) -> None:
    label = deposited(archive)
    answer = call("HEAD", f"/col/{label}/data.json")
    assert answer["statusCode"] == 200, answer["body"]
    assert answer["headers"]["Content-Type"] == "application/json"


def test_a_json_default_file_is_served_at_the_items_own_url(archive: Runtime) -> None:
    label = deposited(archive)
    default = call("PATCH", "/api/item", {"default_file": "data.json"}, f"ibi={label}")
    assert default["statusCode"] == 200, default["body"]
    answer = call("GET", f"/col/{label}")
    assert answer["statusCode"] == 200 and served(answer) == JSON_FILE


def test_bytes_response_sends_json_bytes_unchanged() -> None:
    app = APIGatewayHttpResolver()

    @app.get("/file")
    def file() -> Any:
        return edge.bytes_response(
            200, JSON_FILE, content_type="application/json", headers={"ETag": '"x"'}
        )

    answer = app.resolve(event("GET", "/file"), LocalContext("archive", "t"))
    assert answer["statusCode"] == 200 and answer["isBase64Encoded"] is True
    assert base64.b64decode(answer["body"]) == JSON_FILE
    assert answer["headers"] == {"Content-Type": "application/json", "ETag": '"x"'}


def test_the_other_json_answers_are_still_serialised() -> None:
    answer = edge.json_response(200, {"a": [1, 2]})
    assert answer.is_json() and answer.body == '{"a": [1, 2]}'


# -- what ibi deposit declares, and a deposit whose files fail -------------------------------


@pytest.mark.parametrize(
    ("name", "declared"),
    [
        ("data.csv.gz", "application/gzip"),
        ("release-1.0.tar.gz", "application/gzip"),
        ("dump.sql.bz2", "application/x-bzip2"),
        ("grid.nc.xz", "application/x-xz"),
        ("data.json", "application/json"),
        ("table.csv", "text/csv"),
        ("no-extension", "application/octet-stream"),
    ],
)
def test_ibi_deposit_declares_a_compressed_file_as_what_it_is(
    tmp_path: Path, name: str, declared: str
) -> None:
    (tmp_path / name).write_bytes(b"")
    assert read_upload(tmp_path / name, name)[2] == declared


class RefusingUploads(Federation):
    """An Archive that creates the item, then refuses the announced files (a name, say)."""

    def answer(self, method: str, path: str, body: Any) -> Any:
        if (method, path) == ("POST", "/api/item/uploads"):
            message = "\"files\": 'a\\\\b.txt' is not a relative file path inside the item"
            return self.json({"error": {"code": "BadRequest", "message": message}}, 400)
        return super().answer(method, path, body)


def test_a_deposit_whose_files_fail_says_how_to_finish_it_under_the_same_ibi(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    refusing = RefusingUploads()
    for name, real in REAL.items():

        def build(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            return _real(*args, **{**kwargs, "transport": refusing.send})

        monkeypatch.setattr(ibi_client, name, build)
    (tmp_path / "a.txt").write_bytes(b"a")
    status, out, err = run(capsys, "deposit", str(tmp_path / "a.txt"), *A)
    assert status == 1 and out == ""
    assert "'a\\\\b.txt' is not a relative file path" in err
    key = re.search(r"--idempotency-key (ibi-cli-\S+) ", err)
    assert key is not None and f"{ITEM} was created, but not its files" in err
    status, _, err = run(capsys, "deposit", str(tmp_path / "a.txt"), *A, "--idempotency-key", "k-1")
    assert status == 1 and "--idempotency-key k-1 " in err
