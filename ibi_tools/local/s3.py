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
- each segment of a key becomes a directory or a file name, the last one plus
  ``._S3rver_metadata.json`` (22 bytes), and a file name has at most 255 bytes: a key with a
  segment of more than 233 bytes (a file name of 255 bytes, which S3 takes: it limits only the
  whole key, to 1024) is an s3rver 500, and a longer one kills it. So :meth:`LocalS3.client`
  keeps a segment s3rver cannot under a shorter one (its start and a hash of it: see
  :func:`short_segments`), in every request: the Archive still names the file by its own key;
- it reads ``x-amz-copy-source`` with JavaScript's ``decodeURI``, which leaves ``%23 %24 %26
  %2B %2C %2F %3A %3B %3D %3F %40`` (``# $ & + , / : ; = ? @``) undecoded, where S3 and moto
  decode every escape: boto3's copy source (each of those escaped) names a key s3rver does not
  have, and a file named ``a;b.csv`` could not be published (``FileMissing``). So
  :meth:`LocalS3.client` sends the copy source in the form ``decodeURI`` reads back as the key
  (those characters as they are, everything else escaped); ``files.py`` keeps boto3's form,
  which is S3's;
- presigned URLs must be SigV4 (``Config(signature_version="s3v4")``, as :meth:`client` does):
  botocore presigns with SigV2 by default in us-east-1;
- it logs every request line, query string included: a presigned URL's ``X-Amz-Signature``
  and ``X-Amz-Credential`` with it, and its logging cannot be configured beyond ``--silent``.
  So its output reaches the log only through :func:`~ibi_tools.local.stores.scrub_log_line`
  (no query strings, no colours), into a 0600 file. Its request logger (koa-logger) cuts the
  first 16 characters of each line, which are colour codes only when colours are on: hence
  ``FORCE_COLOR=1``, else the method and the start of the path are cut instead.
"""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import quote, unquote

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from ibi_tools.local.stores import LOCAL_REGION, LOOPBACK, LocalServer

# s3rver has one account and checks that requests name its access key (not the signature).
S3RVER_KEY = "S3RVER"
_MISSING_BUCKET_CODES = {"404", "NoSuchBucket", "NotFound"}
_BUCKET_EXISTS_CODES = {"BucketAlreadyExists", "BucketAlreadyOwnedByYou"}
# The longest segment s3rver can keep: a file name has at most 255 bytes, and the last segment
# of a key is one with "._S3rver_metadata.json" (22 bytes) after it. Keys within these limits
# are kept as they are, so that what a data directory holds stays where it was.
MAX_FOLDER_BYTES = 255
MAX_NAME_BYTES = 255 - 22
_SHORT_START_BYTES = 120  # what a shortened segment keeps of the original, before its hash


def short_segment(segment: str, limit: int = MAX_NAME_BYTES) -> str:
    """``segment``, or when longer than ``limit`` bytes, its first bytes (whole characters),
    ``~`` and the SHA-256 of all of it (185 bytes at most, so that shortening is done once)."""
    data = segment.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return segment
    start = data[:_SHORT_START_BYTES].decode("utf-8", "ignore")
    return f"{start}~{hashlib.sha256(data).hexdigest()}"


def short_segments(key: str) -> str:
    """``key`` as s3rver keeps it: each segment :func:`short_segment` (folders up to 255)."""
    *folders, name = key.split("/")
    return "/".join([*(short_segment(f, MAX_FOLDER_BYTES) for f in folders), short_segment(name)])


def keys_for_s3rver(params: dict[str, Any], **_: Any) -> None:
    """Every key a request names (``Key``, a copy source's, a deletion's, a listing's whole
    segments) as :func:`short_segments` stores it."""
    if isinstance(params.get("Key"), str):
        params["Key"] = short_segments(params["Key"])
    source = params.get("CopySource")
    if isinstance(source, dict) and isinstance(source.get("Key"), str):
        params["CopySource"] = {**source, "Key": short_segments(source["Key"])}
    prefix = params.get("Prefix")
    if isinstance(prefix, str) and "/" in prefix:  # its folders; not the start of a name
        folders, slash, start = prefix.rpartition("/")
        params["Prefix"] = short_segments(folders + slash) + start
    delete = params.get("Delete")
    for entry in delete.get("Objects", []) if isinstance(delete, dict) else []:
        if isinstance(entry, dict) and isinstance(entry.get("Key"), str):
            entry["Key"] = short_segments(entry["Key"])


# What JavaScript's decodeURI leaves escaped (ECMA-262's reserved set, and "#").
_DECODE_URI_KEEPS = ";/?:@&=+$,#"
_VERSION = "?versionId="


def copy_source_for_s3rver(params: dict[str, Any], **_: Any) -> None:
    """Rewrite a CopyObject's (or UploadPartCopy's) ``CopySource``, which botocore has just
    percent-encoded for S3, into the form s3rver's ``decodeURI`` turns back into the key.

    A ``?versionId=`` suffix is botocore's own (a key's ``?`` is escaped by then), and is kept.
    """
    source = params.get("CopySource")
    if not isinstance(source, str):
        return
    path, version, version_id = source.partition(_VERSION)
    params["CopySource"] = quote(unquote(path), safe=_DECODE_URI_KEEPS) + version + version_id


class LocalS3(LocalServer):
    """An s3rver on loopback keeping its buckets (and their objects) in ``path``."""

    tool = "s3rver"

    def arguments(self) -> list[str]:
        arguments = [
            "--directory",
            str(self.path),
            "--address",
            LOOPBACK,
            "--port",
            str(self.port),
            "--no-vhost-buckets",
        ]
        return arguments if self.log is not None else [*arguments, "--silent"]

    def environment(self) -> dict[str, str]:
        return {"FORCE_COLOR": "1"}  # whole request lines (see above); the colours are scrubbed

    def client(self) -> Any:
        """A boto3 S3 client for this server: path-style, SigV4 presigning, its fixed key, the
        copy source as s3rver reads it (after botocore's own encoding, which runs first)."""
        client = boto3.client(
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
        events = client.meta.events
        events.register_first("before-parameter-build.s3", keys_for_s3rver)
        for operation in ("CopyObject", "UploadPartCopy"):
            # botocore encodes the copy source at the operation's own event, which runs before
            # the service's: the key is shortened before it, the encoding redone after it
            event = f"before-parameter-build.s3.{operation}"
            events.register_first(event, keys_for_s3rver)
            events.register_last(event, copy_source_for_s3rver)
        return client

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
