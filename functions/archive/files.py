"""Data access for an Archive's files: the only module here that talks to S3.

One bucket. A file of an item is the object ``<prefix><item>/<path>``, where ``<item>`` is
the item's key (its main label, which holds slashes: ``8JMKD3MGP8W/35MME4E``,
``sid.inpe.br/mtc-m18/2009/07.21.13.23``) percent-encoded as one segment, so that no two
(item, path) pairs share a key and one item's files are exactly the keys under its segment.

Three places in the bucket, each a prefix of its own:

* ``items/<item>/<path>``: the published files, the bytes persistent URLs serve. Only this
  Lambda writes there (by a server-side copy): no presigned URL ever points there, so no
  upload can change a published file.
* ``uploads/<item>/<sha256>/<path>``: where a presigned PUT lands (one key per announced
  content), kept until the bucket's lifecycle rule expires it (a day, ``infra/archive.py``).
* ``history/<item>/<sha256>/<path>``: the previous versions of replaced files, under the
  SHA-256 they were published with, kept for good.

Large files go straight to S3 through a presigned PUT, then :meth:`S3FileStore.commit` checks
what arrived and copies it to its published key. On AWS the URL is signed over the length, the
content type and ``x-amz-checksum-sha256``, so S3 refuses any other length, type or body
(``BadDigest``) and keeps the SHA-256 it verified, which the commit reads back. Emulators
check less (moto no checksum; local mode's SeaweedFS checks them as S3 does): there the
commit reads the object and hashes it, which is also what it does whenever no trustworthy
checksum is stored. A copy is one request up to 5 GiB (S3's limit for CopyObject, as for PUT).

The client must presign with SigV4 (``Config(signature_version="s3v4")``): botocore presigns
with SigV2 by default in us-east-1, which does not sign the length (and which S3 is retiring);
presigning refuses such a client.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from botocore.exceptions import BotoCoreError, ClientError, FlexibleChecksumError

from functions.archive.model import file_path
from functions.shared.dynamo import THROTTLING_CODES, error_code, translate
from ibi.core.errors import InvalidInput

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import GetObjectOutputTypeDef, HeadObjectOutputTypeDef
else:
    S3Client = GetObjectOutputTypeDef = HeadObjectOutputTypeDef = Any

MISSING_CODES = {"NoSuchKey", "NotFound", "404"}
MAX_SINGLE_PUT = 5 * 1024**3  # S3's limit for one PUT (and so for one presigned upload)
MAX_KEY_BYTES = 1024
MAX_PRESIGN_SECONDS = 7 * 24 * 3600
READ_CHUNK = 1024 * 1024
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_HEADER_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")


class FileStoreError(Exception):
    """The store could not do what was asked (throttled, unreachable, refused)."""

    def __init__(self, message: str, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.throttled = throttled


class FileMissing(Exception):
    """The item has no file at ``path`` in the store (never uploaded, or deleted)."""

    def __init__(self, item_key: str, path: str) -> None:
        super().__init__(f"{item_key}: no file {path!r}")
        self.item_key = item_key
        self.path = path


class FileMismatch(Exception):
    """The stored file is not the one announced: ``part`` (size or sha256) differs."""

    def __init__(self, item_key: str, path: str, part: str, *, expected: str, found: str):
        super().__init__(f"{item_key}: {path!r} has {part} {found}, expected {expected}")
        self.item_key = item_key
        self.path = path
        self.part = part
        self.expected = expected
        self.found = found


class FileTooLarge(Exception):
    """The file is bigger than the caller will read in memory."""

    def __init__(self, item_key: str, path: str, *, size: int, limit: int) -> None:
        super().__init__(f"{item_key}: {path!r} has {size} bytes, more than {limit}")
        self.item_key = item_key
        self.path = path
        self.size = size
        self.limit = limit


def _store_error(error: Exception, action: str) -> FileStoreError:
    failure = translate(error, action, FileStoreError)
    assert isinstance(failure, FileStoreError)
    return failure


def _is_missing(error: Exception) -> bool:
    return error_code(error) in MISSING_CODES


def _digest(sha256_hex: str) -> bytes:
    if not isinstance(sha256_hex, str) or not _SHA256_HEX.fullmatch(sha256_hex):
        raise InvalidInput("sha256", f"{sha256_hex!r} is not a lower-case hex SHA-256")
    return bytes.fromhex(sha256_hex)


def _check_size(size: int) -> int:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_SINGLE_PUT:
        raise InvalidInput("size", f"{size!r} is not a byte count from 0 to {MAX_SINGLE_PUT}")
    return size


def _check_expires(expires: int) -> int:
    if isinstance(expires, bool) or not isinstance(expires, int):
        raise InvalidInput("expires", f"{expires!r} is not a number of seconds")
    if not 1 <= expires <= MAX_PRESIGN_SECONDS:
        raise InvalidInput("expires", f"{expires} is not from 1 to {MAX_PRESIGN_SECONDS} seconds")
    return expires


def _header_value(part: str, value: str) -> str:
    if not value or _HEADER_UNSAFE.search(value):
        raise InvalidInput(part, f"{value!r} cannot be sent as a header")
    return value


def attachment(filename: str) -> str:
    """A ``Content-Disposition`` that saves as ``filename`` (an ASCII fallback and RFC 6266)."""
    if not filename:
        raise InvalidInput("filename", "empty")
    fallback = "".join(
        char if " " <= char <= "~" and char not in '"\\/' else "_" for char in filename
    )
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


class S3FileStore:
    """An Archive's files in one S3 bucket (or anything that speaks its API: moto, SeaweedFS).

    ``trust_stored_checksum``: take the ``ChecksumSHA256`` S3 keeps as the file's SHA-256
    (S3 verified it on upload). Set it to False for a server that keeps a checksum the client
    claimed without verifying it (moto does when sent ``x-amz-sdk-checksum-algorithm``).
    """

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        *,
        prefix: str = "items/",
        uploads_prefix: str = "uploads/",
        history_prefix: str = "history/",
        trust_stored_checksum: bool = True,
    ) -> None:
        prefixes = {prefix, uploads_prefix, history_prefix}
        if len(prefixes) != 3 or any(not p or not p.endswith("/") for p in prefixes - {""}):
            raise ValueError(f"the prefixes {sorted(prefixes)} must differ and end with '/'")
        if not uploads_prefix or not history_prefix:
            raise ValueError("uploads and previous versions need prefixes of their own")
        self._client = client
        self._bucket = bucket
        self._prefix = prefix
        self._uploads = uploads_prefix
        self._history = history_prefix
        self._trust_stored_checksum = trust_stored_checksum

    @property
    def bucket(self) -> str:
        return self._bucket

    # -- keys ----------------------------------------------------------------------------------

    def _item_prefix(self, item_key: str, prefix: str | None = None) -> str:
        if not item_key:
            raise InvalidInput("item", "empty item key")
        return f"{self._prefix if prefix is None else prefix}{quote(item_key, safe='')}/"

    @staticmethod
    def _checked(key: str, path: str) -> str:
        if len(key.encode("utf-8")) > MAX_KEY_BYTES:
            raise InvalidInput("path", f"{path!r} makes a key over {MAX_KEY_BYTES} bytes")
        return key

    def object_key(self, item_key: str, path: str) -> str:
        """The key of file ``path`` of item ``item_key``: ``<prefix><item %-encoded>/<path>``."""
        return self._checked(self._item_prefix(item_key) + file_path(path), path)

    def upload_key(self, item_key: str, path: str, sha256_hex: str) -> str:
        """Where an upload of ``path`` with SHA-256 ``sha256_hex`` lands before its commit."""
        _digest(sha256_hex)
        prefix = self._item_prefix(item_key, self._uploads)
        return self._checked(f"{prefix}{sha256_hex}/{file_path(path)}", path)

    def version_key(self, item_key: str, path: str, sha256_hex: str) -> str:
        """Where the version of ``path`` published with SHA-256 ``sha256_hex`` is kept."""
        _digest(sha256_hex)
        prefix = self._item_prefix(item_key, self._history)
        return self._checked(f"{prefix}{sha256_hex}/{file_path(path)}", path)

    # -- uploads -------------------------------------------------------------------------------

    def _presign(self, operation: str, params: dict[str, Any], expires: int) -> str:
        try:
            url: str = self._client.generate_presigned_url(
                operation, Params=params, ExpiresIn=_check_expires(expires)
            )
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error, "presigning a file URL") from error
        if "X-Amz-Signature=" not in url:
            raise FileStoreError(
                "the S3 client presigns with SigV2: build it with Config(signature_version='s3v4')"
            )
        return url

    def presign_upload(
        self,
        item_key: str,
        path: str,
        *,
        sha256_hex: str,
        size: int,
        content_type: str,
        expires: int = 900,
    ) -> dict[str, Any]:
        """A PUT the uploader sends with exactly ``headers``; :meth:`commit` it afterwards.

        The URL writes the upload's own key, never a published file. On AWS the signature
        covers the length, the content type and the SHA-256 (S3 checks the body against it),
        so the URL can store nothing but the announced file.
        """
        checksum = _b64(_digest(sha256_hex))
        _check_size(size)
        _header_value("content_type", content_type)
        url = self._presign(
            "put_object",
            {
                "Bucket": self._bucket,
                "Key": self.upload_key(item_key, path, sha256_hex),
                "ContentLength": size,
                "ContentType": content_type,
                "ChecksumSHA256": checksum,
            },
            expires,
        )
        headers = {
            "Content-Type": content_type,
            "Content-Length": str(size),
            "x-amz-checksum-sha256": checksum,
        }
        return {"url": url, "method": "PUT", "headers": headers}

    def commit(self, item_key: str, path: str, *, sha256_hex: str, size: int) -> None:
        """Check the upload of ``path`` (``size`` bytes, SHA-256 ``sha256_hex``), then publish
        it: copy it to the file's published key (whatever was there is replaced: the caller
        decides, from the item, whether that may happen).

        Raises :class:`FileMissing` when nothing was uploaded and :class:`FileMismatch` when
        something else was (the upload stays, until the lifecycle rule expires it).
        """
        upload = self.upload_key(item_key, path, sha256_hex)
        self._check(upload, item_key, path, sha256_hex=sha256_hex, size=size)
        published = self.object_key(item_key, path)
        if not self._published_already(published, sha256_hex, size):
            self._copy(upload, published, (item_key, path), "publishing a file")

    def _published_already(self, key: str, sha256_hex: str, size: int) -> bool:
        """Whether ``key`` holds these bytes by S3's own checksum (a commit retried after its
        copy outlasted the API's 29 s: a copy of several GiB may); never on an emulator."""
        try:
            head = self._client.head_object(Bucket=self._bucket, Key=key, ChecksumMode="ENABLED")
        except (ClientError, BotoCoreError):
            return False
        stored = self._stored_sha256(head)
        return stored == sha256_hex and int(head["ContentLength"]) == size

    def keep_version(self, item_key: str, path: str, *, sha256_hex: str) -> None:
        """Keep the published bytes of ``path`` (SHA-256 ``sha256_hex``) as a previous version,
        before a replacement overwrites them."""
        self._copy(
            self.object_key(item_key, path),
            self.version_key(item_key, path, sha256_hex),
            (item_key, path),
            "keeping a previous version",
        )

    def _copy(self, source: str, target: str, file: tuple[str, str], action: str) -> None:
        try:
            self._client.copy_object(
                Bucket=self._bucket,
                Key=target,
                CopySource={"Bucket": self._bucket, "Key": source},
                ChecksumAlgorithm="SHA256",
            )
        except (ClientError, BotoCoreError) as error:
            if _is_missing(error):
                raise FileMissing(*file) from error
            raise _store_error(error, action) from error

    def _check(self, key: str, item_key: str, path: str, *, sha256_hex: str, size: int) -> None:
        """The object at ``key`` has ``size`` bytes and SHA-256 ``sha256_hex``."""
        _digest(sha256_hex)
        _check_size(size)
        try:
            head = self._client.head_object(Bucket=self._bucket, Key=key, ChecksumMode="ENABLED")
        except (ClientError, BotoCoreError) as error:
            if _is_missing(error):
                raise FileMissing(item_key, path) from error
            raise _store_error(error, "checking an uploaded file") from error
        stored_size = int(head["ContentLength"])
        if stored_size != size:
            raise FileMismatch(item_key, path, "size", expected=str(size), found=str(stored_size))
        found = self._stored_sha256(head)
        if found is None:
            found, read_size = self._hash(key, item_key, path)
            if read_size != size:
                raise FileMismatch(item_key, path, "size", expected=str(size), found=str(read_size))
        if found != sha256_hex:
            raise FileMismatch(item_key, path, "sha256", expected=sha256_hex, found=found)

    def _stored_sha256(self, head: HeadObjectOutputTypeDef) -> str | None:
        """The full-object SHA-256 S3 verified and kept, as hex; None when there is none."""
        value = head.get("ChecksumSHA256")
        if not self._trust_stored_checksum or not value or head.get("ChecksumType") == "COMPOSITE":
            return None
        if "-" in value:  # a multipart upload's checksum of part checksums
            return None
        try:
            digest = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None
        return digest.hex() if len(digest) == 32 else None

    def put(
        self,
        item_key: str,
        path: str,
        data: bytes,
        content_type: str,
        *,
        announced: str | None = None,
    ) -> tuple[str, int]:
        """Store a small file at its published key, or (``announced``: a SHA-256) at the upload
        key of that announcement, as the client's presigned PUT does; S3 checks it against its
        SHA-256. Tests and tools only."""
        _check_size(len(data))
        digest = hashlib.sha256(data).digest()
        key = self.object_key(item_key, path)
        if announced is not None:
            key = self.upload_key(item_key, path, announced)
        try:
            self._client.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=data,
                ContentType=_header_value("content_type", content_type),
                ChecksumSHA256=_b64(digest),
            )
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error, "storing a file") from error
        return digest.hex(), len(data)

    # -- downloads -----------------------------------------------------------------------------

    def presign_download(
        self,
        item_key: str,
        path: str,
        *,
        expires: int = 300,
        filename: str | None = None,
        version: str | None = None,
    ) -> str:
        """A GET URL for the file (``version``: the one published with that SHA-256, kept when
        it was replaced); with ``filename``, browsers save it under that name."""
        key = self.object_key(item_key, path)
        if version is not None:
            key = self.version_key(item_key, path, version)
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": key}
        if filename is not None:
            params["ResponseContentDisposition"] = attachment(filename)
        return self._presign("get_object", params, expires)

    def _get(self, key: str, item_key: str, path: str, action: str) -> GetObjectOutputTypeDef:
        try:
            answer = self._client.get_object(Bucket=self._bucket, Key=key)
        except (ClientError, BotoCoreError) as error:
            if _is_missing(error):
                raise FileMissing(item_key, path) from error
            raise _store_error(error, action) from error
        return answer

    def read(self, item_key: str, path: str, *, max_bytes: int) -> bytes:
        """The whole file, if it has at most ``max_bytes`` (else :class:`FileTooLarge`)."""
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        answer = self._get(self.object_key(item_key, path), item_key, path, "reading a file")
        body = answer["Body"]
        with contextlib.closing(body):
            size = int(answer.get("ContentLength", 0))
            if size > max_bytes:
                raise FileTooLarge(item_key, path, size=size, limit=max_bytes)
            try:
                data: bytes = body.read(max_bytes + 1)
            except (ClientError, BotoCoreError) as error:
                raise _store_error(error, "reading a file") from error
        if len(data) > max_bytes:
            raise FileTooLarge(item_key, path, size=len(data), limit=max_bytes)
        return data

    def _hash(self, key: str, item_key: str, path: str) -> tuple[str, int]:
        """The SHA-256 (hex) and size of the stored bytes, read in chunks."""
        answer = self._get(key, item_key, path, "hashing a file")
        body = answer["Body"]
        sha256 = hashlib.sha256()
        size = 0
        with contextlib.closing(body):
            try:
                for chunk in body.iter_chunks(READ_CHUNK):
                    sha256.update(chunk)
                    size += len(chunk)
            except FlexibleChecksumError as error:
                # botocore read every byte, then found they do not match the stored checksum:
                # on S3 (which verified that checksum) the bytes were damaged on the way, so try
                # again; elsewhere the stored checksum may be a claim, and the bytes are the truth
                if self._trust_stored_checksum:
                    raise _store_error(error, "hashing a file") from error
            except (ClientError, BotoCoreError) as error:
                raise _store_error(error, "hashing a file") from error
        return sha256.hexdigest(), size

    def sha256_of(self, item_key: str, path: str, *, version: str | None = None) -> str:
        """The SHA-256 (hex) of the stored bytes, computed by reading them (for ``verify``);
        ``version``: of the previous version kept under that SHA-256."""
        key = self.object_key(item_key, path)
        if version is not None:
            key = self.version_key(item_key, path, version)
        return self._hash(key, item_key, path)[0]

    # -- deletion ------------------------------------------------------------------------------

    def delete_item_files(self, item_key: str) -> int:
        """Delete every file of the item; answer how many there were."""
        prefix = self._item_prefix(item_key)
        try:
            keys = [
                entry["Key"]
                for page in self._client.get_paginator("list_objects_v2").paginate(
                    Bucket=self._bucket, Prefix=prefix
                )
                for entry in page.get("Contents", [])
            ]
            for start in range(0, len(keys), 1000):
                batch = keys[start : start + 1000]
                answer = self._client.delete_objects(
                    Bucket=self._bucket,
                    Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
                )
                errors = answer.get("Errors", [])
                if errors:
                    codes = {str(error.get("Code", "")) for error in errors}
                    raise FileStoreError(
                        f"deleting the files of an item: {', '.join(sorted(codes))}",
                        throttled=bool(codes & THROTTLING_CODES),
                    )
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error, "deleting the files of an item") from error
        return len(keys)
