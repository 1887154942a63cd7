"""The Archive's file store against moto (in-process and as a server) and SeaweedFS (LocalS3).

Uploads and downloads go through presigned URLs with real HTTP requests, so those tests run
against the two backends that serve HTTP: moto's ThreadedMotoServer and LocalS3.
"""

from __future__ import annotations

import base64
import hashlib
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from moto import mock_aws
from moto.server import ThreadedMotoServer

from functions.archive.files import (
    FileMismatch,
    FileMissing,
    FileStoreError,
    FileTooLarge,
    S3FileStore,
    attachment,
)
from ibi.core.errors import InvalidInput
from ibi_tools.local.s3 import LocalS3
from ibi_tools.local.stores import LOOPBACK, free_port, free_ports

ITEM = "sid.inpe.br/mtc-m18/2009/07.21.13.23"
IBIP_ITEM = "8JMKD3MGP8W/35MME4E"
SIGV4 = Config(signature_version="s3v4", s3={"addressing_style": "path"})
HTTP_BACKENDS = ["moto-server", "seaweedfs"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address=LOOPBACK, port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def local_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    with LocalS3(tmp_path_factory.mktemp("local-s3") / "s3", port=free_ports(10)) as server:
        yield server


def _client(backend: str, request: pytest.FixtureRequest) -> Any:
    if backend == "moto-server":
        endpoint = request.getfixturevalue("moto_server")
        return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", config=SIGV4)
    if backend == "seaweedfs":
        return request.getfixturevalue("local_s3").client()
    return boto3.client("s3", region_name="us-east-1", config=SIGV4)


def _store(backend: str, request: pytest.FixtureRequest) -> Iterator[S3FileStore]:
    bucket = f"archive-{uuid.uuid4().hex[:12]}"
    if backend == "moto":
        with mock_aws():
            client = _client(backend, request)
            client.create_bucket(Bucket=bucket)
            yield S3FileStore(client, bucket)
        return
    client = _client(backend, request)
    client.create_bucket(Bucket=bucket)
    yield S3FileStore(client, bucket)


@pytest.fixture(params=["moto", *HTTP_BACKENDS])
def store(request: pytest.FixtureRequest) -> Iterator[S3FileStore]:
    yield from _store(request.param, request)


@pytest.fixture(params=HTTP_BACKENDS)
def http_store(request: pytest.FixtureRequest) -> Iterator[S3FileStore]:
    yield from _store(request.param, request)


def http(method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None):
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    return urllib.request.urlopen(request, timeout=10)


def upload(store: S3FileStore, item: str, path: str, data: bytes, announced: bytes) -> int:
    """Send ``data`` through a URL presigned for ``announced``; answer the HTTP status."""
    grant = store.presign_upload(
        item, path, sha256_hex=sha256(announced), size=len(announced), content_type="text/plain"
    )
    assert grant["method"] == "PUT"
    headers = dict(grant["headers"], **{"Content-Length": str(len(data))})
    try:
        with http("PUT", grant["url"], data, headers) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


# -- keys ----------------------------------------------------------------------------------------


def test_object_key_encodes_the_item_as_one_segment() -> None:
    store = S3FileStore(object(), "bucket")
    assert (
        store.object_key(ITEM, "doc/thesis.pdf")
        == "items/sid.inpe.br%2Fmtc-m18%2F2009%2F07.21.13.23/doc/thesis.pdf"
    )
    assert store.object_key(IBIP_ITEM, "a.txt") == "items/8JMKD3MGP8W%2F35MME4E/a.txt"
    # item "a/b" with file "c" and item "a" with file "b/c" do not meet; nor do "%" items
    assert store.object_key("a/b", "c") != store.object_key("a", "b/c")
    assert store.object_key("a%2Fb", "c") != store.object_key("a/b", "c")
    assert S3FileStore(object(), "bucket", prefix="").object_key("x", "y") == "x/y"


@pytest.mark.parametrize("path", ["", "../etc/passwd", "a/../../b", "a//b", "a\\b", "x\ny"])
def test_object_key_refuses_paths_outside_the_item(path: str) -> None:
    with pytest.raises(InvalidInput):
        S3FileStore(object(), "bucket").object_key(ITEM, path)


def test_object_key_refuses_an_empty_item_and_over_long_keys() -> None:
    store = S3FileStore(object(), "bucket")
    with pytest.raises(InvalidInput):
        store.object_key("", "a.txt")
    with pytest.raises(InvalidInput):
        store.object_key(ITEM, "a" * 1000)


def test_attachment_header_is_safe_and_keeps_the_name() -> None:
    header = attachment('relatório "final".pdf')
    assert header == (
        'attachment; filename="relat_rio _final_.pdf"; '
        "filename*=UTF-8''relat%C3%B3rio%20%22final%22.pdf"
    )
    assert "\n" not in attachment("a\r\nb.txt")


# -- uploads through presigned URLs ----------------------------------------------------------------


def test_presigned_upload_commit_and_download(http_store: S3FileStore) -> None:
    data = b"a thesis\n" * 5000
    assert upload(http_store, ITEM, "doc/thesis.txt", data, data) == 200
    http_store.commit(ITEM, "doc/thesis.txt", sha256_hex=sha256(data), size=len(data))

    url = http_store.presign_download(ITEM, "doc/thesis.txt", filename="tese.txt")
    with http("GET", url) as answer:
        assert answer.read() == data
        assert answer.headers["Content-Disposition"].startswith('attachment; filename="tese.txt"')
    with http("GET", http_store.presign_download(ITEM, "doc/thesis.txt")) as answer:
        assert answer.read() == data


def test_other_bytes_through_a_presigned_url_are_refused_or_caught(
    http_store: S3FileStore,
) -> None:
    announced = b"the announced file"
    other = b"X" + announced[1:]
    status = upload(http_store, ITEM, "a.txt", other, announced)
    if status == 200:  # emulators take it (S3 answers 400 BadDigest): the commit catches it
        with pytest.raises(FileMismatch) as caught:
            http_store.commit(ITEM, "a.txt", sha256_hex=sha256(announced), size=len(announced))
        assert caught.value.part == "sha256"
    else:
        assert status in {400, 403}


def test_shorter_bytes_through_a_presigned_url_are_refused_or_caught(
    http_store: S3FileStore,
) -> None:
    announced = b"the announced file"
    status = upload(http_store, ITEM, "a.txt", announced[:-1], announced)
    if status == 200:
        with pytest.raises(FileMismatch) as caught:
            http_store.commit(ITEM, "a.txt", sha256_hex=sha256(announced), size=len(announced))
        assert caught.value.part == "size"
    else:
        assert status in {400, 403}


def test_presign_upload_checks_what_it_signs() -> None:
    store = S3FileStore(object(), "bucket")
    with pytest.raises(InvalidInput):
        store.presign_upload(ITEM, "a", sha256_hex="ABC", size=1, content_type="text/plain")
    with pytest.raises(InvalidInput):
        store.presign_upload(ITEM, "a", sha256_hex="0" * 64, size=-1, content_type="text/plain")
    with pytest.raises(InvalidInput):
        store.presign_upload(ITEM, "a", sha256_hex="0" * 64, size=6 * 1024**3, content_type="x")
    with pytest.raises(InvalidInput):
        store.presign_upload(ITEM, "a", sha256_hex="0" * 64, size=1, content_type="a\nb")


def test_presign_upload_signs_length_type_and_checksum() -> None:
    with mock_aws():
        store = S3FileStore(boto3.client("s3", region_name="us-east-1", config=SIGV4), "bucket")
        grant = store.presign_upload(
            ITEM, "a.txt", sha256_hex=sha256(b"abc"), size=3, content_type="text/plain", expires=60
        )
    assert grant["headers"] == {
        "Content-Type": "text/plain",
        "Content-Length": "3",
        "x-amz-checksum-sha256": "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=",
    }
    assert "X-Amz-Expires=60" in grant["url"]
    signed = grant["url"].split("X-Amz-SignedHeaders=")[1].split("&")[0]
    assert signed == "content-length%3Bcontent-type%3Bhost%3Bx-amz-checksum-sha256"


def test_presigning_needs_a_sigv4_client() -> None:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")  # botocore presigns SigV2 here
        store = S3FileStore(client, "bucket")
        with pytest.raises(FileStoreError, match="SigV2"):
            store.presign_download(ITEM, "a.txt")


# -- commit ----------------------------------------------------------------------------------------


def test_commit_checks_size_and_checksum(store: S3FileStore) -> None:
    data = b"0123456789"
    assert store.put(ITEM, "a.txt", data, "text/plain", announced=sha256(data)) == (
        sha256(data),
        10,
    )
    store.commit(ITEM, "a.txt", sha256_hex=sha256(data), size=10)
    assert store.read(ITEM, "a.txt", max_bytes=10) == data  # published
    store.put(ITEM, "b.txt", data, "text/plain", announced=sha256(b"other"))
    with pytest.raises(FileMismatch) as caught:
        store.commit(ITEM, "b.txt", sha256_hex=sha256(b"other"), size=10)
    assert (caught.value.part, caught.value.found) == ("sha256", sha256(data))
    with pytest.raises(FileMismatch) as caught:
        store.commit(ITEM, "a.txt", sha256_hex=sha256(data), size=11)
    assert (caught.value.part, caught.value.expected, caught.value.found) == ("size", "11", "10")
    with pytest.raises(FileMissing):
        store.read(ITEM, "b.txt", max_bytes=10)  # nothing refused is published


def test_commit_of_nothing_is_missing(store: S3FileStore) -> None:
    with pytest.raises(FileMissing):
        store.commit(ITEM, "never.txt", sha256_hex=sha256(b""), size=0)


def test_an_upload_never_lands_on_a_published_file(http_store: S3FileStore) -> None:
    """Issue 11, finding 5: a presigned PUT writes its own upload key, whatever it carries;
    only a commit publishes, and the item decides whether a commit may (content.py)."""
    published = b"published bytes\n"
    assert upload(http_store, ITEM, "a.txt", published, published) == 200
    http_store.commit(ITEM, "a.txt", sha256_hex=sha256(published), size=len(published))
    other = b"other bytes!!!!!\n"
    assert upload(http_store, ITEM, "a.txt", other, other) == 200
    assert http_store.read(ITEM, "a.txt", max_bytes=100) == published
    assert http_store.sha256_of(ITEM, "a.txt") == sha256(published)
    grant = http_store.presign_upload(
        ITEM, "a.txt", sha256_hex=sha256(other), size=len(other), content_type="text/plain"
    )
    assert "/uploads/" in grant["url"] and "/items/" not in grant["url"]


def test_a_replaced_version_is_kept_under_its_checksum(http_store: S3FileStore) -> None:
    first, second = b"version one\n", b"version two, longer\n"
    for data in (first, second):
        assert upload(http_store, IBIP_ITEM, "doc/a.txt", data, data) == 200
    http_store.commit(IBIP_ITEM, "doc/a.txt", sha256_hex=sha256(first), size=len(first))
    http_store.keep_version(IBIP_ITEM, "doc/a.txt", sha256_hex=sha256(first))
    http_store.commit(IBIP_ITEM, "doc/a.txt", sha256_hex=sha256(second), size=len(second))
    assert http_store.read(IBIP_ITEM, "doc/a.txt", max_bytes=100) == second
    assert http_store.sha256_of(IBIP_ITEM, "doc/a.txt", version=sha256(first)) == sha256(first)
    url = http_store.presign_download(
        IBIP_ITEM, "doc/a.txt", filename="a.txt", version=sha256(first)
    )
    with http("GET", url) as answer:
        assert answer.read() == first
    with pytest.raises(FileMissing):
        http_store.sha256_of(IBIP_ITEM, "doc/a.txt", version=sha256(b"never published"))


def test_commit_uses_the_stored_checksum_only_when_trusted() -> None:
    """moto keeps a checksum the client claims without checking it; S3 would refuse it."""
    data, claimed = b"the real bytes", sha256(b"a claim")
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1", config=SIGV4)
        client.create_bucket(Bucket="bucket")
        trusting = S3FileStore(client, "bucket")
        careful = S3FileStore(client, "bucket", trust_stored_checksum=False)
        for key in (trusting.upload_key(ITEM, "a.txt", claimed), trusting.object_key(ITEM, "b")):
            client.put_object(
                Bucket="bucket",
                Key=key,
                Body=data,
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=base64.b64encode(bytes.fromhex(claimed)).decode(),
            )
        trusting.commit(ITEM, "a.txt", sha256_hex=claimed, size=len(data))  # no read at all
        with pytest.raises(FileMismatch):
            careful.commit(ITEM, "a.txt", sha256_hex=claimed, size=len(data))
        careful.put(ITEM, "a.txt", data, "text/plain", announced=sha256(data))
        careful.commit(ITEM, "a.txt", sha256_hex=sha256(data), size=len(data))
        assert careful.sha256_of(ITEM, "a.txt") == sha256(data)
        with pytest.raises(FileStoreError, match="FlexibleChecksumError"):
            trusting.sha256_of(ITEM, "b")  # on S3: damaged on the way, to be retried


# -- reads -----------------------------------------------------------------------------------------


def test_read_within_and_over_the_limit(store: S3FileStore) -> None:
    data = "résumé\n".encode() * 10
    store.put(IBIP_ITEM, "index.html", data, "text/html; charset=utf-8")
    assert store.read(IBIP_ITEM, "index.html", max_bytes=len(data)) == data
    with pytest.raises(FileTooLarge) as caught:
        store.read(IBIP_ITEM, "index.html", max_bytes=len(data) - 1)
    assert (caught.value.size, caught.value.limit) == (len(data), len(data) - 1)
    with pytest.raises(FileMissing):
        store.read(IBIP_ITEM, "other.html", max_bytes=100)


def test_sha256_of_streams_the_stored_bytes(store: S3FileStore) -> None:
    data = bytes(range(256)) * (3 * 4096 + 7)  # about 3 MiB: several chunks
    store.put(ITEM, "data/big.bin", data, "application/octet-stream")
    assert store.sha256_of(ITEM, "data/big.bin") == sha256(data)
    with pytest.raises(FileMissing):
        store.sha256_of(ITEM, "data/none.bin")


# -- deletion --------------------------------------------------------------------------------------


def test_delete_item_files_deletes_that_item_only(store: S3FileStore) -> None:
    store.put("a/b", "one.txt", b"1", "text/plain")
    store.put("a/b", "sub/two.txt", b"2", "text/plain")
    store.put("a", "b/three.txt", b"3", "text/plain")
    store.put("a/bc", "four.txt", b"4", "text/plain")
    assert store.delete_item_files("a/b") == 2
    with pytest.raises(FileMissing):
        store.read("a/b", "one.txt", max_bytes=10)
    assert store.read("a", "b/three.txt", max_bytes=10) == b"3"
    assert store.read("a/bc", "four.txt", max_bytes=10) == b"4"
    assert store.delete_item_files("a/b") == 0


# -- errors ----------------------------------------------------------------------------------------


def test_throttling_is_flagged() -> None:
    client = boto3.client("s3", region_name="us-east-1", config=SIGV4)
    store = S3FileStore(client, "bucket")
    with Stubber(client) as stub:
        stub.add_client_error("head_object", "SlowDown", http_status_code=503)
        with pytest.raises(FileStoreError) as caught:
            store.commit(ITEM, "a.txt", sha256_hex=sha256(b""), size=0)
    assert caught.value.throttled
    with Stubber(client) as stub:
        stub.add_client_error("copy_object", "SlowDown", http_status_code=503)
        with pytest.raises(FileStoreError) as caught:
            store.keep_version(ITEM, "a.txt", sha256_hex=sha256(b""))
    assert caught.value.throttled


def test_a_missing_bucket_is_a_store_error_not_a_missing_file(store: S3FileStore) -> None:
    other = S3FileStore(store._client, f"absent-{uuid.uuid4().hex[:12]}")
    with pytest.raises(FileStoreError) as caught:
        other.put(ITEM, "a.txt", b"x", "text/plain")
    assert not caught.value.throttled


def test_an_unreachable_store_is_a_store_error(tmp_path: Path) -> None:
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{LOOPBACK}:{free_port()}",
        region_name="us-east-1",
        config=Config(signature_version="s3v4", retries={"max_attempts": 1}, connect_timeout=1),
    )
    with pytest.raises(FileStoreError, match="EndpointConnectionError"):
        S3FileStore(client, "bucket").sha256_of(ITEM, "a.txt")
