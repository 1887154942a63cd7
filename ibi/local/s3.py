"""A local stand-in for S3: s3rver (npm) on loopback, keeping its buckets in a directory.

Why s3rver 3.7.1: it is the S3 emulator that runs here (node 20, no Docker, no binary
download) *and* keeps its data: each object is a plain file (``<key>._S3rver_object``, with
its metadata and MD5 beside it) under ``<path>/<bucket>/``, so objects survive a restart and
a ``kill -9`` of the server. moto's server keeps everything in memory, MinIO and LocalStack
need a binary download or Docker, and s3rver's successor (``@20minutes/s3rver``) needs
node 24. Measured here (boto3 1.44, node 20): start 0.25-0.3 s; a 64 MiB object put in 0.4 s,
read back in 0.2 s, sent through a presigned PUT in 0.25 s, hashed by streaming in 0.2 s;
200 small puts / heads / gets in about 1.0 / 0.7 / 0.7 s; multipart uploads, DeleteObjects,
listing with prefixes and percent signs in keys, presigned GETs with
``response-content-disposition``: all work, with boto3's default (CRC) checksum settings too.

What it does not do, and what follows (``functions/archive/files.py`` copes with each):

- it checks no SigV4 signature (only that the access key is its own, ``S3RVER``, and that a
  presigned URL has not expired), so a presigned PUT is not bound to its signed
  ``Content-Length``, ``Content-Type`` or ``x-amz-checksum-sha256``;
- it verifies no ``x-amz-checksum-*`` (nor ``Content-MD5``) and stores none, so HEAD returns no
  ``ChecksumSHA256``: committing an upload means reading the object back and hashing it;
- it writes an object in place, not atomically: a server killed in the middle of a PUT leaves
  a truncated object, which a commit (size and SHA-256 check) then refuses;
- a key's last segment becomes a file name plus ``._S3rver_object`` (15 characters), so each
  segment is limited to about 240 bytes here (S3 itself only limits the whole key to 1024);
- presigned URLs must be SigV4 (``Config(signature_version="s3v4")``, as :meth:`client` does):
  botocore presigns with SigV2 by default in us-east-1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from ibi.local.stores import (
    LOCAL_REGION,
    LOOPBACK,
    _die_with_parent,
    find_node_tool,
    free_port,
    wait_for_port,
)

# s3rver has one account and checks that requests name its access key (not the signature).
S3RVER_KEY = "S3RVER"
_MISSING_BUCKET_CODES = {"404", "NoSuchBucket", "NotFound"}
_BUCKET_EXISTS_CODES = {"BucketAlreadyExists", "BucketAlreadyOwnedByYou"}


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie holds no port and no files


def _stop_leftover(pidfile: Path, path: Path) -> None:
    """An s3rver on ``path`` left running by an earlier run that was killed: stop it.

    Like ``stores._stop_leftover`` (which only knows dynalite), and it also checks that the
    process serves this very directory, so that a reused pid or another run's s3rver is left
    alone.
    """
    try:
        pid = int(pidfile.read_text().strip())
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if not any(b"s3rver" in argument for argument in arguments):
        return
    if str(path).encode() not in arguments:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.05)


class LocalS3:
    """An s3rver on loopback keeping its buckets (and their objects) in ``path``."""

    def __init__(self, path: Path, *, port: int | None = None, log: IO[bytes] | None = None):
        self.path = Path(path).absolute()  # as the leftover check finds it in the command line
        self.port = port or free_port()
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def _pidfile(self) -> Path:
        return self.path.parent / f"{self.path.name}.pid"

    def start(self) -> LocalS3:
        self.path.mkdir(parents=True, exist_ok=True)
        _stop_leftover(self._pidfile, self.path)
        command = [
            str(find_node_tool("s3rver")),
            "--directory",
            str(self.path),
            "--address",
            LOOPBACK,
            "--port",
            str(self.port),
            "--no-vhost-buckets",
        ]
        if self._log is None:
            command.append("--silent")
        self._process = subprocess.Popen(  # noqa: S603 - our own tool, fixed arguments
            command,
            stdout=self._log or subprocess.DEVNULL,
            stderr=self._log or subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, no locks taken
        )
        self._pidfile.write_text(f"{self._process.pid}\n")
        wait_for_port(self.port, self._process)
        return self

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
        self._pidfile.unlink(missing_ok=True)

    def client(self) -> Any:
        """A boto3 S3 client for this server: path-style, SigV4 presigning, its fixed key."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                retries={"max_attempts": 3, "mode": "standard"},
                max_pool_connections=64,
            ),
            region_name=LOCAL_REGION,
            aws_access_key_id=S3RVER_KEY,
            aws_secret_access_key=S3RVER_KEY,
        )

    def ensure_bucket(self, name: str) -> None:
        """Create bucket ``name`` unless it is there already (it is kept in ``path``)."""
        client = self.client()
        try:
            client.head_bucket(Bucket=name)
            return
        except ClientError as error:
            if error.response.get("Error", {}).get("Code", "") not in _MISSING_BUCKET_CODES:
                raise
        try:
            client.create_bucket(Bucket=name)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code", "") not in _BUCKET_EXISTS_CODES:
                raise

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
