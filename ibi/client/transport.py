"""The one HTTP path of every client here (:func:`http_send`), its answer (:class:`Raw`), its
error (:class:`ApiError`), and what a person reads of an answer's text (:func:`page_text`)."""

from __future__ import annotations

import html
import http
import http.client
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from ibi.core.errors import InvalidInput
from ibi.core.pairlist import decode_value, parse_pair_list


class ApiError(Exception):
    """The API answered with an error (``status``), or could not be reached (``status`` 0)."""

    def __init__(self, status: int, message: str, code: str = "") -> None:
        super().__init__(
            f"{status} {code or reason_phrase(status)}: {message}" if status else message
        )
        self.status = status
        self.code = code
        self.message = message


def reason_phrase(status: int) -> str:
    """The reason phrase of an HTTP status (``Forbidden``), or the number when unknown."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return str(status)


@dataclass(frozen=True, slots=True)
class Raw:
    """An HTTP answer as received: status, headers (as sent), body bytes."""

    status: int
    headers: dict[str, str]
    content: bytes

    @property
    def reason(self) -> str:
        return reason_phrase(self.status)


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
