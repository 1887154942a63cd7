"""LocalS3 (s3rver on loopback): objects survive restarts and kill -9; leftovers are stopped;
its log keeps no presigned URL's signature; its files are private."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ibi_tools.local.s3 import LocalS3

BUCKET = "ibi-archive-files"
KEY = "items/8JMKD3MGP8W%2F35MME4E/doc/thesis.pdf"
DATA = b"%PDF-1.7 a thesis\n" * 1000

# A run of `ibi local` in its own process: starts LocalS3 on a directory, stores one object,
# says the server's pid, then waits for the server (so it reaps it if another run stops it).
RUN = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ibi_tools.local.s3 import LocalS3

    server = LocalS3(Path(sys.argv[1])).start()
    server.ensure_bucket(sys.argv[2])
    server.client().put_object(Bucket=sys.argv[2], Key=sys.argv[3], Body=sys.stdin.buffer.read())
    print(server.pid, flush=True)
    server._process.wait()
    """
)


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_until_gone(pid: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while running(pid):
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.05)


def stored(server: LocalS3) -> bytes:
    body: bytes = server.client().get_object(Bucket=BUCKET, Key=KEY)["Body"].read()
    return body


def start_run(path: Path) -> tuple[subprocess.Popen[bytes], int]:
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, str(path), BUCKET, KEY],
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
    with LocalS3(path) as first:
        first.ensure_bucket(BUCKET)
        first.client().put_object(Bucket=BUCKET, Key=KEY, Body=DATA)
    with LocalS3(path) as second:
        second.ensure_bucket(BUCKET)  # already there: nothing to do
        assert stored(second) == DATA
        assert [entry["Name"] for entry in second.client().list_buckets()["Buckets"]] == [BUCKET]
    assert not (tmp_path / "s3.pid").exists()


def test_objects_survive_a_kill_9_of_the_server(tmp_path: Path) -> None:
    path = tmp_path / "s3"
    server = LocalS3(path).start()
    try:
        server.ensure_bucket(BUCKET)
        server.client().put_object(Bucket=BUCKET, Key=KEY, Body=DATA)
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
    finally:
        server.stop()
    with LocalS3(path) as again:
        assert stored(again) == DATA


def test_server_dies_with_a_killed_run_and_keeps_its_objects(tmp_path: Path) -> None:
    path = tmp_path / "s3"
    run, server_pid = start_run(path)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=10)
    wait_until_gone(server_pid)  # PR_SET_PDEATHSIG: the server goes with its parent
    assert (tmp_path / "s3.pid").exists()  # the killed run could not clean up
    with LocalS3(path) as again:
        assert stored(again) == DATA


def test_a_leftover_server_on_the_directory_is_stopped_on_start(tmp_path: Path) -> None:
    path = tmp_path / "s3"
    run, leftover = start_run(path)
    try:
        assert running(leftover)
        with LocalS3(path) as server:
            wait_until_gone(leftover)
            assert server.pid != leftover
            assert stored(server) == DATA
    finally:
        if run.poll() is None:
            run.kill()
        run.wait(timeout=10)


def test_a_server_on_another_directory_is_left_alone(tmp_path: Path) -> None:
    with LocalS3(tmp_path / "one") as one:
        (tmp_path / "two.pid").write_text(f"{one.pid}\n")  # e.g. a stale pidfile, pid reused
        with LocalS3(tmp_path / "two"):
            assert one.pid is not None and running(one.pid)


def test_a_stale_pidfile_does_not_stop_the_start(tmp_path: Path) -> None:
    (tmp_path / "s3.pid").write_text("999999999\n")
    with LocalS3(tmp_path / "s3") as server:
        server.ensure_bucket(BUCKET)
        assert server.client().list_objects_v2(Bucket=BUCKET)["KeyCount"] == 0


@pytest.mark.parametrize("size", [0, 5 * 1024 * 1024 + 1])
def test_empty_and_large_objects_round_trip(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    with LocalS3(tmp_path / "s3") as server:
        server.ensure_bucket(BUCKET)
        client = server.client()
        client.put_object(Bucket=BUCKET, Key=KEY, Body=data)
        assert client.head_object(Bucket=BUCKET, Key=KEY)["ContentLength"] == size
        assert client.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == data


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def wait_for_line(log: Path, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in (logged := log.read_text()):
        assert time.monotonic() < deadline, f"{text!r} not in the log:\n{logged}"
        time.sleep(0.05)
    return logged


def test_presigned_urls_are_logged_without_their_query_and_every_file_is_private(
    tmp_path: Path,
) -> None:
    """A presigned PUT and GET: the log names the object, never a signature; files 0600."""
    log = tmp_path / "s3rver.log"
    with umask(0), LocalS3(tmp_path / "s3", log=log) as server:  # the widest umask there is
        server.ensure_bucket(BUCKET)
        client = server.client()
        put = client.generate_presigned_url(
            "put_object", Params={"Bucket": BUCKET, "Key": KEY}, ExpiresIn=60
        )
        request = urllib.request.Request(put, data=DATA, method="PUT")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        get = client.generate_presigned_url(
            "get_object", Params={"Bucket": BUCKET, "Key": KEY}, ExpiresIn=60
        )
        assert "X-Amz-Signature=" in get
        with urllib.request.urlopen(get, timeout=10) as response:
            assert response.read() == DATA
        pidfile = tmp_path / "s3.pid"
        assert mode(pidfile) == 0o600
        assert mode(tmp_path / "s3") == 0o700
        stored_files = [p for p in (tmp_path / "s3").rglob("*") if p.is_file()]
        assert stored_files and {mode(p) for p in stored_files} == {0o600}
        assert {mode(p) for p in (tmp_path / "s3").rglob("*") if p.is_dir()} == {0o700}
        path = f"/{BUCKET}/{KEY.replace('%', '%25')}"  # as it was sent: the key, URL-encoded
        logged = wait_for_line(log, f"GET {path} 200")  # s3rver logs once the body is sent
    assert f"PUT {path} 200" in logged
    assert "X-Amz-" not in logged and "?" not in logged and "\x1b" not in logged
    assert mode(log) == 0o600


def test_an_older_wider_log_is_made_private(tmp_path: Path) -> None:
    log = tmp_path / "s3rver.log"
    log.write_text("an older run's lines\n")
    log.chmod(0o644)
    with LocalS3(tmp_path / "s3", log=log):
        assert mode(log) == 0o600
    assert log.read_text().startswith("an older run's lines\n")  # appended to, not replaced


def test_restart_after_a_kill_9_keeps_the_port_and_the_objects(tmp_path: Path) -> None:
    server = LocalS3(tmp_path / "s3", log=tmp_path / "s3rver.log").start()
    try:
        server.ensure_bucket(BUCKET)
        server.client().put_object(Bucket=BUCKET, Key=KEY, Body=DATA)
        port, pid = server.port, server.pid
        assert pid is not None and server.exit_status() is None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while server.exit_status() is None:  # node's other threads end a moment after it
            assert time.monotonic() < deadline, "the killed server was never reaped"
            time.sleep(0.05)
        assert server.exit_status() == "killed by signal 9"
        server.restart()
        assert server.port == port and server.pid != pid and server.exit_status() is None
        assert stored(server) == DATA
    finally:
        server.stop()
