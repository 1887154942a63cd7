"""The Archive's facade, what the routes call: files and item records together, and pages.

:class:`ContentService` owns what needs an item's files and its record at once: uploads and
their check (a published file never changes there), an operator's revision (the previous
version kept in the file store, the change recorded in the item), ``verify``, a transfer out
and offers, and what a file request gets. The item layer beneath it (``service.py``:
``ArchiveService``, made of ``deposits.py``, ``transfers.py``, ``bootstrap.py`` over
``items.py``) owns the records alone; a verb of it that the routes call as it is is named on
the facade with :class:`Through`, never defined twice.

Pure decisions over ports: which answer a file request gets (410 for a tombstone, the external
URL, 304 for a cached copy, a presigned URL for a large file, or the bytes after their SHA-256
is checked again), the file-list and metadata pages, uploads and their check (a published
file never changes there), an operator's revision (the previous version kept), ``verify`` and a
transfer. Each returns an answer object; the handler turns it into HTTP. An item on its way in
(an incoming transfer) is shown to no one.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload
from urllib.parse import quote

from aws_lambda_powertools import Logger

from functions.archive.copies import CopyChecks
from functions.archive.errors import ArchiveError, BadRequest, NotHeld
from functions.archive.mapping import item_to_mapping
from functions.archive.model import Forms, Item, State, StoredFile
from functions.archive.offers import Offer, OfferKeys, Sender, accept, confirm, make_offer
from functions.archive.parsing import declared_files
from functions.archive.registered import Registry, shown, transfer_view
from functions.archive.service import UNKNOWN, ArchiveService, reason_of
from functions.archive.store import ItemStore
from functions.archive.transfer import (
    DepositApi,
    Transferred,
    at_registered_address,
    check_item,
    leave_of,
    transfer,
)
from functions.archive.views import (
    ArchiveViews,
    file_list_page,
    integrity_page,
    metadata_page,
    oai_dc,
)

logger = Logger(service="archive", child=True)

CACHE_FILE = "public, max-age=3600"
CACHE_METADATA = "public, max-age=300"
VERIFY_PAGE = 25
DAMAGED = (
    "This file failed its integrity check here: its bytes are not the ones deposited. It is "
    "not served, and this Archive no longer offers the item to the resolver, which leads "
    "readers to a good copy elsewhere when there is one."
)


class FileStore(Protocol):
    """An Archive's files (``functions.archive.files.S3FileStore``)."""

    def presign_upload(
        self, item_key: str, path: str, *, sha256_hex: str, size: int, content_type: str
    ) -> dict[str, Any]: ...
    def commit(self, item_key: str, path: str, *, sha256_hex: str, size: int) -> None: ...
    def keep_version(self, item_key: str, path: str, *, sha256_hex: str) -> None: ...
    def presign_download(
        self,
        item_key: str,
        path: str,
        *,
        filename: str | None = None,
        version: str | None = None,
    ) -> str: ...
    def read(self, item_key: str, path: str, *, max_bytes: int) -> bytes: ...
    def put(
        self,
        item_key: str,
        path: str,
        data: bytes,
        content_type: str,
        *,
        announced: str | None = None,
    ) -> tuple[str, int]: ...
    def sha256_of(self, item_key: str, path: str, *, version: str | None = None) -> str: ...


@dataclass(frozen=True, slots=True)
class Receivers:
    """How to reach a receiving Archive: ``connect(url)`` (which applies the address rules and
    may raise ``BadRequest``), and how long a transfer may take in all (the Lambda has 29 s)."""

    connect: Callable[[str], DepositApi]
    budget_seconds: float = 26.0
    clock: Callable[[], float] = time.monotonic
    # A sending Archive reached through its public routes (offers.py), under the same rules.
    senders: Callable[[str], Sender] | None = None
    # Where the resolver says each registered Archive is (registered.py); None: no resolver,
    # so no original moves (transfers and offers go only to registered Archives).
    registry: Registry | None = None


# Whether the resolver leads readers of an IBI to an Archive other than this one (a good copy
# of an item damaged here): ``outbound.ResolverHoldings.elsewhere``.
GoodCopy = Callable[[str], bool]


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


P = ParamSpec("P")
R = TypeVar("R")


class Through(Generic[P, R]):
    """A verb of the item layer that the facade answers as it is: named on the facade (under
    the same name), defined once in ``ArchiveService``, called on the facade's ``archive``."""

    def __init__(self, verb: Callable[Concatenate[ArchiveService, P], R]) -> None:
        self.name = verb.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            raise TypeError(f"{owner.__name__}.{name} would answer {self.name}: name it so")

    @overload
    def __get__(self, facade: None, owner: type) -> Through[P, R]: ...
    @overload
    def __get__(self, facade: ContentService, owner: type | None = None) -> Callable[P, R]: ...
    def __get__(
        self, facade: ContentService | None, owner: type | None = None
    ) -> Through[P, R] | Callable[P, R]:
        if facade is None:
            return self
        verb: Callable[P, R] = getattr(facade.archive, self.name)
        return verb


@dataclass(frozen=True, slots=True)
class Verification:
    items: list[dict[str, Any]]
    problems: list[dict[str, str]]
    next: str | None
    # Copies whose original's files could not be read (``copies.py``): ibi, reason, since.
    unverified: list[dict[str, Any]] = field(default_factory=list)


class ContentService:
    """One Archive under its public ``views``: every route's one call (module doc)."""

    def __init__(
        self,
        archive: ArchiveService,
        *,
        views: ArchiveViews,
        files: FileStore | None,
        serve_inline_bytes: int,
        receivers: Receivers | None = None,
        offer_keys: OfferKeys | None = None,
        good_copy: GoodCopy | None = None,
        copies: CopyChecks | None = None,
    ) -> None:
        self.archive = archive
        # None: no resolver to read an original from (every new copy is unverified).
        self.copies = copies or CopyChecks(None, archive.now)
        self.views = views
        self._files = files
        self._inline = serve_inline_bytes
        self._receivers = receivers
        self._offer_keys = offer_keys
        self._good_copy = good_copy

    def _store(self) -> FileStore:
        if self._files is None:
            raise BadRequest("this Archive keeps no files: give the item a url instead")
        return self._files

    # -- public pages ----------------------------------------------------------------------------

    def _public(self, label: str) -> Item:
        """The item as the public sees it: an incoming transfer is not held yet."""
        item = self.archive.get(label)
        if item.pending:
            raise NotHeld(f"this Archive holds no item {label!r} yet")
        return item

    def _signposts(self, item: Item) -> str:
        """FAIR Signposting for the item's pages (``signposting.py``)."""
        from functions.archive.signposting import links

        return links(item, self.views, self.views.resolver_url)

    def serve_file(self, label: str, path: str, if_none_match: str | None) -> FileAnswer:
        """``GET /col/<ibi>[/<path>]``: the file, or where to get it, never damaged bytes."""
        item = self._public(label)
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
        if chosen.path in item.damaged:
            return self._damaged(item, chosen, known=True)
        etag = f'"{chosen.sha256}"'
        if if_none_match == etag:
            return FileAnswer(304, {"ETag": etag})
        headers = {"ETag": etag, "Cache-Control": CACHE_FILE, "Link": self._signposts(item)}
        if chosen.size > self._inline:
            name = chosen.path.rsplit("/", 1)[-1]
            location = self._files.presign_download(item.key, chosen.path, filename=name)
            return FileAnswer(302, {**headers, "Location": location})
        return self._inline_file(item, chosen, self._files, headers)

    def _inline_file(
        self, item: Item, chosen: StoredFile, files: FileStore, headers: dict[str, str]
    ) -> FileAnswer:
        from functions.archive.files import FileMissing, FileTooLarge

        try:
            data = files.read(item.key, chosen.path, max_bytes=self._inline)
        except (FileMissing, FileTooLarge):  # gone, or not the size it was published with
            return self._damaged(item, chosen)
        if hashlib.sha256(data).hexdigest() != chosen.sha256:
            return self._damaged(item, chosen)
        page = Page(200, data, chosen.content_type, headers)
        return FileAnswer(200, headers, page=page, path=chosen.path)

    def _damaged(self, item: Item, chosen: StoredFile, *, known: bool = False) -> FileAnswer:
        """Damage found now is recorded in the item, so that its protocol answer is empty until
        an operator repairs the file (and ``verify`` says so). Then the reader is sent back to
        the persistent URL (307) when the resolver leads to a good copy elsewhere; otherwise,
        and for damage known before, a styled 500 (under the pages' CSP, linking the item's
        other pages and its persistent URL).

        No loop: the 307 follows only a recorded damage (this Archive no longer offers the
        item, so the resolver cannot send the reader back here) and a good copy the resolver
        names; a reader who comes back all the same finds the damage known: the page.
        """
        if not known and self._record_damage(item, chosen):
            location = self._good_copy_url(item, chosen)
            if location is not None:
                headers = {"Location": location, "Cache-Control": "no-store"}
                return FileAnswer(307, headers, damaged=True, path=chosen.path)
        page = Page(500, integrity_page(item, chosen.path, DAMAGED, self.views))
        return FileAnswer(500, page=page, damaged=True, path=chosen.path)

    def _record_damage(self, item: Item, chosen: StoredFile) -> bool:
        try:
            self.archive.record_damage(item.key, damaged=[chosen.path])
        except ArchiveError as error:  # the page is answered all the same
            logger.warning("damage not recorded", extra={"ibi": item.key, "why": str(error)})
            return False
        return True

    def _good_copy_url(self, item: Item, chosen: StoredFile) -> str | None:
        """The persistent URL of the damaged file, if the resolver leads to a good copy."""
        persistent = self.views.persistent_url(item)
        if persistent is None or self._good_copy is None or not self._good_copy(item.key):
            return None
        main = item.main_file
        return persistent if main == chosen else f"{persistent}/{quote(chosen.path, safe='/')}"

    def file_list(self, label: str) -> Page:
        """``GET /list/<ibi>``: the file-list page (403 when the item is not listable; a
        tombstone's page, 410, when it was deleted)."""
        item = self._public(label)
        signposts = {"Link": self._signposts(item)}
        status = 410 if item.deleted else 200 if item.listable else 403
        return Page(status, file_list_page(item, self.views), headers=signposts)

    def linkset(self, label: str) -> Page:
        """``GET /linkset/<ibi>``: the item's Signposting linkset (``signposting.py``)."""
        from functions.archive.signposting import LINKSET, linkset_json

        item = self._public(label)
        body = linkset_json(item, self.views, self.views.resolver_url)
        headers = {"Cache-Control": CACHE_METADATA, "Link": self._signposts(item)}
        return Page(200, body, LINKSET, headers)

    def metadata(self, label: str, format: str | None) -> Page:
        """``GET /metadata/<ibi>``: the metadata page (a tombstone's, 410, for a deleted item),
        or the oai_dc record."""
        item = self._public(label)
        if not item.dc:
            raise NotHeld(f"{item.key} has no metadata in this Archive")
        cache = {"Cache-Control": CACHE_METADATA, "Link": self._signposts(item)}
        if format == "oai_dc":
            return Page(200, oai_dc(item), "text/xml; charset=utf-8", cache)
        status = 410 if item.deleted else 200
        return Page(status, metadata_page(item, self.views), headers=cache)

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
            # the last check of its external URL (links.py); None: never, or the URL changed
            "link_check": item.link.to_mapping() if item.link else None,
        }

    def add_copy(self, body: Any, principal: str = UNKNOWN) -> Item:
        """``POST /api/copies``: a copy whose expected files are read from its original's
        Archive (``copies.py``), or recorded ``unverified`` when they cannot be."""
        return self.archive.add_copy(body, principal=principal, check=self.copies.new_copy)

    def presign_uploads(self, label: str, body: Any) -> dict[str, Any]:
        """Presigned PUT URLs for files of an item (any size, straight to the file store)."""
        declared_list = declared_files(body, frozenset({"files"}))
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

    def commit_files(self, label: str, body: Any, principal: str = UNKNOWN) -> tuple[Item, int]:
        """Check uploaded files against their SHA-256 and size, then publish them in the item.

        Only files the item does not publish yet are added (by its depositor, see
        :meth:`ArchiveService.files_to_add`); the same bytes again change nothing; other bytes
        at a published path are refused before anything is written.
        """
        declared = declared_files(body)
        default = body.get("default_file")
        item, new = self.archive.files_to_add(label, declared, default, principal)
        if new:
            files = self._store()
            for stored in new:
                files.commit(item.key, stored.path, sha256_hex=stored.sha256, size=stored.size)
        return self.archive.add_files(label, new, default, principal), len(new)

    def revise_files(self, label: str, body: Any, principal: str = UNKNOWN) -> tuple[Item, int]:
        """An operator's revision: ``{"files": […], "reason", "default_file"?}`` adds or replaces
        files of any item; each replaced version is kept (``history/``) and every change is
        recorded in the item's history (who, when, why, both checksums)."""
        declared = declared_files(body, frozenset({"files", "default_file", "reason"}))
        reason = reason_of(body)
        item, changes = self.archive.files_to_revise(label, declared)
        if changes:
            files, key = self._store(), item.key
            for change in changes:
                old = change.old
                if old is not None and change.replaces:  # a new path or a repair keeps nothing
                    files.keep_version(key, old.path, sha256_hex=old.sha256)
                new = change.new
                files.commit(key, new.path, sha256_hex=new.sha256, size=new.size)
        item = self.archive.record_revision(
            label,
            changes,
            reason=reason,
            principal=principal,
            default=body.get("default_file"),
        )
        return item, len(changes)

    def previous_version(self, label: str, path: str | None, sha256: str | None) -> dict[str, Any]:
        """Where to download a replaced version of a file (``GET /api/item/previous``)."""
        item = self.archive.get(label)
        kept = {(r.path, r.old_sha256): r for r in item.history if r.action == "replaced"}
        revision = kept.get((path, (sha256 or "").lower()))
        if revision is None or revision.path is None or revision.old_sha256 is None:
            raise NotHeld(
                f"{item.key} has no previous version {sha256!r} of {path!r}: see its history"
            )
        name = revision.path.rsplit("/", 1)[-1]
        url = self._store().presign_download(
            item.key, revision.path, filename=name, version=revision.old_sha256
        )
        return {"path": revision.path, **revision.to_mapping()["old"], "url": url}

    def verify(self, label: str | None, after: str | None) -> Verification:
        """Stored files against their SHA-256; a copy against its original's files, read
        again from the original's Archive while the copy is not verified (``copies.py``). What
        is found is recorded: a damaged file is marked (the item is no longer offered), a file
        found intact again (an operator restored it) is unmarked, a copy checked is verified."""
        files = self._store()
        if label:
            items, more = [self.archive.get(label)], None
        else:
            items, more = self.archive.list_items(after=after, limit=VERIFY_PAGE)
        live = [item for item in items if not item.deleted and not item.pending]
        rechecked = self.copies.recheck(self.archive, live)
        report, unverified = [], []
        for item in (rechecked.get(item.key, item) for item in live):
            entry = check_item(item, files)
            if item.state is State.COPY:
                check = item.original_check
                entry["original_check"] = check.to_mapping() if check else None
                if check is None or not check.verified:
                    reason = (check and check.reason) or "made before copies were checked"
                    if item.key not in rechecked:
                        reason += " (not read again in this call: its time budget was spent)"
                    since = check.to_mapping()["at"] if check else None
                    unverified.append({"ibi": item.key, "reason": reason, "since": since})
            bad = {p["path"] for p in entry["problems"] if p["problem"] in {"missing", "sha256"}}
            damaged = item.damaged
            if bad or damaged:
                checked = [f.path for f in item.files]
                damaged = self.archive.record_damage(item.key, damaged=bad, checked=checked).damaged
            entry["damaged"] = list(damaged)
            report.append(entry)
        problems = [p for entry in report for p in entry["problems"]]
        return Verification(report, problems, more, unverified)

    def transfer(self, label: str, body: Any) -> Transferred:
        """Move a transferable original to another Archive (seed 001 §3.2; see transfer.py)."""
        if not isinstance(body, dict) or not isinstance(body.get("to"), str):
            raise BadRequest(
                'send {"to": "<receiving Archive API URL>", "leave": "copy"|"tombstone"}'
            )
        if self._receivers is None:
            raise BadRequest("this Archive transfers nothing")
        receivers = self._receivers
        ends = receivers.clock() + receivers.budget_seconds
        # Only to an included Archive, at the address the resolver has registered for it.
        receiver = at_registered_address(
            receivers.connect(body["to"]), body["to"], receivers.registry
        )
        return transfer(
            self.archive,
            self._files,
            receiver,
            label,
            leave=leave_of(body.get("leave", "copy")),
            remaining=lambda: ends - receivers.clock(),
        )

    # -- the item layer's verbs, answered as they are (defined in deposits.py, transfers.py) ---

    get = Through(ArchiveService.get)
    list_items = Through(ArchiveService.list_items)
    create_original = Through(ArchiveService.create_original)
    deposit_original = Through(ArchiveService.deposit_original)
    import_original = Through(ArchiveService.import_original)
    update = Through(ArchiveService.update)
    link = Through(ArchiveService.link)
    unlink = Through(ArchiveService.unlink)
    delete = Through(ArchiveService.delete)
    receive_transfer = Through(ArchiveService.receive_transfer)
    complete_transfer = Through(ArchiveService.complete_transfer)
    cancel_transfer = Through(ArchiveService.cancel_transfer)

    @property
    def items(self) -> ItemStore:
        """The item records as stored, which the OAI-PMH repository reads (``oai.py``)."""
        return self.archive.items

    # -- a transfer between institutions (offers.py) ------------------------------------------

    def _keys(self) -> OfferKeys:
        if self._offer_keys is None:
            raise BadRequest("this Archive makes no offers")
        return self._offer_keys

    def _registry(self) -> Registry | None:
        return self._receivers.registry if self._receivers is not None else None

    def make_offer(self, label: str, body: Any, *, sender: str) -> tuple[Offer, str]:
        """A signed, short-lived offer of an original to a registered Archive (no write, but
        taking back an original an expired offer released and no one took)."""
        return make_offer(
            self.archive,
            self._keys(),
            label,
            body,
            sender=sender,
            base_url=self.views.base_url,
            registry=self._registry(),
        )

    def confirm_offer(self, body: Any, *, sender: str) -> dict[str, Any]:
        """The public confirmation of one of this Archive's offers (the original moves once,
        once the receiver shows at its registered address that it staged the item)."""
        return confirm(self.archive, self._keys(), body, sender=sender, registry=self._registry())

    def held_for_transfer(self, label: str) -> dict[str, Any]:
        """Public: what this Archive holds of ``label`` for a transfer (``registered.py``):
        a staged item included, which nothing else shows. 404 when nothing (or a tombstone)."""
        item = self.archive.get(label)
        if not shown(item):
            raise NotHeld(f"this Archive holds no item {label!r}")
        return transfer_view(item)

    def accept_offer(self, body: Any, *, me: Forms, principal: str = UNKNOWN) -> Item:
        """Take an original another Archive offered: pull, check, stage, confirm, promote."""
        senders = self._receivers.senders if self._receivers is not None else None
        if senders is None:
            raise BadRequest("this Archive accepts no offers")
        token = body.get("offer") if isinstance(body, dict) else None
        return accept(self, senders, token, me=me, principal=principal, registry=self._registry())

    def stage_file(self, item_key: str, path: str, data: bytes, content_type: str) -> None:
        """Bytes pulled from a sender, at the upload key their commit checks (offers.py)."""
        sha256 = hashlib.sha256(data).hexdigest()
        self._store().put(item_key, path, data, content_type, announced=sha256)
