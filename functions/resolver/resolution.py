"""Resolution (spec §5.2-§5.3, §7.7-§7.9): from a persistent URL to the item's URL.

Pure logic: the Archives are asked through ``ask_all`` (the fan-out, done elsewhere), so this
module decides only what to ask, what the answers mean, and what to answer.

Decisions where seed 001 is silent (besides spec §7):

* "The first non-empty answer" (seed 001 §6) is read as: a round of urlRequest ends a short
  grace (``IBI_ORIGINAL_GRACE_MS``, 50 ms, never the Archive timeout) after the first answer
  that holds the wanted ``url…`` pair or leads onward (:class:`Patience`), or when every
  Archive answered. Among the answers heard by then, those holding the URL come first, an
  ``Original`` before a ``Copy``, then the order the Archives answered in; an answer without
  the URL is chased only when no answer has it. Two answers claiming the original are
  named on the result (:class:`Conflict`); the 302 stays.
* For a relation with ``.lastedition`` the holder of the original speaks for the edition
  chain: an answer claiming the original (``state`` or ``state<r>`` ``Original``), or one that
  leads onward (``ibi.nextedition``, ``ibi.lastedition`` naming another IBI), comes before a
  Copy's claim to be the last edition, which is used only when no such answer came. A copy's
  answer never ends such a round early. Editions are only ever added, so an answer that
  knows a next edition knows more than one that does not.
* ``Deleted`` (410) is answered only when no Archive offers the item otherwise. The alert
  keeps one trusted tombstone's answer (:class:`Tombstone`; the owner's first, then one with
  the holdings pairs): what the 410 page and a negotiated citation say was there.
* 504 only when no Archive answered at all; an IBI unknown to every Archive that answered
  is 404 even if some Archives did not answer in time.
* With ``Original`` required, answers are compared on ``state<relation>``: exactly one
  ``Original`` holding the URL is selected; two or more is 409 naming the suspects; none
  is 404 ("no Archive holds the original").

Claims checked (issue 24). Each answer says whether its Archive is trusted for the IBI asked
(:class:`Trust`, set by the fan-out): the owner of its prefix, an Archive a transfer record
names, or anyone when the prefix has no registered owner. A claim of the asked IBI's original
by any other Archive is never followed: it is named on the result (:class:`Conflict`, kind
``untrusted-original``) and the reader gets what the trusted answers and the copies give;
when they give nothing, 409 naming the suspect and the owner. With ``Original`` required, two
claims are 409 as the spec says, and one untrusted claim is 409 too.

Editions (issue 24, item 4): the last edition is what the originals along the chain say. An
answer whose last edition is a copy's (``state<r>`` not ``Original``) is used only when no
answer of the round leads to a next edition (``ibi.nextedition``) not yet asked: a copy of a
middle edition may not know the editions after it. Such a copy's URL is kept as the fallback,
given when the chain leads nowhere.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from functions.shared.headers import quality as q_value
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList, label_of
from ibi.core.persistent_url import PersistentURL
from ibi.core.relations import Relation, Verb, involves_editions, next_hop, present_hops

MAX_HOPS = 8  # §7.9
# url.translation(pt-BR)…, ibi.translation(en).lastedition …: the first translation step.
_TRANSLATION_PAIR = re.compile(r"(?:url|ibi)\.translation\(([A-Za-z]{2}(?:-[A-Za-z]{2})?)\)")


class Trust(enum.Enum):
    """Whether an Archive may claim the original of the IBI asked (module notes)."""

    OWNER = "owner"  # it owns the IBI's prefix
    NAMED = "named"  # a transfer record of a trusted Archive names it
    UNOWNED = "unowned"  # no registered Archive owns the prefix: anyone, as before owners
    UNTRUSTED = "untrusted"  # the prefix has an owner, and it is neither it nor named


@dataclass(frozen=True, slots=True)
class ArchiveAnswer:
    """What one Archive said to one urlRequest (``pairs`` is None if it did not answer)."""

    archive: str  # the Archive's service IBI (its key in the registry)
    address: str
    pairs: PairList | None
    problem: str | None = None  # why there is no answer: timeout, refused, malformed …
    trust: Trust = Trust.UNOWNED
    owner: str | None = None  # the service IBI of the owner of the IBI's prefix, if any

    @property
    def trusted(self) -> bool:
        return self.trust is not Trust.UNTRUSTED


Check = Callable[[PairList], bool]


@dataclass(frozen=True, slots=True)
class Patience:
    """When a round may end before every Archive has answered (None: never)."""

    usable: Check  # the round may end with it: a short grace after the first one
    preferred: Check  # the best answer there is (the original's): a location hint needs it


# ask_all(ibi, pairs, patience): every included Archive, waited for as ``patience`` says.
AskAll = Callable[[str, Sequence[tuple[str, str]], Patience | None], list[ArchiveAnswer]]


TWO_ORIGINALS = "two-originals"
UNTRUSTED_ORIGINAL = "untrusted-original"
UNTRUSTED_TITLE = "An Archive claims an original it may not hold"


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two or more Archives claimed the original of ``ibi`` in one round (``relation`` asked),
    or (``untrusted-original``) Archives that may not claim it did: never followed."""

    ibi: str
    relation: Relation
    archives: tuple[str, ...]  # their service IBIs, in the order they answered
    kind: str = TWO_ORIGINALS
    owner: str | None = None  # the prefix's owner (``untrusted-original``)


@dataclass(frozen=True, slots=True)
class Found:
    url: str
    answer: ArchiveAnswer
    relation: Relation
    ibi: str  # the IBI whose answer gave the URL
    hops: int
    status: int = 302
    conflicts: tuple[Conflict, ...] = ()  # two originals seen on the way (the 302 stays)


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A deleted item's answer: the IBI it names and the pairs (with the holdings pairs, its
    Dublin Core and withdrawal, when they were asked for and its Archive knows them)."""

    ibi: str
    pairs: PairList

    @property
    def described(self) -> bool:
        """Whether the answer carries the holdings pairs (``holdings.state``)."""
        return "holdings.state" in self.pairs


@dataclass(frozen=True, slots=True)
class Alert:
    status: int  # 404, 409, 410, 504
    title: str
    message: str
    suspects: tuple[str, ...] = ()
    tombstone: Tombstone | None = None  # a 410's: what was there


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
    return label_of(answer, pair_name)


def _claims_original(answer: PairList, relation: Relation) -> bool:
    return answer.word("state") == "Original" or _state(answer, relation) == "Original"


def _claims_asked_original(answer: PairList, relation: Relation, asked: str) -> bool:
    """Whether ``answer`` claims the original of the IBI asked itself (not of a related IBI,
    which has a prefix and an owner of its own)."""
    if answer.word("state") == "Original":
        return True
    if _state(answer, relation) != "Original":
        return False
    related = _ibi_of(answer, relation.pair_name("ibi"))
    return related is None or _label(related) == _label(asked)


def untrusted_claims(
    held: Sequence[ArchiveAnswer], relation: Relation, asked: str
) -> list[ArchiveAnswer]:
    """The answers claiming the original of ``asked`` from Archives that may not (module notes)."""
    return [
        a
        for a in held
        if a.pairs and not a.trusted and _claims_asked_original(a.pairs, relation, asked)
    ]


def _tombstone(held: Sequence[ArchiveAnswer], asked: str) -> Tombstone | None:
    """One trusted tombstone's answer: the prefix owner's first, then one that carries the
    holdings pairs. What an untrusted Archive says was there is never shown."""
    told = sorted(
        (a for a in held if a.pairs and a.trusted),
        key=lambda a: (a.trust is not Trust.OWNER, "holdings.state" not in (a.pairs or ())),
    )
    pairs = told[0].pairs if told else None
    return Tombstone(_ibi_of(pairs, "ibi") or asked, pairs) if pairs else None


def _leads_onward(answer: PairList, relation: Relation, asked: str) -> bool:
    """Whether ``answer`` names another IBI that serves ``relation`` (a hop to chase)."""
    here = _label(asked)
    return any(
        (target := _ibi_of(answer, hop.pair_name)) is not None and _label(target) != here
        for hop in present_hops(relation, answer)
    )


def _label(text: str) -> str:
    try:
        return parse_label(text).label
    except InvalidInput:
        return text


def patience(relation: Relation, asked: str, *, required_original: bool) -> Patience | None:
    """How long a round about ``asked`` waits (module notes); None: for every Archive.

    Every claim must be seen when the original is required (two are a 409), and every
    language for a bare ``+`` (it is chosen among all the answers' translations).
    """
    if required_original or any(
        step.name == "GetTranslation" and step.parameter is None for step in relation.steps
    ):
        return None

    def onward(answer: PairList) -> bool:
        return _leads_onward(answer, relation, asked)

    if involves_editions(relation):

        def original(answer: PairList) -> bool:
            return _claims_original(answer, relation) and (
                bool(_url_pair(answer, relation)) or onward(answer)
            )

        def edition_usable(answer: PairList) -> bool:
            return onward(answer) or (
                _claims_original(answer, relation) and bool(_url_pair(answer, relation))
            )

        return Patience(usable=edition_usable, preferred=original)

    def usable(answer: PairList) -> bool:
        return bool(_url_pair(answer, relation)) or onward(answer)

    def preferred(answer: PairList) -> bool:
        return bool(_url_pair(answer, relation)) and _state(answer, relation) == "Original"

    return Patience(usable=usable, preferred=preferred)


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
                quality = q_value(value)
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


def prefix_match(ranges: Sequence[str], offered: Sequence[str]) -> str | None:
    """RFC 4647 §3.3.1 basic filtering, best range first: ``pt`` matches ``pt-BR``; then the
    same with each range's language alone (``pt-PT`` finds ``pt-BR``: ours, not the RFC's).

    Among the tags one range matches, the shortest, then the first alphabetically (so the
    choice does not depend on which Archive answered first).
    """
    languages = [wanted.split("-")[0] for wanted in ranges]
    for prefix in [*ranges, *languages]:
        lowered = prefix.lower()
        matched = [tag for tag in offered if tag.lower().startswith(lowered + "-")]
        if matched:
            return min(matched, key=lambda tag: (len(tag), tag.lower()))
    return None


def choose_language(accept_language: str | None, offered: Sequence[str]) -> str | None:
    """A bare ``+`` (§7.8): lookup, then the best prefix match; None: the item itself."""
    ranges = parse_accept_language(accept_language)
    return lookup(ranges, offered) or prefix_match(ranges, offered)


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
    tombstone: Tombstone | None = None
    known: bool = False
    conflicts: list[Conflict] = field(default_factory=list)
    suspects: list[ArchiveAnswer] = field(default_factory=list)  # untrusted claims (not followed)
    fallback: Found | None = None  # a copy's last edition, when the chain leads nowhere better

    @classmethod
    def start(cls, url: PersistentURL, client_ips: str) -> _Walk:
        base_pairs: list[tuple[str, str]] = [("clientinformation.ipaddress", client_ips)]
        if url.file_path:
            # Table 6.9: path-absolute, as in its example "/reference.bib".
            base_pairs.append(("parsedibiurl.filepath", url.file_path))
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
        if self.suspects:
            return untrusted_alert(self.current, self.suspects)
        if self.deleted_seen:
            message = f"{label} was deleted from its Archive."
            return Alert(410, "Deleted", message, tombstone=self.tombstone)
        if not self.anyone_answered:
            return Alert(
                504, "No Archive answered", "No Archive answered in time; try again shortly."
            )
        if self.known:
            wanted = self.relation.modifier_text or "the item"
            path = f" {self.url.file_path}" if self.url.file_path else ""
            return Alert(
                404,
                "Not available",
                f"{label} is known, but no Archive offers what was asked ({wanted}{path}).",
            )
        return Alert(404, "Unknown IBI", f"No Archive knows {label}.")


def untrusted_alert(ibi: str, suspects: Sequence[ArchiveAnswer]) -> Alert:
    """409: an Archive that may not claim the original of ``ibi`` did (module notes)."""
    owner = suspects[0].owner or "another Archive"
    return Alert(
        409,
        UNTRUSTED_TITLE,
        f"{len(suspects)} Archive(s) answer that they hold the original of {ibi}, but the "
        f"prefix of {ibi} is owned by {owner}, which did not say the original moved there. "
        "The claim is not followed: it is under suspicion and an investigation is needed.",
        (
            *(f"{a.archive} at {a.address} (claims the original)" for a in suspects),
            f"{owner} (owns the prefix)",
        ),
    )


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
        if walk.fallback is not None:
            return replace(walk.fallback, conflicts=tuple(walk.conflicts))
        return walk.conclusion()

    def _round(self, walk: _Walk, hop: int) -> Found | Alert | _Step:
        """Ask every Archive about the current IBI; read their answers."""
        asked_for = walk.relation
        wait = patience(asked_for, walk.current, required_original=walk.required_original)
        held = self._ask(walk, wait)
        if not held:
            return _Step.STOP
        walk.relation = self._negotiate(walk.relation, [a.pairs for a in held if a.pairs])
        if walk.required_original:
            refused = self._refuse_claims(walk, held)
            if refused is not None:
                return refused
        suspects = untrusted_claims(held, walk.relation, walk.current)
        if suspects:
            self._note_suspects(walk, suspects)
            held = [a for a in held if a not in suspects]
        held = _authoritative(held, walk.relation, walk.current)
        with_url = [a for a in held if a.pairs and _url_pair(a.pairs, walk.relation)]
        if walk.relation != asked_for and not with_url:
            # The language chosen (or the item itself) was not in answers filtered for
            # the bare `+`: ask again for exactly that.
            return _Step.NEXT
        if wait is not None:
            self._note_conflict(walk, held, wait)
        onward = self._next_edition(walk, held, with_url)
        if onward is not None:
            if with_url and walk.fallback is None:
                walk.fallback = self._found(walk, with_url[0], hop)
            walk.current, walk.relation = onward
            return _Step.NEXT
        selected = self._select(walk, with_url, hop)
        if selected is not None:
            return selected
        live = [a for a in held if a.pairs and a.pairs.word("state") != "Deleted"]
        if not live:  # every Archive that knows it holds only its tombstone
            walk.deleted_seen = True
            walk.tombstone = _tombstone(held, walk.current)
            return _Step.STOP
        walk.known = True
        return self._chase(walk, live)

    def _ask(self, walk: _Walk, wait: Patience | None) -> list[ArchiveAnswer]:
        """One round of urlRequest; the answers that hold something."""
        verb_list = walk.verb_list()
        pairs = [*walk.base_pairs, ("parsedibiurl.ibi", walk.current)]
        if verb_list:
            pairs.append(("parsedibiurl.verblist", verb_list))
        self.trace.rounds.append((walk.current, verb_list))
        answers = self._ask_all(walk.current, pairs, wait)
        walk.anyone_answered = walk.anyone_answered or any(a.pairs is not None for a in answers)
        return [a for a in answers if a.pairs]

    @staticmethod
    def _refuse_claims(walk: _Walk, held: list[ArchiveAnswer]) -> Alert | None:
        """With the original required: 409 for two claims of it (the spec), or for one claim
        by an Archive that may not make it (module notes)."""
        relation = walk.relation
        originals = [
            a
            for a in held
            if a.pairs and _url_pair(a.pairs, relation) and _state(a.pairs, relation) == "Original"
        ]
        if len(originals) > 1:
            return Alert(
                409,
                "Two or more Archives claim the original",
                f"{len(originals)} Archives answer that they hold the original of "
                f"{walk.current}; at most one can. They are under suspicion and an "
                "investigation is needed.",
                tuple(f"{a.archive} at {a.address}" for a in originals),
            )
        suspects = untrusted_claims(originals, relation, walk.current)
        return untrusted_alert(walk.current, suspects) if suspects else None

    @staticmethod
    def _note_suspects(walk: _Walk, suspects: list[ArchiveAnswer]) -> None:
        """Claims of the original by Archives that may not make them: named, never followed."""
        walk.suspects += [
            a for a in suspects if a.archive not in {s.archive for s in walk.suspects}
        ]
        archives = tuple(a.archive for a in suspects)
        walk.conflicts.append(
            Conflict(walk.current, walk.relation, archives, UNTRUSTED_ORIGINAL, suspects[0].owner)
        )

    @staticmethod
    def _next_edition(
        walk: _Walk, held: list[ArchiveAnswer], with_url: list[ArchiveAnswer]
    ) -> tuple[str, Relation] | None:
        """For ``!``: the next edition to ask when no original gave the last edition's URL and
        an answer names one not yet asked (module notes); None otherwise."""
        relation = walk.relation
        if walk.required_original or not relation.steps:
            return None
        if relation.steps[0].name != "GetLastEdition":
            return None
        if any(a.pairs and _state(a.pairs, relation) == "Original" for a in with_url):
            return None
        here = _label(walk.current)
        for answer in held:
            target = _ibi_of(answer.pairs, "ibi.nextedition") if answer.pairs else None
            if target is None or _label(target) == here:
                continue
            if (_label(target), str(relation)) not in walk.asked:
                return target, relation
        return None

    @staticmethod
    def _note_conflict(walk: _Walk, held: list[ArchiveAnswer], wait: Patience) -> None:
        """Two or more answers of the original's kind: named on the result (the 302 stays)."""
        claims = tuple(a.archive for a in held if a.pairs and wait.preferred(a.pairs))
        if len(claims) > 1:
            walk.conflicts.append(Conflict(walk.current, walk.relation, claims))

    def _select(self, walk: _Walk, with_url: list[ArchiveAnswer], hop: int) -> Found | Alert | None:
        """The answer that gives the URL (an Original first), or 409 for two claimed originals."""
        relation = walk.relation
        if walk.required_original:  # two claims, or an untrusted one: refused already
            originals = [a for a in with_url if a.pairs and _state(a.pairs, relation) == "Original"]
            return self._found(walk, originals[0], hop) if originals else None
        with_url.sort(key=lambda a: 0 if a.pairs and _state(a.pairs, relation) == "Original" else 1)
        return self._found(walk, with_url[0], hop) if with_url else None

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

    def _negotiate(self, relation: Relation, answers: list[PairList]) -> Relation:
        """A bare ``+`` becomes ``+(ll)`` by Accept-Language (§7.8), or the item itself."""
        steps = list(relation.steps)
        for index, step in enumerate(steps):
            if step.name == "GetTranslation" and step.parameter is None:
                chosen = choose_language(self._accept_language, languages_offered(answers))
                if chosen is None:
                    del steps[index]
                else:
                    steps[index] = Verb.translation(chosen)
                return Relation(tuple(steps))
        return relation

    @staticmethod
    def _found(walk: _Walk, answer: ArchiveAnswer, hop: int) -> Found:
        assert answer.pairs is not None
        url = _url_pair(answer.pairs, walk.relation)
        assert url is not None
        return Found(
            url=url,
            answer=answer,
            relation=walk.relation,
            ibi=walk.current,
            hops=hop,
            conflicts=tuple(walk.conflicts),
        )


def _authoritative(
    held: list[ArchiveAnswer], relation: Relation, asked: str
) -> list[ArchiveAnswer]:
    """For ``.lastedition``: the original's word and the answers leading onward, when any
    came (the original's first), before a copy's claim to be the last edition (module notes).
    Other relations: every answer, as it came."""
    if not involves_editions(relation):
        return held
    first: list[ArchiveAnswer] = []
    then: list[ArchiveAnswer] = []
    for answer in held:
        pairs = answer.pairs
        if not pairs:
            continue
        onward = _leads_onward(pairs, relation, asked)
        if _claims_original(pairs, relation) and (onward or _url_pair(pairs, relation)):
            first.append(answer)
        elif onward:
            then.append(answer)
    return first + then or held
