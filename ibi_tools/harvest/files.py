"""``--fetch``: a record's files downloaded (a block at a time, up to a size), each with the
name it takes in the item; what is left out, with its reason."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from functions.shared.addresses import AddressPolicy
from ibi_tools.harvest.outbound import Opened, Refused, blocks, opened, plain

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

    Through the importer's one outbound path (:func:`.outbound.opened`: http(s) only, public
    addresses only plus ``IBI_ALLOW_NETWORKS``, each redirect hop vetted and pinned, at most
    5); ``timeout`` is the answer's head, redirects included, and each block of the body
    (1 MiB) has ``timeout`` more — a server dripping bytes cannot hold an import. Remote text
    in a reason is shown with its control characters escaped.
    """
    try:
        with opened(url, timeout, policy=policy) as answer:
            return _saved(answer, url, directory, max_bytes, timeout)
    except Refused as refused:
        return f"{url}: {refused}"


def _saved(
    answer: Opened, url: str, directory: Path, max_bytes: int, timeout: float
) -> Fetched | str:
    """The answer's body in a new file of ``directory``; or why not."""
    status = answer.response.status
    if not 200 <= status < 300:
        return f"{url}: HTTP {status} {plain(answer.response.reason or '')}".rstrip()
    declared = answer.header("Content-Type") or "application/octet-stream"
    kind = declared.partition(";")[0].strip().lower()
    if kind in PAGE_TYPES:
        return f"{url}: a web page ({plain(kind)}), not a file"
    saved = directory / f"download-{len(list(directory.iterdir()))}"
    try:
        with saved.open("wb") as out:
            for block in blocks(
                answer, max_bytes, "--max-file-size", lambda: answer.extend(timeout)
            ):
                out.write(block)
    except BaseException:
        saved.unlink(missing_ok=True)
        raise
    media = kind if _MEDIA_TYPE.fullmatch(kind) else "application/octet-stream"
    return Fetched(saved, file_name(answer.url), media, url)


def file_name(url: str) -> str:
    """A downloaded file's name in the item: the URL's last path segment, decoded, with what
    an item's path may not hold (``/``, ``\\``, controls) as ``_``; ``file`` when empty."""
    segment = unquote(urlsplit(url).path.rstrip("/").rpartition("/")[2])
    name = re.sub(r"[\x00-\x1f\x7f-\x9f/\\\ufffe\uffff]", "_", segment).strip()
    name = name.encode()[:255].decode("utf-8", "ignore")
    return name if name not in {"", ".", ".."} else "file"
