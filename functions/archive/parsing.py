"""Reading what a deposit request sends: its fields, IBIs, files and public paths.

Each reader raises :class:`BadRequest` with a message that says what was expected. Nothing is
converted silently: a size is a JSON integer (not ``"12"``, ``1.5`` nor ``true``), a path or
a checksum a string; and no string anywhere in a request may hold a character that a page or
the oai_dc record could not carry (:data:`UNSAFE_TEXT`).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from functions.archive.domain.fields import Request, settable
from functions.archive.errors import BadRequest
from functions.archive.model import Forms, OaiSource, StoredFile
from ibi.core.dublin_core import DC_ELEMENTS
from ibi.core.errors import InvalidInput

MAX_FILE_BYTES = 5 * 1024**3  # S3's limit for one PUT, so for one presigned upload
MAX_PATH_BYTES = 768  # an S3 key has at most 1,024 bytes: the rest is for the item's label
# (a file name of 255 bytes, a file system's most, fits: with 8 folders of 50 bytes above it)
MAX_MEDIA_TYPE = 255
# Refused in every string of a request, keys included: the C0 controls but tab, LF and CR;
# DEL and the C1 controls; lone surrogates (UTF-8 cannot encode them, so no page could be
# sent); U+FFFE and U+FFFF. XML 1.0, the oai_dc record's, forbids most of them.
UNSAFE_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
_WORD = r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"  # an RFC 9110 token
_QUOTED = r'"[ !#-\[\]-~]*"'  # printable ASCII but " and \
MEDIA_TYPE = re.compile(rf"{_WORD}/{_WORD}(?: *; *{_WORD}=(?:{_WORD}|{_QUOTED}))*")
# Fields that hold a string, or null to leave out or clear them.
STRING_FIELDS = {"subsystem", "url", "language", "default_file", "original_sha256"}

# The fields each request may give: the field table's (domain/fields.py). Files join an item
# only through an upload and its check (POST /api/item/files).
CREATE_FIELDS = set(settable(Request.CREATE))
# A new original (POST /api/items) may also say which OAI-PMH record it was imported from.
ORIGINAL_FIELDS = set(settable(Request.ORIGINAL))
UPDATE_FIELDS = set(settable(Request.UPDATE))  # "ibi": only to add the item's other form


def fields_of(body: Any, allowed: set[str], what: str) -> dict[str, Any]:
    """The fields of a request's JSON object, each of the type it must have."""
    if not isinstance(body, dict):
        raise BadRequest(f"{what}: the body must be a JSON object")
    checked_text(body)
    unknown = set(body) - allowed
    if unknown:
        raise BadRequest(f"{what}: unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    for name in sorted(STRING_FIELDS & set(body)):
        if body[name] is not None and not isinstance(body[name], str):
            raise BadRequest(f'"{name}" must be a string (or null)')
    if "content_type" in body and not isinstance(body["content_type"], str):
        raise BadRequest('"content_type" must be "Data" or "Metadata"')
    _check_links(body)
    return body


def _check_links(body: dict[str, Any]) -> None:
    translation, metadata = body.get("translation"), body.get("metadata")
    if isinstance(translation, dict):
        for name in ("language", "url"):
            if name in translation and not isinstance(translation[name], str):
                raise BadRequest(f'"translation.{name}" must be a string')
    if isinstance(metadata, dict) and not isinstance(metadata.get("format", ""), str | None):
        raise BadRequest('metadata "format" is "oai_dc" or absent (free format)')


def checked_text(data: Any, where: str = "the body") -> Any:
    """``data`` (parsed JSON), once no string in it, key or value, holds :data:`UNSAFE_TEXT`."""
    stack = [(data, where)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, str):
            _check_text(value, at)
        elif isinstance(value, dict):
            for key, child in value.items():
                _check_text(key, f"a field name in {at}")
                stack.append((child, key if at == where else f"{at}.{key}"))
        elif isinstance(value, list):
            stack.extend((child, f"{at}[{index}]") for index, child in enumerate(value))
    return data


def _check_text(text: str, where: str) -> None:
    found = UNSAFE_TEXT.search(text)
    if found:
        raise BadRequest(
            f"{where}: character U+{ord(found.group()):04X} at position {found.start()} of "
            f"{text[:80]!r} is not allowed (control characters but tab and line breaks, lone "
            "surrogates, U+FFFE and U+FFFF are refused)"
        )


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


def oai_source(value: Any) -> OaiSource | None:
    """``"oai_source": {"repository", "identifier", "datestamp"?}``: the OAI-PMH record an item
    was imported from (``ibi archive import``), or None when absent or null."""
    if value is None:
        return None
    shape = '"oai_source" is {"repository": base URL, "identifier": OAI identifier, "datestamp"?}'
    if not isinstance(value, dict) or set(value) - {"repository", "identifier", "datestamp"}:
        raise BadRequest(shape)
    fields = (value.get("repository"), value.get("identifier"))
    datestamp = value.get("datestamp")
    if not all(isinstance(v, str) for v in fields) or not isinstance(datestamp, str | None):
        raise BadRequest(shape)
    try:
        return OaiSource(str(fields[0]), str(fields[1]), datestamp)
    except InvalidInput as error:
        raise BadRequest(str(error)) from None


def parse_files(value: Any) -> tuple[StoredFile, ...]:
    if not isinstance(value, list):
        raise BadRequest('"files" must be a list of {"path", "sha256", "size"[, "content_type"]}')
    checked_text(value, "files")
    files = [_declared_file(entry) for entry in value]
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        raise BadRequest('"files": a path appears twice')
    return tuple(files)


def _declared_file(entry: Any) -> StoredFile:
    """One ``{"path", "sha256", "size", "content_type"?}``, each of its type, nothing converted."""
    shape = '{"path": "<string>", "sha256": "<64 hex digits>", "size": <bytes>}'
    if not isinstance(entry, dict) or set(entry) - {"path", "sha256", "size", "content_type"}:
        raise BadRequest(f'"files": each entry is {shape} (and "content_type"?)')
    path, sha256, size = entry.get("path"), entry.get("sha256"), entry.get("size")
    content_type = entry.get("content_type", "application/octet-stream")
    if not isinstance(path, str) or not isinstance(sha256, str):
        raise BadRequest(f'"files": {shape}: "path" and "sha256" are strings')
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise BadRequest(
            f'"files": {path[:80]!r}…: a path has at most {MAX_PATH_BYTES} bytes of UTF-8 '
            f"({MAX_PATH_BYTES} ASCII characters, fewer accented ones)"
        )
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_FILE_BYTES:
        raise BadRequest(
            f'"files": {path!r}: "size" must be a whole number of bytes from 0 to '
            f"{MAX_FILE_BYTES} (5 GiB, the most one upload can carry), not {size!r}"[:400]
        )
    if (
        not isinstance(content_type, str)
        or len(content_type) > MAX_MEDIA_TYPE
        or not MEDIA_TYPE.fullmatch(content_type)
    ):
        raise BadRequest(
            f'"files": {path!r}: "content_type" must be a media type such as "text/plain" '
            f'or "text/plain; charset=utf-8" (at most {MAX_MEDIA_TYPE} characters)'
        )
    try:
        return StoredFile(path=path, sha256=sha256.lower(), size=size, content_type=content_type)
    except InvalidInput as error:
        raise BadRequest(f'"files": {error}') from None


def declared_files(
    data: Any, fields: frozenset[str] = frozenset({"files", "default_file"})
) -> tuple[StoredFile, ...]:
    """The files a request declares: ``{"files": [{"path", "sha256", "size", …}]}``, with no
    field but ``fields``."""
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise BadRequest('the body is {"files": [{"path", "sha256", "size", "content_type"?}]}')
    if unknown := sorted(set(data) - fields):
        raise BadRequest(f"unknown fields {unknown}: the body takes {sorted(fields)}")
    checked_text(data)
    if data.get("default_file") is not None and not isinstance(data["default_file"], str):
        raise BadRequest('"default_file" must be the path of one of the item\'s files')
    return parse_files(data["files"])


def label_of(text: str) -> str:
    """The key an item is stored under, from either form of its IBI."""
    try:
        return Forms.of(text).key
    except InvalidInput as error:
        raise BadRequest(f"not an IBI: {error}") from None


def forms_of(value: Any) -> Forms:
    """An IBI given as a label or as ``{"rep": …, "ibip": …}``."""
    if not isinstance(value, str | dict) or (
        isinstance(value, dict) and not all(isinstance(v, str | None) for v in value.values())
    ):
        raise BadRequest('an IBI is a label, or {"rep": "<label>", "ibip": "<label>"}')
    try:
        return Forms.from_mapping(value)
    except InvalidInput as error:
        raise BadRequest(f"not an IBI: {error}") from None


def ibi_from(path: str) -> tuple[str, str]:
    """``<ibi>[/<file path>]`` from a public path: the IBI's shape says where it ends.

    A rep label has four segments (``sub/word/YYYY/MM.DD.hh.mm…``), an ibip label two
    (``PREFIX/SUFFIX``). The rep shape is tried first: its last two segments are a date, which
    no ibip label followed by a file path spells by chance, while a rep's first two segments
    could read as an ibip label.
    """
    text = unquote(path)
    parts = text.split("/")
    for segments in (4, 2):
        if len(parts) >= segments:
            try:
                label = Forms.of("/".join(parts[:segments])).key
            except InvalidInput:
                continue
            return label, "/".join(parts[segments:])
    raise BadRequest(f"{text!r} does not start with an IBI")
