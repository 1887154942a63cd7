"""``--fetch``: a record's files downloaded (a block at a time, up to a size), each with the
name it takes in the item; what is left out, with its reason."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ibi import __version__

MAX_FILE_BYTES = 1 << 30  # --fetch: 1 GiB a file unless told otherwise
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


def download(url: str, directory: Path, max_bytes: int, timeout: float) -> Fetched | str:
    """``url``'s bytes into ``directory``, a block at a time; or why not (a web page, too
    large, an HTTP error, unreachable)."""
    request = urllib.request.Request(url, headers={"User-Agent": f"ibi-import/{__version__}"})  # noqa: S310 - http(s) URLs only (file_urls)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            declared = response.headers.get("Content-Type") or "application/octet-stream"
            kind = declared.partition(";")[0].strip().lower()
            if kind in PAGE_TYPES:
                return f"{url}: a web page ({kind}), not a file"
            length = response.headers.get("Content-Length") or ""
            if length.isdigit() and int(length) > max_bytes:
                return f"{url}: {int(length)} bytes, over --max-file-size {max_bytes}"
            target = directory / f"download-{len(list(directory.iterdir()))}"
            if not _copy(response, target, max_bytes):
                return f"{url}: over --max-file-size {max_bytes} bytes"
            name = file_name(response.url or url)
    except urllib.error.HTTPError as error:
        return f"{url}: HTTP {error.code} {error.reason}"
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as error:
        return f"{url}: {getattr(error, 'reason', error)}"
    media = kind if _MEDIA_TYPE.fullmatch(kind) else "application/octet-stream"
    return Fetched(target, name, media, url)


def _copy(response: Any, target: Path, max_bytes: int) -> bool:
    size = 0
    with target.open("wb") as out:
        while block := response.read(1 << 20):
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
