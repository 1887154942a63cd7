"""``--fetch``: a record's files downloaded (a block at a time, up to a size), each with the
name it takes in the item; what is left out, with its reason."""

from __future__ import annotations

import http.client
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from functions.shared.addresses import AddressPolicy, Unresolvable, UnsafeAddress
from functions.shared.pinned import Deadline, pinned
from ibi import __version__

MAX_FILE_BYTES = 1 << 30  # --fetch: 1 GiB a file unless told otherwise
MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
PAGE_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+")


@dataclass(frozen=True, slots=True)
class Fetched:
    """A file downloaded for an item: where it is now, its name in the item, its type."""

    path: Path
    name: str
    content_type: str
    url: str


Fetch = Callable[[str, Path, int, float], Fetched | str]


def download(
    url: str,
    directory: Path,
    max_bytes: int,
    timeout: float,
    *,
    policy: AddressPolicy | None = None,
) -> Fetched | str:
    """``url``'s bytes into ``directory``, a block at a time; or why not (a web page, too
    large, an HTTP error, unreachable, an address refused).

    Only http(s), only public addresses (plus ``IBI_ALLOW_NETWORKS``, loopback for local mode
    and tests), each redirect hop vetted and connected to the address vetted
    (``functions.shared.pinned``), at most 5; ``timeout`` is the whole answer's head, and each
    block of the body (1 MiB) has ``timeout`` more — a server dripping bytes cannot hold an
    import. Remote text in a reason is shown with its control characters escaped.
    """
    policy = policy or _policy()
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            split = urlsplit(current)
            host = split.hostname
        except ValueError:
            return f"{url}: {_plain(current[:200])!r} is not a URL"
        if split.scheme not in {"http", "https"} or not host:
            return f"{url}: {_plain(current[:200])} is not an http(s) URL: not fetched"
        try:
            connection, target = pinned(policy, split, timeout, time.monotonic() + timeout)
        except (UnsafeAddress, Unresolvable, ValueError) as error:
            return f"{url}: not fetched: {_plain(str(error))}"
        try:
            answer = _fetch_one(
                connection,
                target,
                url=url,
                current=current,
                directory=directory,
                max_bytes=max_bytes,
                timeout=timeout,
            )
        except TimeoutError:
            return f"{url}: no answer within {timeout:g} s"
        except (OSError, http.client.HTTPException) as error:
            return f"{url}: {_plain(str(error) or type(error).__name__)}"
        finally:
            connection.close()
        if not isinstance(answer, _Redirect):
            return answer
        current = answer.location
    return f"{url}: more than {MAX_REDIRECTS} redirects"


@dataclass(frozen=True, slots=True)
class _Redirect:
    location: str


def _fetch_one(
    connection: http.client.HTTPConnection,
    target: str,
    *,
    url: str,
    current: str,
    directory: Path,
    max_bytes: int,
    timeout: float,
) -> Fetched | str | _Redirect:
    """One GET of a download: the file, a refusal, or the next hop."""
    connection.request("GET", target, headers={"User-Agent": f"ibi-import/{__version__}"})
    sock = connection.sock  # (http.client may drop it from the connection once answered)
    response = connection.getresponse()
    status = response.status
    if status in REDIRECTS:
        location = response.getheader("Location")
        if not location:
            return f"{url}: HTTP {status} without a Location"
        try:
            return _Redirect(urljoin(current, location))
        except ValueError:
            return f"{url}: HTTP {status} to a malformed URL {_plain(location[:200])!r}"
    if not 200 <= status < 300:
        return f"{url}: HTTP {status} {_plain(response.reason or '')}".rstrip()
    declared = response.getheader("Content-Type") or "application/octet-stream"
    kind = declared.partition(";")[0].strip().lower()
    if kind in PAGE_TYPES:
        return f"{url}: a web page ({_plain(kind)}), not a file"
    length = response.getheader("Content-Length") or ""
    if length.isdigit() and int(length) > max_bytes:
        return f"{url}: {int(length)} bytes, over --max-file-size {max_bytes}"
    saved = directory / f"download-{len(list(directory.iterdir()))}"

    def next_block() -> None:  # each block of the body gets ``timeout`` more
        if isinstance(sock, Deadline):
            sock.deadline = time.monotonic() + timeout

    if not _copy(response, saved, max_bytes, next_block):
        return f"{url}: over --max-file-size {max_bytes} bytes"
    media = kind if _MEDIA_TYPE.fullmatch(kind) else "application/octet-stream"
    return Fetched(saved, file_name(current), media, url)


def _policy() -> AddressPolicy:
    """Public addresses, plus the networks of ``IBI_ALLOW_NETWORKS`` (comma-separated)."""
    allowed = [n.strip() for n in os.environ.get("IBI_ALLOW_NETWORKS", "").split(",") if n.strip()]
    return AddressPolicy(allowed)


def _plain(text: str) -> str:
    """Remote text for a terminal: control characters escaped (``\\x1b`` shown, not run)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _copy(response: Any, target: Path, max_bytes: int, next_block: Callable[[], None]) -> bool:
    size = 0
    with target.open("wb") as out:
        while True:
            next_block()
            block = response.read(1 << 20)
            if not block:
                break
            size += len(block)
            if size > max_bytes:
                break
            out.write(block)
    if size > max_bytes:
        target.unlink()
        return False
    return True


def file_name(url: str) -> str:
    """A downloaded file's name in the item: the URL's last path segment, decoded, with what
    an item's path may not hold (``/``, ``\\``, controls) as ``_``; ``file`` when empty."""
    segment = unquote(urlsplit(url).path.rstrip("/").rpartition("/")[2])
    name = re.sub(r"[\x00-\x1f\x7f-\x9f/\\\ufffe\uffff]", "_", segment).strip()
    name = name.encode()[:255].decode("utf-8", "ignore")
    return name if name not in {"", ".", ".."} else "file"
