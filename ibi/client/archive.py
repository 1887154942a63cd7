"""An Archive's deposit API: items, their files (streamed from disk through presigned URLs),
links, transfers, link checks and the integrity report."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlencode

from ibi.client.api import ApiClient
from ibi.client.transport import ApiError, Raw


class LocalFile:
    """A file to upload from disk: hashed and sent a block at a time, never read whole."""

    BLOCK = 1 << 20

    def __init__(self, path: Path) -> None:
        self.path = path
        self._digest: tuple[str, int] | None = None

    def __repr__(self) -> str:
        return f"LocalFile({str(self.path)!r})"

    def digest(self) -> tuple[str, int]:
        """(SHA-256 in hex, size in bytes), read once."""
        if self._digest is None:
            with self.path.open("rb") as stream:
                sha256 = hashlib.file_digest(stream, "sha256").hexdigest()
                self._digest = (sha256, stream.tell())
        return self._digest

    def open(self) -> BinaryIO:
        return self.path.open("rb")


Content = bytes | LocalFile
Upload = tuple[str, Content, str]  # (path in the item, the bytes or a file, content type)


def digest(content: Content) -> tuple[str, int]:
    """(SHA-256 in hex, size) of an upload's content."""
    if isinstance(content, LocalFile):
        return content.digest()
    return hashlib.sha256(content).hexdigest(), len(content)


class UploadProgress(Protocol):
    """Told of each file as its upload starts, then of the bytes sent."""

    def start(self, path: str, size: int) -> None: ...
    def sent(self, count: int) -> None: ...


class _Reading:
    """A file object that tells ``progress`` of every block read from it (http.client reads
    a request body a block at a time when it is a file object)."""

    def __init__(self, stream: BinaryIO, progress: UploadProgress | None) -> None:
        self._stream = stream
        self._progress = progress

    def read(self, size: int = -1) -> bytes:
        block = self._stream.read(size if size is not None and size >= 0 else LocalFile.BLOCK)
        if block and self._progress is not None:
            self._progress.sent(len(block))
        return block


LINK_CHECK_IBIS = 50  # items one link check request may name (functions/archive/links.py)


class ArchiveClient(ApiClient):
    """An Archive's deposit API."""

    service_name = "an Archive"

    def service(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/api/service")
        return answer

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        answer: dict[str, Any] = self.ok(
            self.request("POST", "/api/items", body, headers), "POST /api/items"
        )
        return answer

    def copy(self, body: dict[str, Any]) -> dict[str, Any]:
        """A copy of an original held elsewhere (``{"ibi", "original_files"?, …}``). The Archive
        reads the original's files from its Archive through its resolver; ``original_files``,
        if given, must agree (409 otherwise). The answer's ``original_check`` says whether it
        could (``verified``) or not (``unverified``, with the reason)."""
        answer: dict[str, Any] = self.call("POST", "/api/copies", body)
        return answer

    def item(self, ibi: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/api/item", ibi=ibi)
        return answer

    def items(self, *, page_size: int = 200) -> Iterator[dict[str, Any]]:
        """Every item the Archive holds, tombstones included (``GET /api/items``, a page at a
        time)."""
        after: str | None = None
        while True:
            query = {"limit": str(page_size), **({"after": after} if after else {})}
            page = self.call("GET", "/api/items", **query)
            yield from page["items"]
            after = page.get("next")
            if not after:
                return

    def update(self, ibi: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Change an item: ``{"listable": false}``, ``"language"``, ``"dc"``, … (its timestamp
        advances)."""
        answer: dict[str, Any] = self.call("PATCH", "/api/item", changes, ibi=ibi)
        return answer

    def delete(self, ibi: str, reason: str | None = None) -> dict[str, Any]:
        """Delete an item: a tombstone stays, answering ``Deleted`` (410 at the resolver), its
        pages and citation saying what was there and, with ``reason``, why it was withdrawn."""
        why = {"reason": reason} if reason else {}
        answer: dict[str, Any] = self.call("DELETE", "/api/item", None, ibi=ibi, **why)
        return answer

    def transfer(self, ibi: str, to: str, leave: str) -> dict[str, Any]:
        """Move a transferable original to the Archive whose deposit API is ``to``."""
        answer: dict[str, Any] = self.call(
            "POST", "/api/item/transfer", {"to": to.rstrip("/"), "leave": leave}, ibi=ibi
        )
        return answer

    def link(self, ibi: str, body: dict[str, Any]) -> dict[str, Any]:
        """Link one related item: ``{"next_edition": …}``, ``{"translation": …}`` or
        ``{"metadata": {"ibi": …, "format": "oai_dc"?}}``."""
        answer: dict[str, Any] = self.call("POST", "/api/item/links", body, ibi=ibi)
        return answer

    def unlink(self, ibi: str, link: str) -> dict[str, Any]:
        """Remove one link (``link``: ``next_edition``, ``translation(pt-BR)``, ``metadata`` or
        ``metadata_oai_dc``); the Archive records the removal in the item's history."""
        answer: dict[str, Any] = self.call("DELETE", "/api/item/links", ibi=ibi, link=link)
        return answer

    def upload_files(
        self,
        ibi: str,
        files: Sequence[Upload],
        *,
        default_file: str | None = None,
        progress: UploadProgress | None = None,
    ) -> dict[str, Any]:
        """Upload ``(path, content, content type)`` through presigned URLs, then commit them.

        A :class:`LocalFile`'s content is streamed from disk, never read whole.
        """
        body: dict[str, Any] = {"files": self._declare_and_upload(ibi, files, progress)}
        if default_file is not None:
            body["default_file"] = default_file
        answer: dict[str, Any] = self.call("POST", "/api/item/files", body, ibi=ibi)
        return answer

    def _declare_and_upload(
        self, ibi: str, files: Sequence[Upload], progress: UploadProgress | None = None
    ) -> list[Any]:
        """Announce ``files`` and send each through its presigned URL; what was announced."""
        sizes = [digest(content) for _, content, _ in files]
        declared: list[dict[str, Any]] = [
            {"path": path, "sha256": sha256, "size": size, "content_type": content_type}
            for (path, _, content_type), (sha256, size) in zip(files, sizes, strict=True)
        ]
        answer = self.call("POST", "/api/item/uploads", {"files": declared}, ibi=ibi)
        uploads = answer.get("uploads") if isinstance(answer, dict) else None
        if not isinstance(uploads, list) or len(uploads) != len(files):
            raise ApiError(0, "the Archive answered no upload URLs")
        for upload, (path, content, _), (_, size) in zip(uploads, files, sizes, strict=True):
            if progress is not None:
                progress.start(path, size)
            self._upload(upload, content, size, progress)
        return declared

    def _upload(
        self, upload: dict[str, Any], content: Content, size: int, progress: UploadProgress | None
    ) -> None:
        """One presigned PUT: bytes as they are, a :class:`LocalFile` a block at a time."""
        headers = {"Content-Length": str(size), **upload["headers"]}
        if isinstance(content, LocalFile):
            with content.open() as stream:
                raw = self._put(upload, _Reading(stream, progress), headers)
        else:
            raw = self._put(upload, content, headers)
            if progress is not None:
                progress.sent(len(content))
        if not 200 <= raw.status < 300:
            raise ApiError(raw.status, f"uploading {upload['path']}: {raw.reason}")

    def _put(self, upload: dict[str, Any], data: Any, headers: dict[str, str]) -> Raw:
        return self._transport(
            upload["method"],
            upload["url"],  # a URL the Archive presigned
            data=data,
            headers=headers,
            timeout=self.timeout,
        )

    def replace_files(
        self,
        ibi: str,
        files: Sequence[Upload],
        *,
        reason: str,
        default_file: str | None = None,
        progress: UploadProgress | None = None,
    ) -> dict[str, Any]:
        """An operator's revision: add or replace files of any item (the previous versions are
        kept and every change is recorded in the item's history, with ``reason``)."""
        body: dict[str, Any] = {
            "files": self._declare_and_upload(ibi, files, progress),
            "reason": reason,
        }
        if default_file is not None:
            body["default_file"] = default_file
        answer: dict[str, Any] = self.call("POST", "/api/item/files/replace", body, ibi=ibi)
        return answer

    def previous_version(self, ibi: str, path: str, sha256: str) -> dict[str, Any]:
        """Where to download a replaced version of a file (a short-lived URL)."""
        query = urlencode({"ibi": ibi, "path": path, "sha256": sha256})
        answer: dict[str, Any] = self.call("GET", f"/api/item/previous?{query}")
        return answer

    def import_original(self, body: dict[str, Any]) -> dict[str, Any]:
        """An original for an IBI of another subsystem: ``{"ibi", "reason", …}`` (operators)."""
        answer: dict[str, Any] = self.call("POST", "/api/imports", body)
        return answer

    # -- the receiving side of a transfer (called by the sending Archive) ----------------------

    def receive_transfer(self, body: dict[str, Any]) -> Any:
        return self.call("POST", "/api/transfers", body)

    def complete_transfer(self, ibi: str) -> Any:
        return self.call("POST", "/api/transfers/complete", None, ibi=ibi)

    def cancel_transfer(self, ibi: str) -> Any:
        return self.call("DELETE", "/api/transfers", None, ibi=ibi)

    def check_links(self, ibis: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
        """Check the items' external URLs now (``POST /api/links/check``): those ``ibis``
        names, else every item with one, a run after another (each within the API's time)
        until none is left; each run's answer, its ``results`` item by item."""
        if ibis:
            for at in range(0, len(ibis), LINK_CHECK_IBIS):
                yield self.call(
                    "POST", "/api/links/check", {"ibis": list(ibis[at : at + LINK_CHECK_IBIS])}
                )
            return
        body: dict[str, Any] = {}
        while True:
            run = self.call("POST", "/api/links/check", body)
            yield run
            if not run["left"] or not run["checked"]:  # done, or no progress to wait for
                return
            body = {"checked_before": body.get("checked_before", run["started_at"])}

    def verify(self, ibi: str | None = None) -> Iterator[dict[str, Any]]:
        """The integrity report, item by item (every item when ``ibi`` is None)."""
        if ibi is not None:
            yield from self.call("POST", "/api/verify", None, ibi=ibi)["items"]
            return
        after: str | None = None
        while True:
            query = {"after": after} if after else {}
            page = self.call("POST", "/api/verify", None, **query)
            yield from page["items"]
            after = page.get("next")
            if not after:
                return
