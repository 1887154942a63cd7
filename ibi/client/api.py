"""A JSON API of ibi (:class:`ApiClient`): one request, retried as the answer says (the
:class:`RetryPolicy`), signed where that applies, its error decoded, and the service that
answers named when an endpoint is not the one a client expected."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from ibi import __version__
from ibi.client.signing import aws_region_of, signer_for
from ibi.client.transport import ApiError, Raw, Transport, http_send, page_text, reason_phrase


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


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
        self.signer = signer_for(sign, region or aws_region_of(endpoint))

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
        return ApiError(answer.status, message or reason_phrase(answer.status), code)
    if isinstance(body, dict) and body.get("message"):  # API Gateway's own answers (403, 500)
        return ApiError(answer.status, str(body["message"]))
    if body is None or body == "":
        return ApiError(answer.status, "no answer body")
    text = body if isinstance(body, str) else json.dumps(body)
    return ApiError(answer.status, page_text(text))
