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
  botocore presigns with SigV2 by default in us-east-1;
- it logs every request line, query string included: a presigned URL's ``X-Amz-Signature``
  and ``X-Amz-Credential`` with it, and its logging cannot be configured beyond ``--silent``.
  So its output reaches the log only through :func:`~ibi_tools.local.stores.scrub_log_line`
  (no query strings, no colours), into a 0600 file. Its request logger (koa-logger) cuts the
  first 16 characters of each line, which are colour codes only when colours are on: hence
  ``FORCE_COLOR=1``, else the method and the start of the path are cut instead.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from ibi_tools.local.stores import LOCAL_REGION, LOOPBACK, LocalServer

# s3rver has one account and checks that requests name its access key (not the signature).
S3RVER_KEY = "S3RVER"
_MISSING_BUCKET_CODES = {"404", "NoSuchBucket", "NotFound"}
_BUCKET_EXISTS_CODES = {"BucketAlreadyExists", "BucketAlreadyOwnedByYou"}


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
