"""In-memory fakes for the Archive's ports: items, files, the minter, a receiving Archive."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from functions.archive.files import FileMissing
from functions.archive.model import Forms, Item, Profile
from functions.archive.store import ItemExists, StaleItem
from ibi.core.labels import IBI


class MemoryItemStore:
    """``functions.archive.store.ItemStore`` in a dict, with its conditional writes."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.aliases: dict[str, str] = {}
        self.service: Forms | None = None
        self.languages: set[str] = set()
        self.unspecified = False
        self.urlkeys: dict[str, tuple[str, int, bool]] = {}
        self.accesses: dict[str, int] = {}
        self._lock = threading.Lock()

    def get(self, label: str) -> Item | None:
        return self.items.get(self.aliases.get(label, label))

    def create(self, item: Item) -> None:
        with self._lock:
            for label in item.ibi.labels:
                if self.get(label) is not None:
                    raise ItemExists(self.get(label))
            self.items[item.key] = item
            for label in item.ibi.labels:
                if label != item.key:
                    self.aliases[label] = item.key

    def replace(self, item: Item, *, expected_version: int) -> None:
        with self._lock:
            if self.items[item.key].version != expected_version:
                raise StaleItem(item.key)
            self.items[item.key] = item

    def note_item(self, item: Item) -> None:
        for language in (item.language, *(t.language for t in item.translations)):
            if language is None:
                self.unspecified = True
            else:
                self.languages.add(language)

    def profile(self) -> Profile:
        return Profile(frozenset(self.languages), self.unspecified)

    def profile_and_item(self, label: str) -> tuple[Profile, Item | None]:
        return self.profile(), self.get(label)

    def service_item(self) -> Forms | None:
        return self.service

    def claim_service_item(self, forms: Forms) -> Forms:
        with self._lock:
            if self.service is None:
                self.service = forms
            return self.service

    def issue_urlkey(self, urlkey: str, label: str, *, expires_at: int) -> None:
        self.urlkeys[urlkey] = (label, expires_at, False)

    def use_urlkey(self, urlkey: str, *, now: int) -> str | None:
        label, expires_at, used = self.urlkeys.get(urlkey, ("", 0, True))
        if used or expires_at <= now:
            return None
        self.urlkeys[urlkey] = (label, expires_at, True)
        return label

    def count_access(self, label: str) -> int:
        if self.get(label) is None:
            return 0
        self.accesses[label] = self.accesses.get(label, 0) + 1
        return self.accesses[label]

    def access_count(self, label: str) -> int:
        return self.accesses.get(label, 0)

    def scan(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]:
        keys = sorted(k for k in self.items if after is None or k > after)
        page = keys[:limit]
        return [self.items[k] for k in page], (page[-1] if len(keys) > limit else None)


class MemoryFileStore:
    """``functions.archive.content.FileStore`` in a dict of bytes."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], bytes] = {}

    def put(self, item_key: str, path: str, data: bytes) -> None:
        self.files[(item_key, path)] = data

    def presign_upload(
        self, item_key: str, path: str, *, sha256_hex: str, size: int, content_type: str
    ) -> dict[str, Any]:
        url = f"memory://{item_key}/{path}"
        return {"url": url, "method": "PUT", "headers": {"Content-Length": str(size)}}

    def commit(self, item_key: str, path: str, *, sha256_hex: str, size: int) -> None:
        if (item_key, path) not in self.files:
            raise FileMissing(item_key, path)

    def presign_download(self, item_key: str, path: str, *, filename: str | None = None) -> str:
        return f"memory://{item_key}/{path}?download={filename}"

    def read(self, item_key: str, path: str, *, max_bytes: int) -> bytes:
        if (item_key, path) not in self.files:
            raise FileMissing(item_key, path)
        return self.files[(item_key, path)]

    def sha256_of(self, item_key: str, path: str) -> str:
        return hashlib.sha256(self.read(item_key, path, max_bytes=1 << 30)).hexdigest()


@dataclass
class MemoryMinter:
    """The minting service: a new IBI per call, the same one for a repeated idempotency key."""

    next_date: Decimal = Decimal(1795473000)
    by_key: dict[str, Forms] = field(default_factory=dict)
    minted: list[Forms] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, subsystem: str | None, idempotency_key: str | None) -> Forms:
        with self._lock:
            if idempotency_key is not None and idempotency_key in self.by_key:
                return self.by_key[idempotency_key]
            ibi = IBI.build(self.next_date, host="ibi.example.org", ip="192.0.2.10")
            self.next_date += 1
            forms = Forms(rep=ibi.rep, ibip=ibi.ibip)
            self.minted.append(forms)
            if idempotency_key is not None:
                self.by_key[idempotency_key] = forms
            return forms


@dataclass
class MemoryReceiver:
    """A receiving Archive's deposit API (``functions.archive.transfer.Receiver``)."""

    refuse: Exception | None = None
    created: list[dict[str, Any]] = field(default_factory=list)
    uploads: list[tuple[str, list[tuple[str, bytes, str]]]] = field(default_factory=list)
    links: list[Any] = field(default_factory=list)

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        if self.refuse is not None:
            raise self.refuse
        self.created.append(body)
        return {**body, "state": "Original"}

    def upload_files(
        self, ibi: str, files: list[tuple[str, bytes, str]], *, default_file: str | None = None
    ) -> dict[str, Any]:
        self.uploads.append((ibi, files))
        return {"ibi": ibi, "files": [path for path, _, _ in files]}

    def call(self, method: str, path: str, body: Any = None, **query: str) -> Any:
        self.links.append(body)
        return {"ibi": query.get("ibi"), "linked": body}
