"""Identified items as an Archive holds them (spec §2; seed 001 §3).

Pure data and rules, no AWS: an item is found by either form of its IBI, has a state
(``Original``, ``Copy``, ``Deleted``), the time of its last change, its files or an external
URL, a content type, a language, and links to related items (next edition, translations,
metadata), each with or without an IBI of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum
from typing import Any

from ibi.core.dates import format_date, iso_date
from ibi.core.dublin_core import DC_ELEMENTS
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.core.usage import NO_USAGE, Usage


class State(StrEnum):
    ORIGINAL = "Original"
    COPY = "Copy"
    DELETED = "Deleted"


class ContentType(StrEnum):
    DATA = "Data"
    METADATA = "Metadata"


_LANGUAGE = re.compile(r"([a-z]{2})(?:-([a-z]{2}))?", re.IGNORECASE)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FILE_PATH = re.compile(r"[^\x00-\x1f\x7f\\]{1,1024}")


def language_tag(text: str) -> str:
    """``pt``, ``pt-BR`` (ISO 639-1 language, ISO 3166-1 country), normalised."""
    match = _LANGUAGE.fullmatch(text)
    if not match:
        raise InvalidInput("language", f"{text!r} is not ll or ll-CC (e.g. pt, pt-BR)")
    language, country = match.groups()
    return language.lower() + (f"-{country.upper()}" if country else "")


def file_path(text: str) -> str:
    """A file's path inside an item: relative, no '..', no control characters."""
    path = text.strip("/")
    if not _FILE_PATH.fullmatch(path) or any(part in {"", ".", ".."} for part in path.split("/")):
        raise InvalidInput("path", f"{text!r} is not a relative file path inside the item")
    return path


@dataclass(frozen=True, slots=True)
class Forms:
    """The forms of one IBI (Table 7.4): ``rep``, ``ibip`` or both, canonical."""

    rep: str | None = None
    ibip: str | None = None

    def __post_init__(self) -> None:
        if self.rep is None and self.ibip is None:
            raise InvalidInput("ibi", "an IBI needs its rep form, its ibip form, or both")
        if self.rep is not None:
            label = parse_label(self.rep)
            if label.form != "rep":
                raise InvalidInput("ibi", f"{self.rep!r} is not a rep label")
            object.__setattr__(self, "rep", label.label)
        if self.ibip is not None:
            label = parse_label(self.ibip)
            if label.form != "ibip":
                raise InvalidInput("ibi", f"{self.ibip!r} is not an ibip label")
            object.__setattr__(self, "ibip", label.label)
        both = self.rep is not None and self.ibip is not None
        if both and parse_label(str(self.rep)).date != parse_label(str(self.ibip)).date:
            raise InvalidInput("ibi", f"{self.rep} and {self.ibip} are not of the same date")

    @classmethod
    def of(cls, label: str) -> Forms:
        parsed = parse_label(label)
        return cls(rep=parsed.label) if parsed.form == "rep" else cls(ibip=parsed.label)

    @classmethod
    def from_mapping(cls, data: Any) -> Forms:
        if isinstance(data, str):
            return cls.of(data)
        if not isinstance(data, dict) or set(data) - {"rep", "ibip"}:
            raise InvalidInput("ibi", f'{data!r}: give a label, or {{"rep": …, "ibip": …}}')
        return cls(rep=data.get("rep"), ibip=data.get("ibip"))

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label for label in (self.ibip, self.rep) if label is not None)

    @property
    def key(self) -> str:
        """The label the item is stored under: its ibip form if it has one."""
        return self.labels[0]

    def matches(self, label: str) -> bool:
        canonical = parse_label(label).label
        return canonical in self.labels

    def words(self) -> list[str]:
        """As a pair-list value: ``rep R ibip P`` (Table 7.4)."""
        words: list[str] = []
        if self.rep is not None:
            words += ["rep", self.rep]
        if self.ibip is not None:
            words += ["ibip", self.ibip]
        return words

    def to_mapping(self) -> dict[str, str]:
        return {k: v for k, v in (("rep", self.rep), ("ibip", self.ibip)) if v is not None}

    def merged(self, other: Forms) -> Forms:
        return Forms(rep=self.rep or other.rep, ibip=self.ibip or other.ibip)


@dataclass(frozen=True, slots=True)
class StoredFile:
    path: str
    sha256: str
    size: int
    content_type: str = "application/octet-stream"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", file_path(self.path))
        if not _SHA256.fullmatch(self.sha256):
            raise InvalidInput("sha256", f"{self.sha256!r} is not a lower-case hex SHA-256")
        if self.size < 0:
            raise InvalidInput("size", "a file size cannot be negative")

    def to_mapping(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
            "content_type": self.content_type,
        }


@dataclass(frozen=True, slots=True)
class Revision:
    """One recorded change to what an item publishes: nothing published changes silently.

    ``action``: ``replaced`` (a file's bytes, the previous ones kept under their SHA-256),
    ``added`` (a file added by an operator after the deposit), ``repaired`` (a damaged file
    published again with the bytes it was deposited with), ``imported`` (an original for an
    IBI of another subsystem, authorised by an operator), ``received`` (an original that came
    through a transfer), ``released`` (an original that left through an offer, ``reason`` naming
    it), ``restored`` (that original back here: the offer expired and no one took it),
    ``unlinked`` (a link to a related item removed, ``reason`` naming it), ``retargeted``
    (what the item's persistent URL serves changed: ``served_before`` and ``served_after``, each
    a file's path or the external URL, or None; ``path``, ``old`` and ``new`` the files),
    ``deleted`` (the item withdrawn: a tombstone stays, ``reason`` saying why, or empty). ``by``
    is the principal (an IAM ARN, or ``anonymous:<ip>`` locally).
    """

    action: str
    at: Decimal
    by: str
    path: str | None = None
    old_sha256: str | None = None
    old_size: int | None = None
    new_sha256: str | None = None
    new_size: int | None = None
    reason: str = ""
    served_before: str | None = None
    served_after: str | None = None

    def __post_init__(self) -> None:
        if self.action not in REVISION_ACTIONS:
            raise InvalidInput("history", f"{self.action!r} is not one of {REVISION_ACTIONS}")
        for checksum in (self.old_sha256, self.new_sha256):
            if checksum is not None and not _SHA256.fullmatch(checksum):
                raise InvalidInput("sha256", f"{checksum!r} is not a lower-case hex SHA-256")

    def to_mapping(self) -> dict[str, Any]:
        def version(sha256: str | None, size: int | None) -> dict[str, Any] | None:
            return None if sha256 is None else {"sha256": sha256, "size": size}

        return {
            "action": self.action,
            "at": iso_date(self.at),
            "date": format_date(self.at),
            "by": self.by,
            "path": self.path,
            "old": version(self.old_sha256, self.old_size),
            "new": version(self.new_sha256, self.new_size),
            "reason": self.reason,
            # what the persistent URL served before and after (``retargeted`` only)
            **(
                {"from": self.served_before, "to": self.served_after}
                if self.action == "retargeted"
                else {}
            ),
        }

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> Revision:
        old, new = data.get("old") or {}, data.get("new") or {}
        return cls(
            action=data["action"],
            at=Decimal(data["date"]),
            by=data["by"],
            path=data.get("path"),
            old_sha256=old.get("sha256"),
            old_size=old.get("size"),
            new_sha256=new.get("sha256"),
            new_size=new.get("size"),
            reason=data.get("reason", ""),
            served_before=data.get("from"),
            served_after=data.get("to"),
        )


REVISION_ACTIONS = (
    "replaced",
    "added",
    "repaired",
    "imported",
    "received",
    "released",
    "restored",
    "unlinked",
    "retargeted",
    "deleted",
)


class CopyCheck(StrEnum):
    """Whether a copy's expected files were read from its original's Archive (``copies.py``)."""

    VERIFIED = "verified"  # through the resolver, from the Archive holding the original
    UNVERIFIED = "unverified"  # they could not be read: the depositor's word, until a verify


@dataclass(frozen=True, slots=True)
class OriginalCheck:
    """Where a copy's expected files (``original_files``) come from, and since when: read from
    the original's Archive (``archive``: its service IBI), or not (``reason``: why not)."""

    status: CopyCheck
    at: Decimal
    reason: str | None = None
    archive: str | None = None

    @property
    def verified(self) -> bool:
        return self.status is CopyCheck.VERIFIED

    def to_mapping(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "at": iso_date(self.at),
            "date": format_date(self.at),
            "reason": self.reason,
            "archive": self.archive,
        }

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> OriginalCheck:
        return cls(
            status=CopyCheck(data["status"]),
            at=Decimal(data["date"]),
            reason=data.get("reason"),
            archive=data.get("archive"),
        )


class LinkStatus(StrEnum):
    """What the last check of an item's external ``url`` found (``links.py``)."""

    OK = "ok"  # a 2xx answer, redirects followed
    BROKEN = "broken"  # anything else: ``problem`` and ``reason`` say what


@dataclass(frozen=True, slots=True)
class LinkCheck:
    """The last check of an item's external ``url`` (``links.py``): the URL it checked, what
    it found and when (whole seconds since 1970), the last time the URL answered 2xx, and since
    when it has been broken. It speaks of ``url`` only: once the item's URL changes, it speaks
    of nothing (:attr:`Item.link`)."""

    url: str
    status: LinkStatus
    checked: int
    last_success: int | None = None
    broken_since: int | None = None
    problem: str | None = None  # http | dns | timeout | refused_address | too_many_redirects …
    reason: str | None = None  # for people: "HTTP 404", "example.org does not resolve" …
    http_status: int | None = None  # the last HTTP status, when there was one

    @property
    def broken(self) -> bool:
        return self.status is LinkStatus.BROKEN

    def to_record(self) -> dict[str, Any]:
        """As the store keeps it beside the item (``link_check``)."""
        return {
            "url": self.url,
            "status": self.status.value,
            "checked": self.checked,
            "last_success": self.last_success,
            "broken_since": self.broken_since,
            "problem": self.problem,
            "reason": self.reason,
            "http_status": self.http_status,
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> LinkCheck:
        return cls(
            url=data["url"],
            status=LinkStatus(data["status"]),
            checked=int(data["checked"]),
            last_success=data.get("last_success"),
            broken_since=data.get("broken_since"),
            problem=data.get("problem"),
            reason=data.get("reason"),
            http_status=data.get("http_status"),
        )

    def to_mapping(self) -> dict[str, Any]:
        """As the deposit API answers it: the dates in ISO 8601 (UTC)."""

        def iso(seconds: int | None) -> str | None:
            return iso_date(Decimal(seconds)) if seconds is not None else None

        return {
            **self.to_record(),
            "checked": iso(self.checked),
            "last_success": iso(self.last_success),
            "broken_since": iso(self.broken_since),
        }


def is_sha256(text: Any) -> bool:
    """Whether ``text`` is a SHA-256 as 64 lower-case hex digits."""
    return isinstance(text, str) and _SHA256.fullmatch(text) is not None


_OAI_IDENTIFIER = re.compile(r"[^\s\x00-\x1f\x7f-\x9f\ufffe\uffff]{1,1024}")
_OAI_DATESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)?")


@dataclass(frozen=True, slots=True)
class DepositRequest:
    """The request an Idempotency-Key made an item with (issue 35): the key's SHA-256, scoped
    to its depositor (``principal\nkey``), and the request body's (its canonical JSON). The
    same key again from the same depositor gets the item back only with the same body."""

    key: str
    body: str

    def __post_init__(self) -> None:
        if not (is_sha256(self.key) and is_sha256(self.body)):
            raise InvalidInput("deposit_request", "its key and body are SHA-256s (64 hex digits)")

    def to_mapping(self) -> dict[str, str]:
        return {"key": self.key, "body": self.body}


@dataclass(frozen=True, slots=True)
class OaiSource:
    """The OAI-PMH record an item was imported from (``ibi archive import``): the repository's
    base URL, the record's OAI identifier and its datestamp then. It is how a later import of the
    same repository knows the record is here already."""

    repository: str
    identifier: str
    datestamp: str | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"https?://\S{1,2000}", self.repository):
            raise InvalidInput("oai_source", f"{self.repository!r} is not an http(s) base URL")
        if not _OAI_IDENTIFIER.fullmatch(self.identifier):
            raise InvalidInput(
                "oai_source", "an OAI identifier is 1-1024 characters, no spaces or controls"
            )
        if self.datestamp is not None and not _OAI_DATESTAMP.fullmatch(self.datestamp):
            raise InvalidInput(
                "oai_source", f"{self.datestamp!r} is not YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ"
            )

    def to_mapping(self) -> dict[str, Any]:
        return {
            "repository": self.repository,
            "identifier": self.identifier,
            "datestamp": self.datestamp,
        }


@dataclass(frozen=True, slots=True)
class Translation:
    """A translation of the item: its language, and its IBI if it has one."""

    language: str
    ibi: Forms | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "language", language_tag(self.language))
        if (self.ibi is None) == (self.url is None):
            raise InvalidInput("translation", "a translation is linked by its IBI or by a URL")
        if self.url is not None and not re.fullmatch(r"https?://\S+", self.url):
            raise InvalidInput("translation", f"{self.url!r} is not an http(s) URL")


@dataclass(frozen=True, slots=True)
class Item:
    """One identified item in one Archive."""

    ibi: Forms
    state: State
    timestamp: Decimal
    content_type: ContentType = ContentType.DATA
    language: str | None = None
    files: tuple[StoredFile, ...] = ()
    default_file: str | None = None
    external_url: str | None = None
    transferable: bool = True
    listable: bool = True
    next_edition: Forms | None = None
    translations: tuple[Translation, ...] = ()
    metadata: Forms | None = None
    metadata_oai_dc: Forms | None = None
    dc: dict[str, tuple[str, ...]] = field(default_factory=dict)
    original_sha256: str | None = None
    # A copy's expected files: the paths, SHA-256 and sizes of its original's files, as the
    # original's Archive publishes them (``POST /api/copies`` ``original_files``).
    original_files: tuple[StoredFile, ...] = ()
    # Whether ``original_files`` were read from the original's Archive (None: an original, or a
    # copy made before copies were checked, on its depositor's word).
    original_check: OriginalCheck | None = None
    service: bool = False
    # Who deposited the item, and when (None for items deposited before this was recorded).
    creator: str | None = None
    created: Decimal | None = None
    history: tuple[Revision, ...] = ()
    # An original on its way in (a transfer not yet complete): answered to no one.
    pending: bool = False
    # Paths of files whose stored bytes failed their SHA-256 (found when serving or by
    # ``verify``): the protocol answers nothing for the item until they are repaired.
    damaged: tuple[str, ...] = ()
    # A tombstone of the original deleted here (not one of a copy, nor of an original that
    # left by a transfer): no original of its IBI is ever held here again.
    deleted_original: bool = False
    # Where the original went when this Archive released it in a transfer (the receiving
    # Archive's service IBI) and when: the transfer record its urlRequest answer carries.
    moved_to: Forms | None = None
    moved_at: Decimal | None = None
    # The OAI-PMH record it was imported from (None: not imported from one).
    oai_source: OaiSource | None = None
    # The Idempotency-Key request that deposited it (None: deposited without one).
    deposit_request: DepositRequest | None = None
    version: int = 0
    # Accesses counted here (ibi/core/usage.py): kept beside the item by the store, not part
    # of its JSON (a deposit, a transfer body), and no part of the item's equality.
    usage: Usage = field(default=NO_USAGE, compare=False)
    # The last check of ``external_url`` (``links.py``): kept beside the item by the store, as
    # the accesses are, not part of its JSON, its version or its equality.
    link_check: LinkCheck | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.language is not None:
            object.__setattr__(self, "language", language_tag(self.language))
        if self.default_file is not None:
            object.__setattr__(self, "default_file", file_path(self.default_file))
            if self.state is not State.DELETED and not self.has_file(self.default_file):
                raise InvalidInput(
                    "default_file", f"{self.default_file!r} is not a file of the item"
                )
        if self.external_url is not None and not re.fullmatch(
            r"https?://[^\s]+", self.external_url
        ):
            raise InvalidInput("url", f"{self.external_url!r} is not an http(s) URL")
        unknown = set(self.dc) - set(DC_ELEMENTS)
        if unknown:
            raise InvalidInput("metadata", f"unknown Dublin Core element(s) {sorted(unknown)}")

    @property
    def key(self) -> str:
        return self.ibi.key

    @property
    def deleted(self) -> bool:
        return self.state is State.DELETED

    @property
    def yields_to_transfer(self) -> bool:
        """Whether an incoming transfer of the IBI's original may take this item's place: an
        incoming transfer answered to no one yet, or a tombstone but an original's deleted here
        (a deleted copy, or an original that left by a transfer: docs/decisions.md)."""
        return self.pending or (self.deleted and not self.deleted_original)

    @property
    def usable(self) -> bool:
        """Whether the item may be offered to readers: held, complete, its bytes intact."""
        return not self.deleted and not self.pending and not self.damaged

    @property
    def expects_files(self) -> bool:
        """Whether a copy's files are bound to a list: ``original_files``, or an original read
        from its Archive with no files (then the copy may hold none)."""
        check = self.original_check
        return bool(self.original_files) or (check is not None and check.verified)

    def expected(self, path: str) -> StoredFile | None:
        """What a copy's file at ``path`` must be: the original's file (None if not listed)."""
        return next((f for f in self.original_files if f.path == path), None)

    @property
    def iso_timestamp(self) -> str:
        """ISO 8601 UTC, to the second (the protocol's ``timestamp``)."""
        return iso_date(Decimal(int(self.timestamp)))

    def has_file(self, path: str) -> bool:
        return any(f.path == path for f in self.files)

    def file(self, path: str) -> StoredFile | None:
        return next((f for f in self.files if f.path == path), None)

    @property
    def main_file(self) -> StoredFile | None:
        if self.default_file is not None:
            return self.file(self.default_file)
        return self.files[0] if len(self.files) == 1 else None

    @property
    def served(self) -> str | None:
        """What the item's persistent URL leads to: its main file's path, else its URL."""
        main = self.main_file
        return main.path if main is not None else self.external_url

    @property
    def link(self) -> LinkCheck | None:
        """The last check of the item's external URL, if it checked the URL the item has now."""
        check = self.link_check
        return check if check is not None and check.url == self.external_url else None

    def translation(self, language: str) -> Translation | None:
        tag = language_tag(language)
        return next((t for t in self.translations if t.language == tag), None)

    def changed(self, timestamp: Decimal, **changes: Any) -> Item:
        """The item after a change: its timestamp advances (never backwards)."""
        moment = max(timestamp, self.timestamp)
        return replace(self, timestamp=moment, version=self.version + 1, **changes)

    @property
    def withdrawal(self) -> tuple[Decimal, str] | None:
        """When a tombstone's item was deleted and why (its ``deleted`` revision; a tombstone
        made before deletions were recorded: its timestamp, no reason). None if not deleted, or
        if the tombstone is what a transfer left (the original lives on elsewhere)."""
        deleted = [r for r in self.history if r.action == "deleted"]
        if deleted and self.deleted:
            return deleted[-1].at, deleted[-1].reason
        return (self.timestamp, "") if self.deleted and self.moved_to is None else None

    def tombstone(self, timestamp: Decimal) -> Item:
        """Deleted: the IBI stays known forever; what it pointed to is gone."""
        return replace(
            self,
            state=State.DELETED,
            timestamp=max(timestamp, self.timestamp),
            files=(),
            default_file=None,
            external_url=None,
            damaged=(),
            version=self.version + 1,
        )


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A urlkey this Archive handed out: the IBI asked, and each URL offered with the key of
    the item it leads to (so that an acknowledgment counts where the reader went)."""

    label: str
    targets: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Profile:
    """What the Archive holds, as far as its relation set is concerned."""

    languages: frozenset[str] = frozenset()
    unspecified_language: bool = False
