"""An Archive's item records: reading them, and the one way every verb changes one.

:class:`ItemRecords` is the base of the item layer (``service.ArchiveService``): the store under
one clock, a page of items, and the machinery the deposits (``deposits.py``), the transfers
(``transfers.py``) and the service item (``bootstrap.py``) share: an item built from a
request's fields, created with a conditional write (one item per IBI), changed with a
conditional write retried on a race (:meth:`ItemRecords._modify`), a change of what its
persistent URL serves recorded in its history, forgotten (an incoming transfer only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from functions.archive.errors import ArchiveError, BadRequest, Conflict, Gone, NotHeld, Unavailable
from functions.archive.model import ContentType, Forms, Item, Revision, State
from functions.archive.parsing import dublin_core, flag, label_of, oai_source
from functions.archive.store import ArchiveStoreError, ItemExists, ItemStore, StaleItem
from ibi.core.errors import InvalidInput

Clock = Callable[[], Decimal]
Minter = Callable[[str | None, str | None], Forms]  # (subsystem, idempotency key) -> IBI
UNAVAILABLE = "the Archive's store is unavailable; retry shortly"
MAX_HISTORY = 200  # revisions kept in an item (its record stays far below DynamoDB's 400 KB)
UNKNOWN = "unknown"  # the principal of calls made without one (tests, local tools)


class ItemRecords:
    """The items of one Archive's store, read and changed under its clock."""

    def __init__(self, items: ItemStore, *, clock: Clock) -> None:
        self.items = items
        self._clock = clock

    # -- reading -------------------------------------------------------------------------------

    def get(self, label: str) -> Item:
        try:
            item = self.items.get(label_of(label))
        except ArchiveStoreError as error:
            raise Unavailable(UNAVAILABLE) from error
        if item is None:
            raise NotHeld(f"this Archive holds no item {label!r}")
        return item

    def list_items(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]:
        """A page of the items (tombstones included), and where the next page starts."""
        try:
            return self.items.scan(after=after, limit=limit)
        except ArchiveStoreError as error:
            raise Unavailable(UNAVAILABLE) from error

    def now(self) -> Decimal:
        """This Archive's clock (an offer's expiry, ``offers.py``)."""
        return self._clock()

    def accesses(self, item: Item) -> int:
        """How many acknowledged accesses the item had (through the resolver)."""
        return self.items.access_count(item.key)

    # -- making and changing an item -----------------------------------------------------------

    def _build(
        self, forms: Forms, state: State, data: dict[str, Any], principal: str = UNKNOWN
    ) -> Item:
        now = self._clock()
        try:
            return Item(
                ibi=forms,
                state=state,
                timestamp=now,
                creator=principal,
                created=now,
                content_type=ContentType(data.get("content_type", "Data")),
                language=data.get("language"),
                external_url=data.get("url"),
                transferable=flag(data.get("transferable", True), "transferable"),
                listable=flag(data.get("listable", True), "listable"),
                dc=dublin_core(data.get("dc", {})),
                oai_source=oai_source(data.get("oai_source")),
            )
        except ValueError as error:  # InvalidInput and enum errors
            raise BadRequest(str(error)) from None

    def _create(self, item: Item, *, accesses: int = 0) -> None:
        try:
            self.items.create(item, accesses=accesses)
        except ItemExists as exists:
            held = exists.existing
            state = held.state.value if held is not None else "an item"
            if held is not None and held.pending:
                state = "an original being transferred in"
            raise Conflict(
                f"this Archive already holds {item.ibi.key} (as {state}); an Archive holds one "
                "item per IBI, never an original and a copy"
            ) from None
        except ArchiveStoreError as error:
            raise Unavailable(UNAVAILABLE) from error
        self._note(item)

    def _note(self, item: Item) -> None:
        self.items.note_item(item)

    def _modify(
        self, label: str, change: Callable[[Item], Item], *, by: str = UNKNOWN, reason: str = ""
    ) -> Item:
        """Apply ``change`` with one conditional write (retried on a race); a change of what
        the item's persistent URL serves is recorded in its history, by ``by``."""
        for _ in range(5):
            item = self.get(label)
            if item.deleted:
                raise Gone(f"{item.ibi.key} was deleted; its IBI stays known and is never reused")
            try:
                changed = change(item)
            except (InvalidInput, ValueError) as error:
                if isinstance(error, ArchiveError):
                    raise
                raise BadRequest(str(error)) from None
            if changed is item:
                return item  # nothing to change (a retried request)
            changed = self._retargeted(item, changed, by, reason)
            try:
                self.items.replace(changed, expected_version=item.version)
            except StaleItem:
                continue
            except ArchiveStoreError as error:
                raise Unavailable(UNAVAILABLE) from error
            self._note(changed)
            return changed
        raise Conflict(f"{label} is being changed by someone else; retry")

    def _retargeted(self, before: Item, after: Item, by: str, reason: str) -> Item:
        """``after``, with a ``retargeted`` revision when what its persistent URL serves (the
        main file, else the external URL) changed. The first thing an item serves is its
        deposit, not a change; a tombstone and an incoming transfer record nothing."""
        was, now = before.served, after.served
        if was is None or was == now or after.deleted or after.pending:
            return after
        if len(after.history) >= MAX_HISTORY:
            raise Conflict(f"{after.key} has {MAX_HISTORY} revisions already")
        old, new = before.main_file, after.main_file
        revision = Revision(
            "retargeted",
            at=self._clock(),
            by=by,
            path=new.path if new is not None else None,
            old_sha256=old.sha256 if old is not None else None,
            old_size=old.size if old is not None else None,
            new_sha256=new.sha256 if new is not None else None,
            new_size=new.size if new is not None else None,
            reason=reason,
            served_before=was,
            served_after=now,
        )
        return replace(after, history=(*after.history, revision))

    def _forget(self, item: Item) -> None:
        try:
            self.items.remove(item)
        except StaleItem:
            raise Conflict(f"{item.key} is being changed by someone else; retry") from None
        except ArchiveStoreError as error:
            raise Unavailable(UNAVAILABLE) from error
