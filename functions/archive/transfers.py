"""A transfer as the item records see it (seed 001 §3.2; seed 004 §4.5).

The sending side: :meth:`Transfers.release_original` (the original becomes a copy or a
tombstone) and :meth:`Transfers.restore_original` (undone when the receiver did not take it).
The receiving side: :meth:`Transfers.receive_transfer` (held, answering no one),
:meth:`Transfers.complete_transfer` (the original is here) or
:meth:`Transfers.cancel_transfer`. Who drives them: ``transfer.py`` (this Archive sends to a
receiver's deposit API) and ``offers.py`` (between institutions); the files come through the
content layer (``content.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from functions.archive.deposits import NotCreator
from functions.archive.domain.fields import Request, settable
from functions.archive.errors import BadRequest, Conflict, Unavailable
from functions.archive.items import UNAVAILABLE, UNKNOWN, ItemRecords
from functions.archive.mapping import links_from_mapping
from functions.archive.model import Forms, Item, Revision, State
from functions.archive.parsing import fields_of, forms_of
from functions.archive.store import ArchiveStoreError, StaleItem
from ibi.core.errors import InvalidInput

# What an incoming transfer carries: the deposit fields (no "transferable": it is, once here)
# and the links, in the item's own JSON form (functions.archive.mapping.transfer_body).
# "accesses": the sender's access count, carried so that the item's count goes on from it.
TRANSFER_FIELDS = set(settable(Request.TRANSFER))
MAX_ACCESSES = 10**15  # a count carried by a transfer (DynamoDB numbers hold 38 digits)


class Transfers(ItemRecords):
    """An original leaving this Archive, or coming in."""

    # -- the sending side ----------------------------------------------------------------------

    def release_original(
        self,
        label: str,
        *,
        leave: str,
        version: int | None = None,
        reason: str | None = None,
        to: Forms | None = None,
    ) -> tuple[Item, Item]:
        """First step of a transfer: this Archive stops answering ``Original`` for the item.

        Returns (the item as it was, the item as it is now: a ``Copy`` or a tombstone). Only a
        transferable original moves; the Archive's own service item never does. With
        ``version``, only that version of the item (the one the receiver was sent and checked).
        With ``reason`` (an offer, ``offers.py``), the release is recorded in the item's history.
        With ``to`` (the receiving Archive's service IBI), the item keeps the transfer record
        that its protocol answer carries (``ibi.core.transfers``, issue 24).
        """
        if leave not in {"copy", "tombstone"}:
            raise BadRequest('"leave" is "copy" or "tombstone"')
        before: list[Item] = []

        def change(item: Item) -> Item:
            if item.state is not State.ORIGINAL:
                raise Conflict(f"{item.key} is a {item.state.value} here: only an original moves")
            if item.service or not item.transferable:
                raise Conflict(f"{item.key} is an untransferable original")
            if version is not None and item.version != version:
                raise Conflict(f"{item.key} changed while it was being transferred; retry")
            before.append(item)
            history = item.history
            if reason is not None:
                released = Revision("released", at=self._clock(), by=UNKNOWN, reason=reason)
                history = (*history, released)
            moved_at = self._clock() if to is not None else None
            if leave == "tombstone":
                left = item.tombstone(self._clock())
                return replace(left, history=history, moved_to=to, moved_at=moved_at)
            main = item.main_file
            return item.changed(
                self._clock(),
                state=State.COPY,
                transferable=False,
                original_sha256=main.sha256 if main else None,
                original_files=item.files,
                history=history,
                moved_to=to,
                moved_at=moved_at,
            )

        after = self._modify(label, change)
        return before[-1], after

    def restore_original(self, before: Item) -> None:
        """Undo :meth:`release_original` when the receiving Archive did not take the item."""
        for _ in range(5):
            current = self.get(before.key)
            restored = replace(
                before,
                version=current.version + 1,
                timestamp=max(self._clock(), current.timestamp),
            )
            try:
                self.items.replace(restored, expected_version=current.version)
            except StaleItem:
                continue
            except ArchiveStoreError as error:
                raise Unavailable(UNAVAILABLE) from error
            return
        raise Conflict(f"{before.key} is being changed by someone else; the original is not back")

    # -- the receiving side --------------------------------------------------------------------

    def receive_transfer(self, body: Any, principal: str = UNKNOWN) -> Item:
        """Hold an original that another Archive is transferring here, answering no one yet.

        Kept as a pending ``Copy`` (never answered by the protocol, never served) until
        :meth:`complete_transfer`; the sender's files come through the usual upload and check.
        A second call for the same pending item starts it again (a retried transfer).
        """
        data = fields_of(body, TRANSFER_FIELDS, "an incoming transfer")
        if "ibi" not in data:
            raise BadRequest('a transfer names the IBI it moves: give "ibi"')
        forms = forms_of(data["ibi"])
        item = self._build(forms, State.COPY, data, principal)
        try:
            item = replace(item, pending=True, **links_from_mapping(data))
        except (InvalidInput, ValueError, KeyError, TypeError, AttributeError) as error:
            raise BadRequest(f"an incoming transfer: its links: {error}") from None
        accesses = data.get("accesses", 0)
        if isinstance(accesses, bool) or not isinstance(accesses, int):
            accesses = -1
        if not 0 <= accesses <= MAX_ACCESSES:
            raise BadRequest(
                '"accesses" is the count of accesses so far: a whole number from 0 to '
                f"{MAX_ACCESSES}"
            )
        held = self.items.get(forms.key)
        if held is not None and held.deleted_original:
            raise Conflict(
                f"this Archive deleted the original of {held.key}: no original of its IBI is held "
                "here again (docs/decisions.md); transfer it to another Archive"
            )
        if held is not None and held.yields_to_transfer:  # a retry, or a copy's tombstone
            self._forget(held)
        self._create(item, accesses=accesses)
        return item

    def complete_transfer(self, label: str, principal: str = UNKNOWN) -> Item:
        """The original is here now: the sender released it after checking what we hold.

        One conditional write (each file's bytes were checked by its commit), so that it is
        quick and either it or a cancellation wins.
        """

        def change(item: Item) -> Item:
            if not item.pending:
                raise Conflict(f"{item.key} is no incoming transfer here (it is {item.state})")
            if item.creator != principal:
                raise NotCreator(f"only whoever started the transfer of {item.key} completes it")
            now = self._clock()
            received = Revision("received", at=now, by=principal)
            return item.changed(
                now,
                state=State.ORIGINAL,
                pending=False,
                transferable=True,
                original_sha256=None,
                original_files=(),
                history=(*item.history, received),
            )

        return self._modify(label, change)

    def cancel_transfer(self, label: str) -> Item:
        """Forget an incoming transfer that did not complete (never answered to anyone)."""
        item = self.get(label)
        if not item.pending:
            raise Conflict(f"{item.key} is no incoming transfer here: it stays")
        self._forget(item)
        return item
