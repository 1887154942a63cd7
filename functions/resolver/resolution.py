"""Resolution (spec §5.2-§5.3, §7.7-§7.9): from a persistent URL to the item's URL.

Pure logic: the Archives are asked through ``ask_all`` (the fan-out, done elsewhere), so this
module decides only what to ask, what the answers mean, and what to answer.

Decisions where seed 001 is silent (besides spec §7):

* "The first non-empty answer" is read as: among the answers, those holding the wanted
  ``url…`` pair come first, an ``Original`` before a ``Copy``, then the order the Archives
  answered in; an answer without the URL is chased only when no answer has it.
* ``Deleted`` (410) is answered only when no Archive offers the item otherwise.
* 504 only when no Archive answered at all; an IBI unknown to every Archive that answered
  is 404 even if some Archives did not answer in time.
* With ``Original`` required, answers are compared on ``state<relation>``: exactly one
  ``Original`` holding the URL is selected; two or more is 409 naming the suspects; none
  is 404 ("no Archive holds the original").
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList, parse_forms
from ibi.core.persistent_url import PersistentURL
from ibi.core.relations import Relation, Verb, next_hop

MAX_HOPS = 8  # §7.9
# url.translation(pt-BR)…, ibi.translation(en).lastedition …: the first translation step.
_TRANSLATION_PAIR = re.compile(r"(?:url|ibi)\.translation\(([A-Za-z]{2}(?:-[A-Za-z]{2})?)\)")


@dataclass(frozen=True, slots=True)
class ArchiveAnswer:
    """What one Archive said to one urlRequest (``pairs`` is None if it did not answer)."""

    archive: str  # the Archive's service IBI (its key in the registry)
    address: str
    pairs: PairList | None
    problem: str | None = None  # why there is no answer: timeout, refused, malformed …


# ask_all(ibi, pairs, enough): every included Archive; ``enough(answer)`` may end the wait.
AskAll = Callable[
    [str, Sequence[tuple[str, str]], Callable[[PairList], bool] | None], list[ArchiveAnswer]
]


@dataclass(frozen=True, slots=True)
class Found:
    url: str
    answer: ArchiveAnswer
    relation: Relation
    ibi: str  # the IBI whose answer gave the URL
    hops: int
    status: int = 302


@dataclass(frozen=True, slots=True)
class Alert:
    status: int  # 404, 409, 410, 504
    title: str
    message: str
    suspects: tuple[str, ...] = ()


@dataclass
class Trace:
    """What was asked, for logs and tests."""

    rounds: list[tuple[str, str]] = field(default_factory=list)  # (ibi, verb list)


def _url_pair(answer: PairList, relation: Relation) -> str | None:
    value = answer.get(relation.pair_name("url"))
    return value if isinstance(value, str) and value else None


def _state(answer: PairList, relation: Relation) -> str | None:
    value = answer.get(relation.pair_name("state"))
    return value if isinstance(value, str) else None


def _ibi_of(answer: PairList, pair_name: str) -> str | None:
    """A label from an ``ibi…`` pair's forms (ibip preferred)."""
    value = answer.get(pair_name)
    if not value or isinstance(value, str):
        return None
    try:
        forms = parse_forms(value)
    except InvalidInput:
        return None
    return forms.get("ibip") or forms.get("rep")


def languages_offered(answers: Sequence[PairList]) -> list[str]:
    """Every language named by a ``url.translation(…)`` or ``ibi.translation(…)`` pair."""
    found: list[str] = []
    for pairs in answers:
        for name in pairs.names():
            match = _TRANSLATION_PAIR.match(name)
            if match and match.group(1) not in found:
                found.append(match.group(1))
    return found


def parse_accept_language(header: str | None) -> list[str]:
    """Language ranges by preference (q-values), ``*`` and q=0 left out (RFC 9110)."""
    ranges: list[tuple[float, int, str]] = []
    for position, part in enumerate((header or "").split(",")):
        pieces = part.strip().split(";")
        tag = pieces[0].strip()
        quality = 1.0
        for parameter in pieces[1:]:
            key, _, value = parameter.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if tag and tag != "*" and quality > 0 and len(tag) <= 35:
            ranges.append((-quality, position, tag))
    return [tag for _, _, tag in sorted(ranges)]


def lookup(ranges: Sequence[str], offered: Sequence[str]) -> str | None:
    """RFC 4647 §3.4 lookup: for each range, best first, truncate until a tag matches."""
    lowered = {tag.lower(): tag for tag in offered}
    for wanted in ranges:
        subtags = wanted.lower().split("-")
        while subtags:
            candidate = "-".join(subtags)
            if candidate in lowered:
                return lowered[candidate]
            subtags.pop()
    return None


class _Step(enum.Enum):
    """What a round leaves to do besides answering."""

    STOP = "stop"  # nothing more to ask: conclude
    NEXT = "next"  # ask again (another relation, or the IBI a hop leads to)


@dataclass
class _Walk:
    """Where one resolution stands: what is asked next, what was asked, what was heard."""

    url: PersistentURL
    base_pairs: list[tuple[str, str]]
    current: str
    relation: Relation
    asked: set[tuple[str, str]] = field(default_factory=set)  # (IBI, relation): never twice
    anyone_answered: bool = False
    deleted_seen: bool = False
    known: bool = False

    @classmethod
    def start(cls, url: PersistentURL, client_ips: str) -> _Walk:
        base_pairs: list[tuple[str, str]] = [("clientinformation.ipaddress", client_ips)]
        if url.file_path:
            # As in Example 7.11: the file's path inside the item, without the leading "/".
            base_pairs.append(("parsedibiurl.filepath", url.file_path.lstrip("/")))
        return cls(url, base_pairs, url.ibi.label, url.relation)

    @property
    def required_original(self) -> bool:
        return self.url.required_item_status == "Original"

    def first_time(self) -> bool:
        """Whether the current (IBI, relation) is new; it counts as asked from now on."""
        key = (parse_label(self.current).label, str(self.relation))
        if key in self.asked:
            return False
        self.asked.add(key)
        return True

    def verb_list(self) -> str:
        verbs = [*self.relation.steps, *([Verb.file_list()] if self.url.wants_file_list else [])]
        return " ".join(str(verb) for verb in verbs)

    def conclusion(self) -> Alert:
        """The alert when no round found the URL."""
        label = self.url.ibi.label
        if self.deleted_seen:
            return Alert(410, "Deleted", f"{label} was deleted from its Archive.")
        if not self.anyone_answered:
            return Alert(
                504, "No Archive answered", "No Archive answered in time; try again shortly."
            )
        if self.known:
            wanted = self.relation.modifier_text or "the item"
            path = f" /{self.url.file_path}" if self.url.file_path else ""
            return Alert(
                404,
                "Not available",
                f"{label} is known, but no Archive offers what was asked ({wanted}{path}).",
            )
        return Alert(404, "Unknown IBI", f"No Archive knows {label}.")


class Resolver:
    """One resolution: rounds of urlRequest to every Archive, analysis, chasing (§5.3)."""

    def __init__(self, ask_all: AskAll, *, accept_language: str | None = None) -> None:
        self._ask_all = ask_all
        self._accept_language = accept_language
        self.trace = Trace()

    def resolve(self, url: PersistentURL, client_ips: str) -> Found | Alert:
        walk = _Walk.start(url, client_ips)
        for hop in range(MAX_HOPS + 1):
            if not walk.first_time():
                break
            step = self._round(walk, hop)
            if step is _Step.STOP:
                break
            if isinstance(step, Found | Alert):
                return step
        return walk.conclusion()

    def _round(self, walk: _Walk, hop: int) -> Found | Alert | _Step:
        """Ask every Archive about the current IBI; read their answers."""
        held = self._ask(walk)
        if not held:
            return _Step.STOP
        asked_for = walk.relation
        walk.relation = self._negotiate(walk.relation, [a.pairs for a in held if a.pairs])
        with_url = [a for a in held if a.pairs and _url_pair(a.pairs, walk.relation)]
        if walk.relation != asked_for and not with_url:
            # The language chosen (or the item itself) was not in answers filtered for
            # the bare `+`: ask again for exactly that.
            return _Step.NEXT
        selected = self._select(walk, with_url, hop)
        if selected is not None:
            return selected
        live = [a for a in held if a.pairs and a.pairs.word("state") != "Deleted"]
        if not live:  # every Archive that knows it holds only its tombstone
            walk.deleted_seen = True
            return _Step.STOP
        walk.known = True
        return self._chase(walk, live)

    def _ask(self, walk: _Walk) -> list[ArchiveAnswer]:
        """One round of urlRequest; the answers that hold something."""
        verb_list = walk.verb_list()
        pairs = [*walk.base_pairs, ("parsedibiurl.ibi", walk.current)]
        if verb_list:
            pairs.append(("parsedibiurl.verblist", verb_list))
        self.trace.rounds.append((walk.current, verb_list))
        enough = self._enough(walk.relation, walk.required_original)
        answers = self._ask_all(walk.current, pairs, enough)
        walk.anyone_answered = walk.anyone_answered or any(a.pairs is not None for a in answers)
        return [a for a in answers if a.pairs]

    def _select(self, walk: _Walk, with_url: list[ArchiveAnswer], hop: int) -> Found | Alert | None:
        """The answer that gives the URL (an Original first), or 409 for two claimed originals."""
        relation = walk.relation
        if walk.required_original:
            originals = [a for a in with_url if a.pairs and _state(a.pairs, relation) == "Original"]
            if len(originals) > 1:
                return Alert(
                    409,
                    "Two or more Archives claim the original",
                    f"{len(originals)} Archives answer that they hold the original of "
                    f"{walk.current}; at most one can. They are under suspicion and an "
                    "investigation is needed.",
                    tuple(f"{a.archive} at {a.address}" for a in originals),
                )
            return self._found(originals[0], relation, walk.current, hop) if originals else None
        with_url.sort(key=lambda a: 0 if a.pairs and _state(a.pairs, relation) == "Original" else 1)
        return self._found(with_url[0], relation, walk.current, hop) if with_url else None

    @staticmethod
    def _chase(walk: _Walk, live: list[ArchiveAnswer]) -> Alert | _Step:
        """Follow the first answer that leads to another (IBI, relation) not yet asked."""
        chase = next(
            (
                (target, step)
                for a in live
                if a.pairs
                and (step := next_hop(walk.relation, a.pairs)) is not None
                and (target := _ibi_of(a.pairs, step.pair_name)) is not None
                and (parse_label(target).label, str(step.relation)) not in walk.asked
            ),
            None,
        )
        if chase is None:
            if walk.required_original:
                return Alert(
                    404,
                    "No Archive holds the original",
                    f"{walk.current} is known, but no Archive offers its original "
                    "(ibiurl.requireditemstatus=Original).",
                )
            return _Step.STOP
        walk.current, hop_step = chase
        walk.relation = hop_step.relation
        return _Step.NEXT

    @staticmethod
    def _enough(relation: Relation, required_original: bool) -> Callable[[PairList], bool] | None:
        """When one answer settles the round: it offers the wanted URL of an ``Original``.

        Never when the original is required (every claim must be seen to detect two) nor for a
        bare ``+`` (the language is chosen among every answer's translations).
        """
        if required_original or any(
            step.name == "GetTranslation" and step.parameter is None for step in relation.steps
        ):
            return None

        def enough(answer: PairList) -> bool:
            return bool(_url_pair(answer, relation)) and _state(answer, relation) == "Original"

        return enough

    def _negotiate(self, relation: Relation, answers: list[PairList]) -> Relation:
        """A bare ``+`` becomes ``+(ll)`` by Accept-Language (§7.8), or the item itself."""
        steps = list(relation.steps)
        for index, step in enumerate(steps):
            if step.name == "GetTranslation" and step.parameter is None:
                offered = languages_offered(answers)
                chosen = lookup(parse_accept_language(self._accept_language), offered)
                if chosen is None:
                    del steps[index]
                else:
                    steps[index] = Verb.translation(chosen)
                return Relation(tuple(steps))
        return relation

    def _found(self, answer: ArchiveAnswer, relation: Relation, ibi: str, hop: int) -> Found:
        assert answer.pairs is not None
        url = _url_pair(answer.pairs, relation)
        assert url is not None
        return Found(url=url, answer=answer, relation=relation, ibi=ibi, hops=hop)
