"""HTTP client of the ibi JSON APIs (minting), signing with SigV4 where that applies."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from ibi import __version__

_AWS_API_HOST = re.compile(r"[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?")


class ApiError(Exception):
    """The API answered with an error (``status``), or could not be reached (``status`` 0)."""

    def __init__(self, status: int, message: str, code: str = "") -> None:
        super().__init__(f"{status} {code}: {message}" if status else message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


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


class ApiClient:
    """A JSON API of ibi (minting, an Archive's deposit API), signed where that applies."""

    retry_statuses: frozenset[int] = frozenset({429, 502, 503, 504})

    def __init__(
        self,
        endpoint: str,
        *,
        sign: bool | None = None,
        region: str | None = None,
        timeout: float = 30.0,
        retries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        split = urlsplit(endpoint)
        if split.scheme not in {"http", "https"} or not split.netloc:
            raise ApiError(0, f"{endpoint!r} is not an http(s) URL of an ibi API")
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self._sleep = sleep
        region = region or aws_region_of(endpoint)
        self.signer: SigV4Signer | None = None
        if sign is True or (sign is None and region is not None):
            if region is None:
                raise ApiError(0, "--sign needs --region for an endpoint outside *.amazonaws.com")
            signer = SigV4Signer(region)
            if signer.available:
                self.signer = signer
            elif sign is True:
                raise ApiError(0, "--sign: no AWS credentials found")

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Answer:
        """Send, retrying answers that say "retry" (409 in progress, 429, 503) as told."""
        data = json.dumps(body).encode() if body is not None else b""
        url = self.endpoint + path
        attempt = 0
        while True:
            answer = self._send(method, url, data, dict(headers or {}))
            if answer.status not in self.retry_statuses or attempt >= self.retries:
                return answer
            attempt += 1
            retry_after = answer.headers.get("retry-after", "")
            delay = float(retry_after) if retry_after.isdigit() else min(2.0**attempt * 0.1, 5.0)
            self._sleep(min(delay, 30.0))

    def _send(self, method: str, url: str, data: bytes, headers: dict[str, str]) -> Answer:
        headers.setdefault("accept", "application/json")
        headers.setdefault("user-agent", f"ibi-cli/{__version__}")
        if data:
            headers.setdefault("content-type", "application/json")
        if self.signer is not None:
            headers = self.signer.sign(method, url, headers, data)
        request = urllib.request.Request(url, data=data or None, method=method, headers=headers)  # noqa: S310 - http(s) checked above
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return _answer(response.status, dict(response.headers.items()), response.read())
        except urllib.error.HTTPError as error:
            return _answer(error.code, dict(error.headers.items()), error.read())
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise ApiError(0, f"cannot reach {url}: {reason}") from None

    def call(self, method: str, path: str, body: Any = None, **query: str) -> Any:
        """One request; the answer's JSON, or :class:`ApiError`."""
        if query:
            path += "?" + urlencode(query)
        return _ok(self.request(method, path, body))


class MintingClient(ApiClient):
    # 409: a request with the same Idempotency-Key is still being served: retry it.
    retry_statuses = frozenset({409, 429, 502, 503, 504})

    def mint(
        self, *, subsystem: str | None = None, count: int = 1, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"count": count}
        if subsystem is not None:
            body["subsystem"] = subsystem
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        answer: dict[str, Any] = _ok(self.request("POST", "/mint", body, headers))
        return answer

    def records(
        self, *, subsystem: str | None = None, after: str | None = None, limit: int = 50
    ) -> Iterator[dict[str, Any]]:
        """Every mint record, page after page."""
        while True:
            query: dict[str, str] = {"limit": str(limit)}
            if subsystem:
                query["subsystem"] = subsystem
            if after:
                query["after"] = after
            page = _ok(self.request("GET", "/mints?" + urlencode(query)))
            yield from page["records"]
            after = page.get("next")
            if not after:
                return

    def subsystems(self) -> dict[str, Any]:
        answer: dict[str, Any] = _ok(self.request("GET", "/subsystems"))
        return answer


def _answer(status: int, headers: dict[str, str], raw: bytes) -> Answer:
    lowered = {name.lower(): value for name, value in headers.items()}
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode("utf-8", "replace")
    return Answer(status, lowered, body)


def _ok(answer: Answer) -> Any:
    if 200 <= answer.status < 300:
        return answer.body
    body = answer.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        raise ApiError(
            answer.status, str(body["error"].get("message")), str(body["error"].get("code"))
        )
    if isinstance(body, dict) and "message" in body:  # API Gateway's own answers (403, 500)
        raise ApiError(answer.status, str(body["message"]))
    raise ApiError(answer.status, str(body)[:500])


class ArchiveClient(ApiClient):
    """An Archive's deposit API."""

    def service(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/api/service")
        return answer

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
        answer: dict[str, Any] = _ok(self.request("POST", "/api/items", body, headers))
        return answer

    def copy(self, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("POST", "/api/copies", body)
        return answer

    def item(self, ibi: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/api/item", ibi=ibi)
        return answer

    def upload_files(
        self, ibi: str, files: list[tuple[str, bytes, str]], *, default_file: str | None = None
    ) -> dict[str, Any]:
        """Upload ``(path, content, content type)`` through presigned URLs, then commit them."""
        import hashlib

        declared = [
            {
                "path": path,
                "sha256": hashlib.sha256(content).hexdigest(),
                "size": len(content),
                "content_type": content_type,
            }
            for path, content, content_type in files
        ]
        uploads = self.call("POST", "/api/item/uploads", {"files": declared}, ibi=ibi)["uploads"]
        for upload, (_, content, _) in zip(uploads, files, strict=True):
            request = urllib.request.Request(  # noqa: S310 - a URL our Archive presigned
                upload["url"], data=content, method=upload["method"], headers=upload["headers"]
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout):  # noqa: S310
                    pass
            except urllib.error.HTTPError as error:
                raise ApiError(error.code, f"uploading {upload['path']}: {error.reason}") from None
        body: dict[str, Any] = {"files": declared}
        if default_file is not None:
            body["default_file"] = default_file
        answer: dict[str, Any] = self.call("POST", "/api/item/files", body, ibi=ibi)
        return answer

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

    def register(self, archive_service_ibi: str, registration_key: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.call(
            "POST",
            "/admin/archives",
            {"archiveserviceibi": archive_service_ibi, "registrationkey": registration_key},
        )
        return answer

    def archives(self) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self.call("GET", "/admin/archives")["archives"]
        return answer


def switch_archive(
    archive: ArchiveClient,
    resolver_url: str,
    registration_key: str,
    *,
    on: bool,
    resolver_service_ibi: str = "J8LNKB5R7W/3FUQHC5",
    admin_email: str = "admin@localhost",
    archive_ip: str | None = None,
    timeout: float = 30.0,
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
        resolver_service_ibi=resolver_service_ibi,
        admin_email=admin_email,
        archive_ip=archive_ip,
        timeout=timeout,
    )


def send_switch(
    resolver_url: str,
    *,
    address: str,
    service_ibi: str,
    base_url: str,
    registration_key: str,
    on: bool,
    resolver_service_ibi: str = "J8LNKB5R7W/3FUQHC5",
    admin_email: str = "admin@localhost",
    archive_ip: str | None = None,
    timeout: float = 30.0,
) -> str:
    """The inclusion or exclusion request itself, from the Archive's details; the answer."""
    from ibi import __version__
    from ibi.core.pairlist import encode_query

    split = urlsplit(base_url)
    pairs = [
        ("servicesubject", "inclusionRequest" if on else "exclusionRequest"),
        ("archiveaddress", address),
        ("archiveserviceibi", service_ibi),
        ("archiveip", archive_ip or split.hostname or ""),
        ("archiveprotocol", split.scheme.upper()),
        ("archiveplatformversion", f"ibi-{__version__}"),
        ("archiveadmemailaddress", admin_email),
        ("registrationkey", registration_key),
    ]
    url = f"{resolver_url.rstrip('/')}/{resolver_service_ibi}?{encode_query(pairs)}"
    request = urllib.request.Request(url, headers={"User-Agent": f"ibi/{__version__}"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            text: str = response.read().decode("ascii", "replace")
            return text.strip()
    except urllib.error.HTTPError as error:
        text = error.read().decode("ascii", "replace").strip()
        raise ApiError(error.code, text or str(error.reason)) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
        raise ApiError(
            0, f"cannot reach {resolver_url}: {getattr(error, 'reason', error)}"
        ) from None
