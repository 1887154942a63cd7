"""One run of an import: the list's pages read from the repository (503 and 429 retried, an
expired token restarting it), each record deposited, tombstoned or skipped, the state written
after each."""

from __future__ import annotations

import contextlib
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO
from urllib.parse import urlencode, urlsplit

from ibi.client import ApiError, LocalFile, Raw, page_text
from ibi_tools.harvest import outbound
from ibi_tools.harvest.files import MAX_FILE_BYTES, Fetch, Fetched, download
from ibi_tools.harvest.oai import (
    HarvestError,
    OaiError,
    OaiPage,
    OaiRecord,
    body_text,
    parse_page,
)
from ibi_tools.harvest.outbound import plain
from ibi_tools.harvest.records import (
    DATESTAMP,
    HTTP_URL,
    file_urls,
    idempotency_key,
    item_body,
)
from ibi_tools.harvest.state import ImportState

if TYPE_CHECKING:
    from ibi.client import Upload

METADATA_PREFIX = "oai_dc"
RETRIES = 5  # of a 503 or 429 from the repository
MAX_WAIT = 600.0  # seconds: the longest Retry-After honoured
MAX_ANSWER_BYTES = 64 << 20  # of one OAI-PMH answer (a page): a larger one stops the import
MAX_IDLE_PAGES = 3  # pages in a row that bring no new record: the list is stopped there
_SET_SPEC = re.compile(r"[A-Za-z0-9\-_.!~*'()]+(?::[A-Za-z0-9\-_.!~*'()]+)*")


class Archive(Protocol):
    """What an import needs of an Archive's deposit API (:class:`ibi.client.ArchiveClient`)."""

    def create(
        self, body: dict[str, Any], *, idempotency_key: str | None = None
    ) -> dict[str, Any]: ...
    def delete(self, ibi: str) -> dict[str, Any]: ...
    def items(self) -> Iterator[dict[str, Any]]: ...
    def upload_files(
        self, ibi: str, files: Sequence[Upload], *, default_file: str | None = None
    ) -> dict[str, Any]: ...


Get = Callable[[str, float], Raw]


def http_get(url: str, timeout: float) -> Raw:
    """One OAI-PMH request through the importer's one outbound path (:mod:`.outbound`): vetted,
    every redirect hop too, the whole answer within ``timeout``, at most 64 MiB."""
    return outbound.get(
        url,
        timeout,
        max_bytes=MAX_ANSWER_BYTES,
        limit="the most an OAI-PMH answer is read",
        headers={"Accept": "text/xml, application/xml"},
    )


@dataclass(frozen=True, slots=True)
class ImportOptions:
    repository: str
    set_spec: str | None = None
    from_date: str | None = None
    fetch: bool = False
    max_file_bytes: int = MAX_FILE_BYTES
    timeout: float = 30.0
    restart: bool = False

    def __post_init__(self) -> None:
        if not HTTP_URL.fullmatch(self.repository) or not urlsplit(self.repository).hostname:
            raise HarvestError(f"{self.repository!r}: give the repository's http(s) base URL")
        if self.set_spec is not None and not _SET_SPEC.fullmatch(self.set_spec):
            raise HarvestError(f"--set {self.set_spec!r} is not a setSpec (e.g. user-zenodo)")
        if self.from_date is not None and not DATESTAMP.fullmatch(self.from_date):
            raise HarvestError(
                f"--from {self.from_date!r}: give YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ"
            )


@dataclass
class Summary:
    created: list[tuple[str, str]] = field(default_factory=list)  # (OAI identifier, IBI)
    present: list[tuple[str, str]] = field(default_factory=list)
    tombstoned: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (OAI identifier, why)
    errors: list[tuple[str, str]] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (OAI identifier, a URL left out)
    pages: int = 0
    stopped: str | None = None  # why the list was stopped short (a token again, nothing new)

    def counts(self) -> str:
        return (
            f"{len(self.created)} created, {len(self.present)} already there, "
            f"{len(self.tombstoned)} tombstoned, {len(self.skipped)} skipped, "
            f"{len(self.errors)} errors"
        )

    def to_mapping(self) -> dict[str, Any]:
        def pairs(rows: list[tuple[str, str]], name: str) -> list[dict[str, str]]:
            return [{"identifier": a, name: b} for a, b in rows]

        return {
            "created": pairs(self.created, "ibi"),
            "already_there": pairs(self.present, "ibi"),
            "tombstoned": pairs(self.tombstoned, "ibi"),
            "skipped": pairs(self.skipped, "reason"),
            "errors": pairs(self.errors, "reason"),
            "files_left_out": pairs(self.files, "reason"),
            "pages": self.pages,
            "stopped": self.stopped,
        }


@dataclass(frozen=True, slots=True)
class Held:
    """An item of the Archive imported from a record of the repository."""

    ibi: str
    deleted: bool


class Importer:
    """One run of an import: pages from the repository, items into the Archive, the state
    written after each record. Ports passed in: the Archive, HTTP GET, the download of files,
    the clock's sleep, and where progress lines go."""

    def __init__(
        self,
        archive: Archive,
        options: ImportOptions,
        state: ImportState,
        *,
        get: Get = http_get,
        fetch: Fetch = download,
        sleep: Callable[[float], None] = time.sleep,
        progress: TextIO | None = None,
    ) -> None:
        self.archive = archive
        self.options = options
        self.state = state
        self._get = get
        self._fetch = fetch
        self._sleep = sleep
        self._progress = progress if progress is not None else sys.stderr
        self.summary = Summary()
        self._held: dict[str, Held] = {}

    def say(self, line: str) -> None:
        self._progress.write(f"ibi: {plain(line)}\n")
        self._progress.flush()

    def run(self) -> Summary:
        """Import every record of the list (those done before skipped); the summary."""
        self._held = self.held()
        if self.state.complete or self.options.restart:
            self.state.token, self.state.complete = None, False
        for page in self.pages():
            self.summary.pages += 1
            before = len(self.summary.created), len(self.summary.errors)
            for record in page.records:
                self.one(record)
                self.state.save()
            self.state.token, self.state.complete = page.token, page.token is None
            self.state.save()
            self.say(
                f"page {self.summary.pages}: {len(page.records)} records, "
                f"{len(self.summary.created) - before[0]} created, "
                f"{len(self.summary.errors) - before[1]} errors (so far: {self.summary.counts()})"
            )
        self.state.stopped = self.summary.stopped
        if self.summary.stopped is None:
            self.state.token, self.state.complete = None, True
        else:
            self.say(self.summary.stopped)
        self.state.save()
        return self.summary

    def held(self) -> dict[str, Held]:
        """The Archive's items imported from this repository, by OAI identifier: read once, so
        that no record is deposited twice even if the state file was lost."""
        held: dict[str, Held] = {}
        for item in self.archive.items():
            source = item.get("oai_source") or {}
            if source.get("repository") == self.options.repository and source.get("identifier"):
                forms = item.get("ibi") or {}
                label = str(forms.get("ibip") or forms.get("rep"))
                held[source["identifier"]] = Held(label, item.get("state") == "Deleted")
        if held:
            self.say(f"the Archive holds {len(held)} items imported from this repository")
        return held

    # -- the list ---------------------------------------------------------------------------

    def pages(self) -> Iterator[OaiPage]:
        """The list's pages from the state's token (its first page when none); a token the
        repository refuses (they expire) restarts the list once. A list that never ends is
        stopped (:attr:`Summary.stopped` says why): a token given again, or
        :data:`MAX_IDLE_PAGES` pages in a row that bring no record not read before."""
        restarted = False
        asked: set[str] = set()  # the tokens asked since the list's start, in this run
        seen: set[str] = set()  # the identifiers read since then
        idle = 0
        while True:
            token = self.state.token
            try:
                page = parse_page(self.request(token))
            except OaiError as error:
                if error.code == "noRecordsMatch":
                    self.say("no records match: nothing to import")
                    return
                if error.code != "badResumptionToken" or restarted or token is None:
                    raise
                self.say("the repository no longer takes the saved token: reading from the start")
                restarted, self.state.token = True, None
                asked, seen, idle = set(), set(), 0
                continue
            if token is not None:
                asked.add(token)
            before = len(seen)
            seen.update(record.identifier for record in page.records)
            idle = idle + 1 if len(seen) == before else 0
            yield page
            if page.token is None:
                return
            self.summary.stopped = endless(page.token, asked, idle, self.summary.pages)
            if self.summary.stopped is not None:
                return

    def request(self, token: str | None) -> bytes:
        """One ``ListRecords`` answer's body, 503 and 429 retried as ``Retry-After`` says."""
        query = {"verb": "ListRecords"}
        if token is not None:
            query["resumptionToken"] = token
        else:
            query["metadataPrefix"] = METADATA_PREFIX
            query.update(
                {
                    k: v
                    for k, v in (("set", self.options.set_spec), ("from", self.options.from_date))
                    if v
                }
            )
        base = self.options.repository
        url = base + ("&" if "?" in base else "?") + urlencode(query)
        for attempt in range(RETRIES + 1):
            try:
                raw = self._get(url, self.options.timeout)
            except outbound.Refused as refused:
                hint = ""
                if isinstance(refused, outbound.AddressRefused):
                    hint = (
                        " (IBI_ALLOW_NETWORKS names the networks allowed besides, e.g. 127.0.0.0/8)"
                    )
                raise HarvestError(f"{plain(url)}: {refused}{hint}") from None
            except ApiError as error:
                raise HarvestError(plain(error.message)) from None
            if raw.status not in (429, 503) or attempt == RETRIES:
                break
            wait = retry_after(raw.headers, attempt)
            self.say(f"the repository answered {raw.status}: asking again in {wait:g} s")
            self._sleep(wait)
        if raw.status in (429, 503):
            raise HarvestError(f"{url} still answered {raw.status} after {RETRIES} retries")
        # Some repositories (Zenodo) answer an OAI-PMH error with a 4xx and the error's XML.
        if 200 <= raw.status < 300 or raw.content.lstrip().startswith(b"<"):
            return raw.content
        received = plain(page_text(body_text(raw.content), 200))
        raise HarvestError(f"{plain(url)} answered {raw.status}: {received!r}")

    # -- one record ---------------------------------------------------------------------------

    def one(self, record: OaiRecord) -> None:
        """Import, tombstone or skip one record; an Archive's refusal is that record's error."""
        identifier = record.identifier
        if not identifier:
            self.summary.skipped.append(("(none)", "a record with no identifier"))
            return
        if record.unusable is not None:
            self.state.skipped[identifier] = record.unusable
            self.summary.skipped.append((identifier, record.unusable))
            return
        self.state.skipped.pop(identifier, None)
        try:
            if record.deleted:
                self.deleted(record)
            else:
                self.imported(record)
        except ApiError as error:
            if error.status == 0:
                raise  # the Archive cannot be reached: stop here, the state says where
            self.state.failed[identifier] = str(error)
            self.summary.errors.append((identifier, str(error)))

    def imported(self, record: OaiRecord) -> None:
        identifier = record.identifier
        held = self._held.get(identifier)
        gone = self.state.tombstoned.get(identifier) or (
            held.ibi if held and held.deleted else None
        )
        if gone is not None:
            reason = f"deleted in the Archive (the tombstone {gone}): an IBI is never reused"
            self.summary.skipped.append((identifier, reason))
        elif identifier in self.state.done:
            self.summary.present.append((identifier, self.state.done[identifier]))
        elif held is not None and identifier not in self.state.failed:
            self.state.done[identifier] = held.ibi
            self.summary.present.append((identifier, held.ibi))
        else:
            label = self.deposit(record, held.ibi if held is not None else None)
            self.state.done[identifier] = label
            self.state.failed.pop(identifier, None)
            self.summary.created.append((identifier, label))

    def deposit(self, record: OaiRecord, label: str | None) -> str:
        """Create the record's item (unless ``label``: made by a run that failed after it), and
        upload its files when fetching; the item's IBI."""
        body = item_body(record, self.options.repository)
        with contextlib.ExitStack() as stack:
            files: list[Fetched] = []
            if self.options.fetch:
                directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="ibi-import-"))
                files = self.files(record, Path(directory))
            if files:
                body.pop("url", None)
            if label is None:
                key = idempotency_key(
                    self.state.archive, self.options.repository, record.identifier
                )
                label = created_ibi(self.archive.create(body, idempotency_key=key))
            if files:
                uploads: list[Upload] = [(f.name, LocalFile(f.path), f.content_type) for f in files]
                self.archive.upload_files(label, uploads, default_file=files[0].name)
        return label

    def files(self, record: OaiRecord, directory: Path) -> list[Fetched]:
        """The record's files, downloaded (each URL left out is noted with its reason)."""
        fetched: list[Fetched] = []
        names: set[str] = set()
        for url in file_urls(record.dc):
            got = self._fetch(url, directory, self.options.max_file_bytes, self.options.timeout)
            if isinstance(got, str):
                self.summary.files.append((record.identifier, got))
                continue
            name, n = got.name, 1
            while name in names:
                n += 1
                name = f"{n}-{got.name}"
            names.add(name)
            fetched.append(Fetched(got.path, name, got.content_type, got.url))
        return fetched

    def deleted(self, record: OaiRecord) -> None:
        identifier = record.identifier
        if identifier in self.state.tombstoned:
            self.summary.present.append((identifier, self.state.tombstoned[identifier]))
            return
        held = self._held.get(identifier)
        label = self.state.done.get(identifier) or (held.ibi if held is not None else None)
        if label is None:
            self.summary.skipped.append((identifier, "deleted at the source, never imported"))
            return
        if held is not None and held.deleted:
            self.state.tombstoned[identifier] = label
            self.summary.present.append((identifier, label))
            return
        try:
            self.archive.delete(label)
        except ApiError as error:
            if error.status != 410:  # 410: a tombstone already
                raise
        self.state.done.pop(identifier, None)
        self.state.tombstoned[identifier] = label
        self.summary.tombstoned.append((identifier, label))


def endless(token: str, asked: set[str], idle: int, pages: int) -> str | None:
    """Why a list whose next token is ``token`` never ends (None: it may go on)."""
    if token in asked:
        shown = plain(token if len(token) <= 80 else token[:79] + "…")
        why = f"the repository gave the resumption token {shown!r} again"
    elif idle >= MAX_IDLE_PAGES:
        why = f"{idle} pages in a row brought no record not read before"
    else:
        return None
    return (
        f"the list was stopped after page {pages}: {why} (a list that never ends); the state "
        "keeps that token: the same command asks for it again"
    )


def created_ibi(item: dict[str, Any]) -> str:
    """The IBI of an item the Archive created (its ``ibip``, else its ``rep``)."""
    forms = item.get("ibi") if isinstance(item, dict) else None
    label = (forms.get("ibip") or forms.get("rep")) if isinstance(forms, dict) else None
    if not label:
        raise ApiError(502, f"the Archive answered no IBI for the item it created: {item!r:.200}")
    return str(label)


def retry_after(headers: dict[str, str], attempt: int) -> float:
    """The wait a 503 or 429 asks for (``Retry-After``: seconds or an HTTP date), else 5, 10,
    20 … seconds; never more than :data:`MAX_WAIT`."""
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), "").strip()
    wait: float = 5.0 * 2**attempt
    if value.isdigit():
        wait = float(value)
    elif value:
        with contextlib.suppress(TypeError, ValueError):
            wait = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
    return min(max(wait, 0.0), MAX_WAIT)
