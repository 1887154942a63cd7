"""Persistent URLs: what a browser asks of the resolver (spec §5.1, §5.2; seed 001 §6.1).

::

    persistent-URL = "http://" resolver "/" IBI [mdf] [path-absolute] ["?" query]

:func:`parse_persistent_url` takes what follows the resolver's host, e.g.
``/8JMKD3MGP8W/35MMLL8!:(oai_dc)/reference.bib?ibiurl.requireditemstatus=Original&x=1``.

Decisions where the seeds are silent:

* **Input** is the request target as sent: printable ASCII, no spaces, percent-encoded
  (API Gateway's ``rawPath`` + ``?`` + ``rawQueryString``). At most ``max_length``
  characters. A raw ``#`` is refused (a fragment never reaches a server).
* **Percent-encoding in the path.** The whole path is decoded first (``%hh`` as UTF-8, else
  ISO 8859-1; ``+`` stays ``+``), then split: the IBI and the modifier are read after
  decoding (``%21`` is ``!``, ``%2F`` is ``/``), and the file path is kept decoded
  (``/doc/a%20b.pdf`` -> ``/doc/a b.pdf``). A decoded control character (``%00``, ``%0A``)
  or a ``.``/``..`` segment in the file path is refused. A lone final ``/`` is no file path.
* **Where the IBI ends.** The IBI is read case-insensitively. A ``rep`` IBI has four segments
  (``subdomain/word[.port]/YYYY/MM.DD.hh.mm[.ss[.f]]``), an ``ibip`` two; the modifier starts
  at the first ``!``, ``+``, ``:`` or parenthesis of the IBI's last segment and ends at the
  next ``/``.
  When the first four segments are a valid ``rep`` IBI that reading wins, otherwise the first
  two must be a valid ``ibip`` (so ``/LK47B6W/362SFKH/2009/07.21.13.23.pdf`` is an ibip with a
  file path).
* **Query.** ``ibiurl.*`` names are matched in any case; the two known ones may appear once
  each and an unknown ``ibiurl.*`` pair is refused (a typo must not silently change what is
  resolved). ``ibiurl.requireditemstatus`` accepts only ``Original`` (any case).
  ``ibiurl.verblist`` is decoded (``+`` is a space) and read verb by verb. Every other pair is
  kept as written (not decoded), in order, to be passed along untouched.
* **Verb list** (``parsedibiurl.verblist``): :func:`ibi.core.relations.union_of_verbs` of the
  modifier's verbs and ``ibiurl.verblist``; the result must be one of the 14 orders, so
  ``/X:?ibiurl.verblist=GetLastEdition`` (``:!``) is refused.

Every refusal is an :class:`InvalidInput` whose ``part`` is ``path``, ``ibi``, ``modifier``
or ``query`` — a 400 answer (§7.7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote, urlsplit

from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import Label, parse_label
from ibi.core.pairlist import decode_value, encode_value, split_query
from ibi.core.relations import (
    ITEM_ITSELF,
    Relation,
    Verb,
    format_verb_list,
    parse_modifier,
    parse_verb_list,
    relation_for_verbs,
    union_of_verbs,
    wants_file_list,
)

__all__ = [
    "DEFAULT_MAX_PERSISTENT_URL",
    "PersistentURL",
    "Verb",
    "parse_ibi_or_persistent_url",
    "parse_persistent_url",
]

DEFAULT_MAX_PERSISTENT_URL = 8192
REQUIRED_ITEM_STATUS = "ibiurl.requireditemstatus"
VERB_LIST = "ibiurl.verblist"
_MODIFIER_START = "!+:()"  # a label never holds these; a modifier starts with one


@dataclass(frozen=True, slots=True)
class PersistentURL:
    """A parsed persistent URL; ``verbs`` is computed (and checked) from the rest."""

    ibi: Label
    modifier: Relation = ITEM_ITSELF
    file_path: str | None = None
    required_item_status: Literal["Original"] | None = None
    query_verbs: tuple[Verb, ...] = ()
    other_pairs: tuple[tuple[str, str], ...] = ()
    verbs: tuple[Verb, ...] = field(init=False)

    def __post_init__(self) -> None:
        if self.file_path is not None:
            _check_file_path(self.file_path)
        verbs = union_of_verbs(self.modifier.steps, self.query_verbs)
        try:
            relation_for_verbs(verbs)
        except InvalidInput as error:
            after = f" after the modifier {self.modifier.modifier_text!r}" if self.modifier else ""
            raise InvalidInput("query", f"{VERB_LIST}{after}: {error.reason}") from None
        object.__setattr__(self, "verbs", verbs)

    @property
    def relation(self) -> Relation:
        """The related item asked for: ``!:(oai_dc)`` -> ``.lastedition.metadata(oai_dc)``."""
        return relation_for_verbs(self.verbs)

    @property
    def wants_file_list(self) -> bool:
        return wants_file_list(self.verbs)

    @property
    def verb_list(self) -> str:
        """``parsedibiurl.verblist``: the verbs, space-separated (``""`` when none)."""
        return format_verb_list(self.verbs)

    @property
    def passed_query(self) -> str:
        """The pairs the resolver does not interpret, as written, joined by ``&``."""
        return "&".join(f"{name}={value}" for name, value in self.other_pairs)

    def forwarded_pairs(self) -> list[tuple[str, str]]:
        """The ``parsedibiurl.*`` pairs of Table 6.6 that go to the Archives (decoded).

        ``parsedibiurl.requireditemstatus`` is *not* among them (§5.2): a lying Archive must
        not learn that an original is wanted.
        """
        pairs = [("parsedibiurl.ibi", self.ibi.label)]
        if self.file_path is not None:
            pairs.append(("parsedibiurl.filepath", self.file_path))
        if self.verbs:
            pairs.append(("parsedibiurl.verblist", self.verb_list))
        return pairs

    def path_and_query(self) -> str:
        """The canonical text: ``/IBI`` + modifier + path + ``?`` + ibiurl pairs, then the rest.

        :func:`parse_persistent_url` reads it back to an equal value.
        """
        text = "/" + self.ibi.label + self.modifier.modifier_text
        if self.file_path is not None:
            text += encode_value(self.file_path, "path")
        query = []
        if self.required_item_status is not None:
            query.append(f"{REQUIRED_ITEM_STATUS}={self.required_item_status}")
        if self.query_verbs:
            query.append(f"{VERB_LIST}=" + "+".join(str(verb) for verb in self.query_verbs))
        query += [f"{name}={value}" for name, value in self.other_pairs]
        return text + ("?" + "&".join(query) if query else "")


def parse_persistent_url(
    path_and_query: str, *, max_length: int = DEFAULT_MAX_PERSISTENT_URL
) -> PersistentURL:
    """Read what follows the resolver's host in a persistent URL (module notes)."""
    text = path_and_query
    if not isinstance(text, str):
        raise InvalidInput("path", f"{text!r} is not text")
    if len(text) > max_length:
        raise InvalidInput("path", f"the persistent URL is longer than {max_length} characters")
    for offset, char in enumerate(text):
        if not "\x21" <= char <= "\x7e":
            raise InvalidInput(
                "path",
                f"raw character {char!r} at offset {offset}: a request target is printable "
                "ASCII without spaces (percent-encode the rest)",
            )
    if "#" in text:
        raise InvalidInput("path", "a fragment ('#') is never sent to a server")
    raw_path, question, raw_query = text.partition("?")
    if not raw_path.startswith("/"):
        raise InvalidInput("path", f"{_clip(raw_path)!r} does not start with '/'")
    path = decode_value(raw_path, "path", plus_as_space=False)
    _refuse_control(path, "path", "the path")
    ibi, modifier_text, file_path = _split_path(path[1:])
    modifier = parse_modifier(modifier_text)
    status, query_verbs, others = _read_query(raw_query) if question else (None, (), ())
    return PersistentURL(
        ibi=ibi,
        modifier=modifier,
        file_path=file_path,
        required_item_status=status,
        query_verbs=query_verbs,
        other_pairs=others,
    )


def parse_ibi_or_persistent_url(text: str) -> PersistentURL:
    """An IBI as a person gives it: a label in either form (a final ``/`` ignored), or a
    whole persistent URL pasted from a browser, ``http[s]://resolver/IBI[mdf][/path][?query]``.

    A label is the URL of the item itself (no modifier, no path). A URL's fragment is dropped
    and characters a browser shows unencoded (spaces, accents) are percent-encoded before it
    is read by :func:`parse_persistent_url`; what it refuses is refused here.
    """
    if not isinstance(text, str):
        raise InvalidIBI("ibi", f"{text!r} is not text")
    stripped = text.strip()
    if not stripped.lower().startswith(("http://", "https://")):
        return PersistentURL(ibi=parse_label(stripped.rstrip("/") or stripped))
    split = urlsplit(stripped)
    if not split.netloc:
        raise InvalidInput("path", f"{_clip(text)!r} names no resolver (http://HOST/IBI)")
    target = quote(split.path, safe=_URL_SAFE) + (
        "?" + quote(split.query, safe=_URL_SAFE) if split.query else ""
    )
    if target in {"", "/"}:
        raise InvalidIBI(
            "ibi", f"{_clip(text)!r} holds no IBI: a persistent URL is http://resolver/IBI"
        )
    return parse_persistent_url(target)


_URL_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "#")  # % kept as is


def _split_path(path: str) -> tuple[Label, str, str | None]:
    """``IBI[mdf][/file path]`` -> (label, modifier text, file path)."""
    if not path:
        raise InvalidIBI("ibi", "the persistent URL holds no IBI (expected /IBI[modifier][/path])")
    segments = path.split("/")
    errors: list[InvalidInput] = []
    # rep: subdomain/word[.port]/YYYY/MM.DD.hh.mm[.ss[.f]] — four segments, the third a year.
    candidates = []
    if len(segments) >= 4 and segments[2].isdigit():
        candidates.append(4)
    if len(segments) >= 2:
        candidates.append(2)
    for count in candidates:
        last = segments[count - 1]
        cut = next((i for i, char in enumerate(last) if char in _MODIFIER_START), len(last))
        label_text = "/".join([*segments[: count - 1], last[:cut]])
        try:
            label = parse_label(label_text)
        except InvalidInput as error:
            errors.append(error)
            continue
        return label, last[cut:], _file_path(segments[count:])
    if errors:
        first = errors[0]
        raise InvalidIBI("ibi", f"{_clip(path)!r} does not start with a valid IBI: {first}")
    raise InvalidIBI(
        "ibi",
        f"{_clip(path)!r} does not start with an IBI: PREFIX/SUFFIX (ibip) or "
        "subdomain/word[.port]/YYYY/MM.DD.hh.mm[.ss[.f]] (rep)",
    )


def _file_path(segments: list[str]) -> str | None:
    if not segments or segments == [""]:
        return None
    return _check_file_path("/" + "/".join(segments))


def _check_file_path(path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/") or path == "/":
        raise InvalidInput("path", f"{path!r} is not a file path (/name, /dir/name …)")
    _refuse_control(path, "path", "the file path")
    if any(segment in {".", ".."} for segment in path.split("/")):
        raise InvalidInput("path", f"{_clip(path)!r} holds a '.' or '..' segment")
    return path


def _read_query(
    raw_query: str,
) -> tuple[Literal["Original"] | None, tuple[Verb, ...], tuple[tuple[str, str], ...]]:
    status: Literal["Original"] | None = None
    verbs: tuple[Verb, ...] = ()
    seen: set[str] = set()
    others: list[tuple[str, str]] = []
    for raw_name, raw_value in split_query(raw_query, max_length=len(raw_query)):
        try:
            name = decode_value(raw_name, "query").lower()
        except InvalidInput:  # not a name of ours: pass it along as written
            name = raw_name
        if not name.startswith("ibiurl."):
            others.append((raw_name, raw_value))
            continue
        if name in seen:
            raise InvalidInput("query", f"{name} appears twice")
        seen.add(name)
        value = decode_value(raw_value, "query")
        _refuse_control(value, "query", name)
        if name == REQUIRED_ITEM_STATUS:
            if value.lower() != "original":
                raise InvalidInput(
                    "query", f"{REQUIRED_ITEM_STATUS} is {_clip(value)!r}; only Original is allowed"
                )
            status = "Original"
        elif name == VERB_LIST:
            verbs = parse_verb_list(value, "query")
        else:
            raise InvalidInput(
                "query",
                f"{_clip(name)!r} is not a pair the resolver knows "
                f"({REQUIRED_ITEM_STATUS}, {VERB_LIST})",
            )
    return status, verbs, tuple(others)


def _refuse_control(text: str, part: str, what: str) -> None:
    for char in text:
        if char < "\x20" or "\x7f" <= char <= "\x9f":
            raise InvalidInput(part, f"{what} decodes to the control character {char!r}")


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
