"""Local mode's S3 server (SeaweedFS, ``ibi_tools/local/s3.py``).

The S3 calls the Archive makes (``functions/archive/files.py``) answer alike on SeaweedFS and
on moto's server; SeaweedFS checks what moto does not (signatures, the signed length, the
checksum), opens only its own block of ports, keeps its objects through stops and ``kill -9``,
and takes over what s3rver kept in an older data directory.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from ibi_tools.local.federation import S3RVER_KEPT, open_s3
from ibi_tools.local.s3 import (
    SECRETS_FILE,
    WEED_PORTS,
    LocalS3,
    S3PortInUseError,
    copy_from_s3rver,
    s3rver_objects,
)
from ibi_tools.local.stores import LOOPBACK, free_port, free_ports

BUCKET = "ibi-archive-files"
KEY = "items/8JMKD3MGP8W%2F35MME4E/doc/thesis.pdf"
DATA = b"%PDF-1.7 a thesis\n" * 1000
# names S3 takes and s3rver did not (CopyObject of the first six, a segment over 233 bytes)
SPECIAL_NAMES = [
    "a;b,c.csv",
    "q#r?s.txt",
    "t&u+v=w.txt",
    "x y%20z.txt",
    "ação/relatório é.pdf",
    "$@:!'()*.dat",
    "n" * 300 + ".txt",
]


def weed(path: Path, **kwargs: Any) -> LocalS3:
    return LocalS3(path, port=free_ports(len(WEED_PORTS)), **kwargs)


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_until_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while running(pid):
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.05)


def stored(server: LocalS3) -> bytes:
    body: bytes = server.client().get_object(Bucket=BUCKET, Key=KEY)["Body"].read()
    return body


def b64sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def http(method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None):
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    return urllib.request.urlopen(request, timeout=10)


def status_of(method: str, url: str, data: bytes | None = None, **headers: str) -> int:
    try:
        with http(method, url, data, headers) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


# ------------------------------------------------------------- the Archive's calls, on both


@pytest.fixture(scope="module")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    with weed(tmp_path_factory.mktemp("seaweedfs") / "s3") as server:
        yield server


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address=LOOPBACK, port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(params=["moto-server", "seaweedfs"])
def s3(request: pytest.FixtureRequest) -> Any:
    """A client of each server, with a bucket of its own."""
    if request.param == "seaweedfs":
        client = request.getfixturevalue("seaweedfs").client()
    else:
        client = boto3.client(
            "s3",
            endpoint_url=request.getfixturevalue("moto_endpoint"),
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
        )
    bucket = f"archive-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    client.bucket = bucket
    client.backend = request.param
    return client


def checksum_kept(s3: Any, answer: dict[str, Any], data: bytes) -> bool:
    """SeaweedFS keeps the SHA-256 it checked, as S3 does; moto keeps none of a presigned PUT
    (the Archive then hashes the bytes: ``files.py``)."""
    kept = answer.get("ChecksumSHA256")
    return kept == b64sha256(data) or (s3.backend == "moto-server" and kept is None)


def presigned_put(client: Any, key: str, data: bytes) -> tuple[str, dict[str, str]]:
    """A PUT presigned as the Archive signs it: over length, type and SHA-256."""
    checksum = b64sha256(data)
    url = client.generate_presigned_url(
        "put_object",
        Params={
            "Bucket": client.bucket,
            "Key": key,
            "ContentLength": len(data),
            "ContentType": "text/plain",
            "ChecksumSHA256": checksum,
        },
        ExpiresIn=60,
    )
    headers = {"Content-Type": "text/plain", "x-amz-checksum-sha256": checksum}
    return url, headers


@pytest.mark.parametrize("name", SPECIAL_NAMES)
def test_the_archives_calls_answer_alike_for_every_name(s3: Any, name: str) -> None:
    """Presigned PUT (length, type, checksum), HEAD and GET with ChecksumMode, CopyObject to
    the published and the history key, listing by prefix, presigned GET, DeleteObjects."""
    data = f"the bytes of {name}\n".encode()
    upload, published = f"uploads/item/{name}", f"items/item/{name}"
    url, headers = presigned_put(s3, upload, data)
    assert status_of("PUT", url, data, **headers) == 200
    head = s3.head_object(Bucket=s3.bucket, Key=upload, ChecksumMode="ENABLED")
    assert head["ContentLength"] == len(data)
    assert checksum_kept(s3, head, data)
    for target in (published, f"history/item/{name}"):
        s3.copy_object(
            Bucket=s3.bucket,
            Key=target,
            CopySource={"Bucket": s3.bucket, "Key": upload},
            ChecksumAlgorithm="SHA256",
        )
    answer = s3.get_object(Bucket=s3.bucket, Key=published, ChecksumMode="ENABLED")
    assert answer["Body"].read() == data
    assert checksum_kept(s3, answer, data)
    listed = s3.list_objects_v2(Bucket=s3.bucket, Prefix="items/item/")["Contents"]
    assert [entry["Key"] for entry in listed] == [published]
    get = s3.generate_presigned_url(
        "get_object",
        Params={
            "Bucket": s3.bucket,
            "Key": published,
            "ResponseContentDisposition": 'attachment; filename="x.txt"',
        },
        ExpiresIn=60,
    )
    with http("GET", get) as answer:
        assert answer.read() == data
        assert answer.headers["Content-Disposition"] == 'attachment; filename="x.txt"'
    deleted = s3.delete_objects(
        Bucket=s3.bucket, Delete={"Objects": [{"Key": published}], "Quiet": True}
    )
    assert not deleted.get("Errors")
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=s3.bucket, Key=published)
    assert missing.value.response["Error"]["Code"] in {"404", "NoSuchKey", "NotFound"}


def test_seaweedfs_refuses_a_body_its_presigned_url_was_not_signed_for(
    seaweedfs: LocalS3,
) -> None:
    client = seaweedfs.client()
    client.bucket = BUCKET
    seaweedfs.ensure_bucket(BUCKET)
    url, headers = presigned_put(client, "uploads/signed", DATA)
    other = DATA[:-1] + b"!"  # the same length, another checksum
    assert status_of("PUT", url, other, **headers) == 400
    assert status_of("PUT", url, DATA + b"more", **headers) in {400, 403}  # another length
    assert status_of("PUT", url.replace("X-Amz-Signature=", "X-Amz-Signature=0"), DATA) == 403
    with pytest.raises(ClientError):
        client.head_object(Bucket=BUCKET, Key="uploads/signed")
    assert status_of("PUT", url, DATA, **headers) == 200  # what it was signed for


def test_seaweedfs_refuses_a_wrong_signature_and_an_unknown_key(seaweedfs: LocalS3) -> None:
    seaweedfs.ensure_bucket(BUCKET)
    secrets = json.loads((seaweedfs.path / SECRETS_FILE).read_text())
    for access_key, secret_key in [
        (secrets["access_key"], "not-its-secret"),
        ("AKIDSOMEONEELSE", secrets["secret_key"]),
    ]:
        other = boto3.client(
            "s3",
            endpoint_url=seaweedfs.endpoint,
            region_name="us-east-1",
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
        )
        with pytest.raises(ClientError) as refused:
            other.list_objects_v2(Bucket=BUCKET)
        code = refused.value.response["Error"]["Code"]
        assert code in {"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied"}
    assert status_of("GET", f"{seaweedfs.endpoint}/{BUCKET}/{KEY}") == 403  # anonymous


def test_its_own_http_ports_refuse_what_s3_would_refuse(seaweedfs: LocalS3) -> None:
    """The filer and the volume server want a token signed with keys only the gateway has."""
    seaweedfs.ensure_bucket(BUCKET)
    seaweedfs.client().put_object(Bucket=BUCKET, Key=KEY, Body=DATA)
    filer = seaweedfs.ports["filer"]
    assert status_of("GET", f"http://{LOOPBACK}:{filer}/buckets/{BUCKET}/{KEY}") == 401
    volume = seaweedfs.ports["volume server"]
    assert status_of("GET", f"http://{LOOPBACK}:{volume}/1,01637037d6") == 401


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (from /proc: its sockets' inodes)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_every_port_it_opens_is_of_its_block_on_loopback(tmp_path: Path) -> None:
    with weed(tmp_path / "s3") as server:
        assert server.pid is not None
        time.sleep(1)  # its admin server starts last, after the S3 endpoint answers
        assert listening_ports(server.pid) == set(server.ports.values())
        assert set(server.ports.values()) == set(range(server.port, server.port + 10))
        arguments = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
        assert b"-ip.bind=127.0.0.1" in arguments
        secrets = json.loads((server.path / SECRETS_FILE).read_text())
        for secret in secrets.values():  # in its environment and 0600 files, never in `ps`
            assert not any(secret.encode() in argument for argument in arguments)


def test_a_taken_port_of_its_block_stops_the_start_naming_it(tmp_path: Path) -> None:
    import socket

    port = free_ports(len(WEED_PORTS))
    with socket.socket() as taken:
        taken.bind((LOOPBACK, port + 6))
        taken.listen()
        with pytest.raises(S3PortInUseError, match=f"port {port + 6} .*filer"):
            LocalS3(tmp_path / "s3", port=port).start()


def test_credentials_are_made_per_data_directory_and_kept(tmp_path: Path) -> None:
    with weed(tmp_path / "one") as one:
        one.ensure_bucket(BUCKET)
        one.client().put_object(Bucket=BUCKET, Key=KEY, Body=DATA)
        first = json.loads((tmp_path / "one" / SECRETS_FILE).read_text())
    assert oct((tmp_path / "one" / SECRETS_FILE).stat().st_mode & 0o777) == "0o600"
    with weed(tmp_path / "one") as again:
        assert json.loads((tmp_path / "one" / SECRETS_FILE).read_text()) == first
        assert stored(again) == DATA
    LocalS3(tmp_path / "two", port=1)  # made with the server, before it starts
    other = json.loads((tmp_path / "two" / SECRETS_FILE).read_text())
    assert other["access_key"] != first["access_key"]
    assert other["secret_key"] != first["secret_key"]


# ------------------------------------------------------------------ its data, on disk, kept

# A run of `ibi local` in its own process: starts LocalS3 on a directory, stores one object,
# says the server's pid, then waits for the server (so it reaps it if another run stops it).
RUN = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ibi_tools.local.s3 import LocalS3

    server = LocalS3(Path(sys.argv[1]), port=int(sys.argv[4])).start()
    server.ensure_bucket(sys.argv[2])
    server.client().put_object(Bucket=sys.argv[2], Key=sys.argv[3], Body=sys.stdin.buffer.read())
    print(server.pid, flush=True)
    server._process.wait()
    """
)


def start_run(path: Path) -> tuple[subprocess.Popen[bytes], int]:
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, str(path), BUCKET, KEY, str(free_ports(len(WEED_PORTS)))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert run.stdin is not None and run.stdout is not None
    run.stdin.write(DATA)
    run.stdin.close()
    line = run.stdout.readline()
    assert line, "the run did not start its server"
    return run, int(line)


def test_objects_survive_stop_and_start(tmp_path: Path) -> None:
    path = tmp_path / "s3"
    with weed(path) as first:
        first.ensure_bucket(BUCKET)
        first.client().put_object(Bucket=BUCKET, Key=KEY, Body=DATA)
    with weed(path) as second:
        second.ensure_bucket(BUCKET)  # already there: nothing to do
        assert stored(second) == DATA
        assert [entry["Name"] for entry in second.client().list_buckets()["Buckets"]] == [BUCKET]
    assert not (tmp_path / "s3.pid").exists()


def test_restart_after_a_kill_9_keeps_the_port_and_the_objects(tmp_path: Path) -> None:
    server = weed(tmp_path / "s3", log=tmp_path / "seaweedfs.log").start()
    try:
        server.ensure_bucket(BUCKET)
        for name in SPECIAL_NAMES:
            server.client().put_object(Bucket=BUCKET, Key=f"items/{name}", Body=name.encode())
        server.client().put_object(Bucket=BUCKET, Key=KEY, Body=DATA)  # the last write
        port, pid = server.port, server.pid
        assert pid is not None and server.exit_status() is None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while server.exit_status() is None:
            assert time.monotonic() < deadline, "the killed server was never reaped"
            time.sleep(0.05)
        assert server.exit_status() == "killed by signal 9"
        server.restart()
        assert server.port == port and server.pid != pid and server.exit_status() is None
        assert stored(server) == DATA
        for name in SPECIAL_NAMES:
            body = server.client().get_object(Bucket=BUCKET, Key=f"items/{name}")["Body"]
            assert body.read() == name.encode()
    finally:
        server.stop()


def test_server_dies_with_a_killed_run_and_keeps_its_objects(tmp_path: Path) -> None:
    path = tmp_path / "s3"
    run, server_pid = start_run(path)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=10)
    wait_until_gone(server_pid)  # PR_SET_PDEATHSIG: the server goes with its parent
    assert (tmp_path / "s3.pid").exists()  # the killed run could not clean up
    with weed(path) as again:
        assert stored(again) == DATA


def test_a_leftover_server_on_the_directory_is_stopped_on_start(tmp_path: Path) -> None:
    path = tmp_path / "s3"
    run, leftover = start_run(path)
    try:
        assert running(leftover)
        with weed(path) as server:
            wait_until_gone(leftover)
            assert server.pid != leftover
            assert stored(server) == DATA
    finally:
        if run.poll() is None:
            run.kill()
        run.wait(timeout=10)


def test_a_stale_pidfile_does_not_stop_the_start(tmp_path: Path) -> None:
    (tmp_path / "s3.pid").write_text("999999999\n")
    with weed(tmp_path / "s3") as server:
        server.ensure_bucket(BUCKET)
        assert server.client().list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_its_files_are_private_and_its_log_keeps_no_signature(tmp_path: Path) -> None:
    log = tmp_path / "seaweedfs.log"
    log.write_text("an older run's lines\n")
    log.chmod(0o644)
    with umask(0), weed(tmp_path / "s3", log=log) as server:  # the widest umask there is
        server.ensure_bucket(BUCKET)
        client = server.client()
        client.bucket = BUCKET
        url, headers = presigned_put(client, KEY, DATA)
        assert status_of("PUT", url, DATA, **headers) == 200
        assert status_of("PUT", url, DATA[:-1] + b"?", **headers) == 400
        assert mode(tmp_path / "s3.pid") == 0o600
        assert mode(tmp_path / "s3") == 0o700
        assert mode(tmp_path / "s3" / SECRETS_FILE) == 0o600
    assert mode(log) == 0o600
    logged = log.read_text()
    assert logged.startswith("an older run's lines\n")  # appended to, not replaced
    assert "X-Amz-Signature" not in logged and "X-Amz-Credential" not in logged


# ------------------------------------------------------------- an older data directory's s3rver


def s3rver_directory(directory: Path, objects: dict[tuple[str, str], bytes]) -> None:
    """What s3rver kept: ``<bucket>/<key>._S3rver_object``, its metadata and MD5 beside it."""
    for (bucket, key), data in objects.items():
        file = directory / bucket / f"{key}._S3rver_object"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        (directory / bucket / f"{key}._S3rver_metadata.json").write_text(
            json.dumps({"content-type": "text/csv"})
        )
        (directory / bucket / f"{key}._S3rver_object.md5").write_text(
            hashlib.md5(data).hexdigest()  # s3rver kept an MD5 beside each object
        )


OLD_OBJECTS = {
    ("ibi-archive-a-files", "items/LK47B6W42J4%2F4GRSTK4W8Q/report.csv"): b"a,b\n1,2\n",
    ("ibi-archive-a-files", "history/LK47B6W42J4%2F4GRSTK4W8Q/ab12/report.csv"): b"a\n",
    ("ibi-archive-b-files", "items/LK47B6W42J4%2F4GRSTK4W99/ação é.csv"): b"x\n",
}


def test_s3rver_objects_are_read_from_its_files(tmp_path: Path) -> None:
    s3rver_directory(tmp_path, OLD_OBJECTS)
    found = {(bucket, key) for bucket, key, _ in s3rver_objects(tmp_path)}
    assert found == set(OLD_OBJECTS)


def test_an_s3rver_data_directory_is_copied_once_and_kept_renamed(tmp_path: Path) -> None:
    s3rver_directory(tmp_path / "s3", OLD_OBJECTS)
    port = free_ports(len(WEED_PORTS))
    server = open_s3(tmp_path, port)
    try:
        client = server.client()
        for (bucket, key), data in OLD_OBJECTS.items():
            answer = client.get_object(Bucket=bucket, Key=key)
            assert answer["Body"].read() == data
            assert answer["ContentType"] == "text/csv"
        client.delete_object(Bucket="ibi-archive-b-files", Key=next(iter(OLD_OBJECTS))[1])
    finally:
        server.stop()
    assert not (tmp_path / "s3").exists()
    assert (tmp_path / S3RVER_KEPT).is_dir()  # kept, for the user to delete
    again = open_s3(tmp_path, port)  # the second start copies nothing again
    try:
        listed = again.client().list_objects_v2(Bucket="ibi-archive-a-files")["Contents"]
        assert len(listed) == 2
    finally:
        again.stop()


def test_copy_from_s3rver_counts_what_it_copied(seaweedfs: LocalS3, tmp_path: Path) -> None:
    s3rver_directory(tmp_path, OLD_OBJECTS)
    assert copy_from_s3rver(tmp_path, seaweedfs.client()) == 3
