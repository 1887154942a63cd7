"""The item's fields, declared once (issue 36, functions/archive/domain/fields.py): the table
covers every attribute of the item, its rows are the item's JSON in order, an item with every
field set survives the store's mapping and a transfer, and each request's field set is the
table's (the sets the Archive had before, written out, so that none changes unseen)."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal

import pytest

from functions.archive.domain.fields import (
    FIELDS,
    KEPT_BESIDE,
    Carried,
    Request,
    carried,
    item_from_mapping,
    item_to_mapping,
    settable,
)
from functions.archive.mapping import deposit_body, links_from_mapping, transfer_body
from functions.archive.model import (
    ContentType,
    CopyCheck,
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

SHA = "ab" * 32
FULL = Item(
    ibi=Forms(ibip="8JMKD3MGP8W/35MME4E"),
    state=State.COPY,
    timestamp=Decimal("1795473000.123"),
    content_type=ContentType.METADATA,
    language="pt-BR",
    files=(StoredFile("a.txt", SHA, 3),),
    default_file="a.txt",
    external_url="https://example.org/a",
    transferable=False,
    listable=False,
    next_edition=Forms(ibip="8JMKD3MGP8W/35MME4F"),
    translations=(Translation(language="en", ibi=Forms(ibip="8JMKD3MGP8W/35MME4G")),),
    metadata=Forms(ibip="8JMKD3MGP8W/35MME4H"),
    metadata_oai_dc=Forms(ibip="8JMKD3MGP8W/35MME4J"),
    dc={"title": ("A", "B")},
    original_sha256=SHA,
    original_files=(StoredFile("a.txt", SHA, 3),),
    original_check=OriginalCheck(CopyCheck.VERIFIED, Decimal(1795473001), archive="LK47B6W/3"),
    service=True,
    creator="anonymous:127.0.0.1",
    created=Decimal("1795473000"),
    history=(Revision("imported", at=Decimal(1795473000), by="op", reason="why"),),
    pending=True,
    damaged=("a.txt",),
    deleted_original=True,
    moved_to=Forms(ibip="8JMKD3MGP8W/35MME4K"),
    moved_at=Decimal("1795473002"),
    oai_source=OaiSource("https://repo.example.org/oai", "oai:repo:1", "2024-05-01"),
    deposit_request=DepositRequest("cd" * 32, "ef" * 32),
)


def test_every_attribute_of_the_item_has_a_row_or_is_kept_beside() -> None:
    attributes = {f.name for f in dataclasses.fields(Item)}
    rows = {f.attribute for f in FIELDS if f.attribute}
    assert attributes == rows | KEPT_BESIDE
    assert not rows & KEPT_BESIDE
    names = [f.name for f in FIELDS]
    assert len(names) == len(set(names))  # one row per JSON name


def test_an_item_with_every_field_set_survives_the_mapping() -> None:
    item = FULL
    for row in FIELDS:  # no field may be left at its default: each must round-trip set
        if row.attribute:
            default = next(f for f in dataclasses.fields(Item) if f.name == row.attribute)
            assert getattr(item, row.attribute) != default.default, row.attribute
    mapping = item_to_mapping(item)
    assert list(mapping) == [f.name for f in FIELDS if f.dump is not None]
    again = item_from_mapping(json.loads(json.dumps(mapping)), version=3)
    assert again == dataclasses.replace(item, version=3)


def test_the_json_the_store_keeps_is_unchanged() -> None:
    """Byte for byte what item_to_mapping wrote before the table (its keys, in order)."""
    assert list(item_to_mapping(FULL)) == [
        "ibi", "state", "timestamp", "date", "content_type", "language", "files",
        "default_file", "url", "transferable", "listable", "next_edition", "translations",
        "metadata", "metadata_oai_dc", "dc", "original_sha256", "original_files",
        "original_check", "service", "creator", "created", "history", "pending", "damaged",
        "deleted_original", "moved_to", "moved_at", "oai_source", "deposit_request",
    ]  # fmt: skip
    assert item_to_mapping(FULL)["url"] == "https://example.org/a"  # external_url's name
    assert item_to_mapping(FULL)["date"] == "1795473000.123"


@pytest.mark.parametrize(
    ("request_", "fields"),
    [
        (Request.CREATE, {"ibi", "subsystem", "url", "content_type", "language", "transferable", "listable", "dc"}),
        (Request.ORIGINAL, {"ibi", "subsystem", "url", "content_type", "language", "transferable", "listable", "dc", "oai_source"}),
        (Request.COPY, {"ibi", "url", "content_type", "language", "listable", "dc", "original_sha256", "original_files"}),
        (Request.IMPORT, {"ibi", "url", "content_type", "language", "transferable", "listable", "dc", "reason"}),
        (Request.UPDATE, {"ibi", "url", "default_file", "content_type", "language", "transferable", "listable", "dc"}),
        (Request.TRANSFER, {"ibi", "url", "content_type", "language", "listable", "dc", "next_edition", "translations", "metadata", "metadata_oai_dc", "accesses"}),
    ],
)  # fmt: skip
def test_each_request_takes_the_fields_it_took_before(request_: Request, fields: set[str]) -> None:
    assert settable(request_) == fields


def test_a_transfer_carries_each_field_or_says_why_not() -> None:
    """What a transfer's body holds is the table's deposit and link rows; the receiver reads
    the links back as they were; default_file comes with the files."""
    body = transfer_body(dataclasses.replace(FULL, state=State.ORIGINAL, transferable=True))
    assert set(body) == set(carried(Carried.DEPOSIT)) - {"transferable"} | set(
        carried(Carried.LINK)
    )
    assert set(body) <= settable(Request.TRANSFER)  # the receiver takes all it is sent
    links = links_from_mapping(body)
    assert links == {
        "next_edition": FULL.next_edition,
        "translations": FULL.translations,
        "metadata": FULL.metadata,
        "metadata_oai_dc": FULL.metadata_oai_dc,
    }
    assert deposit_body(FULL)["transferable"] is True
    assert carried(Carried.FILES) == ("files", "default_file")  # uploaded and checked there
    # What no transfer carries, each the receiver's own: a new field must say which it is.
    assert set(carried(Carried.NO)) == {
        "state", "timestamp", "date", "original_sha256", "original_files", "original_check",
        "service", "creator", "created", "history", "pending", "damaged", "deleted_original",
        "moved_to", "moved_at", "oai_source", "deposit_request", "subsystem", "reason",
        "accesses",
    }  # fmt: skip
