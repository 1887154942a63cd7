"""The importer's one outbound path: every request to a repository or to a file's server (a GET),
vetted and pinned (``functions.shared.pinned``), each redirect hop vetted, within a deadline, its
body read a block at a time up to a size; and remote text made safe for a terminal."""

from __future__ import annotations

import http.client
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urljoin, urlsplit

from functions.shared.addresses import AddressPolicy, Unresolvable, UnsafeAddress
from functions.shared.pinned import Deadline, pinned
from ibi import __version__
from ibi.client import Raw

MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
BLOCK = 1 << 20  # bytes read at a time
USER_AGENT = f"ibi-import/{__version__}"
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class Refused(Exception):
    """A request not made, or given up: why, its remote text escaped (:func:`plain`)."""


class AddressRefused(Refused):
    """A request not made: its host (or a redirect hop's) is at an address not allowed."""


def plain(text: str) -> str:
    """Remote text for a terminal: control characters escaped (``\\x1b`` shown, not run)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def allowed() -> AddressPolicy:
    """Public addresses, plus the networks of ``IBI_ALLOW_NETWORKS`` (comma-separated)."""
    networks = os.environ.get("IBI_ALLOW_NETWORKS", "").split(",")
    return AddressPolicy([n.strip() for n in networks if n.strip()])


@dataclass(frozen=True, slots=True)
class Opened:
    """An answer that is not a redirect, its body still to be read: where it came from."""

    response: http.client.HTTPResponse
    url: str  # the last hop's URL
    sock: Any

    def header(self, name: str) -> str:
        return self.response.getheader(name) or ""

    def extend(self, seconds: float) -> None:
        """Move the deadline to ``seconds`` from now (a download: a block at a time)."""
        if isinstance(self.sock, Deadline):
            self.sock.deadline = time.monotonic() + seconds


def _http(url: str, first: str) -> SplitResult:
    try:
        split = urlsplit(url)
        host = split.hostname
    except ValueError:
        raise Refused(f"{plain(url[:200])!r} is not a URL") from None
    if split.scheme not in {"http", "https"} or not host:
        hop = "" if url == first else "a redirect to "
        raise Refused(f"{hop}{plain(url[:200])} is not an http(s) URL: not fetched")
    return split


@contextmanager
def opened(
    url: str,
    timeout: float,
    *,
    policy: AddressPolicy | None = None,
    headers: dict[str, str] | None = None,
) -> Iterator[Opened]:
    """``GET url``, redirects followed (at most 5, each hop vetted by ``policy``, default
    :func:`allowed`); the whole exchange, the body read in the ``with`` included, ends within
    ``timeout`` seconds unless :meth:`Opened.extend` moves it. Raises :class:`Refused`."""
    policy = policy or allowed()
    deadline = time.monotonic() + timeout
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        split = _http(current, url)
        try:
            remaining = max(deadline - time.monotonic(), 0.001)
            connection, target = pinned(policy, split, remaining, deadline)
        except (UnsafeAddress, Unresolvable, ValueError) as error:
            hop = "" if current == url else f"the redirect to {plain(current[:200])}: "
            raise AddressRefused(f"not fetched: {hop}{plain(str(error))}") from None
        try:
            connection.request("GET", target, headers={"User-Agent": USER_AGENT, **(headers or {})})
            sock = connection.sock  # (http.client may drop it from the connection once answered)
            response = connection.getresponse()
            if response.status not in REDIRECTS:
                yield Opened(response, current, sock)
                return
            location = response.getheader("Location")
            if not location:
                raise Refused(f"HTTP {response.status} without a Location")
            try:
                current = urljoin(current, location)
            except ValueError:
                raise Refused(
                    f"HTTP {response.status} to a malformed URL {plain(location[:200])!r}"
                ) from None
        except TimeoutError:
            raise Refused(f"no answer within {timeout:g} s") from None
        except (OSError, http.client.HTTPException) as error:
            raise Refused(plain(str(error) or type(error).__name__)) from None
        finally:
            connection.close()
    raise Refused(f"more than {MAX_REDIRECTS} redirects")


def blocks(
    answer: Opened, max_bytes: int, limit: str, each: Callable[[], None] | None = None
) -> Iterator[bytes]:
    """The answer's body a block at a time; :class:`Refused` once it is over ``max_bytes``
    (``limit`` names that bound), declared or read."""
    length = answer.header("Content-Length")
    if length.isdigit() and int(length) > max_bytes:
        raise Refused(f"{int(length)} bytes, over {limit} ({max_bytes} bytes)")
    size = 0
    while True:
        if each is not None:
            each()
        block = answer.response.read(BLOCK)
        if not block:
            return
        size += len(block)
        if size > max_bytes:
            raise Refused(f"over {limit} ({max_bytes} bytes)")
        yield block


def get(
    url: str,
    timeout: float,
    *,
    max_bytes: int,
    limit: str,
    headers: dict[str, str] | None = None,
    policy: AddressPolicy | None = None,
) -> Raw:
    """``GET url`` through :func:`opened`: the whole answer within ``timeout`` seconds, its body
    at most ``max_bytes`` (``limit`` names that bound); any status as a :class:`Raw`."""
    with opened(url, timeout, policy=policy, headers=headers) as answer:
        body = b"".join(blocks(answer, max_bytes, limit))
        return Raw(answer.response.status, dict(answer.response.getheaders()), body)
