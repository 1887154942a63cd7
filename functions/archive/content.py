"""What an Archive serves and keeps besides the item records: files, pages, checks, transfers.

Pure decisions over ports: which answer a file request gets (410 for a tombstone, the external
URL, 304 for a cached copy, a presigned URL for a large file, or the bytes after their SHA-256
is checked again), the file-list and metadata pages, uploads and their check, ``verify`` and a
transfer. Each returns an answer object; the handler turns it into HTTP.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from functions.archive.errors import BadRequest, NotHeld
from functions.archive.mapping import item_to_mapping
from functions.archive.model import Item, StoredFile
from functions.archive.parsing import declared_files
from functions.archive.service import ArchiveService
from functions.archive.transfer import Receiver, Transferred, check_item, transfer
from functions.archive.views import ArchiveViews, file_list_page, metadata_page, oai_dc

CACHE_FILE = "public, max-age=3600"
CACHE_METADATA = "public, max-age=300"
VERIFY_PAGE = 25


class FileStore(Protocol):
    """An Archive's files (``functions.archive.files.S3FileStore``)."""

    def presign_upload(
        self, item_key: str, path: str, *, sha256_hex: str, size: int, content_type: str
    ) -> dict[str, Any]: ...
    def commit(self, item_key: str, path: str, *, sha256_hex: str, size: int) -> None: ...
    def presign_download(self, item_key: str, path: str, *, filename: str | None = None) -> str: ...
    def read(self, item_key: str, path: str, *, max_bytes: int) -> bytes: ...
    def sha256_of(self, item_key: str, path: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Receivers:
    """How to reach a receiving Archive: ``connect(url)``, and the failures it may raise."""

    connect: Callable[[str], Receiver]
    errors: Callable[[], tuple[type[Exception], ...]]


@dataclass(frozen=True, slots=True)
class Page:
    """An answer with a body: a status, its content type and headers (``html`` by default)."""

    status: int
    body: str | bytes
    content_type: str = "html"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FileAnswer:
    """A file request's answer: a redirect (``location``), a 304, bytes, or a page."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    page: Page | None = None
    damaged: bool = False  # the stored bytes failed their SHA-256: never served
    path: str = ""  # the file chosen


@dataclass(frozen=True, slots=True)
class Verification:
    items: list[dict[str, Any]]
    problems: list[dict[str, str]]
    next: str | None


class ContentService:
    """Files, pages and checks of one Archive under its public ``views``."""

    def __init__(
        self,
        archive: ArchiveService,
        *,
        views: ArchiveViews,
        files: FileStore | None,
        serve_inline_bytes: int,
        receivers: Receivers | None = None,
    ) -> None:
        self.archive = archive
        self.views = views
        self._files = files
        self._inline = serve_inline_bytes
        self._receivers = receivers

    def _store(self) -> FileStore:
        if self._files is None:
            raise BadRequest("this Archive keeps no files: give the item a url instead")
        return self._files

    # -- public pages ----------------------------------------------------------------------------

    def serve_file(self, label: str, path: str, if_none_match: str | None) -> FileAnswer:
        """``GET /col/<ibi>[/<path>]``: the file, or where to get it, never damaged bytes."""
        item = self.archive.get(label)
        if item.deleted:
            return FileAnswer(410, page=Page(410, file_list_page(item, self.views)))
        chosen = item.file(path) if path else item.main_file
        if chosen is None:
            if not path and item.external_url:
                return FileAnswer(302, {"Location": item.external_url})
            missing = f"no file {path!r}" if path else "no default file"
            raise NotHeld(f"{item.key} has {missing}")
        if self._files is None:
            raise NotHeld("this Archive keeps no files")
        etag = f'"{chosen.sha256}"'
        if if_none_match == etag:
            return FileAnswer(304, {"ETag": etag})
        headers = {"ETag": etag, "Cache-Control": CACHE_FILE}
        if chosen.size > self._inline:
            name = chosen.path.rsplit("/", 1)[-1]
            location = self._files.presign_download(item.key, chosen.path, filename=name)
            return FileAnswer(302, {**headers, "Location": location})
        return self._inline_file(item, chosen, self._files, headers)

    def _inline_file(
        self, item: Item, chosen: StoredFile, files: FileStore, headers: dict[str, str]
    ) -> FileAnswer:
        data = files.read(item.key, chosen.path, max_bytes=self._inline)
        if hashlib.sha256(data).hexdigest() != chosen.sha256:
            page = Page(500, "<!doctype html><p>This file failed its integrity check.</p>")
            return FileAnswer(500, page=page, damaged=True, path=chosen.path)
        return FileAnswer(200, headers, page=Page(200, data, chosen.content_type, headers))

    def file_list(self, label: str) -> Page:
        """``GET /list/<ibi>``: the file-list page (403 when the item is not listable)."""
        item = self.archive.get(label)
        return Page(200 if item.listable else 403, file_list_page(item, self.views))

    def metadata(self, label: str, format: str | None) -> Page:
        """``GET /metadata/<ibi>``: the metadata page, or the oai_dc record."""
        item = self.archive.get(label)
        if not item.dc:
            raise NotHeld(f"{item.key} has no metadata in this Archive")
        cache = {"Cache-Control": CACHE_METADATA}
        if format == "oai_dc":
            return Page(200, oai_dc(item), "text/xml; charset=utf-8", cache)
        return Page(200, metadata_page(item, self.views), headers=cache)

    # -- the deposit API ---------------------------------------------------------------------------

    def item_answer(self, item: Item) -> dict[str, Any]:
        """The item as the deposit API answers it: its fields, its URLs, its accesses."""
        views = self.views
        return {
            **item_to_mapping(item),
            "urls": {
                "item": views.item_url(item),
                "files": views.file_list_url(item),
                "metadata": views.metadata_url(item, None) if item.dc else None,
            },
            "accesses": self.archive.accesses(item),
        }

    def presign_uploads(self, label: str, body: Any) -> dict[str, Any]:
        """Presigned PUT URLs for files of an item (any size, straight to the file store)."""
        declared_list = declared_files(body)
        item = self.archive.get(label)
        files = self._store()
        uploads = [
            {
                "path": declared.path,
                **files.presign_upload(
                    item.key,
                    declared.path,
                    sha256_hex=declared.sha256,
                    size=declared.size,
                    content_type=declared.content_type,
                ),
            }
            for declared in declared_list
        ]
        return {"ibi": item.ibi.to_mapping(), "uploads": uploads}

    def commit_files(self, label: str, body: Any) -> tuple[Item, int]:
        """Check uploaded files against their SHA-256 and size, then add them to the item."""
        declared = declared_files(body)
        item = self.archive.get(label)
        files = self._store()
        for stored in declared:
            files.commit(item.key, stored.path, sha256_hex=stored.sha256, size=stored.size)
        default = body.get("default_file")
        if default is not None and not isinstance(default, str):
            raise BadRequest('"default_file" must be the path of one of the item\'s files')
        return self.archive.set_files(label, declared, default), len(declared)

    def verify(self, label: str | None, after: str | None) -> Verification:
        """Stored files against their SHA-256; a copy against the original's checksum."""
        files = self._store()
        if label:
            items, more = [self.archive.get(label)], None
        else:
            items, more = self.archive.list_items(after=after, limit=VERIFY_PAGE)
        report = [check_item(item, files) for item in items if not item.deleted]
        problems = [p for entry in report for p in entry["problems"]]
        return Verification(report, problems, more)

    def transfer(self, label: str, body: Any) -> Transferred:
        """Move a transferable original to another Archive (seed 001 §3.2; see transfer.py)."""
        if not isinstance(body, dict) or not isinstance(body.get("to"), str):
            raise BadRequest(
                'send {"to": "<receiving Archive API URL>", "leave": "copy"|"tombstone"}'
            )
        if self._receivers is None:
            raise BadRequest("this Archive transfers nothing")
        receiver = self._receivers.connect(body["to"])
        return transfer(
            self.archive,
            self._files,
            receiver,
            label,
            leave=str(body.get("leave", "copy")),
            errors=self._receivers.errors(),
        )
