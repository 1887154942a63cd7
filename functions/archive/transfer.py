"""Moving an original between Archives, and checking what an Archive stores.

Transfer (seed 001 §3.2; seed 004 §4.5). At no moment may both Archives answer ``Original``,
and the original is released here only once the receiver has shown that it holds the item:

1. the receiver holds the item as an *incoming transfer* (``POST /api/transfers``): a pending
   ``Copy`` it answers to no one (not in the protocol, not on its pages); the item's access
   count goes with it (``accesses``), so that it does not restart at 0;
2. the files go through the receiver's own upload and check (``/api/item/uploads``,
   ``/api/item/files``);
3. the receiver is asked for the item (``GET /api/item``): it must be that IBI, pending, and
   list exactly our files, each with our SHA-256 and size. Any failure so far: nothing was
   released; the incoming item there is cancelled (``DELETE /api/transfers``);
4. this Archive releases the original (a ``Copy`` with the original's checksum, or a
   tombstone), only at the version the receiver was sent;
5. the receiver promotes it (``POST /api/transfers/complete``: one conditional write; its
   commits checked every file's bytes already); its answer must be that IBI, ``Original``,
   with our files.

If step 5 fails in any way (an error, an empty or wrong answer, a timeout), the receiver is
asked once more: if it holds the original with our files, the transfer is done; otherwise its
incoming item is cancelled and the original is put back here. The promotion and the
cancellation are conditional writes on the same record, so one of them wins: a refused
cancellation is followed by a last look, in case the promotion won meanwhile. Between steps 4
and 5 neither Archive answers ``Original`` (at most a few seconds: each call to the receiver
has a short timeout). The one way to end with two originals is a receiver that promotes and
then stops answering; the resolver shows that as a dispute (409), which an operator settles,
whereas an item released here and held nowhere would be lost (410). Step 4 starts only if the
time left can hold step 5's calls and a restore (:data:`CRITICAL_SECONDS`). Should this Archive
stop between steps 4 and 5 all the same, transferring the item again finds it pending there,
with the files released here, and completes step 5.

The receiver is an Archive registered and included at this Archive's resolver, and ``to`` must
be the address the resolver has registered for it (:func:`at_registered_address`,
``registered.py``). Besides its deposit API, the receiver is read through that registered
address (``registered_item``: its public ``GET /transfers/held``): step 3 needs that read to
show the item pending with our files, and after step 5 the transfer counts as done only once it
shows the receiver's ``Original`` with our files — whatever the deposit API answered. A
receiver that fakes the promotion (answers ``Original`` but holds it pending, or not at all)
is cancelled and the original is put back here (issue 24).

The receiver is reached through a port (``Receiver``): the deposit API client, over a
transport that applies the address rules of ``functions.shared.addresses``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aws_lambda_powertools import Logger

from functions.archive.errors import BadRequest, Conflict, Unprocessable
from functions.archive.mapping import transfer_body
from functions.archive.model import Forms, Item, State
from functions.archive.outbound import RefusedAddress
from functions.archive.registered import RegisteredArchive, Registry, included, origin
from functions.archive.service import ArchiveService

logger = Logger(service="archive", child=True)

TRANSFER_MAX_BYTES = 64 * 1024 * 1024
RECEIVER_TIMEOUT = 3.0  # seconds per call to a receiving Archive (a promotion is one write)
# After the release: the promotion, a second look, a cancellation, a last look, a restore.
CRITICAL_SECONDS = 4 * RECEIVER_TIMEOUT + 2.0
Expected = dict[str, tuple[str, int]]  # path -> (sha256, size)


class DepositApi(Protocol):
    """A receiving Archive's deposit API as reached at ``to`` (``ibi.client.ArchiveClient``)."""

    def receive_transfer(self, body: dict[str, Any]) -> Any: ...
    def upload_files(
        self, ibi: str, files: list[tuple[str, bytes, str]], *, default_file: str | None = None
    ) -> Any: ...
    def item(self, ibi: str) -> Any: ...
    def complete_transfer(self, ibi: str) -> Any: ...
    def cancel_transfer(self, ibi: str) -> Any: ...
    def service(self) -> Any: ...


class Receiver(DepositApi, Protocol):
    """A receiving Archive: its deposit API, and its item read at its registered address."""

    def registered_item(self, ibi: str) -> Any: ...


class TransferFailed(Exception):
    """``refused``: nothing moved (the original is here); else where it is must be looked at."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


class NotProven(Exception):
    """The receiver's answer does not show that it holds the item as it must."""


@dataclass(frozen=True, slots=True)
class Transferred:
    here: Item
    there: dict[str, Any]


LEAVES = frozenset({"copy", "tombstone"})


def leave_of(value: Any) -> str:
    """What a transfer leaves behind (``copy`` or ``tombstone``); any other value, 400."""
    if not isinstance(value, str) or value not in LEAVES:
        raise BadRequest('"leave" is "copy" or "tombstone"')
    return value


def transfer(
    service: ArchiveService,
    files: Any,
    receiver: Receiver,
    label: str,
    *,
    leave: str,
    remaining: Callable[[], float] = lambda: float("inf"),
) -> Transferred:
    """Move ``label``'s original to ``receiver``, releasing it only once the receiver proved it
    holds the item; ``remaining()`` is the time left (seconds) for the whole transfer."""
    leave_of(leave)
    item = service.get(label)
    if item.state is not State.ORIGINAL or item.pending:
        resumed = None if item.pending else _resume(receiver, item)
        if resumed is not None:
            return Transferred(here=item, there=resumed)
        raise Conflict(f"{item.key} is a {item.state.value} here: only an original moves")
    if item.service or not item.transferable:
        raise Conflict(f"{item.key} is an untransferable original")
    contents = _contents(item, files)
    expected: Expected = {f.path: (f.sha256, f.size) for f in item.files}
    try:
        body = {**transfer_body(item), "accesses": service.accesses(item)}  # the count goes on
        _expect(receiver.receive_transfer(body), item, pending=True)
        if contents:
            receiver.upload_files(item.key, contents, default_file=item.default_file)
        _expect(receiver.item(item.key), item, pending=True, files=expected)
        # The same, read where the resolver says the receiver is: never released on its word.
        _expect(receiver.registered_item(item.key), item, pending=True, files=expected)
        if remaining() < CRITICAL_SECONDS:
            raise NotProven(f"too little time left ({remaining():.0f} s) to complete safely")
        before, after = service.release_original(
            label, leave=leave, version=item.version, to=_service_of(receiver)
        )
    except Exception as error:
        _cancel(receiver, item.key)
        logger.warning("transfer refused", extra={"ibi": item.key, "reason": str(error)[:300]})
        raise TransferFailed(
            f"the receiving Archive did not show that it holds {item.key}: {error}; nothing "
            "moved, the original is here",
            refused=True,
        ) from error
    there = _promote(receiver, item, expected)
    if there is None:
        service.restore_original(before)
        raise TransferFailed(
            f"the receiving Archive did not take {item.key} as its original; the original is "
            "back here",
            refused=True,
        )
    return Transferred(here=after, there=there)


class RegisteredReceiver:
    """A receiver's deposit API at ``to``, ``to`` being the address the resolver has
    registered for ``archive``; its ``service()`` is the service IBI the resolver registered,
    and ``registered_item`` reads its public transfer view there (``registered.py``)."""

    def __init__(self, api: DepositApi, archive: RegisteredArchive, registry: Registry) -> None:
        self._api = api
        self.archive = archive
        self._registry = registry

    def receive_transfer(self, body: dict[str, Any]) -> Any:
        return self._api.receive_transfer(body)

    def upload_files(
        self, ibi: str, files: list[tuple[str, bytes, str]], *, default_file: str | None = None
    ) -> Any:
        return self._api.upload_files(ibi, files, default_file=default_file)

    def item(self, ibi: str) -> Any:
        return self._api.item(ibi)

    def complete_transfer(self, ibi: str) -> Any:
        return self._api.complete_transfer(ibi)

    def cancel_transfer(self, ibi: str) -> Any:
        return self._api.cancel_transfer(ibi)

    def service(self) -> Any:
        return {"archiveserviceibi": self.archive.service.to_mapping()}

    def registered_item(self, ibi: str) -> Any:
        return self._registry.held(self.archive, ibi)


def at_registered_address(api: DepositApi, to: str, registry: Registry | None) -> Receiver:
    """The receiver at ``to``, once the resolver shows that an included Archive is registered
    there: the service IBI it claims must be registered and included (else 409), and ``to``
    must be the address the resolver has for it (else 400, naming that address)."""
    try:
        claimed = Forms.from_mapping(api.service()["archiveserviceibi"])
    except RefusedAddress as refused:
        raise Unprocessable(
            f'"to" ({to[:200]}) is an address this Archive will not contact ({refused}): give '
            "the receiving Archive's registered address (GET <resolver>/archives/<its IBI>)"
        ) from None
    except Exception as error:
        raise TransferFailed(
            f"the receiving Archive at {to} does not say which Archive it is ({error}); "
            "nothing moved, the original is here",
            refused=True,
        ) from None
    archive = included(registry, claimed.key)
    assert registry is not None  # included() refuses without one
    if origin(to) != origin(archive.base_url):
        raise BadRequest(
            f'"to" ({to}) is not where the resolver has registered the Archive {archive.key}: '
            f"give its registered address, {archive.base_url}"
        )
    return RegisteredReceiver(api, archive, registry)


def _service_of(receiver: Receiver) -> Forms | None:
    """The receiving Archive's service IBI (``GET /api/service``), for the transfer record
    this Archive keeps (issue 24); None when it does not say (no record is kept then)."""
    try:
        return Forms.from_mapping(receiver.service()["archiveserviceibi"])
    except Exception as error:
        logger.warning("receiver's service IBI unknown", extra={"reason": str(error)[:300]})
        return None


def _contents(item: Item, files: Any) -> list[tuple[str, bytes, str]]:
    """The item's files, read and checked against their SHA-256 (damage is never sent)."""
    too_big = [f.path for f in item.files if f.size > TRANSFER_MAX_BYTES]
    if too_big or (item.files and files is None):
        raise BadRequest(f"files too large to transfer through the API: {too_big}")
    contents = []
    for stored in item.files:
        data = files.read(item.key, stored.path, max_bytes=TRANSFER_MAX_BYTES)
        if hashlib.sha256(data).hexdigest() != stored.sha256:
            raise Conflict(f"{item.key}: {stored.path!r} fails its SHA-256 here; not sent")
        contents.append((stored.path, data, stored.content_type))
    return contents


def _resume(receiver: Receiver, item: Item) -> dict[str, Any] | None:
    """A transfer interrupted after the release (this Archive stopped between steps 4 and 5):
    the receiver holds the item pending, with the files we released; promote it there."""
    try:
        files = None if item.deleted else {f.path: (f.sha256, f.size) for f in item.files}
        _expect(receiver.registered_item(item.key), item, pending=True, files=files)
        _expect(receiver.complete_transfer(item.key), item, pending=False, files=files)
        answer = _expect(receiver.registered_item(item.key), item, pending=False, files=files)
    except Exception as error:
        logger.info("no transfer to resume", extra={"ibi": item.key, "reason": str(error)[:300]})
        return None
    logger.warning("interrupted transfer completed", extra={"ibi": item.key})
    return answer


def _promote(receiver: Receiver, item: Item, expected: Expected) -> dict[str, Any] | None:
    """The receiver's item once it holds the original with our files, as read at its registered
    address (whatever the promotion answered); None when it does not."""
    try:
        _expect(receiver.complete_transfer(item.key), item, pending=False, files=expected)
    except Exception as error:
        logger.warning("promotion failed", extra={"ibi": item.key, "reason": str(error)[:300]})
    held = _holds(receiver, item, expected)  # done, its answer lost; or faked: not done
    if held is not None:
        return held
    # The promotion and the cancellation are both conditional writes there: one of them wins.
    # A refused cancellation may mean the promotion won meanwhile: look once more.
    return None if _cancel(receiver, item.key) else _holds(receiver, item, expected)


def _holds(receiver: Receiver, item: Item, expected: Expected) -> dict[str, Any] | None:
    """The receiver's item if it holds the original with our files, read at its registered
    address; else None."""
    try:
        return _expect(receiver.registered_item(item.key), item, pending=False, files=expected)
    except Exception as error:
        logger.warning("receiver not holding", extra={"ibi": item.key, "reason": str(error)[:300]})
        return None


def _cancel(receiver: Receiver, key: str) -> bool:
    """The receiver forgets its incoming item (it refuses for an original); whether it did."""
    try:
        receiver.cancel_transfer(key)
    except Exception as error:
        logger.info("incoming transfer not cancelled", extra={"ibi": key, "reason": str(error)})
        return False
    return True


def _expect(
    answer: Any, item: Item, *, pending: bool, files: Expected | None = None
) -> dict[str, Any]:
    """``answer`` is the receiver's record of ``item``: pending or original, with ``files``."""
    if not isinstance(answer, dict):
        raise NotProven(f"the receiver answered no item ({type(answer).__name__})")
    try:
        forms = Forms.from_mapping(answer.get("ibi"))
    except (ValueError, TypeError) as error:
        raise NotProven(f"the receiver's item has no IBI: {error}") from None
    if not set(forms.labels) & set(item.ibi.labels):
        raise NotProven(f"the receiver answered about {forms.key}, not {item.key}")
    state = (answer.get("state"), answer.get("pending"))
    wanted = (State.COPY.value, True) if pending else (State.ORIGINAL.value, False)
    if state != wanted:
        raise NotProven(f"the receiver holds it as {state}, not {wanted}")
    if files is not None and _files_of(answer) != files:
        raise NotProven("the receiver's files (paths, SHA-256, sizes) are not ours")
    return answer


def _files_of(answer: dict[str, Any]) -> Expected:
    listed = answer.get("files")
    if not isinstance(listed, list) or not all(isinstance(f, dict) for f in listed):
        raise NotProven("the receiver lists no files")
    found: Expected = {}
    for entry in listed:
        path, sha256, size = entry.get("path"), entry.get("sha256"), entry.get("size")
        if not isinstance(path, str) or not isinstance(sha256, str) or type(size) is not int:
            raise NotProven(f"the receiver lists a file without path, SHA-256 or size: {entry}")
        found[path] = (sha256, size)
    return found


def check_item(item: Item, files: Any) -> dict[str, Any]:
    """One item's integrity: every file's SHA-256, every previous version kept under its
    SHA-256, and a copy's main file against its original's checksum."""
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
    problems += _check_history(item, files)
    problems += compare_with_original(item)
    replaced = [r.to_mapping() for r in item.history if r.action in {"replaced", "added"}]
    entry: dict[str, Any] = {
        "ibi": item.ibi.to_mapping(),
        "state": item.state.value,
        "files": len(item.files),
        "problems": problems,
        "revisions": replaced,
    }
    if item.state is State.COPY:
        entry["original"] = _original_basis(item)
    return entry


def _original_basis(item: Item) -> str:
    """What a copy is compared with: its original's files, one checksum, or nothing."""
    if item.original_files:
        return f"{len(item.original_files)} file(s) of the original"
    return "the original's main file" if item.original_sha256 else "unknown"


def compare_with_original(item: Item) -> list[dict[str, str]]:
    """Where a copy disagrees with its original's files (paths, SHA-256, sizes) as recorded
    (read from the original's Archive when the copy was made, or by a later verify:
    ``copies.py``): a file missing here, one the original has not, other bytes."""
    if item.state is not State.COPY:
        return []
    problems: list[dict[str, str]] = []
    if item.expects_files:
        for expected in item.original_files:
            held = item.file(expected.path)
            if held is None:
                problem = "missing from the copy"
            elif (held.sha256, held.size) != (expected.sha256, expected.size):
                problem = "differs from the original"
            else:
                continue
            problems.append(
                {
                    "ibi": item.key,
                    "path": expected.path,
                    "problem": problem,
                    "sha256": expected.sha256,
                }
            )
        problems += [
            {"ibi": item.key, "path": f.path, "problem": "not in the original"}
            for f in item.files
            if item.expected(f.path) is None
        ]
        return problems
    main = item.main_file
    if item.original_sha256 and main is not None and main.sha256 != item.original_sha256:
        problems.append(
            {
                "ibi": item.key,
                "path": main.path,
                "problem": "differs from the original",
                "sha256": item.original_sha256,
            }
        )
    return problems


def _check_history(item: Item, files: Any) -> list[dict[str, str]]:
    """Each replaced version is still there, with the SHA-256 it was published with."""
    from functions.archive.files import FileMissing

    problems: list[dict[str, str]] = []
    for revision in item.history:
        if revision.action != "replaced" or revision.path is None or not revision.old_sha256:
            continue
        try:
            found = files.sha256_of(item.key, revision.path, version=revision.old_sha256)
        except FileMissing:
            found = "missing"
        if found != revision.old_sha256:
            problems.append(
                {
                    "ibi": item.key,
                    "path": revision.path,
                    "problem": f"previous version {'missing' if found == 'missing' else 'sha256'}",
                    "sha256": revision.old_sha256,
                }
            )
    return problems
