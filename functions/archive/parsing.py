"""Reading what a deposit request sends: its fields, IBIs, files and public paths.

Each reader raises :class:`BadRequest` with a message that says what was expected.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from functions.archive.errors import BadRequest
from functions.archive.model import DC_ELEMENTS, Forms, StoredFile
from ibi.core.errors import InvalidInput

# Files join an item only through an upload and its check (POST /api/item/files).
CREATE_FIELDS = {
    "ibi",
    "subsystem",
    "url",
    "content_type",
    "language",
    "transferable",
    "listable",
    "dc",
}
UPDATE_FIELDS = {
    "url",
    "default_file",
    "content_type",
    "language",
    "transferable",
    "listable",
    "dc",
}


def fields_of(body: Any, allowed: set[str], what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest(f"{what}: the body must be a JSON object")
    unknown = set(body) - allowed
    if unknown:
        raise BadRequest(f"{what}: unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    return body


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f'"{name}" must be true or false')
    return value


def dublin_core(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise BadRequest('"dc" must be an object of Dublin Core elements, e.g. {"title": ["…"]}')
    result: dict[str, tuple[str, ...]] = {}
    for element, given in value.items():
        values = [given] if isinstance(given, str) else given
        if element not in DC_ELEMENTS:
            raise BadRequest(
                f'"dc": {element!r} is not a Dublin Core element ({", ".join(DC_ELEMENTS)})'
            )
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise BadRequest(f'"dc.{element}" must be a string or a list of strings')
        result[element] = tuple(values)
    return result


def parse_files(value: Any) -> tuple[StoredFile, ...]:
    if not isinstance(value, list):
        raise BadRequest('"files" must be a list of {"path", "sha256", "size"[, "content_type"]}')
    files = []
    for entry in value:
        if not isinstance(entry, dict) or set(entry) - {"path", "sha256", "size", "content_type"}:
            raise BadRequest(f'"files": {entry!r} is not {{"path", "sha256", "size"}}')
        try:
            files.append(
                StoredFile(
                    path=str(entry["path"]),
                    sha256=str(entry["sha256"]).lower(),
                    size=int(entry["size"]),
                    content_type=str(entry.get("content_type", "application/octet-stream")),
                )
            )
        except (KeyError, ValueError, TypeError) as error:
            raise BadRequest(f'"files": {entry!r}: {error}') from None
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        raise BadRequest('"files": a path appears twice')
    return tuple(files)


def declared_files(data: Any) -> tuple[StoredFile, ...]:
    """The files a request declares: ``{"files": [{"path", "sha256", "size", …}]}``."""
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise BadRequest('the body is {"files": [{"path", "sha256", "size", "content_type"?}]}')
    return parse_files(data["files"])


def label_of(text: str) -> str:
    """The key an item is stored under, from either form of its IBI."""
    try:
        return Forms.of(text).key
    except InvalidInput as error:
        raise BadRequest(f"not an IBI: {error}") from None


def forms_of(value: Any) -> Forms:
    """An IBI given as a label or as ``{"rep": …, "ibip": …}``."""
    try:
        return Forms.from_mapping(value)
    except InvalidInput as error:
        raise BadRequest(f"not an IBI: {error}") from None


def ibi_from(path: str) -> tuple[str, str]:
    """``<ibi>[/<file path>]`` from a public path: the IBI's shape says where it ends."""
    text = unquote(path)
    parts = text.split("/")
    for length in (1, 4):  # ibip: PREFIX/SUFFIX; rep: sub/word/YYYY/MM.DD.hh.mm…
        if len(parts) > length:
            candidate = "/".join(parts[: length + 1])
            try:
                label = Forms.of(candidate).key
            except InvalidInput:
                continue
            return label, "/".join(parts[length + 1 :])
    raise BadRequest(f"{text!r} does not start with an IBI")
