"""The item's fields, declared once (issue 36): what each is called in JSON, how it is written
and read, which requests may set it, and whether a transfer carries it.

Before, the fields were listed in about eight places (the request field sets, the store's
mapping, the transfer and deposit bodies), and a field missing from one list disappeared on a
transfer without a word. Now :data:`FIELDS` is the one list: :func:`item_to_mapping` and
:func:`item_from_mapping` (the deposit API's JSON, the store's record) are its rows in order,
:func:`settable` gives each request's field set and :func:`carried` a transfer's, and a test
ties it to :class:`~functions.archive.model.Item` (every attribute has a row or is named in
:data:`KEPT_BESIDE`).

A row whose ``attribute`` is None is a request's word, not the item's (``subsystem``: where to
mint; ``reason``: why an import; ``accesses``: a transfer's count so far).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
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


class Request(StrEnum):
    """The requests that give an item's fields."""

    CREATE = "create"  # every new item: an original, a copy, an import
    ORIGINAL = "original"  # POST /api/items
    COPY = "copy"  # POST /api/copies
    IMPORT = "import"  # POST /api/imports (an operator's original of any subsystem)
    UPDATE = "update"  # PATCH /api/item
    TRANSFER = "transfer"  # POST /api/transfers (an original coming in)


class Carried(StrEnum):
    """How a transfer (or an offer) takes a field to the receiving Archive."""

    DEPOSIT = "deposit"  # in the body that makes the item there, as deposited
    LINK = "link"  # in the body, as the item's links
    FILES = "files"  # with the files, uploaded and checked there (and the default one)
    NO = "no"  # not carried: the receiver's own (its state, its history, its checks)


Dump = Callable[[Item], Any]
Load = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class ItemField:
    """One field: its JSON ``name``, the :class:`Item` ``attribute`` it is (None: a request's
    word only), how it is written (``dump``) and read back (``load``, from what this or an
    earlier version stored), the requests that may set it, and how a transfer carries it."""

    name: str
    attribute: str | None
    dump: Dump | None = None
    load: Load | None = None
    settable: frozenset[Request] = frozenset()
    carried: Carried = Carried.NO


def _forms(data: dict[str, str] | None) -> Forms | None:
    return Forms(rep=data.get("rep"), ibip=data.get("ibip")) if data else None


def forms_mapping(forms: Forms | None) -> dict[str, str] | None:
    return forms.to_mapping() if forms is not None else None


def translation_mapping(translation: Translation) -> dict[str, Any]:
    return {
        "language": translation.language,
        "ibi": forms_mapping(translation.ibi),
        "url": translation.url,
    }


def _translations(data: dict[str, Any]) -> tuple[Translation, ...]:
    return tuple(
        Translation(language=t["language"], ibi=_forms(t.get("ibi")), url=t.get("url"))
        for t in data.get("translations") or []
    )


def _expected_mapping(stored: StoredFile) -> dict[str, Any]:
    return {"path": stored.path, "sha256": stored.sha256, "size": stored.size}


def _timestamp(data: dict[str, Any]) -> Decimal:
    """The exact date: ``date``, or (stored by earlier versions) a decimal ``timestamp``."""
    return Decimal(data["date"] if "date" in data else data["timestamp"])


def _date(value: Decimal | None) -> str | None:
    return format_date(value) if value is not None else None


def _deleted_original(data: dict[str, Any]) -> bool:
    """Whether a tombstone is the original's, deleted here. One stored before this was recorded
    counts as one unless it kept a copy's checksums (only a copy has them): never re-created."""
    if "deleted_original" in data:
        return bool(data["deleted_original"])
    copy = data.get("original_sha256") or data.get("original_files")
    return data["state"] == State.DELETED.value and not copy


def _optional(name: str, read: Callable[[Any], Any]) -> Load:
    """A field read with ``read`` when present and not empty, else None."""
    return lambda data: read(data[name]) if data.get(name) else None


R = Request
_NEW = frozenset({R.CREATE, R.ORIGINAL, R.COPY, R.IMPORT})  # every request making an item
_DEPOSITED = _NEW | {R.UPDATE, R.TRANSFER}  # and those changing or moving it

FIELDS: tuple[ItemField, ...] = (
    ItemField(
        "ibi",
        "ibi",
        lambda i: i.ibi.to_mapping(),
        lambda d: Forms(rep=d["ibi"].get("rep"), ibip=d["ibi"].get("ibip")),
        _DEPOSITED,  # update: only to add the item's other form
        Carried.DEPOSIT,
    ),
    ItemField("state", "state", lambda i: i.state.value, lambda d: State(d["state"])),
    ItemField("timestamp", "timestamp", lambda i: iso_date(i.timestamp), _timestamp),
    ItemField("date", None, lambda i: format_date(i.timestamp)),  # the timestamp, exact
    ItemField(
        "content_type",
        "content_type",
        lambda i: i.content_type.value,
        lambda d: ContentType(d["content_type"]),
        _DEPOSITED,
        Carried.DEPOSIT,
    ),
    ItemField(
        "language",
        "language",
        lambda i: i.language,
        lambda d: d.get("language"),
        _DEPOSITED,
        Carried.DEPOSIT,
    ),
    ItemField(
        "files",
        "files",
        lambda i: [f.to_mapping() for f in i.files],
        lambda d: tuple(StoredFile(**f) for f in d.get("files", [])),
        carried=Carried.FILES,  # uploaded and checked there, never in a body
    ),
    ItemField(
        "default_file",
        "default_file",
        lambda i: i.default_file,
        lambda d: d.get("default_file"),
        frozenset({R.UPDATE}),
        Carried.FILES,
    ),
    ItemField(
        "url",
        "external_url",
        lambda i: i.external_url,
        lambda d: d.get("url", d.get("external_url")),  # earlier versions: external_url
        _DEPOSITED,
        Carried.DEPOSIT,
    ),
    ItemField(
        "transferable",
        "transferable",
        lambda i: i.transferable,
        lambda d: bool(d.get("transferable", True)),
        frozenset({R.CREATE, R.ORIGINAL, R.IMPORT, R.UPDATE}),  # a copy, a transfer: never
        Carried.DEPOSIT,  # always true there: a transferred original stays transferable
    ),
    ItemField(
        "listable",
        "listable",
        lambda i: i.listable,
        lambda d: bool(d.get("listable", True)),
        _DEPOSITED,
        Carried.DEPOSIT,
    ),
    ItemField(
        "next_edition",
        "next_edition",
        lambda i: forms_mapping(i.next_edition),
        lambda d: _forms(d.get("next_edition")),
        frozenset({R.TRANSFER}),  # elsewhere: POST /api/item/links
        Carried.LINK,
    ),
    ItemField(
        "translations",
        "translations",
        lambda i: [translation_mapping(t) for t in i.translations],
        _translations,
        frozenset({R.TRANSFER}),
        Carried.LINK,
    ),
    ItemField(
        "metadata",
        "metadata",
        lambda i: forms_mapping(i.metadata),
        lambda d: _forms(d.get("metadata")),
        frozenset({R.TRANSFER}),
        Carried.LINK,
    ),
    ItemField(
        "metadata_oai_dc",
        "metadata_oai_dc",
        lambda i: forms_mapping(i.metadata_oai_dc),
        lambda d: _forms(d.get("metadata_oai_dc")),
        frozenset({R.TRANSFER}),
        Carried.LINK,
    ),
    ItemField(
        "dc",
        "dc",
        lambda i: {k: list(v) for k, v in i.dc.items()},
        lambda d: {k: tuple(v) for k, v in d.get("dc", {}).items()},
        _DEPOSITED,
        Carried.DEPOSIT,
    ),
    ItemField(
        "original_sha256",
        "original_sha256",
        lambda i: i.original_sha256,
        lambda d: d.get("original_sha256"),
        frozenset({R.COPY}),
    ),
    ItemField(
        "original_files",
        "original_files",
        lambda i: [_expected_mapping(f) for f in i.original_files],
        lambda d: tuple(StoredFile(**f) for f in d.get("original_files", [])),
        frozenset({R.COPY}),
    ),
    ItemField(
        "original_check",
        "original_check",
        lambda i: i.original_check.to_mapping() if i.original_check else None,
        _optional("original_check", OriginalCheck.from_mapping),
    ),
    ItemField("service", "service", lambda i: i.service, lambda d: bool(d.get("service", False))),
    ItemField("creator", "creator", lambda i: i.creator, lambda d: d.get("creator")),
    ItemField("created", "created", lambda i: _date(i.created), _optional("created", Decimal)),
    ItemField(
        "history",
        "history",
        lambda i: [revision.to_mapping() for revision in i.history],
        lambda d: tuple(Revision.from_mapping(r) for r in d.get("history", [])),
    ),
    ItemField("pending", "pending", lambda i: i.pending, lambda d: bool(d.get("pending", False))),
    ItemField(
        "damaged", "damaged", lambda i: list(i.damaged), lambda d: tuple(d.get("damaged", []))
    ),
    ItemField(
        "deleted_original", "deleted_original", lambda i: i.deleted_original, _deleted_original
    ),
    ItemField(
        "moved_to",
        "moved_to",
        lambda i: forms_mapping(i.moved_to),
        lambda d: _forms(d.get("moved_to")),
    ),
    ItemField("moved_at", "moved_at", lambda i: _date(i.moved_at), _optional("moved_at", Decimal)),
    ItemField(
        "oai_source",
        "oai_source",
        lambda i: i.oai_source.to_mapping() if i.oai_source else None,
        _optional("oai_source", lambda value: OaiSource(**value)),
        frozenset({R.ORIGINAL}),
        Carried.NO,  # the import's own record of where it came from (docs/archive.md)
    ),
    ItemField(
        "deposit_request",
        "deposit_request",
        lambda i: i.deposit_request.to_mapping() if i.deposit_request else None,
        _optional("deposit_request", lambda value: DepositRequest(**value)),
    ),
    # A request's words, not the item's:
    ItemField("subsystem", None, settable=frozenset({R.CREATE, R.ORIGINAL})),
    ItemField("reason", None, settable=frozenset({R.IMPORT})),
    ItemField("accesses", None, settable=frozenset({R.TRANSFER})),
)
# The attributes kept beside the item's JSON by the store (its accesses, its last link check,
# its record's version), not part of what the API answers, a transfer carries or equality sees.
KEPT_BESIDE = frozenset({"usage", "link_check", "version"})
STORED = tuple(f for f in FIELDS if f.dump is not None)


def item_to_mapping(item: Item) -> dict[str, Any]:
    """The item as JSON: what the deposit API answers and what the store keeps."""
    return {f.name: f.dump(item) for f in STORED if f.dump is not None}


def item_from_mapping(data: dict[str, Any], version: int = 0) -> Item:
    """The item :func:`item_to_mapping` wrote (or an earlier version stored)."""
    values = {f.attribute: f.load(data) for f in STORED if f.attribute and f.load is not None}
    return Item(**values, version=version)


def settable(request: Request) -> frozenset[str]:
    """The fields a ``request``'s body may give."""
    return frozenset(f.name for f in FIELDS if request in f.settable)


def carried(how: Carried) -> tuple[str, ...]:
    """The fields a transfer carries ``how``, in the item's JSON order."""
    return tuple(f.name for f in FIELDS if f.carried is how)
