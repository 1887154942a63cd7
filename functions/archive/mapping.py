"""One mapping of an Archive item to JSON and back: the deposit API, the store and transfers.

``item_to_mapping`` is the item as the deposit API shows it and as the store keeps it (the
same field names: ``url`` for the external URL, ``timestamp`` in ISO 8601 and ``date`` exact).
``item_from_mapping`` reads it back, and also reads what earlier versions stored
(``external_url``, and ``timestamp`` as the exact decimal date). ``deposit_body`` is the part
a receiving Archive takes to create the item (``POST /api/items``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from functions.archive.model import (
    ContentType,
    DepositRequest,
    Forms,
    Item,
    OaiSource,
    OriginalCheck,
    Revision,
    State,
    StoredFile,
    Translation,
)
from ibi.core.dates import format_date, iso_date

# What a new original takes (files come through an upload and its check).
DEPOSIT_FIELDS = ("ibi", "content_type", "language", "url", "transferable", "listable", "dc")
# The links a transfer carries with the item (in the item's JSON form).
LINK_FIELDS = ("next_edition", "translations", "metadata", "metadata_oai_dc")


def forms_mapping(forms: Forms | None) -> dict[str, str] | None:
    return forms.to_mapping() if forms is not None else None


def _forms(data: dict[str, str] | None) -> Forms | None:
    return Forms(rep=data.get("rep"), ibip=data.get("ibip")) if data else None


def translation_mapping(translation: Translation) -> dict[str, Any]:
    return {
        "language": translation.language,
        "ibi": forms_mapping(translation.ibi),
        "url": translation.url,
    }


def item_to_mapping(item: Item) -> dict[str, Any]:
    """The item as JSON: what the deposit API answers and what the store keeps."""
    return {
        "ibi": item.ibi.to_mapping(),
        "state": item.state.value,
        "timestamp": iso_date(item.timestamp),
        "date": format_date(item.timestamp),
        "content_type": item.content_type.value,
        "language": item.language,
        "files": [f.to_mapping() for f in item.files],
        "default_file": item.default_file,
        "url": item.external_url,
        "transferable": item.transferable,
        "listable": item.listable,
        "next_edition": forms_mapping(item.next_edition),
        "translations": [translation_mapping(t) for t in item.translations],
        "metadata": forms_mapping(item.metadata),
        "metadata_oai_dc": forms_mapping(item.metadata_oai_dc),
        "dc": {k: list(v) for k, v in item.dc.items()},
        "original_sha256": item.original_sha256,
        "original_files": [_expected_mapping(f) for f in item.original_files],
        "original_check": item.original_check.to_mapping() if item.original_check else None,
        "service": item.service,
        "creator": item.creator,
        "created": format_date(item.created) if item.created is not None else None,
        "history": [revision.to_mapping() for revision in item.history],
        "pending": item.pending,
        "damaged": list(item.damaged),
        "deleted_original": item.deleted_original,
        "moved_to": forms_mapping(item.moved_to),
        "moved_at": format_date(item.moved_at) if item.moved_at is not None else None,
        "oai_source": item.oai_source.to_mapping() if item.oai_source else None,
        "deposit_request": item.deposit_request.to_mapping() if item.deposit_request else None,
    }


def _expected_mapping(stored: StoredFile) -> dict[str, Any]:
    return {"path": stored.path, "sha256": stored.sha256, "size": stored.size}


def _timestamp(data: dict[str, Any]) -> Decimal:
    """The exact date: ``date``, or (stored by earlier versions) a decimal ``timestamp``."""
    return Decimal(data["date"] if "date" in data else data["timestamp"])


def item_from_mapping(data: dict[str, Any], version: int = 0) -> Item:
    """The item :func:`item_to_mapping` wrote (or an earlier version stored)."""
    return Item(
        ibi=Forms(rep=data["ibi"].get("rep"), ibip=data["ibi"].get("ibip")),
        state=State(data["state"]),
        timestamp=_timestamp(data),
        content_type=ContentType(data["content_type"]),
        language=data.get("language"),
        files=tuple(StoredFile(**f) for f in data.get("files", [])),
        default_file=data.get("default_file"),
        external_url=data.get("url", data.get("external_url")),
        transferable=bool(data.get("transferable", True)),
        listable=bool(data.get("listable", True)),
        next_edition=_forms(data.get("next_edition")),
        translations=tuple(
            Translation(language=t["language"], ibi=_forms(t.get("ibi")), url=t.get("url"))
            for t in data.get("translations", [])
        ),
        metadata=_forms(data.get("metadata")),
        metadata_oai_dc=_forms(data.get("metadata_oai_dc")),
        dc={k: tuple(v) for k, v in data.get("dc", {}).items()},
        original_sha256=data.get("original_sha256"),
        original_files=tuple(StoredFile(**f) for f in data.get("original_files", [])),
        original_check=_original_check(data.get("original_check")),
        service=bool(data.get("service", False)),
        creator=data.get("creator"),
        created=Decimal(data["created"]) if data.get("created") else None,
        history=tuple(Revision.from_mapping(r) for r in data.get("history", [])),
        pending=bool(data.get("pending", False)),
        damaged=tuple(data.get("damaged", [])),
        deleted_original=_deleted_original(data),
        moved_to=_forms(data.get("moved_to")),
        moved_at=Decimal(data["moved_at"]) if data.get("moved_at") else None,
        oai_source=OaiSource(**data["oai_source"]) if data.get("oai_source") else None,
        deposit_request=DepositRequest(**data["deposit_request"])
        if data.get("deposit_request")
        else None,
        version=version,
    )


def _original_check(data: dict[str, Any] | None) -> OriginalCheck | None:
    """A copy's check (None for an original, and for a copy stored before copies were checked)."""
    return OriginalCheck.from_mapping(data) if data else None


def _deleted_original(data: dict[str, Any]) -> bool:
    """Whether a tombstone is the original's, deleted here. One stored before this was recorded
    counts as one unless it kept a copy's checksums (only a copy has them): never re-created."""
    if "deleted_original" in data:
        return bool(data["deleted_original"])
    copy = data.get("original_sha256") or data.get("original_files")
    return data["state"] == State.DELETED.value and not copy


def deposit_body(item: Item) -> dict[str, Any]:
    """What a receiving Archive takes to create ``item`` as a transferable original."""
    mapping = item_to_mapping(item)
    body = {name: mapping[name] for name in DEPOSIT_FIELDS if mapping[name] is not None}
    body["transferable"] = True
    return body


def transfer_body(item: Item) -> dict[str, Any]:
    """What a receiving Archive takes to hold ``item`` while it comes in (``POST /api/transfers``):
    the deposit fields and the links, in the item's own JSON form."""
    mapping = item_to_mapping(item)
    body = deposit_body(item)
    del body["transferable"]
    body.update({name: mapping[name] for name in LINK_FIELDS if mapping[name]})
    return body


def links_from_mapping(data: dict[str, Any]) -> dict[str, Any]:
    """The links of :func:`transfer_body` as :class:`Item` fields (``InvalidInput`` if wrong)."""
    return {
        "next_edition": _forms(data.get("next_edition")),
        "translations": tuple(
            Translation(language=t["language"], ibi=_forms(t.get("ibi")), url=t.get("url"))
            for t in data.get("translations") or []
        ),
        "metadata": _forms(data.get("metadata")),
        "metadata_oai_dc": _forms(data.get("metadata_oai_dc")),
    }


def links_of(item: Item) -> list[dict[str, Any]]:
    """The item's links, as the deposit API takes them (one per call)."""
    links: list[dict[str, Any]] = []
    if item.next_edition:
        links.append({"next_edition": item.next_edition.to_mapping()})
    for translation in item.translations:
        mapping = translation_mapping(translation)
        links.append({"translation": {k: v for k, v in mapping.items() if v is not None}})
    if item.metadata:
        links.append({"metadata": {"ibi": item.metadata.to_mapping()}})
    if item.metadata_oai_dc:
        links.append({"metadata": {"ibi": item.metadata_oai_dc.to_mapping(), "format": "oai_dc"}})
    return links
