"""A data directory of ``ibi local``: its modes, its tables (and their copy from dynalite), its S3
server (and the copy from s3rver), its lock and ``running.json``, and its registration keys.

The data directory is the user's only (0700 when ``ibi local`` made it or it holds a run's
data already; ``keys/`` and ``s3/`` always 0700, every file ``ibi local`` writes 0600).
SeaweedFS keeps its objects in ``seaweedfs/`` and logs to ``seaweedfs.log`` there. A data
directory an earlier version kept in dynalite (``dynamodb/``) is copied into the tables at its
first start (:func:`open_tables`), and one whose objects s3rver kept (``s3/``) into SeaweedFS
(:func:`open_s3`).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ibi_tools.local.stores import (
    Dynalite,
    LocalStoreError,
    private_dir,
    write_private,
)
from ibi_tools.local.subsystems import SUBSYSTEMS_FILE
from ibi_tools.local.tables import LocalTables, LocalTablesClient


def prepare_data_dir(data_dir: Path) -> None:
    """The data directory, and its ``keys/``, readable by the user only (0700).

    The directory itself is tightened only when it is new, empty, or a run's already: one
    the user named that holds other things (``--data-dir .``) keeps its mode, and every
    secret in it sits in a 0700 subdirectory or a 0600 file anyway.
    """
    ours = not data_dir.exists() or (data_dir / SUBSYSTEMS_FILE).exists()
    if ours or not any(data_dir.iterdir()):
        private_dir(data_dir)
    private_dir(data_dir / "keys")  # the registration keys and the resolver's pepper


TABLES_FILE = "tables.sqlite3"
DYNALITE_DIR = "dynamodb"  # where versions before issue 14's local tables kept them
DYNALITE_KEPT = "dynamodb.before-tables"


class LostWriteAheadLog(LocalStoreError):
    """The tables' write-ahead log is gone while writes in it had not reached the file."""


def unwritten_frames(shm: Path) -> int:
    """How many frames of the write-ahead log the tables' ``-shm`` (SQLite's WAL index) says
    are not yet in the database file: its ``mxFrame`` (the log's last valid frame, at byte 16
    of its header) less its ``nBackfill`` (the frames copied back, at byte 96); 0 when it says
    nothing (empty, or not an index)."""
    try:
        with shm.open("rb") as file:
            header = file.read(100)
    except OSError:
        return 0
    if len(header) < 100:
        return 0
    for order in ("little", "big"):  # the index is in the machine's own byte order
        version = int.from_bytes(header[0:4], order)
        if version == 3007000:  # WALINDEX_MAX_VERSION
            last = int.from_bytes(header[16:20], order)
            backfilled = int.from_bytes(header[96:100], order)
            return max(0, last - backfilled)
    return 0


def check_write_ahead_log(path: Path) -> None:
    """Refuse tables whose ``-wal`` is missing while their ``-shm`` says it held writes not
    yet in the file (deleted after a ``kill -9``, say): SQLite would open the file without
    them, and those writes (IBIs minted, items deposited) would be lost without a word."""
    wal, shm = path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")
    if not path.exists() or wal.exists() or not shm.exists():
        return
    frames = unwritten_frames(shm)
    if frames:
        raise LostWriteAheadLog(
            f"{wal} is missing, and {shm.name} says it held {frames} page writes not yet in "
            f"{path.name}: the last writes before ibi local stopped (minted IBIs, deposits) "
            f"would be lost. Put {wal.name} back (from a backup) and start again; or, to go on "
            f"without those writes, delete {shm} and start again"
        )


def open_tables(data_dir: Path) -> LocalTables:
    """The data directory's tables; on the first start of a directory an earlier version kept
    in dynalite, its tables are copied in first (and ``dynamodb/`` kept, renamed). Tables whose
    write-ahead log was lost are refused (:func:`check_write_ahead_log`)."""
    path = data_dir / TABLES_FILE
    check_write_ahead_log(path)
    old = data_dir / DYNALITE_DIR
    if not path.exists() and old.is_dir() and any(old.iterdir()):
        copy_from_dynalite(old, path)
        old.rename(data_dir / DYNALITE_KEPT)
    return LocalTables(path)


def copy_from_dynalite(directory: Path, path: Path) -> int:
    """Every table and item dynalite keeps in ``directory``, copied into new tables at
    ``path`` (written beside it, then moved in place: an interrupted copy leaves nothing).
    The number of items copied."""
    print(f"ibi local: copying the tables in {directory} into {path.name}", file=sys.stderr)
    partial = path.with_name(path.name + ".partial")
    for leftover in (partial, *(partial.with_name(partial.name + end) for end in ("-wal", "-shm"))):
        leftover.unlink(missing_ok=True)
    target = LocalTables(partial)
    client = LocalTablesClient(partial)
    copied = 0
    with Dynalite(directory) as server:
        source = server.client()
        for page in source.get_paginator("list_tables").paginate():
            for name in page["TableNames"]:
                table = source.describe_table(TableName=name)["Table"]
                indexes = [
                    {k: index[k] for k in ("IndexName", "KeySchema", "Projection")}
                    for index in table.get("GlobalSecondaryIndexes", [])
                ]
                client.create_table(
                    TableName=name,
                    KeySchema=table["KeySchema"],
                    AttributeDefinitions=table["AttributeDefinitions"],
                    **({"GlobalSecondaryIndexes": indexes} if indexes else {}),
                )
                for scanned in source.get_paginator("scan").paginate(
                    TableName=name, ConsistentRead=True
                ):
                    for item in scanned["Items"]:
                        client.put_item(TableName=name, Item=item)
                        copied += 1
    client.close()
    target.checkpoint()
    partial.rename(path)
    return copied


S3_DIR = "seaweedfs"
S3RVER_DIR = "s3"  # where versions before SeaweedFS kept their objects (s3rver)
S3RVER_KEPT = "s3.before-seaweedfs"
S3_PORT_OFFSET = 100  # --s3-port's default: the minting port + 100 (8900 for 8800)


def open_s3(data_dir: Path, port: int) -> Any:
    """The data directory's S3 server, started; on the first start of a directory whose
    objects s3rver kept (``s3/``), they are copied in first (and ``s3/`` kept, renamed)."""
    from ibi_tools.local.s3 import copy_from_s3rver, s3_server, s3rver_objects

    server = s3_server(data_dir / S3_DIR, port=port, log=data_dir / "seaweedfs.log").start()
    old = data_dir / S3RVER_DIR
    try:
        if server.persistent and old.is_dir() and s3rver_objects(old):
            print(f"ibi local: copying the objects in {old} into {S3_DIR}/", file=sys.stderr)
            copy_from_s3rver(old, server.client())
            old.rename(data_dir / S3RVER_KEPT)
    except BaseException:
        server.stop()
        raise
    return server


LOCK_FILE = "ibi-local.lock"
RUNNING_FILE = "running.json"  # the running federation's URLs (rotate_key)


def new_registration_key() -> str:
    import secrets

    return f"{secrets.randbelow(10**12):012d}-{secrets.randbelow(10**12):012d}"


def rotate_key(data_dir: Path, archive: str) -> str:
    """Give ``archive`` a new registration key, kept in ``<data>/keys/`` for every later start.

    While ``ibi local`` runs on ``data_dir``, its resolver is given the new key and includes the
    Archive with it in one administrator's request (``POST /admin/switch``, ``rotate``: never
    the public switch route, so never throttled by anyone's wrong keys), all or nothing; the
    key file changes only then, so a failure leaves the old key working.
    """
    path = data_dir / "keys" / f"{archive}.key"
    if not path.exists():
        known = sorted(p.stem for p in (data_dir / "keys").glob("*.key"))
        raise ValueError(f"no Archive {archive!r} in {data_dir} (its Archives: {known or 'none'})")
    key = new_registration_key()
    running = running_endpoints(data_dir)
    if running is not None:
        _rotate_at_resolver(running, archive, key, old=path.read_text().strip())
    write_private(path, key + "\n")
    where = "registered at the running resolver" if running else "registered at the next start"
    return f"{archive}: a new registration key in {path} ({where})"


def _rotate_at_resolver(running: dict[str, Any], archive: str, key: str, *, old: str) -> None:
    """The running resolver re-keys ``archive`` and includes it with ``key``, or changes
    nothing; when no answer came (it may have), the old key is given back the same way."""
    from ibi.client import ApiError, ArchiveClient, ResolverClient, switch_pairs

    archive_url = running["archives"].get(archive)
    if archive_url is None:
        raise ValueError(f"{archive!r} is not running in this ibi local")
    service = ArchiveClient(archive_url, sign=False).service()
    ibi = service["archiveserviceibi"]

    def pairs(registration_key: str) -> dict[str, str]:
        return dict(
            switch_pairs(
                address=service["archiveaddress"],
                service_ibi=ibi.get("ibip") or ibi["rep"],
                base_url=service["base_url"],
                registration_key=registration_key,
                on=True,
            )
        )

    resolver = ResolverClient(running["resolver"], sign=False)
    try:
        answer = resolver.switch(pairs(key), rotate=True)
    except (ApiError, OSError) as error:
        if not isinstance(error, ApiError) or not 400 <= error.status < 500:
            resolver.switch(pairs(old), rotate=True)  # unknown outcome: the old key again
        raise RuntimeError(f"{archive} keeps its old key: {error}") from None
    if answer.get("status.archive") != "included":
        raise RuntimeError(f"{archive} keeps its old key: the resolver answered {answer}")


def running_endpoints(data_dir: Path) -> dict[str, Any] | None:
    """The URLs of the ``ibi local`` running on ``data_dir`` (None when none holds its lock)."""
    try:
        lock = open(data_dir / LOCK_FILE, "a+")  # noqa: SIM115 - closed below
    except OSError:
        return None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: it runs
            running: dict[str, Any] = json.loads((data_dir / RUNNING_FILE).read_text())
            return running
        return None


class DataDirInUseError(RuntimeError):
    """The data directory is held by a running ``ibi local``."""


def lock_data_dir(data_dir: Path, ports: Sequence[int]) -> TextIO:
    """An exclusive lock on the data directory, held while the file returned stays open: a
    second ``ibi local`` on it would start stores on the same files and kill the first's."""
    lock = open(data_dir / LOCK_FILE, "a+")  # noqa: SIM115 - held until the federation stops
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "another ibi local"
        lock.close()
        raise DataDirInUseError(
            f"{data_dir} is in use by {holder}; stop it, or give --data-dir another directory"
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"ibi local (pid {os.getpid()}, ports {', '.join(str(p) for p in ports)})\n")
    lock.flush()
    return lock
