"""Local S3 is ready when it serves its kept objects, not when its port opens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ibi_tools.local.s3 import LocalS3, read_a_kept_object
from ibi_tools.local.stores import LocalStoreError


class Body:
    def read(self) -> bytes:
        return b"x"


class WakingServer:
    """A SeaweedFS whose volume server joins after ``unavailable`` reads: 503 until then."""

    def __init__(self, unavailable: int, contents: list[dict[str, Any]]) -> None:
        self.unavailable = unavailable
        self.contents = contents
        self.reads: list[tuple[str, str, str]] = []
        self.writes = 0

    def list_buckets(self) -> dict[str, Any]:
        return {"Buckets": [{"Name": "empty"}, {"Name": "files"}]}

    def list_objects_v2(self, Bucket: str, MaxKeys: int) -> dict[str, Any]:
        return {"Contents": self.contents} if Bucket == "files" else {}

    def get_object(self, Bucket: str, Key: str, Range: str) -> dict[str, Any]:
        self.reads.append((Bucket, Key, Range))
        if len(self.reads) <= self.unavailable:
            error = {"Error": {"Code": "ServiceUnavailable"}, "ResponseMetadata": {}}
            raise ClientError(error, "GetObject")  # type: ignore[arg-type]
        return {"Body": Body()}

    def put_object(self, **_: Any) -> None:
        self.writes += 1


def waiting(server: WakingServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LocalS3:
    local = LocalS3(tmp_path / "s3", port=40000)
    monkeypatch.setattr(local, "client", lambda: server)
    monkeypatch.setattr("ibi_tools.local.s3.time.sleep", lambda _: None)
    return local


def test_a_kept_object_that_answers_503_is_read_again_until_it_is_served(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = WakingServer(3, [{"Key": "zero", "Size": 0}, {"Key": "a/file.pdf", "Size": 9}])
    waiting(server, monkeypatch, tmp_path)._wait_until_serving()
    # the 0-byte object is passed over (a range of it is a 416, never a success)
    assert server.reads == [("files", "a/file.pdf", "bytes=0-0")] * 4
    assert server.writes == 0  # nothing written to find out


def test_a_server_that_never_serves_its_objects_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = WakingServer(10**9, [{"Key": "kept", "Size": 1}])
    local = waiting(server, monkeypatch, tmp_path)
    with pytest.raises(LocalStoreError, match="did not serve its objects within 0 s"):
        local._wait_until_serving(seconds=0)


def test_nothing_kept_is_ready_at_once() -> None:
    server = WakingServer(10**9, [])
    read_a_kept_object(server)
    assert server.reads == []


def test_weed_is_not_waited_on_for_long_after_a_sigterm() -> None:
    assert LocalS3.stop_seconds <= 3.0  # it survives kill -9: what it acknowledged is on disk


def test_the_wait_ends_when_ibi_local_is_being_stopped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server = WakingServer(10**9, [{"Key": "kept", "Size": 1}])
    local = waiting(server, monkeypatch, tmp_path)
    local.cancelled = lambda: len(server.reads) >= 2
    local._wait_until_serving(seconds=3600)  # returns: no error, no hour-long wait
    assert len(server.reads) == 2
