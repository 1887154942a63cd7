"""Deposits (spec §2): originals, copies, their files, links, updates and deletions.

Rules kept here: one item per IBI in an Archive; a copy keeps the original's IBI (and its
checksum); an Archive never holds both; a deletion leaves a tombstone and the IBI is never
forgotten or reused.

Who may do what (issue 11; docs/archive.md, "Who may change what"):

* An original is created here only for an IBI of this Archive's own subsystems (the prefixes of
  its minting service), minted now or before; any other IBI comes through an operator's
  import (:meth:`Deposits.import_original`) or a transfer (``transfers.py``), each recorded in
  the item's history.
* Each item records who deposited it (the principal: an IAM ARN in AWS, ``anonymous:<ip>``
  locally) and when. Files join it through ``POST /api/item/files`` only from that principal
  and within :data:`CREATOR_WINDOW` of the deposit (the CI role's longest session): a pipeline
  completes what its own run deposited, nothing else.
* A published file never changes through that route: the same bytes again are a no-op, other
  bytes are :class:`FileExists`. Replacing (or adding a file to anybody's item) is the
  operator's revision (``ContentService.revise_files``, recorded here by
  :meth:`Deposits.record_revision`), which keeps the previous version and records who, when,
  why, and both checksums.

These verbs change item records only; the files' bytes are the content layer's
(``content.py``), which calls them.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from functions.archive.domain.fields import Request, settable
from functions.archive.errors import (
    ArchiveError,
    BadRequest,
    Conflict,
    Gone,
    NotHeld,
    Unavailable,
    Unprocessable,
)
from functions.archive.issued import DEPOSIT_KEY, MintRecords, check_issued
from functions.archive.items import MAX_HISTORY, UNAVAILABLE, UNKNOWN, ItemRecords, Minter
from functions.archive.model import (
    ContentType,
    DepositRequest,
    Forms,
    Item,
    OriginalCheck,
    Revision,
    State,
    StoredFile,
    Translation,
    is_sha256,
    language_tag,
)
from functions.archive.parsing import (
    ORIGINAL_FIELDS,
    UPDATE_FIELDS,
    dublin_core,
    fields_of,
    flag,
    forms_of,
    parse_files,
)
from functions.archive.store import ArchiveStoreError, ItemExists
from ibi.core.labels import parse_label

# A new copy checked against its original (``copies.py``): (IBI, the depositor's
# ``original_files``, ``original_sha256``) -> the expected files and main checksum, and the check.
CheckCopy = Callable[
    [Forms, tuple[StoredFile, ...], str | None],
    tuple[tuple[StoredFile, ...], str | None, OriginalCheck],
]
# How long after a deposit its depositor may add files to it: the CI role's longest session
# (infra/ci.py MAX_SESSION), so a pipeline run completes its own items and no later one can.
CREATOR_WINDOW = Decimal(3600)
# An IBI dated later than now (beyond this clock skew) was not minted yet: nobody may claim it.
FUTURE_SLACK = Decimal(60)
MAX_REASON = 500


def deposit_request(principal: str, idempotency_key: str, body: Any) -> DepositRequest:
    """What ``idempotency_key`` binds: the key as its depositor's own, and the body's digest
    (its canonical JSON: keys sorted, no spaces; numbers as the request spelled them)."""
    scoped = hashlib.sha256(f"{principal}\n{idempotency_key}".encode()).hexdigest()
    canonical = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return DepositRequest(key=scoped, body=hashlib.sha256(canonical.encode()).hexdigest())


def mint_key(request: DepositRequest | None) -> str:
    """The Idempotency-Key a deposit mints under: its request's (scoped to its depositor, so a
    retry gets the same IBI), else one of its own; always a deposit's (``issued.py``)."""
    return f"{DEPOSIT_KEY}{request.key if request else 'once:' + uuid.uuid4().hex}"


# The links DELETE /api/item/links removes (?link=; also translation(LANG)), as the history
# names each.
UNLINKABLE = {
    "next_edition": "next edition",
    "metadata": "metadata",
    "metadata_oai_dc": "OAI Dublin Core metadata",
}
MAX_ORIGINAL_FILES = 1000  # a copy's expected files (the record stays below 400 KB)


class NotOwnSubsystem(ArchiveError):
    """An original for an IBI that none of this Archive's subsystems minted."""

    status = 403


class NotCreator(ArchiveError):
    """Files added to an item by someone else than its depositor, or too late."""

    status = 403


class NextEditionExists(ArchiveError):
    """A conditional next-edition link (``"if_none": true``) to an item that has another one."""

    status = 409


class IdempotencyKeyReused(Unprocessable):
    """An Idempotency-Key sent again by its depositor with another request body."""


class FileExists(ArchiveError):
    """A published file would change: refused; replacing is a separate, recorded operation."""

    status = 409


class DiffersFromOriginal(ArchiveError):
    """A copy's file is not the original's: another path, other bytes (SHA-256 or size)."""

    status = 422


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file of a revision: the new version, and the one it replaces (None: a new path)."""

    new: StoredFile
    old: StoredFile | None

    @property
    def replaces(self) -> bool:
        """Whether published bytes give way to others (the old ones are kept first); a new
        path or a repair (a damaged file given its own bytes again) replaces nothing."""
        return self.old is not None and not _same_bytes(self.old, self.new)


class Deposits(ItemRecords):
    """Originals and copies deposited, their files added or revised, linked, updated, deleted.

    ``_mint`` mints an IBI (None: this Archive mints nothing), ``_mint_records`` reads the
    minting service's record (None: no service to ask), ``_principal`` is who this Archive is
    there, ``own_prefixes`` are its subsystems' and ``_window`` how long a depositor may add
    files (``ArchiveService`` sets them).
    """

    _mint: Minter | None
    _mint_records: MintRecords | None
    _principal: str
    own_prefixes: frozenset[str]
    _window: Decimal

    # -- deposit -------------------------------------------------------------------------------

    def create_original(
        self, body: Any, *, idempotency_key: str | None = None, principal: str = UNKNOWN
    ) -> Item:
        """A new original (:meth:`deposit_original`'s item)."""
        item, _ = self.deposit_original(body, idempotency_key=idempotency_key, principal=principal)
        return item

    def deposit_original(
        self, body: Any, *, idempotency_key: str | None = None, principal: str = UNKNOWN
    ) -> tuple[Item, bool]:
        """A new original, and whether it is a retried request's item (made before).

        An IBI given must be one of this Archive's own subsystems (:class:`NotOwnSubsystem`),
        not dated in the future, and issued by the minting service to this Archive or to the
        depositor, for no deposit of this Archive's (``issued.py``). An Idempotency-Key is the
        depositor's own: the same key from the same principal with the same body gets the same
        item back, with another body :class:`IdempotencyKeyReused`; another principal's key of
        the same spelling is another key.
        """
        data = fields_of(body, ORIGINAL_FIELDS, "a new original")
        request = deposit_request(principal, idempotency_key, body) if idempotency_key else None
        if "ibi" in data:
            if "subsystem" in data:
                raise BadRequest('give either "ibi" (minted before) or "subsystem" (mint now)')
            forms = forms_of(data["ibi"])
            made = self._made_by(forms, request)
            if made is not None:
                return made, True
            self._check_own(forms)
            self._check_issued(forms, principal)
        else:
            if self._mint is None:
                raise BadRequest('this Archive mints nothing: give the item\'s "ibi"')
            forms = self._mint(data.get("subsystem"), mint_key(request))
            if data.get("subsystem") and self.own_prefixes:
                self._check_own(forms)  # another Archive's subsystem: its IBI, not ours
            made = self._made_by(forms, request)
            if made is not None:
                return made, True
        item = replace(self._build(forms, State.ORIGINAL, data, principal), deposit_request=request)
        self._create(item)
        return item, False

    def _made_by(self, forms: Forms, request: DepositRequest | None) -> Item | None:
        """The item ``request`` (its key, scoped to its depositor) made before, if any; the
        same key with another body is :class:`IdempotencyKeyReused`."""
        if request is None:
            return None
        try:
            existing = self.items.get(forms.key)
        except ArchiveStoreError as error:
            raise Unavailable(UNAVAILABLE) from error
        made = existing.deposit_request if existing is not None else None
        if existing is None or made is None or made.key != request.key:
            return None  # a new item (or another request's: its IBI is taken, a 409 below)
        if made.body != request.body:
            raise IdempotencyKeyReused(
                "this Idempotency-Key was used for a different request (another body); send "
                "a new key for a new deposit"
            )
        return existing

    def _check_issued(self, forms: Forms, depositor: str) -> None:
        """The mint record's word on ``forms`` (``issued.py``). An Archive wired to no minting
        service (in-memory tests) has no record to ask: the prefix and date rules alone."""
        if self._mint_records is not None:
            issue = self._mint_records.issue_of(forms.key)
            check_issued(forms, issue, archive=self._principal, depositor=depositor)

    def _check_own(self, forms: Forms) -> None:
        """Refuse an original for an IBI none of this Archive's subsystems minted (or could have
        minted yet: an IBI dated in the future would be squatted before it is issued)."""
        labels = [parse_label(label) for label in forms.labels]
        foreign = [label.label for label in labels if label.prefix not in self.own_prefixes]
        if foreign:
            own = ", ".join(sorted(self.own_prefixes)) or "none configured"
            raise NotOwnSubsystem(
                f"{', '.join(foreign)} was not minted by this Archive's subsystems (prefixes: "
                f"{own}): an original of another subsystem comes only through a transfer "
                "(POST /api/transfers) or an operator's import (POST /api/imports)"
            )
        if any(label.date > self._clock() + FUTURE_SLACK for label in labels):
            raise BadRequest(f"{forms.key} is dated in the future: it has not been minted yet")

    def import_original(self, body: Any, *, principal: str = UNKNOWN) -> Item:
        """An original for an IBI of any subsystem, authorised by an operator and recorded:
        ``{"ibi", "reason", …the fields of a new original}`` (the route is not the CI role's)."""
        allowed = set(settable(Request.IMPORT))
        data = fields_of(body, allowed, "an import")
        if "ibi" not in data:
            raise BadRequest('an import names the IBI it brings: give "ibi"')
        reason = reason_of(data)
        forms = forms_of(data["ibi"])
        item = self._build(forms, State.ORIGINAL, data, principal)
        revision = Revision("imported", at=self._clock(), by=principal, reason=reason)
        item = replace(item, history=(revision,))
        self._create(item)
        return item

    def add_copy(
        self, body: Any, *, principal: str = UNKNOWN, check: CheckCopy | None = None
    ) -> Item:
        """A copy of an item held elsewhere, with what its files must be.

        ``original_files`` (``[{"path", "sha256", "size"}]``, as the original's Archive
        publishes them) are the copy's expected files: each file committed to the copy must be
        one of them, byte for byte (:class:`DiffersFromOriginal`), and ``verify`` compares the
        copy with them. ``original_sha256`` (older clients) is the expected main file's.
        ``check`` (``copies.py``) reads them from the original's Archive instead, the
        depositor's only as a cross-check, and says whether it could.
        """
        allowed = set(settable(Request.COPY))
        data = fields_of(body, allowed, "a copy")
        if "ibi" not in data:
            raise BadRequest('a copy keeps the original\'s IBI: give "ibi"')
        forms = forms_of(data["ibi"])
        original_sha256 = data.get("original_sha256")
        if original_sha256 is not None:
            if not isinstance(original_sha256, str) or not is_sha256(original_sha256.lower()):
                raise BadRequest(
                    '"original_sha256" must be the SHA-256 of the original\'s file: 64 hex digits'
                )
            original_sha256 = original_sha256.lower()
        expected = _original_files(data.get("original_files"))
        checked = None
        if check is not None:
            expected, original_sha256, checked = check(forms, expected, original_sha256)
        if original_sha256 is None and len(expected) == 1:
            original_sha256 = expected[0].sha256
        item = self._build(forms, State.COPY, data, principal)
        item = replace(
            item,
            transferable=False,
            original_sha256=original_sha256,
            original_files=expected,
            original_check=checked,
        )
        self._create(item)
        return item

    def record_original_check(
        self,
        label: str,
        checked: OriginalCheck,
        *,
        expected: tuple[StoredFile, ...] | None = None,
        original_sha256: str | None = None,
    ) -> Item:
        """Persist a later check of a copy against its original (``copies.py``): when it was
        verified, its expected files become those read from the original's Archive. The item's
        timestamp does not move: what it publishes did not change."""

        def change(item: Item) -> Item:
            if item.state is not State.COPY:
                return item
            changes: dict[str, Any] = {"original_check": checked}
            if expected is not None:
                changes.update(original_files=expected, original_sha256=original_sha256)
            return replace(item, **changes, version=item.version + 1)

        return self._modify(label, change)

    # -- changing an item ----------------------------------------------------------------------

    def update(self, label: str, body: Any, principal: str = UNKNOWN) -> Item:
        data = fields_of(body, UPDATE_FIELDS, "an update")
        if "ibi" in data:
            self._add_forms(label, forms_of(data["ibi"]))
            if set(data) == {"ibi"}:
                return self.get(label)

        def change(item: Item) -> Item:
            changes: dict[str, Any] = {}
            if "url" in data:
                changes["external_url"] = data["url"]
            if "default_file" in data:
                changes["default_file"] = data["default_file"]
            if "content_type" in data:
                changes["content_type"] = ContentType(data["content_type"])
            if "language" in data:
                changes["language"] = data["language"]
            for name in ("transferable", "listable"):
                if name in data:
                    changes[name] = flag(data[name], name)
            if "dc" in data:
                changes["dc"] = dublin_core(data["dc"])
            if item.service and changes.get("transferable"):
                raise Conflict("the Archive's own service item is untransferable")
            return item.changed(self._clock(), **changes)

        return self._modify(label, change, by=principal)

    def _add_forms(self, label: str, forms: Forms) -> None:
        """Make the item answer to ``forms`` (its own, plus the other form of its IBI): e.g. a
        copy made with the ibip form learns the rep form, and is found by either."""
        item = self.get(label)
        if item.deleted:
            raise Gone(f"{item.key} was deleted; its IBI stays known and is never reused")
        if not set(item.ibi.labels) <= set(forms.labels):
            raise Unprocessable(
                f'"ibi" keeps the item\'s IBI: give its forms {item.ibi.to_mapping()} and the '
                "one to add (the same date)"
            )
        if forms.key != item.key:
            raise Conflict(
                f"{item.key} is stored under its {'rep' if forms.ibip else 'ibip'} form; its "
                "ibip form can only be given when it is deposited"
            )
        if item.state is State.ORIGINAL and not item.service:
            self._check_own(forms)
        for alias in forms.labels:
            if alias in item.ibi.labels:
                continue
            try:
                self.items.add_alias(alias, item.key)
            except ItemExists:
                held = self.items.get(alias)
                if held is None or held.key != item.key:
                    raise Conflict(f"{alias} is another item's IBI in this Archive") from None
            except ArchiveStoreError as error:
                raise Unavailable(UNAVAILABLE) from error

        def change(current: Item) -> Item:
            merged = current.ibi.merged(forms)
            if merged == current.ibi:
                return current
            return replace(current, ibi=merged, version=current.version + 1)

        self._modify(label, change)

    def link(self, label: str, body: Any) -> Item:
        """Link one related item (``POST /api/item/links``).

        ``{"next_edition": …}`` replaces a next edition the item has; with ``"if_none": true``
        it is a conditional write that only adds one: the same link again is a no-op, another
        next edition already there is :class:`NextEditionExists` (a release chain never forks).
        """
        data = dict(
            fields_of(body, {"next_edition", "translation", "metadata", "if_none"}, "a link")
        )
        if_none = data.pop("if_none", False)
        if not isinstance(if_none, bool) or (if_none and "next_edition" not in data):
            raise BadRequest('"if_none" is true or false, and goes with "next_edition" only')
        if len(data) != 1:
            raise BadRequest(
                'link one thing at a time: "next_edition", "translation" or "metadata"'
            )

        def change(item: Item) -> Item:
            if "next_edition" in data:
                forms = forms_of(data["next_edition"])
                if forms.key == item.key:
                    raise Unprocessable("an item cannot be its own next edition")
                if if_none and item.next_edition is not None:
                    if set(item.next_edition.labels) & set(forms.labels):
                        return item  # the same link again (a retried release)
                    raise NextEditionExists(
                        f"{item.key} has a next edition already, {item.next_edition.key}: "
                        "link after the last edition (follow next_edition from it), or send "
                        'without "if_none" to replace it'
                    )
                return item.changed(self._clock(), next_edition=forms)
            if "translation" in data:
                link = data["translation"]
                if not isinstance(link, dict) or "language" not in link:
                    raise BadRequest('"translation" is {"language": "pt-BR", "ibi": … | "url": …}')
                translation = Translation(
                    language=str(link["language"]),
                    ibi=forms_of(link["ibi"]) if "ibi" in link else None,
                    url=link.get("url"),
                )
                kept = tuple(t for t in item.translations if t.language != translation.language)
                return item.changed(self._clock(), translations=(*kept, translation))
            link = data["metadata"]
            if not isinstance(link, dict) or "ibi" not in link:
                raise BadRequest('"metadata" is {"ibi": …, "format": "oai_dc"?}')
            forms = forms_of(link["ibi"])
            if link.get("format") == "oai_dc":
                return item.changed(self._clock(), metadata_oai_dc=forms)
            if link.get("format") not in (None, ""):
                raise BadRequest('metadata "format" is "oai_dc" or absent (free format)')
            return item.changed(self._clock(), metadata=forms)

        return self._modify(label, change)

    def unlink(self, label: str, link: str | None, principal: str) -> Item:
        """Remove one link (``DELETE /api/item/links``), recorded in the item's history.

        ``link`` is the item's field: ``next_edition``, ``metadata``, ``metadata_oai_dc``, or
        ``translation(LANG)`` (as the spec names the relation). A link the item does not have
        is :class:`NotHeld`.
        """
        language = _translation_language(link or "")
        if link not in UNLINKABLE and language is None:
            raise BadRequest(
                f"say which link to remove: ?link={'|'.join(UNLINKABLE)}|translation(LANG)"
            )

        def change(item: Item) -> Item:
            if language is not None:
                tag = language_tag(language)
                kept = tuple(t for t in item.translations if t.language != tag)
                if len(kept) == len(item.translations):
                    held = ", ".join(t.language for t in item.translations) or "none"
                    raise NotHeld(f"{item.key} has no translation into {tag} (it has: {held})")
                gone = next(t for t in item.translations if t.language == tag)
                target = gone.ibi.key if gone.ibi is not None else str(gone.url)
                changes: dict[str, Any] = {"translations": kept}
                what = f"the translation into {tag}, {target}"
            else:
                forms = getattr(item, str(link))
                if forms is None:
                    raise NotHeld(f"{item.key} has no {UNLINKABLE[str(link)]} link")
                changes = {str(link): None}
                what = f"the {UNLINKABLE[str(link)]} link to {forms.key}"
            if len(item.history) >= MAX_HISTORY:
                raise Conflict(f"{item.key} has {MAX_HISTORY} revisions already")
            now = self._clock()
            removed = Revision("unlinked", at=now, by=principal, reason=f"{what}, removed")
            return item.changed(now, history=(*item.history, removed), **changes)

        return self._modify(label, change)

    def delete(self, label: str, *, reason: str | None = None, principal: str = UNKNOWN) -> Item:
        """Withdraw an item: a tombstone stays, its Dublin Core kept (its pages and citation say
        what was there), with a ``deleted`` revision saying when, by whom and why (``reason``,
        at most 500 characters, optional)."""
        if len(reason or "") > MAX_REASON:
            raise BadRequest(f'"reason" is at most {MAX_REASON} characters: say it shorter')
        why = (reason or "").strip()

        def change(item: Item) -> Item:
            if item.service:
                raise Conflict("the Archive's own service item cannot be deleted")
            original = item.state is State.ORIGINAL
            gone = item.tombstone(self._clock())
            deleted = Revision("deleted", at=gone.timestamp, by=principal, reason=why)
            history = (*item.history, deleted)
            return replace(gone, deleted_original=original, history=history)

        return self._modify(label, change)

    # -- files: added by their depositor, revised by an operator -----------------------------

    def files_to_add(
        self, label: str, declared: tuple[StoredFile, ...], default: str | None, principal: str
    ) -> tuple[Item, tuple[StoredFile, ...]]:
        """The item, and those of ``declared`` it does not hold yet (to check and publish).

        A path it holds with the same bytes is a no-op (a retried commit); with other bytes,
        :class:`FileExists`. Any change needs the depositor, within the window
        (:class:`NotCreator`).
        """
        item = self.get(label)
        if item.deleted:
            raise Gone(f"{item.key} was deleted; its IBI stays known and is never reused")
        new = _new_files(item, declared)
        if new or (default is not None and default != item.default_file):
            self._check_creator(item, principal)
        if item.state is State.COPY and not item.pending:
            _check_against_original(item, new, default)
        return item, new

    def _check_creator(self, item: Item, principal: str) -> None:
        late = item.created is None or self._clock() > item.created + self._window
        if item.service or item.creator != principal or late:
            raise NotCreator(
                f"files join {item.key} through POST /api/item/files only from whoever "
                f"deposited it, within {int(self._window)} s of the deposit; an operator adds "
                "or replaces files of any item with POST /api/item/files/replace (recorded in "
                "the item's history)"
            )

    def add_files(
        self,
        label: str,
        files: tuple[StoredFile, ...],
        default: str | None,
        principal: str = UNKNOWN,
    ) -> Item:
        """Record ``files`` (checked and published) in the item; never changes one it holds."""

        def change(item: Item) -> Item:
            new = _new_files(item, files)  # again: another commit may have come in between
            chosen = default if default is not None else item.default_file
            if not new and chosen == item.default_file:
                return item
            return item.changed(self._clock(), files=(*item.files, *new), default_file=chosen)

        return self._modify(label, change, by=principal)

    def files_to_revise(
        self, label: str, declared: tuple[StoredFile, ...]
    ) -> tuple[Item, list[FileChange]]:
        """What an operator's revision changes: each declared file and the one it replaces; a
        damaged file given again with its own bytes is a repair (published again)."""
        item = self.get(label)
        if item.deleted:
            raise Gone(f"{item.key} was deleted; its IBI stays known and is never reused")
        if item.service:
            raise Conflict("the Archive's own service item has no files")
        changes = [FileChange(new, item.file(new.path)) for new in declared]
        return item, [
            c
            for c in changes
            if c.old is None or not _same_bytes(c.old, c.new) or c.new.path in item.damaged
        ]

    def record_revision(
        self,
        label: str,
        changes: list[FileChange],
        *,
        reason: str,
        principal: str,
        default: str | None = None,
    ) -> Item:
        """Record an operator's revision (the new bytes published, the old ones kept)."""

        def change(item: Item) -> Item:
            now = self._clock()
            files = list(item.files)
            revisions: list[Revision] = []
            for planned in changes:
                held = item.file(planned.new.path)
                if held != planned.old:
                    raise Conflict(f"{planned.new.path!r} changed meanwhile; retry")
                new = planned.new
                if held is None:
                    files.append(new)
                else:
                    files[files.index(held)] = new
                action = "added" if held is None else "replaced"
                revisions.append(
                    Revision(
                        "repaired" if held is not None and _same_bytes(held, new) else action,
                        at=now,
                        by=principal,
                        path=new.path,
                        old_sha256=held.sha256 if held else None,
                        old_size=held.size if held else None,
                        new_sha256=new.sha256,
                        new_size=new.size,
                        reason=reason,
                    )
                )
            if len(item.history) + len(revisions) > MAX_HISTORY:
                raise Conflict(f"{item.key} has {MAX_HISTORY} revisions already")
            chosen = default if default is not None else item.default_file
            if not revisions and chosen == item.default_file:
                return item  # nothing changes: nothing to record
            revised = {planned.new.path for planned in changes}
            return item.changed(
                now,
                files=tuple(files),
                default_file=chosen,
                history=(*item.history, *revisions),
                damaged=tuple(path for path in item.damaged if path not in revised),
            )

        return self._modify(label, change, by=principal, reason=reason)

    def record_damage(
        self, label: str, *, damaged: Iterable[str], checked: Iterable[str] = ()
    ) -> Item:
        """Persist what a check found: ``damaged`` paths fail their SHA-256 (or are missing),
        ``checked`` paths were found intact. The item's timestamp does not move: its content
        did not change, only what this Archive knows of its bytes."""
        bad, good = set(damaged), set(checked) - set(damaged)

        def change(item: Item) -> Item:
            paths = {f.path for f in item.files}
            now = tuple(sorted(((set(item.damaged) - good) | bad) & paths))
            if now == item.damaged:
                return item
            return replace(item, damaged=now, version=item.version + 1)

        return self._modify(label, change)


def _translation_language(link: str) -> str | None:
    """``pt-BR`` of ``translation(pt-BR)``; None for any other text."""
    if link.startswith("translation(") and link.endswith(")"):
        return link[len("translation(") : -1]
    return None


def reason_of(data: dict[str, Any]) -> str:
    """The ``"reason"`` an operator gives for a revision or an import: 1-500 characters."""
    reason = data.get("reason")
    if not isinstance(reason, str) or not 1 <= len(reason.strip()) <= MAX_REASON:
        raise BadRequest(f'say why: "reason" is 1-{MAX_REASON} characters, kept in the history')
    return reason.strip()


def _original_files(value: Any) -> tuple[StoredFile, ...]:
    """A copy's ``original_files``: ``[{"path", "sha256", "size"}]``, at most 1,000."""
    if value is None:
        return ()
    if isinstance(value, list) and len(value) > MAX_ORIGINAL_FILES:
        raise BadRequest(f'"original_files": at most {MAX_ORIGINAL_FILES} files')
    try:
        return parse_files(value)
    except BadRequest as error:
        raise BadRequest(f"original_files: {error}") from None


def _check_against_original(item: Item, new: tuple[StoredFile, ...], default: str | None) -> None:
    """A copy's files are its original's: each at a path the original has, with its bytes."""
    for stored in new:
        if not item.expects_files:
            break
        expected = item.expected(stored.path)
        if expected is None:
            listed = ", ".join(repr(f.path) for f in item.original_files[:20])
            raise DiffersFromOriginal(
                f"{item.key}: the original has no file {stored.path!r} (it has {listed}); a "
                "copy holds the original's files only"
            )
        if not _same_bytes(expected, stored):
            raise DiffersFromOriginal(
                f"{item.key}: {stored.path!r} is not the original's (SHA-256 {expected.sha256}, "
                f"{expected.size} bytes; this upload: {stored.sha256}, {stored.size} bytes)"
            )
    if item.original_sha256 is None or item.original_files:
        return
    files = {f.path: f for f in (*item.files, *new)}
    chosen = default if default is not None else item.default_file
    if chosen is None and len(files) == 1:
        chosen = next(iter(files))
    main = files.get(chosen) if chosen is not None else None
    if main is not None and main.sha256 != item.original_sha256:
        raise DiffersFromOriginal(
            f"{item.key}: {main.path!r} has SHA-256 {main.sha256}, the original's is "
            f"{item.original_sha256}; a copy holds the original's bytes"
        )


def _same_bytes(held: StoredFile, declared: StoredFile) -> bool:
    return held.sha256 == declared.sha256 and held.size == declared.size


def _new_files(item: Item, declared: tuple[StoredFile, ...]) -> tuple[StoredFile, ...]:
    """Those of ``declared`` the item does not hold; :class:`FileExists` for changed bytes."""
    new = []
    for wanted in declared:
        held = item.file(wanted.path)
        if held is None:
            new.append(wanted)
        elif not _same_bytes(held, wanted):
            raise FileExists(
                f"{item.key} publishes {held.path!r} already (SHA-256 {held.sha256}, "
                f"{held.size} bytes): published bytes never change through POST "
                "/api/item/files; an operator replaces a file with POST "
                "/api/item/files/replace, which keeps the previous version and records why"
            )
    return tuple(new)
