"""Local mode on a full disk, and after a lost write-ahead log (issue 25).

A full disk is a real one: a 2 MiB tmpfs mounted for the test (the tests run as root, here
and in CI), filled up. Minting then answers 503 naming the disk; making a key leaves no file
behind; ``ibi local`` stops with one line naming the disk. Tables whose ``-wal`` went missing
after a ``kill -9`` are refused with an explanation instead of opened without their last writes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.minting import wiring
from functions.minting.service import MintRequest, StoreUnavailable
from functions.minting.settings import Settings
from functions.minting.store import ensure_tables
from functions.shared import keys
from ibi_tools.local.federation import (
    TABLES_FILE,
    LostWriteAheadLog,
    open_tables,
    unwritten_frames,
)
from ibi_tools.local.stores import free_port
from tests.conftest import TABLES, minting_environment

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB file system of its own (tmpfs), unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(f"these tests mount a small tmpfs, as root: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Write to ``disk`` until it is full."""
    with (disk / "filler").open("wb") as filler, contextlib.suppress(OSError):
        while True:
            filler.write(b"\0" * 65536)
            filler.flush()


def minting_service(client: Any) -> Any:
    settings = Settings.from_environment(minting_environment(max_wait="0"))
    return wiring.build(settings, dynamodb=client).service


def test_minting_on_a_full_disk_answers_503_naming_the_disk(small_disk: Path) -> None:
    from ibi_tools.local.tables import LocalTables

    client = LocalTables(small_disk / TABLES_FILE).client()
    ensure_tables(client, TABLES)
    service = minting_service(client)
    assert service.mint(MintRequest(requester="t", request_id="1", count=1)).answer["ibis"]
    fill(small_disk)
    with pytest.raises(StoreUnavailable) as refused:
        for n in range(2, 200):  # SQLite may still have room in pages it holds
            time.sleep(0.002)  # a date of its own each time (r = 0.001 s)
            service.mint(MintRequest(requester="t", request_id=str(n), count=1))
    assert refused.value.status == 503
    assert str(refused.value) == (
        f"the minting store cannot write: the disk holding {small_disk.resolve()} is full"
    )


def test_a_key_made_on_a_full_disk_leaves_no_file_behind(small_disk: Path) -> None:
    (small_disk / "keys").mkdir()
    fill(small_disk)
    with pytest.raises(OSError) as full:
        keys.FileKeys(small_disk / "keys" / "archive-a-urlkey").load()
    assert full.value.errno == errno.ENOSPC
    assert list((small_disk / "keys").iterdir()) == []


def test_a_key_whose_write_fails_leaves_no_draft(tmp_path: Path, monkeypatch: Any) -> None:
    """The same, with the failure injected: a write that meets ENOSPC."""

    class Full:
        def __init__(self, fd: int, mode: str) -> None:
            self.fd = fd

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *_: object) -> None:
            os.close(self.fd)

        def write(self, _: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(keys.os, "fdopen", Full)
    with pytest.raises(OSError):
        keys.make_key_file(tmp_path / "archive-a-urlkey")
    assert list(tmp_path.iterdir()) == []


def test_ibi_local_on_a_full_disk_stops_with_one_line_naming_it(small_disk: Path) -> None:
    data = small_disk / "data"
    data.mkdir()
    fill(small_disk)
    ports = [free_port() for _ in range(4)]
    done = subprocess.run(
        [
            *(sys.executable, "-m", "ibi_tools.cli", "local", "--no-demo"),
            *("--data-dir", str(data), "--port", str(ports[0])),
            *("--archive-ports", f"{ports[1]},{ports[2]}", "--resolver-port", str(ports[3])),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"ibi: local: the disk holding {data.resolve()} is full: free some space there (or "
        "give --data-dir a directory on another disk), then start again"
    ]


# ------------------------------------------------------------------ a lost write-ahead log

WRITER = textwrap.dedent(
    """
    import sys, time
    from ibi_tools.local.tables import LocalTables
    from functions.minting.store import ensure_tables
    from tests.conftest import TABLES, minting_environment

    client = LocalTables(sys.argv[1]).client()
    ensure_tables(client, TABLES)
    for n in range(50):
        client.put_item(
            TableName=TABLES["record"],
            Item={"subsystem": {"S": "x"}, "first_date": {"N": str(n)}},
        )
    print("written", flush=True)
    time.sleep(60)
    """
)


def killed_after_writing(path: Path) -> None:
    """Tables written by a process then killed with kill -9: their writes in the ``-wal``."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, cwd=ROOT
    )
    assert writer.stdout is not None and writer.stdout.readline() == b"written\n"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=10)


def records(data: Path) -> int:
    client = open_tables(data).client()
    scanned = client.scan(TableName=TABLES["record"], ConsistentRead=True)
    return len(scanned["Items"])


def test_a_deleted_write_ahead_log_after_a_kill_9_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / TABLES_FILE
    killed_after_writing(path)
    assert unwritten_frames(path.with_name(TABLES_FILE + "-shm")) > 0
    path.with_name(TABLES_FILE + "-wal").unlink()
    with pytest.raises(LostWriteAheadLog, match=r"tables\.sqlite3-wal is missing"):
        open_tables(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "ibi_tools.cli", "local", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"ibi: local: {path}-wal is missing, and tables.sqlite3-shm says")
    assert "delete" in line and path.with_name(TABLES_FILE + "-shm").exists()  # left as it was


def test_a_kept_write_ahead_log_after_a_kill_9_keeps_every_write(tmp_path: Path) -> None:
    killed_after_writing(tmp_path / TABLES_FILE)
    assert records(tmp_path) == 50


def test_a_write_ahead_log_already_copied_back_may_be_missing(tmp_path: Path) -> None:
    """Every write copied into the file (a checkpoint), the log gone, its index left (as a
    kill -9 between SQLite's two deletions leaves them): nothing is lost, it starts."""
    import sqlite3

    path = tmp_path / TABLES_FILE
    shm = path.with_name(TABLES_FILE + "-shm")
    killed_after_writing(path)
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # copied back, the log kept
    index = shm.read_bytes()
    connection.close()  # the last connection: both files deleted
    shm.write_bytes(index)
    assert unwritten_frames(shm) == 0
    assert records(tmp_path) == 50
