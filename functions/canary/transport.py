"""The canary's HTTP transport: one GET, redirects not followed, the body read up to a bound."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from functions.canary.probe import Answer

USER_AGENT = "ibi-canary/1 (+docs/deploy.md#the-canary)"
MAX_BODY = 64 * 1024  # enough to know the file is served; the rest is not read


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the probe follows redirects itself, one hop at a time


class UrllibTransport:
    """GETs with the standard library (no dependency), answering 4xx/5xx as answers."""

    def __init__(self) -> None:
        self._opener = urllib.request.build_opener(_NoRedirect)

    def get(self, url: str, *, timeout: float) -> Answer:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})  # noqa: S310
        try:
            with self._opener.open(request, timeout=timeout) as response:
                body = response.read(MAX_BODY)
                return Answer(response.status, _headers(response.headers), len(body))
        except urllib.error.HTTPError as error:
            body = error.read(MAX_BODY) if error.fp is not None else b""
            return Answer(error.code, _headers(error.headers), len(body))


def _headers(headers: Any) -> dict[str, str]:
    return {str(name).lower(): str(value) for name, value in headers.items()}
