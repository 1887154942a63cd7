"""An Archive item as JSON, and the bodies a transfer sends: the field table's
(``domain/fields.py``, issue 36), under the names the rest of the Archive imports.

``item_to_mapping`` is the item as the deposit API shows it and as the store keeps it (the
same field names: ``url`` for the external URL, ``timestamp`` in ISO 8601 and ``date`` exact).
``item_from_mapping`` reads it back, and also reads what earlier versions stored
(``external_url``, and ``timestamp`` as the exact decimal date). ``deposit_body`` is the part
a receiving Archive takes to create the item (``POST /api/items``).
"""

from __future__ import annotations

from typing import Any

from functions.archive.domain.fields import (
    FIELDS,
    Carried,
    carried,
    forms_mapping,
    item_from_mapping,
    item_to_mapping,
    translation_mapping,
)
from functions.archive.model import Item

__all__ = [
    "DEPOSIT_FIELDS",
    "LINK_FIELDS",
    "deposit_body",
    "forms_mapping",
    "item_from_mapping",
    "item_to_mapping",
    "links_from_mapping",
    "links_of",
    "transfer_body",
    "translation_mapping",
]

# What a new original takes (files come through an upload and its check), and the links a
# transfer carries with the item (in the item's JSON form): the field table's (domain/fields.py).
DEPOSIT_FIELDS = carried(Carried.DEPOSIT)
LINK_FIELDS = carried(Carried.LINK)


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
        f.attribute: f.load(data)
        for f in FIELDS
        if f.carried is Carried.LINK and f.attribute and f.load
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
