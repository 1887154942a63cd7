"""HTTP client of the ibi JSON APIs (minting), signing with SigV4 where that applies."""

from __future__ import annotations

import hashlib
import html
import http
import http.client
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypedDict, Unpack
from urllib.parse import quote, urlencode, urlsplit

from ibi import __version__, defaults
from ibi.core.errors import InvalidInput
from ibi.core.pairlist import decode_value, encode_query, parse_pair_list

_AWS_API_HOST = re.compile(r"[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?")


class ApiError(Exception):
    """The API answered with an error (``status``), or could not be reached (``status`` 0)."""

    def __init__(self, status: int, message: str, code: str = "") -> None:
        super().__init__(f"{status} {code or _phrase(status)}: {message}" if status else message)
        self.status = status
        self.code = code
        self.message = message


def _phrase(status: int) -> str:
    """The reason phrase of an HTTP status (``Forbidden``), or the number when unknown."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return str(status)


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True, slots=True)
class Raw:
    """An HTTP answer as received: status, headers (as sent), body bytes."""

    status: int
    headers: dict[str, str]
    content: bytes

    @property
    def reason(self) -> str:
        return _phrase(self.status)


Transport = Callable[..., Raw]


def http_send(
    method: str,
    url: str,
    *,
    data: bytes | BinaryIO = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
    where: str | None = None,
) -> Raw:
    """The one HTTP path of every client here: one request, any status as a :class:`Raw`.

    ``data`` is bytes, or a binary file object read a block at a time (never whole: give its
    ``Content-Length`` in ``headers``). A server that cannot be reached is
    ``ApiError(0, "cannot reach <where>: …")``.
    """
    body = (data or None) if isinstance(data, bytes) else data
    try:
        request = urllib.request.Request(url, data=body, method=method, headers=headers or {})  # noqa: S310 - callers pass http(s) URLs
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return Raw(response.status, dict(response.headers.items()), response.read())
    except urllib.error.HTTPError as error:
        return Raw(error.code, dict(error.headers.items()), error.read())
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        reason = getattr(error, "reason", error)
        raise ApiError(0, f"cannot reach {where or url}: {reason}") from None
    except (ValueError, http.client.HTTPException) as error:  # a URL urllib cannot send to
        raise ApiError(
            0, f"cannot reach {where or url[:200]}: {error or type(error).__name__}"
        ) from None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which answers are retried, how often, and how long to wait before each retry.

    The wait is the answer's ``Retry-After`` (whole seconds) or else an exponential backoff
    (0.2, 0.4, 0.8 … at most 5 s), never more than 30 s. A deterministic refusal is never
    retried: a status outside ``statuses`` (any 4xx but 408 and 429, unless a client says
    otherwise), nor a 502/504 that carries the API's own error code (e.g. ``TransferRefused``:
    the API answered, no gateway failed).
    """

    statuses: frozenset[int]
    retries: int = 5
    sleep: Callable[[float], None] = time.sleep

    def retryable(self, answer: Answer) -> bool:
        if answer.status not in self.statuses:
            return False
        return answer.status not in (502, 504) or _error_fields(answer.body) is None

    def delay(self, attempt: int, answer: Answer) -> float | None:
        """The wait before retry number ``attempt`` (1, 2, …) of ``answer``; None: answer it."""
        if attempt > self.retries or not self.retryable(answer):
            return None
        retry_after = answer.headers.get("retry-after", "")
        delay = float(retry_after) if retry_after.isdigit() else min(2.0**attempt * 0.1, 5.0)
        return min(delay, 30.0)


def aws_region_of(endpoint: str) -> str | None:
    """The region of an API Gateway endpoint (``…execute-api.<region>.amazonaws.com``)."""
    match = _AWS_API_HOST.fullmatch(urlsplit(endpoint).hostname or "")
    return match.group(1) if match else None


class SigV4Signer:
    """Signs requests for API Gateway IAM authorization with the caller's AWS credentials."""

    def __init__(self, region: str) -> None:
        import botocore.session

        self.region = region
        self.credentials = botocore.session.get_session().get_credentials()

    @property
    def available(self) -> bool:
        return self.credentials is not None

    def sign(self, method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        if self.credentials is None:
            raise ApiError(0, "no AWS credentials to sign the request with")
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        frozen = self.credentials.get_frozen_credentials()
        SigV4Auth(frozen, "execute-api", self.region).add_auth(request)
        return dict(request.headers.items())


def _signer(sign: bool | None, region: str | None) -> SigV4Signer | None:
    """A signer when asked to sign (``True``), or by default for an AWS endpoint."""
    if sign is False or (sign is None and region is None):
        return None
    if region is None:
        raise ApiError(0, "--sign needs --region for an endpoint outside *.amazonaws.com")
    signer = SigV4Signer(region)
    if signer.available:
        return signer
    if sign is True:
        raise ApiError(0, "--sign: no AWS credentials found")
    return None


# What answers on a service's own public route, for naming the service an endpoint is:
# (route, the key its JSON answer holds, the service).
SERVICES = (
    ("/api/service", "archiveserviceibi", "an Archive"),
    ("/subsystems", "subsystems", "the minting service"),
    ("/inspect?ibi=8JMKD3MGP8W/35MME4E", "form", "the resolver"),
)


class ApiClient:
    """A JSON API of ibi (minting, an Archive's deposit API), signed where that applies."""

    retry_statuses: frozenset[int] = frozenset({408, 429, 502, 503, 504})
    service_name = "an ibi service"

    def __init__(
        self,
        endpoint: str,
        *,
        sign: bool | None = None,
        region: str | None = None,
        timeout: float = 30.0,
        retries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        transport: Transport = http_send,
    ) -> None:
        try:
            split = urlsplit(endpoint)
            split.port  # noqa: B018 - a port that is no number, or out of range: ValueError
        except ValueError as error:  # e.g. "http://[::1": an unclosed IPv6 literal
            raise ApiError(
                0, f"{endpoint[:200]!r} is not a URL ({error}): give https://host[:port][/path]"
            ) from None
        if split.scheme not in {"http", "https"} or not split.netloc:
            raise ApiError(0, f"{endpoint[:200]!r} is not an http(s) URL of an ibi API")
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self.retry = RetryPolicy(self.retry_statuses, retries, sleep)
        self._transport = transport
        self.signer = _signer(sign, region or aws_region_of(endpoint))

    @property
    def retries(self) -> int:
        return self.retry.retries

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Answer:
        """Send, retrying answers that say "retry" (409 in progress, 429, 503) as told."""
        data = json.dumps(body).encode() if body is not None else b""
        url = self.endpoint + path
        attempt = 0
        while True:
            answer = self._send(method, url, data, dict(headers or {}))
            attempt += 1
            delay = self.retry.delay(attempt, answer)
            if delay is None:
                return answer
            self.retry.sleep(delay)

    def _send(self, method: str, url: str, data: bytes, headers: dict[str, str]) -> Answer:
        headers.setdefault("accept", "application/json")
        headers.setdefault("user-agent", f"ibi-cli/{__version__}")
        if data:
            headers.setdefault("content-type", "application/json")
        if self.signer is not None:
            headers = self.signer.sign(method, url, headers, data)
        return _answer(
            self._transport(method, url, data=data, headers=headers, timeout=self.timeout)
        )

    def call(self, method: str, path: str, body: Any = None, **query: str) -> Any:
        """One request; the answer's JSON, or :class:`ApiError`."""
        if query:
            path += "?" + urlencode(query)
        return self.ok(self.request(method, path, body), f"{method} {path}")

    def ok(self, answer: Answer, asked: str) -> Any:
        """The body of a 2xx ``answer``; else the error, naming the service that answered
        when it is not this client's (an endpoint pointed at the wrong service)."""
        if 200 <= answer.status < 300:
            return answer.body
        if _no_route(answer):
            found = self.identify()
            if found is not None and found != self.service_name:
                raise ApiError(
                    0,
                    f"{self.endpoint} is {found}, not {self.service_name} "
                    f"({asked.partition('?')[0]} answered {answer.status})",
                )
        raise _error(answer)

    def identify(self) -> str | None:
        """Which ibi service answers at this endpoint (None: none that we know)."""
        for path, key, name in SERVICES:
            try:
                answer = self._send("GET", self.endpoint + path, b"", {})
            except ApiError:
                return None
            if answer.status == 200 and isinstance(answer.body, dict) and key in answer.body:
                return name
        return None


class MintingClient(ApiClient):
    # 409: a request with the same Idempotency-Key is still being served: retry it.
    retry_statuses = frozenset({408, 409, 429, 502, 503, 504})
    service_name = "the minting service"

    def mint(
        self, *, subsystem: str | None = None, count: int = 1, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"count": count}
        if subsystem is not None:
            body["subsystem"] = subsystem
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        answer: dict[str, Any] = self.ok(self.request("POST", "/mint", body, headers), "POST /mint")
        return answer

    def records(
        self,
        *,
        subsystem: str | None = None,
        after: str | None = None,
        limit: int = 50,
        newest_first: bool = False,
        since: str | None = None,
        until: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every mint record (from ``since`` to ``until``: epoch or ISO 8601), page after
        page, oldest first or newest first."""
        query: dict[str, str] = {"limit": str(limit)}
        for name, value in (("subsystem", subsystem), ("since", since), ("until", until)):
            if value:
                query[name] = value
        if newest_first:
            query["order"] = "desc"
        while True:
            if after:
                query["after"] = after
            page = self.call("GET", "/mints", None, **query)
            yield from page["records"]
            after = page.get("next")
            if not after:
                return

    def record_of(self, ibi: str) -> dict[str, Any]:
        """The record that issued ``ibi`` (either form); :class:`ApiError` 404 if none did."""
        answer: dict[str, Any] = self.call("GET", "/mints", None, ibi=ibi)
        return dict(answer["records"][0])

    def verify(self, *, subsystem: str | None = None) -> dict[str, Any]:
        """The verification of a subsystem's record (``GET /mints/verify``)."""
        query = {"subsystem": subsystem} if subsystem else {}
        answer: dict[str, Any] = self.call("GET", "/mints/verify", None, **query)
        return answer

    def subsystems(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/subsystems")
        return answer


def _answer(raw: Raw) -> Answer:
    lowered = {name.lower(): value for name, value in raw.headers.items()}
    try:
        body = json.loads(raw.content) if raw.content else None
    except ValueError:
        body = raw.content.decode("utf-8", "replace")
    return Answer(raw.status, lowered, body)


def _error_fields(body: Any) -> tuple[str, str] | None:
    """(code, message) of the ibi APIs' error body ``{"error": {"code", "message"}}``."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    return (str(code) if code else "", str(message) if message else "")


def _no_route(answer: Answer) -> bool:
    """An answer saying the route is unknown here: an endpoint of some other service?"""
    fields = _error_fields(answer.body)
    if fields is not None:
        return fields[0] == "NotFound" and fields[1].startswith("no route")
    if isinstance(answer.body, dict):  # API Gateway's own: {"message": "Not Found"}
        return answer.status in (404, 405)
    return answer.status in (400, 404, 405)  # an HTML page or text: not a JSON API of ours


_TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]*>", re.DOTALL | re.IGNORECASE)


def page_text(text: str, limit: int = 300) -> str:
    """What a person reads of an answer's text: an HTML page without its markup, a pair list
    decoded (``%2B`` is ``+``), on one line of at most ``limit`` characters."""
    if "<" in text and ">" in text:
        text = html.unescape(_TAG.sub(" ", text))
    else:
        text = pair_list_text(text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pair_list_text(text: str) -> str:
    """A pair list (spec §4) as words: ``error {a %2B b}`` is ``a + b``; else ``text``."""
    try:
        pairs = parse_pair_list(text)
    except InvalidInput:
        return text
    lines = []
    for name, value in pairs:
        words = [value] if isinstance(value, str) else list(value)
        try:
            said = " ".join(decode_value(word) for word in words)
        except InvalidInput:
            said = " ".join(words)
        lines.append(said if name == "error" else f"{name} {said}")
    return "; ".join(lines) or text


def _error(answer: Answer) -> ApiError:
    """The error an answer says; a ``429`` also says when to retry (its ``Retry-After``)."""
    error = _stated_error(answer)
    retry_after = answer.headers.get("retry-after", "")
    if answer.status == 429 and retry_after and "retry" not in error.message.lower():
        return ApiError(429, f"{error.message}; retry after {retry_after} s", error.code)
    return error


def _stated_error(answer: Answer) -> ApiError:
    body = answer.body
    fields = _error_fields(body)
    if fields is not None:
        code, message = fields
        return ApiError(answer.status, message or _phrase(answer.status), code)
    if isinstance(body, dict) and body.get("message"):  # API Gateway's own answers (403, 500)
        return ApiError(answer.status, str(body["message"]))
    if body is None or body == "":
        return ApiError(answer.status, "no answer body")
    text = body if isinstance(body, str) else json.dumps(body)
    return ApiError(answer.status, page_text(text))


class LocalFile:
    """A file to upload from disk: hashed and sent a block at a time, never read whole."""

    BLOCK = 1 << 20

    def __init__(self, path: Path) -> None:
        self.path = path
        self._digest: tuple[str, int] | None = None

    def __repr__(self) -> str:
        return f"LocalFile({str(self.path)!r})"

    def digest(self) -> tuple[str, int]:
        """(SHA-256 in hex, size in bytes), read once."""
        if self._digest is None:
            with self.path.open("rb") as stream:
                sha256 = hashlib.file_digest(stream, "sha256").hexdigest()
                self._digest = (sha256, stream.tell())
        return self._digest

    def open(self) -> BinaryIO:
        return self.path.open("rb")


Content = bytes | LocalFile
Upload = tuple[str, Content, str]  # (path in the item, the bytes or a file, content type)


def digest(content: Content) -> tuple[str, int]:
    """(SHA-256 in hex, size) of an upload's content."""
    if isinstance(content, LocalFile):
        return content.digest()
    return hashlib.sha256(content).hexdigest(), len(content)


class UploadProgress(Protocol):
    """Told of each file as its upload starts, then of the bytes sent."""

    def start(self, path: str, size: int) -> None: ...
    def sent(self, count: int) -> None: ...


class _Reading:
    """A file object that tells ``progress`` of every block read from it (http.client reads
    a request body a block at a time when it is a file object)."""

    def __init__(self, stream: BinaryIO, progress: UploadProgress | None) -> None:
        self._stream = stream
        self._progress = progress

    def read(self, size: int = -1) -> bytes:
        block = self._stream.read(size if size is not None and size >= 0 else LocalFile.BLOCK)
        if block and self._progress is not None:
            self._progress.sent(len(block))
        return block


class ArchiveClient(ApiClient):
    """An Archive's deposit API."""

    service_name = "an Archive"

    def service(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/api/service")
        return answer

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        answer: dict[str, Any] = self.ok(
            self.request("POST", "/api/items", body, headers), "POST /api/items"
        )
        return answer

    def copy(self, body: dict[str, Any]) -> dict[str, Any]:
        """A copy of an original held elsewhere (``{"ibi", "original_files"?, …}``). The Archive
        reads the original's files from its Archive through its resolver; ``original_files``,
        if given, must agree (409 otherwise). The answer's ``original_check`` says whether it
        could (``verified``) or not (``unverified``, with the reason)."""
        answer: dict[str, Any] = self.call("POST", "/api/copies", body)
        return answer

    def item(self, ibi: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/api/item", ibi=ibi)
        return answer

    def update(self, ibi: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Change an item: ``{"listable": false}``, ``"language"``, ``"dc"``, … (its timestamp
        advances)."""
        answer: dict[str, Any] = self.call("PATCH", "/api/item", changes, ibi=ibi)
        return answer

    def delete(self, ibi: str) -> dict[str, Any]:
        """Delete an item: a tombstone stays, answering ``Deleted`` (410 at the resolver)."""
        answer: dict[str, Any] = self.call("DELETE", "/api/item", None, ibi=ibi)
        return answer

    def transfer(self, ibi: str, to: str, leave: str) -> dict[str, Any]:
        """Move a transferable original to the Archive whose deposit API is ``to``."""
        answer: dict[str, Any] = self.call(
            "POST", "/api/item/transfer", {"to": to.rstrip("/"), "leave": leave}, ibi=ibi
        )
        return answer

    def link(self, ibi: str, body: dict[str, Any]) -> dict[str, Any]:
        """Link one related item: ``{"next_edition": …}``, ``{"translation": …}`` or
        ``{"metadata": {"ibi": …, "format": "oai_dc"?}}``."""
        answer: dict[str, Any] = self.call("POST", "/api/item/links", body, ibi=ibi)
        return answer

    def unlink(self, ibi: str, link: str) -> dict[str, Any]:
        """Remove one link (``link``: ``next_edition``, ``translation(pt-BR)``, ``metadata`` or
        ``metadata_oai_dc``); the Archive records the removal in the item's history."""
        answer: dict[str, Any] = self.call("DELETE", "/api/item/links", ibi=ibi, link=link)
        return answer

    def upload_files(
        self,
        ibi: str,
        files: Sequence[Upload],
        *,
        default_file: str | None = None,
        progress: UploadProgress | None = None,
    ) -> dict[str, Any]:
        """Upload ``(path, content, content type)`` through presigned URLs, then commit them.

        A :class:`LocalFile`'s content is streamed from disk, never read whole.
        """
        body: dict[str, Any] = {"files": self._declare_and_upload(ibi, files, progress)}
        if default_file is not None:
            body["default_file"] = default_file
        answer: dict[str, Any] = self.call("POST", "/api/item/files", body, ibi=ibi)
        return answer

    def _declare_and_upload(
        self, ibi: str, files: Sequence[Upload], progress: UploadProgress | None = None
    ) -> list[Any]:
        """Announce ``files`` and send each through its presigned URL; what was announced."""
        sizes = [digest(content) for _, content, _ in files]
        declared: list[dict[str, Any]] = [
            {"path": path, "sha256": sha256, "size": size, "content_type": content_type}
            for (path, _, content_type), (sha256, size) in zip(files, sizes, strict=True)
        ]
        answer = self.call("POST", "/api/item/uploads", {"files": declared}, ibi=ibi)
        uploads = answer.get("uploads") if isinstance(answer, dict) else None
        if not isinstance(uploads, list) or len(uploads) != len(files):
            raise ApiError(0, "the Archive answered no upload URLs")
        for upload, (path, content, _), (_, size) in zip(uploads, files, sizes, strict=True):
            if progress is not None:
                progress.start(path, size)
            self._upload(upload, content, size, progress)
        return declared

    def _upload(
        self, upload: dict[str, Any], content: Content, size: int, progress: UploadProgress | None
    ) -> None:
        """One presigned PUT: bytes as they are, a :class:`LocalFile` a block at a time."""
        headers = {"Content-Length": str(size), **upload["headers"]}
        if isinstance(content, LocalFile):
            with content.open() as stream:
                raw = self._put(upload, _Reading(stream, progress), headers)
        else:
            raw = self._put(upload, content, headers)
            if progress is not None:
                progress.sent(len(content))
        if not 200 <= raw.status < 300:
            raise ApiError(raw.status, f"uploading {upload['path']}: {raw.reason}")

    def _put(self, upload: dict[str, Any], data: Any, headers: dict[str, str]) -> Raw:
        return self._transport(
            upload["method"],
            upload["url"],  # a URL the Archive presigned
            data=data,
            headers=headers,
            timeout=self.timeout,
        )

    def replace_files(
        self,
        ibi: str,
        files: Sequence[Upload],
        *,
        reason: str,
        default_file: str | None = None,
        progress: UploadProgress | None = None,
    ) -> dict[str, Any]:
        """An operator's revision: add or replace files of any item (the previous versions are
        kept and every change is recorded in the item's history, with ``reason``)."""
        body: dict[str, Any] = {
            "files": self._declare_and_upload(ibi, files, progress),
            "reason": reason,
        }
        if default_file is not None:
            body["default_file"] = default_file
        answer: dict[str, Any] = self.call("POST", "/api/item/files/replace", body, ibi=ibi)
        return answer

    def previous_version(self, ibi: str, path: str, sha256: str) -> dict[str, Any]:
        """Where to download a replaced version of a file (a short-lived URL)."""
        query = urlencode({"ibi": ibi, "path": path, "sha256": sha256})
        answer: dict[str, Any] = self.call("GET", f"/api/item/previous?{query}")
        return answer

    def import_original(self, body: dict[str, Any]) -> dict[str, Any]:
        """An original for an IBI of another subsystem: ``{"ibi", "reason", …}`` (operators)."""
        answer: dict[str, Any] = self.call("POST", "/api/imports", body)
        return answer

    # -- the receiving side of a transfer (called by the sending Archive) ----------------------

    def receive_transfer(self, body: dict[str, Any]) -> Any:
        return self.call("POST", "/api/transfers", body)

    def complete_transfer(self, ibi: str) -> Any:
        return self.call("POST", "/api/transfers/complete", None, ibi=ibi)

    def cancel_transfer(self, ibi: str) -> Any:
        return self.call("DELETE", "/api/transfers", None, ibi=ibi)

    def verify(self, ibi: str | None = None) -> Iterator[dict[str, Any]]:
        """The integrity report, item by item (every item when ``ibi`` is None)."""
        if ibi is not None:
            yield from self.call("POST", "/api/verify", None, ibi=ibi)["items"]
            return
        after: str | None = None
        while True:
            query = {"after": after} if after else {}
            page = self.call("POST", "/api/verify", None, **query)
            yield from page["items"]
            after = page.get("next")
            if not after:
                return


class ResolverClient(ApiClient):
    """The resolver's administrative API and its Archive-switching service."""

    service_name = "the resolver"

    def register(
        self, archive_service_ibi: str, registration_key: str, prefixes: Sequence[str] = ()
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "archiveserviceibi": archive_service_ibi,
            "registrationkey": registration_key,
        }
        if prefixes:
            body["prefixes"] = list(prefixes)
        answer: dict[str, Any] = self.call("POST", "/admin/archives", body)
        return answer

    def change_prefixes(
        self, archive_service_ibi: str, *, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Add or remove prefixes registered with an Archive (``POST /admin/prefixes``)."""
        body = {"archiveserviceibi": archive_service_ibi, "add": list(add), "remove": list(remove)}
        answer: dict[str, Any] = self.call("POST", "/admin/prefixes", body)
        return answer

    def archives(self) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self.call("GET", "/admin/archives")["archives"]
        return answer

    def holdings(self, ibi: str) -> dict[str, Any]:
        """The holdings view of ``ibi``: every included Archive's answer, and the verdict
        (``GET /holdings/<ibi>`` with ``Accept: application/json``; public, never signed
        unless the client was made to sign)."""
        answer = self.request("GET", "/holdings/" + quote(ibi.strip().strip("/"), safe="/@.-"))
        body = self.ok(answer, "GET /holdings/")
        if not isinstance(body, dict) or not isinstance(body.get("archives"), list):
            raise ApiError(answer.status, "the resolver answered no holdings view")
        return body


class SwitchOptions(TypedDict, total=False):
    """What an inclusion or exclusion request may say besides the Archive's own details."""

    resolver_service_ibi: str  # default RESOLVER_SERVICE_IBI
    admin_email: str  # default admin@localhost
    archive_ip: str | None  # default the base URL's host
    timeout: float  # default 30 s


def switch_archive(
    archive: ArchiveClient,
    resolver_url: str,
    registration_key: str,
    *,
    on: bool,
    **options: Unpack[SwitchOptions],
) -> str:
    """Send ``inclusionRequest``/``exclusionRequest`` (spec §4) for ``archive``; the answer text.

    The eight pairs of seed 001 Table 5.2, the Archive's own details read from its API.
    """
    service = archive.service()
    label = service["archiveserviceibi"].get("ibip") or service["archiveserviceibi"]["rep"]
    return send_switch(
        resolver_url,
        address=service["archiveaddress"],
        service_ibi=label,
        base_url=service["base_url"],
        registration_key=registration_key,
        on=on,
        **options,
    )


def send_switch(
    resolver_url: str,
    *,
    address: str,
    service_ibi: str,
    base_url: str,
    registration_key: str,
    on: bool,
    **options: Unpack[SwitchOptions],
) -> str:
    """The inclusion or exclusion request itself, from the Archive's details; the answer.

    A refusal is :class:`ApiError` with the resolver's text; a ``429``'s says which Archive,
    why, and when to retry, and its ``Retry-After`` is added when the text has no time.
    """
    pairs = switch_pairs(
        address=address,
        service_ibi=service_ibi,
        base_url=base_url,
        registration_key=registration_key,
        on=on,
        **options,
    )
    resolver_service = options.get("resolver_service_ibi", defaults.RESOLVER_SERVICE_IBI)
    raw = http_send(
        "GET",
        f"{resolver_url.rstrip('/')}/{resolver_service}?{encode_query(pairs)}",
        headers={"User-Agent": f"ibi/{__version__}"},
        timeout=options.get("timeout", 30.0),
        where=resolver_url,
    )
    text = raw.content.decode("ascii", "replace").strip()
    if not 200 <= raw.status < 300:
        said = page_text(text) if text else "no answer body"
        retry_after = {k.lower(): v for k, v in raw.headers.items()}.get("retry-after", "")
        if retry_after and "retry after" not in said:
            said += f"; retry after {retry_after} s"
        raise ApiError(raw.status, said)
    return text


def switch_pairs(
    *,
    address: str,
    service_ibi: str,
    base_url: str,
    registration_key: str,
    on: bool,
    **options: Unpack[SwitchOptions],
) -> list[tuple[str, str]]:
    """The eight pairs of an inclusion or exclusion request (seed 001 Table 5.2)."""
    split = urlsplit(base_url)
    return [
        ("servicesubject", "inclusionRequest" if on else "exclusionRequest"),
        ("archiveaddress", address),
        ("archiveserviceibi", service_ibi),
        ("archiveip", options.get("archive_ip") or split.hostname or ""),
        ("archiveprotocol", split.scheme.upper()),
        ("archiveplatformversion", f"ibi-{__version__}"),
        ("archiveadmemailaddress", options.get("admin_email", "admin@localhost")),
        ("registrationkey", registration_key),
    ]
