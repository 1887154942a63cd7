"""Pair lists and query strings: how the resolver and the Archives talk (spec §3, §7.10).

Answers are ``text/plain`` *pair lists* (seed 001, Table 4.2)::

    pair-list = pair *(space pair)          ; space = SP | CRLF
    pair      = name 1*SP value
    value     = word | "{" list "}"         ; e.g. {rep X ibip Y}
    word      = 1*character                 ; printable ASCII except SP, "{" and "}"

Requests are URLs whose query is ``name=value`` pairs joined by ``&`` (Table 4.1 escapes).

Decisions where the seeds are silent:

* **Values in a pair list are words, kept exactly as sent.** A ``url`` value is a URL whose
  own ``%hh`` escapes belong to it (Example 4.2: ``…/Relat%f3rio%20Final.pdf`` is the URL to
  redirect to, not text to decode), so :func:`parse_pair_list` never decodes. Free text that
  may hold spaces, braces or non-ASCII characters goes through :func:`encode_value` before it
  is put in a pair list and :func:`decode_value` after it is read.
* **One escaping for words and query values.** :func:`encode_value` keeps ASCII letters,
  digits and ``-._~!$'()*,;:@/`` and writes every other character as ``%HH`` of its UTF-8
  bytes (upper-case hex): space ``%20``, ``%`` ``%25``, ``&`` ``%26``, ``+`` ``%2B``, ``=``
  ``%3D``, ``?`` ``%3F`` (Table 4.1), ``#`` ``%23``, ``{`` ``%7B``, ``}`` ``%7D``, control
  characters and non-ASCII. The result is both a valid word and a valid query value; the
  seed's messages come out byte for byte (``rep%20sid.inpe.br/…%20ibip%20…``,
  ``GetLastEdition%20GetMetadata(oai_dc)``, ``metadata.cgi%3Fchoice%3Doai_dc``).
* **Decoding** accepts ``%hh`` in either case and reads a bare ``+`` as a space (Table 4.1
  escapes ``+`` because a bare one is a space). Bytes that are not UTF-8 are read as
  ISO 8859-1, the encoding of the seed's own example (``%f3`` is ``ó``, Example 4.2).
  ``%`` not followed by two hex digits, or a raw space, control or non-ASCII character, is
  an error. The decoded text may hold anything (``%00`` is a NUL): whoever uses it checks it
  (the persistent URL parser refuses control characters).
* **Line ends.** Table 4.2 names CRLF, so :func:`format_pair_list` writes one pair per line
  with CRLF (the seed examples print one pair per line) and no final line end.
  :func:`parse_pair_list` accepts SP, LF or CRLF between pairs, blank lines and a final line
  end; a name and its value share a line (``1*SP``), so a name left alone on its line is
  reported as a name without a value instead of silently taking the next line's name.
* **Empty values and lists.** ``{}`` (Algorithm 2 writes it for a platform software without
  IBI) is the empty list ``()``; ``{x}`` is a one-word list and stays one. An empty string
  given as a value is written ``{}``.
* **Untrusted input.** An Archive's answer is refused when longer than ``max_length``
  characters, when it holds a control, tab, lone CR or non-ASCII character, nested or
  unbalanced braces, braces inside a word, a name without a value, or a name twice.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import parse_label

DEFAULT_MAX_PAIR_LIST = 256 * 1024  # characters; Example 7.2, a full answer, is ~5 000
DEFAULT_MAX_QUERY = 16 * 1024

Value: TypeAlias = str | tuple[str, ...]
"""A pair's value: one word, or the words of a braced list (``()`` for ``{}``)."""
ValueLike: TypeAlias = str | Sequence[str]
Pairs: TypeAlias = "PairList | Mapping[str, ValueLike] | Iterable[tuple[str, ValueLike]]"

_SAFE = frozenset(string.ascii_letters + string.digits + "-._~!$'()*,;:@/")
_WORD = re.compile(r"[\x21-\x7a\x7c\x7e]+")  # Table 4.2: printable ASCII but { and }
_BAD_CHARACTER = re.compile(r"[^\x20-\x7e\r\n]|\r(?!\n)")
_TOKEN = re.compile(r"(?P<space> +)|\{(?P<list>[^{}]*)\}|(?P<word>[\x21-\x7a\x7c\x7e]+)|(?P<bad>.)")
_HEX = frozenset(string.hexdigits)
_ENCODED = re.compile(r"[\x21-\x7e]*")  # what an encoded value may hold (no space, no control)


# ---------------------------------------------------------------------------- %hh escaping


def encode_value(text: str, part: str = "value") -> str:
    """Escape ``text`` so that it is one word and one query value (module notes)."""
    if not isinstance(text, str):
        raise InvalidInput(part, f"{text!r} is not text")
    if all(char in _SAFE for char in text):
        return text
    out: list[str] = []
    for char in text:
        if char in _SAFE:
            out.append(char)
            continue
        try:
            data = char.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(part, f"{text!r} holds a lone surrogate {char!r}") from None
        out.extend(f"%{byte:02X}" for byte in data)
    return "".join(out)


def decode_value(word: str, part: str = "value", *, plus_as_space: bool = True) -> str:
    """Undo :func:`encode_value`: ``%hh`` (UTF-8, else ISO 8859-1) and ``+`` as a space.

    ``plus_as_space=False`` reads ``+`` literally, as in a URL path (RFC 3986).
    """
    if not isinstance(word, str):
        raise InvalidInput(part, f"{word!r} is not text")
    if not _ENCODED.fullmatch(word):
        bad = next(char for char in word if not "\x21" <= char <= "\x7e")
        raise InvalidInput(
            part, f"{_clip(word)!r} holds the raw character {bad!r}; write it as %hh"
        )
    if "%" not in word and not (plus_as_space and "+" in word):
        return word
    data = bytearray()
    index = 0
    while index < len(word):
        char = word[index]
        if char == "%":
            digits = word[index + 1 : index + 3]
            if len(digits) != 2 or not all(digit in _HEX for digit in digits):
                raise InvalidInput(
                    part,
                    f"{_clip(word)!r}: '%' at offset {index} is not followed by two "
                    "hexadecimal digits (write a literal % as %25)",
                )
            data.append(int(digits, 16))
            index += 3
            continue
        data.append(0x20 if plus_as_space and char == "+" else ord(char))
        index += 1
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


# ---------------------------------------------------------------------------- query strings


def encode_query(pairs: Iterable[tuple[str, str]]) -> str:
    """``name=value`` pairs joined by ``&``, both sides escaped by :func:`encode_value`."""
    encoded = []
    for name, value in pairs:
        if not isinstance(name, str) or not name:
            raise InvalidInput("query", f"a pair needs a name, got {name!r}")
        encoded.append(f"{encode_value(name, 'query')}={encode_value(value, 'query')}")
    return "&".join(encoded)


def parse_query(query: str, *, max_length: int = DEFAULT_MAX_QUERY) -> list[tuple[str, str]]:
    """Decode a query string (without its ``?``) into its pairs, in order.

    Empty segments (``a=1&&b=2``, a final ``&``) are skipped and a pair without ``=`` has the
    empty value; a pair without a name is refused. Names may repeat: the caller decides.
    """
    return [
        (decode_value(name, "query"), decode_value(value, "query"))
        for name, value in split_query(query, max_length=max_length)
    ]


def split_query(query: str, *, max_length: int = DEFAULT_MAX_QUERY) -> list[tuple[str, str]]:
    """The pairs of a query string as written, not decoded (to pass them along untouched)."""
    if not isinstance(query, str):
        raise InvalidInput("query", f"{query!r} is not text")
    if len(query) > max_length:
        raise InvalidInput("query", f"longer than {max_length} characters")
    if not _ENCODED.fullmatch(query):
        bad = next(char for char in query if not "\x21" <= char <= "\x7e")
        raise InvalidInput("query", f"holds the raw character {bad!r}; write it as %hh")
    pairs = []
    for segment in query.split("&"):
        if not segment:
            continue
        name, _, value = segment.partition("=")
        if not name:
            raise InvalidInput("query", f"{_clip(segment)!r} is a pair without a name")
        pairs.append((name, value))
    return pairs


# ---------------------------------------------------------------------------- pair lists


@dataclass(frozen=True, slots=True, init=False)
class PairList:
    """An ordered list of ``name value`` pairs, each name once; looked up by name.

    Values are words as sent (module notes): ``str`` for one word, ``tuple`` for a braced
    list. Build it from pairs, a mapping, or another pair list; it validates every name and
    word, so a pair list that exists can always be formatted.
    """

    pairs: tuple[tuple[str, Value], ...]
    _index: dict[str, int] = field(compare=False, repr=False)

    def __init__(self, pairs: Pairs = ()) -> None:
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        checked: list[tuple[str, Value]] = []
        index: dict[str, int] = {}
        for item in items:
            if not isinstance(item, tuple) or len(item) != 2:
                raise InvalidInput("pair list", f"{item!r} is not a (name, value) pair")
            name, value = item
            _check_word(name, "name")
            if name in index:
                raise InvalidInput("pair list", f"the name {name!r} appears twice")
            index[name] = len(checked)
            checked.append((name, _value(name, value)))
        object.__setattr__(self, "pairs", tuple(checked))
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[tuple[str, Value]]:
        return iter(self.pairs)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> Value:
        return self.pairs[self._index[name]][1]

    def __str__(self) -> str:
        return format_pair_list(self)

    def get(self, name: str, default: Value | None = None) -> Value | None:
        position = self._index.get(name)
        return default if position is None else self.pairs[position][1]

    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.pairs)

    def word(self, name: str) -> str | None:
        """The value of ``name`` when it is one word; ``None`` when the name is absent."""
        value = self.get(name)
        if value is None or isinstance(value, str):
            return value
        raise InvalidInput("pair list", f"{name} holds a braced list, not one word")

    def words(self, name: str) -> tuple[str, ...]:
        """The words of ``name``'s value (one word gives a 1-tuple; absent gives ``()``)."""
        value = self.get(name)
        if value is None:
            return ()
        return (value,) if isinstance(value, str) else value

    def with_pair(self, name: str, value: ValueLike) -> PairList:
        """A new pair list with ``name value`` added at the end."""
        return PairList([*self.pairs, (name, value)])

    def filter(self, keep: Callable[[str], bool]) -> PairList:
        """A new pair list with the pairs whose name ``keep`` accepts, in order."""
        return PairList([(name, value) for name, value in self.pairs if keep(name)])


def format_pair_list(pairs: Pairs, *, newline: str = "\r\n") -> str:
    """One ``name value`` per line, lines joined by CRLF (``newline`` may be LF or SP)."""
    if newline not in {"\r\n", "\n", " "}:
        raise InvalidInput("pair list", f"{newline!r} is not a separator (SP, LF or CRLF)")
    pair_list = pairs if isinstance(pairs, PairList) else PairList(pairs)
    lines = []
    for name, value in pair_list:
        text = value if isinstance(value, str) else "{" + " ".join(value) + "}"
        lines.append(f"{name} {text}")
    return newline.join(lines)


def parse_pair_list(text: str | bytes, *, max_length: int = DEFAULT_MAX_PAIR_LIST) -> PairList:
    """Read a pair list (Table 4.2) from an untrusted Archive; see the module notes."""
    if isinstance(text, bytes | bytearray):
        if len(text) > max_length:
            raise InvalidInput("pair list", f"longer than {max_length} characters")
        try:
            text = bytes(text).decode("ascii")
        except UnicodeDecodeError as error:
            raise InvalidInput(
                "pair list",
                f"byte {error.object[error.start]:#04x} at offset {error.start} "
                "is not ASCII; write non-ASCII characters as %hh",
            ) from None
    if not isinstance(text, str):
        raise InvalidInput("pair list", f"{text!r} is not text")
    if len(text) > max_length:
        raise InvalidInput("pair list", f"longer than {max_length} characters")
    bad = _BAD_CHARACTER.search(text)
    if bad:
        where = text.count("\n", 0, bad.start()) + 1
        raise InvalidInput(
            "pair list",
            f"line {where}: character {bad.group()[0]!r} is not printable ASCII; "
            "write it as %hh (pairs are separated by SP, LF or CRLF)",
        )
    pairs: list[tuple[str, Value]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        tokens = _line_tokens(line, number)
        if len(tokens) % 2:
            name = tokens[-1]
            raise InvalidInput("pair list", f"line {number}: the name {name!r} has no value")
        for position in range(0, len(tokens), 2):
            name, value = tokens[position], tokens[position + 1]
            if not isinstance(name, str):
                shown = "{" + " ".join(name) + "}"
                raise InvalidInput(
                    "pair list", f"line {number}: a name must be a word, not {shown!r}"
                )
            if name in seen:
                raise InvalidInput(
                    "pair list",
                    f"line {number}: the name {name!r} appears twice (first on line {seen[name]})",
                )
            seen[name] = number
            pairs.append((name, value))
    return PairList(pairs)


def _line_tokens(line: str, number: int) -> list[Value]:
    """The words and braced lists of one line, checking that separators stand between them."""
    tokens: list[Value] = []
    after_token = False
    for match in _TOKEN.finditer(line):
        kind = match.lastgroup
        if kind == "space":
            after_token = False
            continue
        if kind == "bad":
            raise InvalidInput("pair list", f"line {number}: {_brace_problem(line, match)}")
        if after_token:
            raise InvalidInput(
                "pair list",
                f"line {number}: {_clip(line[: match.end()])!r} has a brace inside a word "
                "(escape braces in values as %7B and %7D)",
            )
        if kind == "list":
            tokens.append(tuple(match.group("list").split()))
        else:
            tokens.append(match.group("word"))
        after_token = True
    return tokens


def _brace_problem(line: str, match: re.Match[str]) -> str:
    where = match.start()
    if match.group() == "}":
        return f"'}}' at column {where + 1} closes no '{{'"
    closing = line.find("}", where + 1)
    opening = line.find("{", where + 1)
    if closing == -1:
        return f"'{{' at column {where + 1} is not closed on its line"
    return f"braces nest at column {opening + 1}: a braced list holds words only"


# ---------------------------------------------------------------------------- forms of IBI


def forms_value(rep: str | None = None, ibip: str | None = None) -> list[str]:
    """The words of a "forms of IBI" value (Table 7.4): ``rep R``, ``ibip P`` or both."""
    if rep is None and ibip is None:
        raise InvalidInput("ibi", "give the rep form, the ibip form or both")
    words: list[str] = []
    for form, label in (("rep", rep), ("ibip", ibip)):
        if label is not None:
            words += [form, _label_of_form(label, form)]
    return words


def parse_forms(words: str | Sequence[str]) -> dict[str, str]:
    """``{rep R ibip P}`` (or ``rep%20R%20ibip%20P`` decoded) -> ``{"rep": R, "ibip": P}``.

    Labels are validated and canonical; ``{}`` gives ``{}`` (an item without IBI, such as a
    platform software, Algorithm 2).
    """
    items = words.split() if isinstance(words, str) else list(words)
    if len(items) % 2:
        raise InvalidInput(
            "ibi", f"{' '.join(items)!r} is not rep R, ibip P or rep R ibip P (Table 7.4)"
        )
    forms: dict[str, str] = {}
    for position in range(0, len(items), 2):
        form, label = items[position], items[position + 1]
        if form not in {"rep", "ibip"}:
            raise InvalidInput("ibi", f"{form!r} is not a form of IBI (rep or ibip)")
        if form in forms:
            raise InvalidInput("ibi", f"the {form} form is given twice")
        forms[form] = _label_of_form(label, form)
    return forms


def label_of(pairs: PairList, name: str) -> str | None:
    """The label a "forms of IBI" pair names (its ibip form first); None when the pair is
    absent or not forms of a valid IBI (an Archive's answer is never trusted to be)."""
    value = pairs.get(name)
    if not value or isinstance(value, str):
        return None
    try:
        forms = parse_forms(value)
    except InvalidInput:
        return None
    return forms.get("ibip") or forms.get("rep")


def _label_of_form(label: str, form: str) -> str:
    parsed = parse_label(label)
    if parsed.form != form:
        raise InvalidIBI(form, f"{label!r} is an {parsed.form} label, not a {form} label")
    return parsed.label


# ---------------------------------------------------------------------------- helpers


def _value(name: str, value: object) -> Value:
    if isinstance(value, str):
        if value == "":
            return ()
        _check_word(value, f"value of {name}")
        return value
    if isinstance(value, Sequence):
        for word in value:
            _check_word(word, f"value of {name}")
        return tuple(value)
    raise InvalidInput("pair list", f"the value of {name!r} is not a word or a list of words")


def _check_word(word: object, what: str) -> None:
    if not isinstance(word, str) or not _WORD.fullmatch(word):
        raise InvalidInput(
            "pair list",
            f"{what}: {_clip(word)!r} is not a word (printable ASCII without space or braces; "
            "escape other characters with encode_value)",
        )


def _clip(text: object, limit: int = 80) -> object:
    if isinstance(text, str) and len(text) > limit:
        return text[:limit] + "…"
    return text
