"""The Archive's deposit operations (spec §2): pure logic over an item store.

Rules kept here: one item per IBI in an Archive; a copy keeps the original's IBI (and its
checksum); an Archive never holds both; a deletion leaves a tombstone and the IBI is never
forgotten or reused; the Archive's own service item is an untransferable original.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from functions.archive.model import (
    DC_ELEMENTS,
    ContentType,
    Forms,
    Item,
    State,
    StoredFile,
    Translation,
)
from functions.archive.store import ArchiveStoreError, ItemExists, ItemStore, StaleItem
from ibi.core.errors import InvalidInput

Clock = Callable[[], Decimal]
Minter = Callable[[str | None, str | None], Forms]  # (subsystem, idempotency key) -> IBI


class ArchiveError(Exception):
    status = 400


class BadRequest(ArchiveError):
    status = 400


class NotHeld(ArchiveError):
    status = 404


class Conflict(ArchiveError):
    status = 409


class Gone(ArchiveError):
    status = 410


class Unavailable(ArchiveError):
    status = 503


# Files join an item only through an upload and its check (POST /api/item/files).
_CREATE_FIELDS = {
    "ibi",
    "subsystem",
    "url",
    "content_type",
    "language",
    "transferable",
    "listable",
    "dc",
}
_UPDATE_FIELDS = {
    "url",
    "default_file",
    "content_type",
    "language",
    "transferable",
    "listable",
    "dc",
}


def _object(body: Any, allowed: set[str], what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest(f"{what}: the body must be a JSON object")
    unknown = set(body) - allowed
    if unknown:
        raise BadRequest(f"{what}: unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    return body


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f'"{name}" must be true or false')
    return value


def _dc(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise BadRequest('"dc" must be an object of Dublin Core elements, e.g. {"title": ["…"]}')
    result: dict[str, tuple[str, ...]] = {}
    for element, given in value.items():
        values = [given] if isinstance(given, str) else given
        if element not in DC_ELEMENTS:
            raise BadRequest(
                f'"dc": {element!r} is not a Dublin Core element ({", ".join(DC_ELEMENTS)})'
            )
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise BadRequest(f'"dc.{element}" must be a string or a list of strings')
        result[element] = tuple(values)
    return result


def parse_files(value: Any) -> tuple[StoredFile, ...]:
    if not isinstance(value, list):
        raise BadRequest('"files" must be a list of {"path", "sha256", "size"[, "content_type"]}')
    files = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) - {"path", "sha256", "size", "content_type"}:
            raise BadRequest(f'"files": {entry!r} is not {{"path", "sha256", "size"}}')
        try:
            files.append(
                StoredFile(
                    path=str(entry["path"]),
                    sha256=str(entry["sha256"]).lower(),
                    size=int(entry["size"]),
                    content_type=str(entry.get("content_type", "application/octet-stream")),
                )
            )
        except (KeyError, ValueError, TypeError) as error:
            raise BadRequest(f'"files": {entry!r}: {error}') from None
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        raise BadRequest('"files": a path appears twice')
    return tuple(files)


class ArchiveService:
    def __init__(
        self,
        items: ItemStore,
        *,
        clock: Clock,
        mint: Minter | None = None,
    ) -> None:
        self.items = items
        self._clock = clock
        self._mint = mint

    # -- reading -------------------------------------------------------------------------------

    def get(self, label: str) -> Item:
        try:
            item = self.items.get(_label(label))
        except ArchiveStoreError as error:
            raise Unavailable("the Archive's store is unavailable; retry shortly") from error
        if item is None:
            raise NotHeld(f"this Archive holds no item {label!r}")
        return item

    # -- the Archive's own service item --------------------------------------------------------

    def ensure_service_item(self, base_url: str) -> Item:
        """The untransferable original that is this Archive's service; minted on first start."""
        forms = self.items.service_item()
        if forms is None:
            if self._mint is None:
                raise Unavailable("no minting service to mint this Archive's service IBI")
            forms = self.items.claim_service_item(self._mint(None, None))
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
        data = _object(body, _CREATE_FIELDS, "a new original")
        if "ibi" in data:
            if "subsystem" in data:
                raise BadRequest('give either "ibi" (minted before) or "subsystem" (mint now)')
            forms = _forms(data["ibi"])
        else:
            if self._mint is None:
                raise BadRequest('this Archive mints nothing: give the item\'s "ibi"')
            forms = self._mint(data.get("subsystem"), idempotency_key)
        item = self._build(forms, State.ORIGINAL, data)
        if idempotency_key is not None:
            existing = self.items.get(forms.key)
            if existing is not None and existing.state is State.ORIGINAL and not existing.service:
                return existing  # the same request, retried: its item, not a second one
        self._create(item)
        return item

    def add_copy(self, body: Any) -> Item:
        allowed = (_CREATE_FIELDS - {"subsystem", "transferable"}) | {"original_sha256"}
        data = _object(body, allowed, "a copy")
        if "ibi" not in data:
            raise BadRequest('a copy keeps the original\'s IBI: give "ibi"')
        forms = _forms(data["ibi"])
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
                transferable=_bool(data.get("transferable", True), "transferable"),
                listable=_bool(data.get("listable", True), "listable"),
                dc=_dc(data.get("dc", {})),
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
            raise Unavailable("the Archive's store is unavailable; retry shortly") from error
        self._note(item)

    def _note(self, item: Item) -> None:
        note = getattr(self.items, "note_item", None)
        if note is not None:
            note(item)

    def update(self, label: str, body: Any) -> Item:
        data = _object(body, _UPDATE_FIELDS, "an update")

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
            for flag in ("transferable", "listable"):
                if flag in data:
                    changes[flag] = _bool(data[flag], flag)
            if "dc" in data:
                changes["dc"] = _dc(data["dc"])
            if item.service and changes.get("transferable"):
                raise Conflict("the Archive's own service item is untransferable")
            return item.changed(self._clock(), **changes)

        return self._modify(label, change)

    def link(self, label: str, body: Any) -> Item:
        data = _object(body, {"next_edition", "translation", "metadata"}, "a link")
        if len(data) != 1:
            raise BadRequest(
                'link one thing at a time: "next_edition", "translation" or "metadata"'
            )

        def change(item: Item) -> Item:
            if "next_edition" in data:
                forms = _forms(data["next_edition"])
                if forms.key == item.key:
                    raise BadRequest("an item cannot be its own next edition")
                return item.changed(self._clock(), next_edition=forms)
            if "translation" in data:
                link = data["translation"]
                if not isinstance(link, dict) or "language" not in link:
                    raise BadRequest('"translation" is {"language": "pt-BR", "ibi": … | "url": …}')
                translation = Translation(
                    language=str(link["language"]),
                    ibi=_forms(link["ibi"]) if "ibi" in link else None,
                    url=link.get("url"),
                )
                kept = tuple(t for t in item.translations if t.language != translation.language)
                return item.changed(self._clock(), translations=(*kept, translation))
            link = data["metadata"]
            if not isinstance(link, dict) or "ibi" not in link:
                raise BadRequest('"metadata" is {"ibi": …, "format": "oai_dc"?}')
            forms = _forms(link["ibi"])
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
                raise Unavailable("the Archive's store is unavailable; retry shortly") from error
            self._note(changed)
            return changed
        raise Conflict(f"{label} is being changed by someone else; retry")


def _label(text: str) -> str:
    try:
        return Forms.of(text).key
    except InvalidInput as error:
        raise BadRequest(f"not an IBI: {error}") from None


def _forms(value: Any) -> Forms:
    try:
        return Forms.from_mapping(value)
    except InvalidInput as error:
        raise BadRequest(f"not an IBI: {error}") from None
