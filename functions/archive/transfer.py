"""Moving an original between Archives, and checking what an Archive stores.

Transfer (seed 001 §3.2; seed 004 §4.5): this Archive first stops answering ``Original``
(it keeps a ``Copy`` with the original's checksum, or a tombstone); then the receiving Archive
creates the ``Original`` and receives the files through its own upload-and-check path, so at
no moment do both answer ``Original``. If the receiver refuses the item, this Archive takes
it back. The receiver is reached through a port (``Receiver``): the deposit API client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from functions.archive.errors import BadRequest
from functions.archive.mapping import deposit_body, links_of
from functions.archive.model import Item
from functions.archive.service import ArchiveService

TRANSFER_MAX_BYTES = 64 * 1024 * 1024


class Receiver(Protocol):
    """The receiving Archive's deposit API (``ibi.client.ArchiveClient``)."""

    def create(
        self, body: dict[str, Any], *, idempotency_key: str | None = None
    ) -> dict[str, Any]: ...

    def upload_files(
        self, ibi: str, files: list[tuple[str, bytes, str]], *, default_file: str | None = None
    ) -> dict[str, Any]: ...

    def call(self, method: str, path: str, body: Any = None, **query: str) -> Any: ...


class TransferFailed(Exception):
    """``refused``: nothing moved (the original is back here); else the receiver is incomplete."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True, slots=True)
class Transferred:
    here: Item
    there: dict[str, Any]


def transfer(
    service: ArchiveService,
    files: Any,
    receiver: Receiver,
    label: str,
    *,
    leave: str,
    errors: tuple[type[Exception], ...],
) -> Transferred:
    """Move ``label``'s original to ``receiver``; ``errors`` are the receiver's failures."""
    item = service.get(label)
    too_big = [f.path for f in item.files if f.size > TRANSFER_MAX_BYTES]
    if too_big or (item.files and files is None):
        raise BadRequest(f"files too large to transfer through the API: {too_big}")
    before, after = service.release_original(label, leave=leave)
    try:
        received = receiver.create(deposit_body(before))
    except errors as error:
        service.restore_original(before)
        raise TransferFailed(str(error), refused=True) from error
    try:
        if before.files:
            contents = [
                (
                    f.path,
                    files.read(before.key, f.path, max_bytes=TRANSFER_MAX_BYTES),
                    f.content_type,
                )
                for f in before.files
            ]
            received = receiver.upload_files(before.key, contents, default_file=before.default_file)
        for link in links_of(before):
            received = receiver.call("POST", "/api/item/links", link, ibi=before.key)
    except errors as error:
        raise TransferFailed(
            f"the receiving Archive holds the original but: {error}; retry the upload there",
            refused=False,
        ) from error
    return Transferred(here=after, there=received)


def check_item(item: Item, files: Any) -> dict[str, Any]:
    """One item's integrity: every file's SHA-256, and a copy's main file against its original."""
    from functions.archive.files import FileMissing

    problems: list[dict[str, str]] = []
    for stored in item.files:
        try:
            found = files.sha256_of(item.key, stored.path)
        except FileMissing:
            problems.append({"ibi": item.key, "path": stored.path, "problem": "missing"})
            continue
        if found != stored.sha256:
            problems.append(
                {"ibi": item.key, "path": stored.path, "problem": "sha256", "found": found}
            )
    main = item.main_file
    if item.original_sha256 and main is not None and main.sha256 != item.original_sha256:
        problems.append(
            {"ibi": item.key, "path": main.path, "problem": "differs from the original"}
        )
    return {"ibi": item.ibi.to_mapping(), "files": len(item.files), "problems": problems}
