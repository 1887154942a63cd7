"""Verbs, modifiers and relations: what a persistent URL asks for (spec §5.1 to §5.3, §6).

One idea, three spellings (seed 001, Tables 6.1, 6.4, 6.5 and 7.5):

=================  ==================  ========================
verb               modifier symbol     relation qualifier
=================  ==================  ========================
``GetLastEdition`` ``!``               ``.lastedition``
``GetTranslation`` ``+`` ``+(pt-BR)``  ``.translation(pt-BR)``
``GetMetadata``    ``:`` ``:(oai_dc)`` ``.metadata(oai_dc)``
``GetFileList``    —                   — (changes the URL, not the item)
=================  ==================  ========================

A :class:`Relation` is a sequence of the first three that follows
``([u [t]] | [t [u]]) [m [t]]``: 14 non-empty orders, the 14 modifiers of Table 6.2, plus the
empty relation (the item itself). Read left to right: ``!:(oai_dc)`` is the oai_dc metadata
of the last edition, ``+!`` the last edition of the translation.

Decisions where the seeds are silent:

* A language is ISO 639-1 (two letters) and a country ISO 3166-1 alpha-2 (two letters); only
  their shape is checked. Any case is accepted and written ``pt-BR``. Keywords (verb names,
  ``.lastedition``, ``oai_dc``) are also accepted in any case and written canonically.
* The verb list of a persistent URL is the modifier's verbs followed by the verbs of
  ``ibiurl.verblist`` that the modifier does not already give (:func:`union_of_verbs`);
  ``GetFileList`` counts once, anywhere. The result must still be a valid order.
* When an answer lacks ``url<r>``, :func:`next_hop` names the ``ibi…`` pair to chase and what
  is still wanted of the item it names: the longest known ``ibi<prefix of r>`` first (the rest
  of ``r`` is then asked of that item), and ``ibi.nextedition`` — with the whole of ``r`` —
  when ``r`` starts with ``.lastedition`` (the worked example of §5.3).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList

VerbName = Literal["GetLastEdition", "GetTranslation", "GetMetadata", "GetFileList"]
VERB_NAMES: tuple[VerbName, ...] = get_args(VerbName)
RelationKind = Literal["ibi", "url", "contenttype", "state", "timestamp"]
RELATION_KINDS: tuple[RelationKind, ...] = get_args(RelationKind)
METADATA_FORMATS = ("oai_dc",)

# Table 6.2, in its order.
MODIFIERS = (
    ":",
    ":+",
    "!",
    "!+",
    "!:",
    "!+:",
    "!:+",
    "!+:+",
    "+",
    "+!",
    "+:",
    "+!:",
    "+:+",
    "+!:+",
)
_ORDERS = frozenset(("", *MODIFIERS))

_SYMBOL: dict[VerbName, str] = {
    "GetLastEdition": "!",
    "GetTranslation": "+",
    "GetMetadata": ":",
    "GetFileList": "",
}
_QUALIFIER: dict[VerbName, str] = {
    "GetLastEdition": ".lastedition",
    "GetTranslation": ".translation",
    "GetMetadata": ".metadata",
}
_BY_NAME: dict[str, VerbName] = {name.lower(): name for name in VERB_NAMES}
_BY_SYMBOL: dict[str, VerbName] = {symbol: name for name, symbol in _SYMBOL.items() if symbol}
_BY_QUALIFIER: dict[str, VerbName] = {word[1:]: name for name, word in _QUALIFIER.items()}

_PARAMETER = r"(?:\((?P<parameter>[^()]*)\))?"
_VERB = re.compile(r"(?P<word>[A-Za-z]+)" + _PARAMETER)
_STEP = re.compile(r"\.(?P<word>[A-Za-z]+)" + _PARAMETER)
_MODIFIER_STEP = re.compile(r"(?P<word>[!+:])" + _PARAMETER)
_LANGUAGE = re.compile(r"([A-Za-z]{2})(?:-([A-Za-z]{2}))?")
_VERB_SEPARATORS = re.compile(r"[ +]+")

T = TypeVar("T")


def _check_order(steps: tuple[Verb, ...], part: str, shown: str) -> None:
    shape = "".join(_SYMBOL[step.name] for step in steps)
    if shape not in _ORDERS:
        what = repr(shape) if shown == shape else f"{shown!r} asks for {shape!r}, which"
        raise InvalidInput(
            part,
            f"{what} is not an allowed order of last edition (!), translation (+) and "
            f"metadata (:); the 14 allowed: {' '.join(MODIFIERS)}",
        )


# ---------------------------------------------------------------------------- parameters


def language_tag(text: str, part: str = "language") -> str:
    """``pt``, ``PT-br`` -> ``pt``, ``pt-BR`` (ISO 639-1 language, ISO 3166-1 country)."""
    match = _LANGUAGE.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise InvalidInput(
            part,
            f"{text!r} is not a language: two letters (ISO 639-1), optionally '-' and a "
            "country in two letters (ISO 3166-1), e.g. pt or pt-BR",
        )
    language, country = match.groups()
    return language.lower() + (f"-{country.upper()}" if country else "")


def metadata_format(text: str, part: str = "format") -> str:
    """The one metadata format of the seeds, ``oai_dc`` (any case on input)."""
    if not isinstance(text, str) or text.lower() not in METADATA_FORMATS:
        raise InvalidInput(part, f"{text!r} is not a metadata format (only oai_dc)")
    return text.lower()


# ---------------------------------------------------------------------------- verbs


@dataclass(frozen=True, slots=True)
class Verb:
    """One verb of Table 6.4, with its parameter (language tag or ``oai_dc``) if any."""

    name: VerbName
    parameter: str | None = None

    def __post_init__(self) -> None:
        if self.name not in VERB_NAMES:
            raise InvalidInput("verb", f"{self.name!r} is not one of {', '.join(VERB_NAMES)}")
        if self.parameter is None:
            return
        if self.name == "GetTranslation":
            object.__setattr__(self, "parameter", language_tag(self.parameter, "verb"))
        elif self.name == "GetMetadata":
            object.__setattr__(self, "parameter", metadata_format(self.parameter, "verb"))
        else:
            raise InvalidInput("verb", f"{self.name} takes no parameter")

    def __str__(self) -> str:
        return self.name + self._parameter_text

    @classmethod
    def last_edition(cls) -> Verb:
        return cls("GetLastEdition")

    @classmethod
    def translation(cls, language: str | None = None) -> Verb:
        return cls("GetTranslation", language)

    @classmethod
    def metadata(cls, format: str | None = None) -> Verb:
        return cls("GetMetadata", format)

    @classmethod
    def file_list(cls) -> Verb:
        return cls("GetFileList")

    @property
    def symbol(self) -> str:
        """The modifier symbol with its parameter (``+(pt-BR)``); ``""`` for GetFileList."""
        symbol = _SYMBOL[self.name]
        return symbol + self._parameter_text if symbol else ""

    @property
    def qualifier(self) -> str:
        """The relation qualifier (``.translation(pt-BR)``); GetFileList has none."""
        if self.name == "GetFileList":
            raise InvalidInput("verb", "GetFileList is not a relation")
        return _QUALIFIER[self.name] + self._parameter_text

    @property
    def language(self) -> str | None:
        return (
            self.parameter.split("-")[0]
            if self.name == "GetTranslation" and self.parameter
            else None
        )

    @property
    def country(self) -> str | None:
        if self.name != "GetTranslation" or not self.parameter or "-" not in self.parameter:
            return None
        return self.parameter.split("-")[1]

    @property
    def _parameter_text(self) -> str:
        return f"({self.parameter})" if self.parameter is not None else ""


GET_LAST_EDITION = Verb("GetLastEdition")
GET_FILE_LIST = Verb("GetFileList")


def parse_verb(text: str, part: str = "verb list") -> Verb:
    """``GetTranslation(pt-BR)``, ``GetMetadata``, ``getlastedition`` … (Table 6.4)."""
    match = _VERB.fullmatch(text) if isinstance(text, str) else None
    name = _BY_NAME.get(match.group("word").lower()) if match else None
    if match is None or name is None:
        raise InvalidInput(
            part,
            f"{text!r} is not a verb: GetLastEdition, GetTranslation[(ll[-CC])], "
            "GetMetadata[(oai_dc)] or GetFileList",
        )
    try:
        return Verb(name, match.group("parameter"))
    except InvalidInput as error:
        raise InvalidInput(part, f"{text!r}: {error.reason}") from None


def parse_verb_list(text: str, part: str = "verb list") -> tuple[Verb, ...]:
    """Verbs separated by spaces (messages, §5.2) or ``+`` (Table 6.4); ``""`` is no verb.

    Only the verbs are read here; their order is checked by :func:`relation_for_verbs`.
    """
    if not isinstance(text, str):
        raise InvalidInput(part, f"{text!r} is not text")
    words = _VERB_SEPARATORS.split(text.strip(" +"))
    return tuple(parse_verb(word, part) for word in words if word)


def format_verb_list(verbs: Iterable[Verb]) -> str:
    """The value of ``parsedibiurl.verblist``: verbs separated by one space."""
    return " ".join(str(verb) for verb in verbs)


def wants_file_list(verbs: Iterable[Verb]) -> bool:
    return any(verb.name == "GetFileList" for verb in verbs)


def union_of_verbs(modifier: Iterable[Verb], query: Iterable[Verb]) -> tuple[Verb, ...]:
    """``parsedibiurl.verblist`` (§5.2): the modifier's verbs, then the query's new ones.

    A query verb equal to a modifier verb not yet matched adds nothing (so ``+:+`` with
    ``GetTranslation`` stays ``+:+``); ``GetFileList`` appears at most once.
    """
    verbs = list(modifier)
    unmatched = list(verbs)
    for verb in query:
        if verb.name == "GetFileList":
            if verb not in verbs:
                verbs.append(verb)
        elif verb in unmatched:
            unmatched.remove(verb)
        else:
            verbs.append(verb)
    return tuple(verbs)


# ---------------------------------------------------------------------------- relations


@dataclass(frozen=True, slots=True)
class Relation:
    """A relation of Table 7.5 as its steps, in order; ``Relation()`` is the item itself."""

    steps: tuple[Verb, ...] = ()

    def __post_init__(self) -> None:
        steps = tuple(self.steps)
        for step in steps:
            if not isinstance(step, Verb):
                raise InvalidInput("relation", f"{step!r} is not a verb")
            if step.name == "GetFileList":
                raise InvalidInput("relation", "GetFileList is not a relation")
        object.__setattr__(self, "steps", steps)
        _check_order(steps, "relation", "".join(step.qualifier for step in steps))

    def __str__(self) -> str:
        """``.lastedition.metadata(oai_dc)``; ``""`` for the item itself."""
        return "".join(step.qualifier for step in self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def shape(self) -> str:
        """The modifier of Table 6.2 without parameters: ``!:``; ``""`` for the item itself."""
        return "".join(_SYMBOL[step.name] for step in self.steps)

    @property
    def modifier_text(self) -> str:
        """The persistent-URL modifier with parameters: ``!:(oai_dc)``, ``+(pt-BR)``."""
        return "".join(step.symbol for step in self.steps)

    @property
    def verbs(self) -> tuple[Verb, ...]:
        return self.steps

    def pair_name(self, kind: RelationKind) -> str:
        """``url.lastedition.metadata(oai_dc)``, ``ibi.translation(pt-BR)``, ``state`` …"""
        if kind not in RELATION_KINDS:
            raise InvalidInput("pair name", f"{kind!r} is not one of {', '.join(RELATION_KINDS)}")
        return kind + str(self)


def parse_relation(text: str, part: str = "relation") -> Relation:
    """``.translation(pt-BR).lastedition`` -> :class:`Relation`; ``""`` is the item itself."""
    steps = _scan(
        text,
        _STEP,
        _BY_QUALIFIER,
        part,
        "a qualifier (.lastedition, .translation[(ll[-CC])], .metadata[(oai_dc)])",
    )
    return _relation(steps, part, text)


def parse_modifier(text: str, part: str = "modifier") -> Relation:
    """``!:(oai_dc)``, ``+(pt-BR)!`` … -> :class:`Relation` (one of the 14 orders)."""
    steps = _scan(
        text, _MODIFIER_STEP, _BY_SYMBOL, part, "a modifier (!, +[(ll[-CC])], :[(oai_dc)])"
    )
    return _relation(steps, part, text)


def relation_for_verbs(verbs: str | Iterable[Verb], part: str = "verb list") -> Relation:
    """The relation that serves a verb list: ``GetLastEdition GetMetadata(oai_dc)`` ->
    ``.lastedition.metadata(oai_dc)``. ``GetFileList`` is left aside (it changes the URL
    asked of the Archive, not the item)."""
    items = parse_verb_list(verbs, part) if isinstance(verbs, str) else tuple(verbs)
    steps = tuple(verb for verb in items if verb.name != "GetFileList")
    return _relation(steps, part, format_verb_list(items))


def parse_pair_name(name: str) -> tuple[RelationKind, Relation]:
    """``url.lastedition.metadata(oai_dc)`` -> ``("url", Relation(...))``.

    Only the five relation kinds (``ibi``, ``url``, ``contenttype``, ``state``,
    ``timestamp``) followed by a relation qualify; ``ibi.nextedition``, ``archiveaddress``
    and the like are refused.
    """
    if not isinstance(name, str):
        raise InvalidInput("pair name", f"{name!r} is not text")
    head, dot, rest = name.partition(".")
    kind = next((candidate for candidate in RELATION_KINDS if candidate == head.lower()), None)
    if kind is None:
        raise InvalidInput(
            "pair name", f"{name!r} does not start with one of {', '.join(RELATION_KINDS)}"
        )
    try:
        return kind, parse_relation(dot + rest)
    except InvalidInput as error:
        raise InvalidInput("pair name", f"{name!r}: {error.reason}") from None


def relation_pair_index(pairs: Iterable[tuple[str, T]]) -> dict[tuple[RelationKind, Relation], T]:
    """The relation pairs of an answer by (kind, relation), whatever the spelling
    (``url.translation(pt-br)`` is found as ``("url", .translation(pt-BR))``). Other pairs
    are left out; when two names mean the same pair the first is kept."""
    index: dict[tuple[RelationKind, Relation], T] = {}
    for name, value in pairs:
        try:
            key = parse_pair_name(name)
        except InvalidInput:
            continue
        index.setdefault(key, value)
    return index


ITEM_ITSELF = Relation()
"""The empty relation: the item itself."""


# ---------------------------------------------------------------------------- chasing IBIs


@dataclass(frozen=True, slots=True)
class Hop:
    """Ask next for the IBI in the answer's ``pair_name`` pair, wanting ``relation`` of it."""

    pair_name: str
    relation: Relation


def hops(relation: Relation) -> tuple[Hop, ...]:
    """The ``ibi…`` pairs that lead towards ``relation``, best first (module notes).

    ``.lastedition.metadata(oai_dc)`` -> ``ibi.lastedition.metadata(oai_dc)`` (then nothing
    more is wanted), ``ibi.lastedition`` (then ``.metadata(oai_dc)``), ``ibi.nextedition``
    (then ``.lastedition.metadata(oai_dc)`` again).
    """
    steps = relation.steps
    found = [
        Hop(Relation(steps[:count]).pair_name("ibi"), Relation(steps[count:]))
        for count in range(len(steps), 0, -1)
    ]
    if steps and steps[0].name == "GetLastEdition":
        found.append(Hop("ibi.nextedition", relation))
    return tuple(found)


def present_hops(relation: Relation, answer: PairList) -> tuple[Hop, ...]:
    """The :func:`hops` whose pair ``answer`` holds with a non-empty value, best first,
    each naming the pair as the answer spells it."""
    wanted = hops(relation)
    if not wanted:  # the item itself: nothing to chase, no pair name to read
        return ()
    spelled: dict[str, str] = {}
    for name, value in answer:
        if not value:
            continue
        try:
            kind, found = parse_pair_name(name)
            canonical = found.pair_name(kind)
        except InvalidInput:
            canonical = name.lower()
        spelled.setdefault(canonical, name)
    return tuple(
        Hop(spelled[hop.pair_name], hop.relation) for hop in wanted if hop.pair_name in spelled
    )


def next_hop(relation: Relation, answer: PairList) -> Hop | None:
    """The IBI that serves ``relation`` when ``answer`` lacks ``url<relation>`` (§5.3).

    Returns the first of :func:`present_hops`; ``None`` when nothing leads further.
    """
    found = present_hops(relation, answer)
    return found[0] if found else None


def involves_editions(relation: Relation) -> bool:
    """Whether ``relation`` asks for a last edition (``!`` anywhere in its modifier)."""
    return any(step.name == "GetLastEdition" for step in relation.steps)


# ---------------------------------------------------------------------------- helpers


def _scan(
    text: str, pattern: re.Pattern[str], names: dict[str, VerbName], part: str, expected: str
) -> tuple[Verb, ...]:
    if not isinstance(text, str):
        raise InvalidInput(part, f"{text!r} is not text")
    steps: list[Verb] = []
    position = 0
    while position < len(text):
        match = pattern.match(text, position)
        name = names.get(match.group("word").lower()) if match else None
        if match is None or name is None:
            raise InvalidInput(
                part,
                f"{text!r}: {text[position : position + 20]!r} at offset {position} "
                f"is not {expected}",
            )
        try:
            steps.append(Verb(name, match.group("parameter")))
        except InvalidInput as error:
            raise InvalidInput(part, f"{text!r}: {error.reason}") from None
        position = match.end()
    return tuple(steps)


def _relation(steps: tuple[Verb, ...], part: str, shown: str) -> Relation:
    _check_order(steps, part, shown)
    return Relation(steps)
