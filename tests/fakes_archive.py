"""In-memory fakes for the Archive's ports: items, files, the minter, a receiving Archive."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from functions.archive.files import FileMismatch, FileMissing
from functions.archive.holdings import Requests
from functions.archive.mapping import item_to_mapping
from functions.archive.model import Forms, Item, LinkCheck, Profile
from functions.archive.store import ItemExists, StaleItem, datestamp_of, is_record
from ibi.core.labels import IBI
from ibi.core.usage import Usage


class MemoryItemStore:
    """``functions.archive.store.ItemStore`` in a dict, with its conditional writes."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.aliases: dict[str, str] = {}
        self.service: Forms | None = None
        self.languages: set[str] = set()
        self.unspecified = False
        self.urlkeys: dict[str, int] = {}  # spent urlkeys, until when they are kept
        self.accesses: dict[str, int] = {}
        self.months: dict[str, dict[str, int]] = {}  # label -> month -> accesses
        self.unique: dict[str, int] = {}  # label -> unique requests (issue 35)
        self.unique_months: dict[str, dict[str, int]] = {}
        self.requests: dict[tuple[str, str], tuple[int, int]] = {}  # (label, client) -> at, session
        self.link_checks: dict[str, LinkCheck] = {}  # beside the item, as the store keeps them
        self._lock = threading.Lock()

    def _beside(self, item: Item) -> Item:
        check = self.link_checks.get(item.key)
        return item if check is None else replace(item, link_check=check)

    def get(self, label: str) -> Item | None:
        item = self.items.get(self.aliases.get(label, label))
        if item is not None:
            item = self._beside(item)
        if item is None or item.key not in self.accesses:
            return item
        usage = Usage.of(self.accesses[item.key], self.months.get(item.key, {}))
        if item.key in self.unique:  # as the store: Requests once a unique request is counted
            unique = Usage.of(self.unique[item.key], self.unique_months[item.key])
            usage = Requests.of(usage.total, dict(usage.months), unique=unique)
        return replace(item, usage=usage)  # as the store reads it beside the item

    def create(self, item: Item, *, accesses: int = 0) -> None:
        with self._lock:
            for label in item.ibi.labels:
                if self.get(label) is not None:
                    raise ItemExists(self.get(label))
            self.items[item.key] = item
            if accesses:
                self.accesses[item.key] = accesses
            for label in item.ibi.labels:
                if label != item.key:
                    self.aliases[label] = item.key

    def add_alias(self, alias: str, key: str) -> None:
        with self._lock:
            if alias in self.items or alias in self.aliases:
                raise ItemExists(self.get(alias))
            self.aliases[alias] = key

    def replace(self, item: Item, *, expected_version: int) -> None:
        with self._lock:
            if self.items[item.key].version != expected_version:
                raise StaleItem(item.key)
            self.items[item.key] = item

    def remove(self, item: Item) -> None:
        with self._lock:
            if self.items[item.key].version != item.version:
                raise StaleItem(item.key)
            del self.items[item.key]
            self.accesses.pop(item.key, None)
            self.months.pop(item.key, None)
            for label in item.ibi.labels:
                self.aliases.pop(label, None)

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

    def spend_urlkey(self, urlkey: str, *, expires_at: int) -> bool:
        with self._lock:  # as DynamoDB's conditional put: one spender
            if urlkey in self.urlkeys:
                return False
            self.urlkeys[urlkey] = expires_at
            return True

    def claim_request(
        self, label: str, client: str, *, at: int, window: int, session_seconds: int
    ) -> bool | None:
        with self._lock:  # as the store's conditional update: one claimant
            before = self.requests.get((label, client))
            if before is not None and before[0] >= at - window:
                return None
            self.requests[(label, client)] = (at, at // session_seconds)
            return before is None or before[1] != at // session_seconds

    def count_access(self, label: str, *, month: str, unique: bool = False) -> int:
        # As DynamoDB's ADD: on the record named (an alias record is not the item's).
        if label not in self.items and label not in self.aliases:
            return 0
        if label in self.items and self.items[label].deleted:  # the condition on its state
            return 0
        with self._lock:  # as DynamoDB's ADD: atomic
            self.accesses[label] = self.accesses.get(label, 0) + 1
            months = self.months.setdefault(label, {})
            months[month] = months.get(month, 0) + 1
            if unique:
                self.unique[label] = self.unique.get(label, 0) + 1
                by_month = self.unique_months.setdefault(label, {})
                by_month[month] = by_month.get(month, 0) + 1
            return self.accesses[label]

    def access_count(self, label: str) -> int:
        return self.accesses.get(label, 0)

    def scan(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]:
        keys = sorted(k for k in self.items if after is None or k > after)
        page = keys[:limit]
        return [self._beside(self.items[k]) for k in page], (
            page[-1] if len(keys) > limit else None
        )

    def note_link_check(self, item: Item, check: LinkCheck) -> bool:
        with self._lock:  # as the store's update: conditional on the item's version
            held = self.items.get(item.key)
            if held is None or held.version != item.version:
                return False
            self.link_checks[item.key] = check
            return True

    def query_datestamps(
        self,
        set_spec: str,
        *,
        first: int | None,
        last: int | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[Item]:
        """As OAI-PMH's index: the set's records by (datestamp, key), within the bounds."""
        positions = sorted(
            ((datestamp_of(item), key), item)
            for key, item in self.items.items()
            if is_record(item) and item.content_type.value == set_spec
        )
        return [
            item
            for (stamp, key), item in positions
            if (first is None or stamp >= first)
            and (last is None or stamp <= last)
            and (after is None or (stamp, key) > after)
        ][:limit]


class MemoryFileStore:
    """``functions.archive.content.FileStore`` in dicts of bytes: published files, uploads (by
    announced SHA-256) and previous versions, as ``S3FileStore`` keeps them under three prefixes."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, str], bytes] = {}
        self.uploads: dict[tuple[str, str, str], bytes] = {}
        self.versions: dict[tuple[str, str, str], bytes] = {}

    def put(
        self,
        item_key: str,
        path: str,
        data: bytes,
        content_type: str = "",
        *,
        announced: str | None = None,
    ) -> tuple[str, int]:
        """Bytes at the published key (bit rot, or what an earlier version stored), or
        (``announced``) at the upload key of that SHA-256, as ``S3FileStore.put``."""
        sha256 = hashlib.sha256(data).hexdigest()
        if announced is not None:
            self.uploads[(item_key, path, announced)] = data
        else:
            self.files[(item_key, path)] = data
        return sha256, len(data)

    def upload(self, item_key: str, path: str, data: bytes, announced: bytes | None = None) -> None:
        """What the client's presigned PUT does: bytes at the upload key of ``announced``."""
        sha256 = hashlib.sha256(data if announced is None else announced).hexdigest()
        self.uploads[(item_key, path, sha256)] = data

    def presign_upload(
        self, item_key: str, path: str, *, sha256_hex: str, size: int, content_type: str
    ) -> dict[str, Any]:
        url = f"memory://uploads/{item_key}/{sha256_hex}/{path}"
        return {"url": url, "method": "PUT", "headers": {"Content-Length": str(size)}}

    def commit(self, item_key: str, path: str, *, sha256_hex: str, size: int) -> None:
        data = self.uploads.get((item_key, path, sha256_hex))
        if data is None:
            raise FileMissing(item_key, path)
        found = hashlib.sha256(data).hexdigest()
        if len(data) != size:
            raise FileMismatch(item_key, path, "size", expected=str(size), found=str(len(data)))
        if found != sha256_hex:
            raise FileMismatch(item_key, path, "sha256", expected=sha256_hex, found=found)
        self.files[(item_key, path)] = data

    def keep_version(self, item_key: str, path: str, *, sha256_hex: str) -> None:
        if (item_key, path) not in self.files:
            raise FileMissing(item_key, path)
        self.versions[(item_key, path, sha256_hex)] = self.files[(item_key, path)]

    def presign_download(
        self,
        item_key: str,
        path: str,
        *,
        filename: str | None = None,
        version: str | None = None,
    ) -> str:
        where = f"history/{version}/" if version else ""
        return f"memory://{where}{item_key}/{path}?download={filename}"

    def read(self, item_key: str, path: str, *, max_bytes: int) -> bytes:
        if (item_key, path) not in self.files:
            raise FileMissing(item_key, path)
        return self.files[(item_key, path)]

    def sha256_of(self, item_key: str, path: str, *, version: str | None = None) -> str:
        if version is not None:
            if (item_key, path, version) not in self.versions:
                raise FileMissing(item_key, path)
            return hashlib.sha256(self.versions[(item_key, path, version)]).hexdigest()
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


class MemoryArchive:
    """A whole receiving Archive in memory, as its deposit API answers a sending one (the
    ``functions.archive.transfer.Receiver`` port): its own store, files and services.

    Misbehaviour, by step (``receive``, ``upload``, ``item``, ``complete``, ``cancel``):
    ``fail[step]`` is raised instead of doing it; ``lose[step]`` is raised after doing it (the
    answer lost); ``answers[step]`` is answered instead of the real answer (``None``: an empty
    200); ``skip_uploads`` drops the files on the floor and answers as if they were taken.
    """

    def __init__(self, *, principal: str = "archive:sender") -> None:
        from functions.archive.content import ContentService
        from functions.archive.service import ArchiveService
        from functions.archive.views import ArchiveViews
        from tests.fakes import FakeClock

        self.store = MemoryItemStore()
        self.files = MemoryFileStore()
        self.service = ArchiveService(self.store, clock=FakeClock(Decimal(1795473100)))
        self.content = ContentService(
            self.service,
            views=ArchiveViews("https://receiver.example.org"),
            files=self.files,
            serve_inline_bytes=1024,
        )
        self.principal = principal
        self.fail: dict[str, BaseException] = {}
        self.lose: dict[str, BaseException] = {}
        self.answers: dict[str, Any] = {}
        self.skip_uploads = False
        self.calls: list[str] = []
        self.watch: Any = None  # called with each step's name before it is taken

    def _step(self, name: str, do: Any) -> Any:
        self.calls.append(name)
        if self.watch is not None:
            self.watch(name)
        if name in self.fail:
            raise self.fail[name]
        answer = do()
        if name in self.lose:
            raise self.lose[name]
        return self.answers.get(name, answer) if name in self.answers else answer

    def held(self, ibi: str) -> Item | None:
        return self.store.get(Forms.of(ibi).key)

    def receive_transfer(self, body: dict[str, Any]) -> Any:
        return self._step(
            "receive",
            lambda: item_to_mapping(self.content.receive_transfer(body, self.principal)),
        )

    def upload_files(
        self, ibi: str, files: list[tuple[str, bytes, str]], *, default_file: str | None = None
    ) -> Any:
        def do() -> Any:
            declared = []
            for path, data, content_type in files:
                if not self.skip_uploads:
                    self.files.upload(Forms.of(ibi).key, path, data)
                sha256 = hashlib.sha256(data).hexdigest()
                declared.append(
                    {
                        "path": path,
                        "sha256": sha256,
                        "size": len(data),
                        "content_type": content_type,
                    }
                )
            if self.skip_uploads:
                return {"ibi": ibi}
            body: dict[str, Any] = {"files": declared, "default_file": default_file}
            item, _ = self.content.commit_files(ibi, body, self.principal)
            return item_to_mapping(item)

        return self._step("upload", do)

    def item(self, ibi: str) -> Any:
        return self._step("item", lambda: item_to_mapping(self.service.get(ibi)))

    def complete_transfer(self, ibi: str) -> Any:
        return self._step(
            "complete",
            lambda: item_to_mapping(self.content.complete_transfer(ibi, self.principal)),
        )

    def cancel_transfer(self, ibi: str) -> Any:
        return self._step("cancel", lambda: item_to_mapping(self.service.cancel_transfer(ibi)))

    def registered_item(self, ibi: str) -> Any:
        """Its public ``GET /transfers/held`` at its registered address (step ``registered``):
        what it really holds, unless told otherwise by step as above."""
        return self._step("registered", lambda: self.transfer_view(ibi))

    def transfer_view(self, ibi: str) -> dict[str, Any] | None:
        from functions.archive.registered import shown, transfer_view

        item = self.held(ibi)
        return transfer_view(item) if item is not None and shown(item) else None


class ClaimingArchive:
    """A :class:`MemoryArchive`'s deposit API as reached at some URL, whose ``GET /api/service``
    says it is the Archive ``service_ibi`` (true or not)."""

    def __init__(self, archive: MemoryArchive, service_ibi: str) -> None:
        self.archive = archive
        self.service_ibi = service_ibi

    def __getattr__(self, name: str) -> Any:
        return getattr(self.archive, name)

    def service(self) -> dict[str, Any]:
        return {"archiveserviceibi": Forms.of(self.service_ibi).to_mapping()}


class MemoryRegistry:
    """The resolver's registry and each registered Archive's public transfer view, in memory
    (``functions.archive.registered.Registry``): ``add`` an Archive (anything with a
    ``transfer_view(ibi)``) at a base URL; ``reads`` records every read of a transfer view."""

    def __init__(self) -> None:
        self.archives: dict[str, tuple[Any, Any]] = {}
        self.reads: list[tuple[str, str]] = []

    def add(
        self, service_ibi: str | Forms, base_url: str, archive: Any, *, included: bool = True
    ) -> Any:
        from functions.archive.registered import RegisteredArchive

        forms = service_ibi if isinstance(service_ibi, Forms) else Forms.of(service_ibi)
        registered = RegisteredArchive(forms, base_url, included)
        self.archives[registered.key] = (registered, archive)
        return registered

    def find(self, service_ibi: str) -> Any:
        wanted = Forms.of(service_ibi).key
        return next((r for r, _ in self.archives.values() if wanted in r.service.labels), None)

    def held(self, archive: Any, ibi: str) -> dict[str, Any] | None:
        self.reads.append((archive.key, ibi))
        registered, held_by = self.archives[archive.key]
        assert registered == archive, "read only at the address the resolver registered"
        view: dict[str, Any] | None = held_by.transfer_view(ibi)
        return view


class ArchiveNode:
    """One whole Archive in memory, as a federation sees it: its items and files, its deposit
    logic, its pages and its protocol (``ProtocolService.answer``, the text the resolver gets)."""

    def __init__(
        self, name: str, service_date: Decimal, *, own: tuple[str, ...], ip: str = "192.0.2.20"
    ) -> None:
        from functions.archive.content import ContentService
        from functions.archive.protocol import ArchiveIdentity, ProtocolService
        from functions.archive.service import ArchiveService
        from functions.archive.views import ArchiveViews
        from tests.fakes import FakeClock

        self.name = name
        self.address = f"{name}.example.org"
        label = IBI.build(service_date, host=self.address, ip=ip)
        self.service_ibi = Forms(rep=label.rep, ibip=label.ibip)
        self.clock = FakeClock(Decimal(1795473000))
        self.store = MemoryItemStore()
        self.files = MemoryFileStore()
        self.service = ArchiveService(self.store, clock=self.clock, own_prefixes=own)
        self.views = ArchiveViews(f"https://{self.address}")
        self.content = ContentService(
            self.service, views=self.views, files=self.files, serve_inline_bytes=1 << 20
        )
        self.protocol = ProtocolService(
            self.store,
            identity=ArchiveIdentity(address=self.address, service=self.service_ibi),
            views=self.views,
            clock=self.clock,
            urlkey_ttl_seconds=600,
        )

    def commit(self, label: str, files: dict[str, bytes], default: str | None = None) -> Item:
        """Upload ``files`` (what the client's presigned PUTs do) and commit them."""
        item = self.service.get(label)
        declared = []
        for path, data in files.items():
            self.files.upload(item.key, path, data)
            declared.append(
                {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
            )
        body: dict[str, Any] = {"files": declared}
        if default is not None or len(files) > 1:
            body["default_file"] = default or next(iter(files))
        return self.content.commit_files(item.key, body)[0]

    def original(self, ibi: Any, files: dict[str, bytes], **fields: Any) -> Item:
        item = self.service.create_original({"ibi": ibi, **fields})
        return self.commit(item.key, files) if files else item

    def copy(self, ibi: Any, files: dict[str, bytes], **fields: Any) -> Item:
        item = self.service.add_copy({"ibi": ibi, **fields})
        return self.commit(item.key, files) if files else item

    def public_files(self, label: str) -> list[dict[str, Any]]:
        """What the original's public read gives a depositor of a copy: path, SHA-256, size."""
        return [
            {"path": f.path, "sha256": f.sha256, "size": f.size}
            for f in self.service.get(label).files
        ]


class MemoryFederation:
    """Two or three :class:`ArchiveNode` and the resolver's own resolution over their protocol
    (``functions.resolver.resolution.Resolver``), acknowledgments included: no socket."""

    # The subsystems the Archives mint for (IBI.build(host="example.org", ip="192.0.2.10")).
    OWN = ("D7N2U8HW", "org/example")

    def __init__(self, *names: str) -> None:
        self.nodes = {
            name: ArchiveNode(name, Decimal(1700000000 + 100 * n), own=self.OWN)
            for n, name in enumerate(names)
        }

    def __getitem__(self, name: str) -> ArchiveNode:
        return self.nodes[name]

    def ask_all(self, ibi: str, pairs: Any, enough: Any = None) -> list[Any]:
        from functions.resolver.authority import ArchiveAnswer
        from ibi.core.pairlist import encode_query, parse_pair_list

        answers = []
        asked = [(k, v) for k, v in pairs if k not in {"servicesubject", "parsedibiurl.ibi"}]
        query = encode_query([("servicesubject", "urlRequest"), *asked, ("parsedibiurl.ibi", ibi)])
        for name, node in self.nodes.items():
            text = str(node.protocol.answer(query).pairs)
            answers.append(ArchiveAnswer(name, node.address, parse_pair_list(text)))
        return answers

    def resolve(self, persistent: str, *, language: str | None = None) -> Any:
        from functions.resolver.resolution import Resolver
        from ibi.core.persistent_url import parse_persistent_url

        return Resolver(self.ask_all, accept_language=language).resolve(
            parse_persistent_url(persistent), "203.0.113.9"
        )

    def acknowledge(self, found: Any, persistent: str) -> str:
        """Send the resolver's acknowledgment (Table 6.11) to the Archive that gave the URL."""
        from functions.resolver.acknowledgments import acknowledgment_pairs
        from ibi.core.pairlist import encode_query

        node = self.nodes[found.answer.archive]
        pairs = acknowledgment_pairs(found, persistent, "203.0.113.9")
        return str(node.protocol.answer(encode_query(pairs)).pairs)
