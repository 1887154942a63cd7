"""The Archive's deposit operations (spec §2): pure logic over an item store.

Rules kept here: one item per IBI in an Archive; a copy keeps the original's IBI (and its
checksum); an Archive never holds both; a deletion leaves a tombstone and the IBI is never
forgotten or reused; the Archive's own service item is an untransferable original, minted
once by :meth:`ArchiveService.bootstrap`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from functions.archive.errors import (
    ArchiveError,
    BadRequest,
    Conflict,
    Gone,
    NotHeld,
    Unavailable,
)
from functions.archive.model import ContentType, Forms, Item, State, StoredFile, Translation
from functions.archive.parsing import (
    CREATE_FIELDS,
    UPDATE_FIELDS,
    dublin_core,
    fields_of,
    flag,
    forms_of,
    label_of,
)
from functions.archive.store import ArchiveStoreError, ItemExists, ItemStore, StaleItem
from ibi.core.errors import InvalidInput

__all__ = [
    "ArchiveError",
    "ArchiveService",
    "BadRequest",
    "Conflict",
    "Gone",
    "NotHeld",
    "Unavailable",
]

Clock = Callable[[], Decimal]
Minter = Callable[[str | None, str | None], Forms]  # (subsystem, idempotency key) -> IBI
UNAVAILABLE = "the Archive's store is unavailable; retry shortly"


class ArchiveService:
    """An Archive's items: deposit, change, delete, list, and its own service item.

    ``name`` names this Archive among those minting through the same service (its table):
    the service IBI is minted with an idempotency key derived from it, so every execution
    environment that bootstraps at once gets the same IBI.
    """

    def __init__(
        self,
        items: ItemStore,
        *,
        clock: Clock,
        mint: Minter | None = None,
        name: str = "archive",
    ) -> None:
        self.items = items
        self._clock = clock
        self._mint = mint
        self.service_mint_key = f"archive-service:{name}"

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

    def accesses(self, item: Item) -> int:
        """How many acknowledged accesses the item had (through the resolver)."""
        return self.items.access_count(item.key)

    # -- the Archive's own service item --------------------------------------------------------

    def bootstrap(self, base_url: str) -> Item:
        """The untransferable original that is this Archive's service, minted the first time.

        Safe to run at once in several execution environments: the IBI is minted with this
        Archive's own idempotency key (every caller gets the same one) and recorded with a
        conditional write (the first record wins; the others read it).
        """
        forms = self.items.service_item()
        if forms is None:
            if self._mint is None:
                raise Unavailable("no minting service to mint this Archive's service IBI")
            forms = self.items.claim_service_item(self._mint(None, self.service_mint_key))
        existing = self.items.get(forms.key)
        if existing is not None:
            return existing
        item = Item(
            ibi=forms,
            state=State.ORIGINAL,
            timestamp=self._clock(),
            external_url=f"{base_url.rstrip('/')}/{forms.key}",
            transferable=False,
            listable=False,
            service=True,
            dc={"title": ("IBI Archive service",), "type": ("Service",)},
        )
        try:
            self.items.create(item)
        except ItemExists as exists:
            if exists.existing is not None:
                return exists.existing
        return item

    # -- deposit -------------------------------------------------------------------------------

    def create_original(self, body: Any, *, idempotency_key: str | None = None) -> Item:
        """A new original. With an idempotency key, a retried request gets the same item."""
        data = fields_of(body, CREATE_FIELDS, "a new original")
        if "ibi" in data:
            if "subsystem" in data:
                raise BadRequest('give either "ibi" (minted before) or "subsystem" (mint now)')
            forms = forms_of(data["ibi"])
        else:
            if self._mint is None:
                raise BadRequest('this Archive mints nothing: give the item\'s "ibi"')
            deposit_key = f"deposit:{idempotency_key}" if idempotency_key else None
            forms = self._mint(data.get("subsystem"), deposit_key)
        item = self._build(forms, State.ORIGINAL, data)
        if idempotency_key is not None:
            existing = self.items.get(forms.key)
            if existing is not None and existing.state is State.ORIGINAL and not existing.service:
                return existing  # the same request, retried: its item, not a second one
        self._create(item)
        return item

    def add_copy(self, body: Any) -> Item:
        allowed = (CREATE_FIELDS - {"subsystem", "transferable"}) | {"original_sha256"}
        data = fields_of(body, allowed, "a copy")
        if "ibi" not in data:
            raise BadRequest('a copy keeps the original\'s IBI: give "ibi"')
        forms = forms_of(data["ibi"])
        original_sha256 = data.get("original_sha256")
        if original_sha256 is not None and (
            not isinstance(original_sha256, str) or len(original_sha256) != 64
        ):
            raise BadRequest('"original_sha256" must be the hex SHA-256 of the original\'s file')
        item = self._build(forms, State.COPY, data)
        item = replace(item, transferable=False, original_sha256=original_sha256)
        self._create(item)
        return item

    def _build(self, forms: Forms, state: State, data: dict[str, Any]) -> Item:
        try:
            return Item(
                ibi=forms,
                state=state,
                timestamp=self._clock(),
                content_type=ContentType(data.get("content_type", "Data")),
                language=data.get("language"),
                external_url=data.get("url"),
                transferable=flag(data.get("transferable", True), "transferable"),
                listable=flag(data.get("listable", True), "listable"),
                dc=dublin_core(data.get("dc", {})),
            )
        except ValueError as error:  # InvalidInput and enum errors
            raise BadRequest(str(error)) from None

    def _create(self, item: Item) -> None:
        try:
            self.items.create(item)
        except ItemExists as exists:
            held = exists.existing
            state = held.state.value if held is not None else "an item"
            raise Conflict(
                f"this Archive already holds {item.ibi.key} (as {state}); an Archive holds one "
                "item per IBI, never an original and a copy"
            ) from None
        except ArchiveStoreError as error:
            raise Unavailable(UNAVAILABLE) from error
        self._note(item)

    def _note(self, item: Item) -> None:
        self.items.note_item(item)

    def update(self, label: str, body: Any) -> Item:
        data = fields_of(body, UPDATE_FIELDS, "an update")

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

        return self._modify(label, change)

    def link(self, label: str, body: Any) -> Item:
        data = fields_of(body, {"next_edition", "translation", "metadata"}, "a link")
        if len(data) != 1:
            raise BadRequest(
                'link one thing at a time: "next_edition", "translation" or "metadata"'
            )

        def change(item: Item) -> Item:
            if "next_edition" in data:
                forms = forms_of(data["next_edition"])
                if forms.key == item.key:
                    raise BadRequest("an item cannot be its own next edition")
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

    def set_files(self, label: str, files: tuple[StoredFile, ...], default: str | None) -> Item:
        def change(item: Item) -> Item:
            kept = tuple(f for f in item.files if f.path not in {g.path for g in files})
            chosen = default if default is not None else item.default_file
            return item.changed(self._clock(), files=(*kept, *files), default_file=chosen)

        return self._modify(label, change)

    def delete(self, label: str) -> Item:
        def change(item: Item) -> Item:
            if item.service:
                raise Conflict("the Archive's own service item cannot be deleted")
            return item.tombstone(self._clock())

        return self._modify(label, change)

    # -- transfer (seed 001 §3.2; seed 004 §4.5) ---------------------------------------------

    def release_original(self, label: str, *, leave: str) -> tuple[Item, Item]:
        """First step of a transfer: this Archive stops answering ``Original`` for the item.

        Returns (the item as it was, the item as it is now: a ``Copy`` or a tombstone). Only a
        transferable original moves; the Archive's own service item never does.
        """
        if leave not in {"copy", "tombstone"}:
            raise BadRequest('"leave" is "copy" or "tombstone"')
        before: list[Item] = []

        def change(item: Item) -> Item:
            if item.state is not State.ORIGINAL:
                raise Conflict(f"{item.key} is a {item.state.value} here: only an original moves")
            if item.service or not item.transferable:
                raise Conflict(f"{item.key} is an untransferable original")
            before.append(item)
            if leave == "tombstone":
                return item.tombstone(self._clock())
            main = item.main_file
            return item.changed(
                self._clock(),
                state=State.COPY,
                transferable=False,
                original_sha256=main.sha256 if main else None,
            )

        after = self._modify(label, change)
        return before[-1], after

    def restore_original(self, before: Item) -> None:
        """Undo :meth:`release_original` when the receiving Archive did not take the item."""
        current = self.get(before.key)
        self.items.replace(
            replace(before, version=current.version + 1, timestamp=self._clock()),
            expected_version=current.version,
        )

    def _modify(self, label: str, change: Callable[[Item], Item]) -> Item:
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
            try:
                self.items.replace(changed, expected_version=item.version)
            except StaleItem:
                continue
            except ArchiveStoreError as error:
                raise Unavailable(UNAVAILABLE) from error
            self._note(changed)
            return changed
        raise Conflict(f"{label} is being changed by someone else; retry")
