"""Resolution (spec §5.2-§5.3, §7.7-§7.9): from a persistent URL to the item's URL.

Pure logic: the Archives are asked through ``ask_all`` (the fan-out, done elsewhere), what
each authority last said is kept through ``kept`` (:class:`KeptAnswers`), so this module
decides only what to ask, whose word counts, and what to answer.

**One rule for whose word counts** (issue 34; docs/resolver.md, "Whose word counts"). For every
IBI a resolution needs — the one asked, and every IBI it chases (next editions, translations,
metadata items) — there is exactly one **authority** (:func:`authority_of`):

* the registered Archive that owns the IBI's prefix, or the Archive its transfer record names
  once that Archive answers as the original's holder (until then the sender's answer stands,
  so that a reader never sees zero or two originals during a transfer);
* for a prefix no Archive owns, the single Archive claiming its original; two claims are a
  conflict: the first by service IBI is chosen (the same every time) and the answer says so
  (``IBI-Conflict``), or 409 with ``ibiurl.requireditemstatus=Original``. With no claim at all
  the copies' answers are all there is (the documented degradation of unowned prefixes).

Only the authority's answer counts for the item's state (exists, deleted), its relations and
where its original is. A ``url<r>`` of the authority's answer is followed when that Archive is
also the authority of the related item it names (``ibi<r>``); else the related IBI is asked
of its own authority (the longest ``ibi<prefix of r>`` the authority names, and for a last
edition only ``ibi.nextedition``: each edition's authority speaks for the next one). No other
Archive's relation pairs are ever chased or shown. Other Archives may only offer **locations
of copies**, and only when the authority says the item exists, is not deleted, and offers no
location itself (a damaged original): a copy is used when its holdings list the file served
with the SHA-256 the authority lists (a verified copy), and the answer says so.

**When the authority does not answer** (it failed, timed out, or is switched off), the
resolver answers from what that authority last said about the same request
(:class:`KeptAnswers`: the chain, the translations, the deletion, the location), and says so
(``IBI-Degraded``) — never silently an older edition than the last one it was told of. With
nothing kept it answers 504 naming the Archives that said they hold copies (not followed:
nothing vouches for them).

Other decisions where seed 001 is silent (besides spec §7):

* A claim of the original (``state Original``, or ``state<r> Original`` about the IBI asked) by
  an Archive that is not the authority never changes the answer, also when the original is
  required: the authority's original is served, and ``IBI-Conflict`` names the claimant (the
  seed's alert, without a denial of service any registered Archive could cause).
* Deleted by its authority → 410 with the authority's tombstone, whatever copies remain.
* The authority knows nothing of the IBI → 404, whatever anyone else says.
* 504 only when no Archive answered at all, or the authority did not and nothing is kept.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from functions.resolver.authority import (
    ArchiveAnswer,
    Conflict,
    Trust,
    Verdict,
    authority_of,
    canonical_label,
    claims_asked_original,
    claims_original,
    ibi_of,
    is_deleted,
    knows,
    labels_of,
    leads_onward,
    spelled,
    state_of,
    url_pair,
    word,
)
from functions.resolver.languages import (
    choose_language,
    languages_offered,
)
from ibi.core.errors import InvalidInput
from ibi.core.holdings import PREFIX as HOLDINGS
from ibi.core.holdings import REQUEST_PAIR as HOLDINGS_PAIR
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList
from ibi.core.persistent_url import PersistentURL
from ibi.core.relations import Relation, Verb, hops, involves_editions

MAX_HOPS = 8  # §7.9


Check = Callable[[PairList], bool]


def never(_: PairList) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Patience:
    """When a round may end before every Archive has answered.

    For an owned prefix the owner is asked first and its answer ends the round, whatever
    these say. ``everyone``: every included Archive is asked at once (the copies' round).
    """

    usable: Check  # the round may end with it: a short grace after the first one
    preferred: Check  # the best answer there is (the original's)
    everyone: bool = False


# ask_all(ibi, pairs, patience): the included Archives, asked as ``patience`` says (None:
# every Archive, waited for).
AskAll = Callable[[str, Sequence[tuple[str, str]], Patience | None], list[ArchiveAnswer]]
OwnerOf = Callable[[str], str | None]  # the service IBI of the owner of a label's prefix


@dataclass(frozen=True, slots=True)
class Kept:
    """What an authority last answered to one request (its urlkey left out)."""

    archive: str
    address: str
    pairs: PairList
    at: str  # ISO 8601 UTC, when it was said


class KeptAnswers(Protocol):
    """What each authority last said, by request (``kept.py``)."""

    def get(self, key: str) -> Kept | None: ...

    def keep(self, key: str, archive: str, address: str, pairs: PairList) -> None: ...


AUTHORITY_DOWN = "authority-down"  # IBI-Degraded: the kept answer of an authority not answering
VERIFIED_COPY = "verified-copy"  # IBI-Degraded: a copy whose files the authority lists


@dataclass(frozen=True, slots=True)
class Degraded:
    """An answer given without the authority's word of now (docs/resolver.md)."""

    kind: str  # AUTHORITY_DOWN | VERIFIED_COPY
    ibi: str
    authority: str  # the authority's service IBI
    at: str = ""  # AUTHORITY_DOWN: when the kept answer was said
    copy: str = ""  # VERIFIED_COPY: the Archive holding the copy


@dataclass(frozen=True, slots=True)
class Found:
    url: str
    answer: ArchiveAnswer
    relation: Relation
    ibi: str  # the IBI whose answer gave the URL
    hops: int
    status: int = 302
    conflicts: tuple[Conflict, ...] = ()  # claims heard on the way (the 302 stays)
    degraded: tuple[Degraded, ...] = ()


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
    conflicts: tuple[Conflict, ...] = ()  # claims heard (IBI-Conflict on the alert too)
    degraded: tuple[Degraded, ...] = ()
    copies: tuple[str, ...] = ()  # where copies still are (a 410), or unverified ones (a 504)


@dataclass
class Trace:
    """What was asked, for logs and tests."""

    rounds: list[tuple[str, str]] = field(default_factory=list)  # (ibi, verb list)


def patience(relation: Relation, asked: str, *, required_original: bool) -> Patience:
    """How long a round about ``asked`` waits, for a prefix no Archive owns (module notes): for
    every Archive when every claim must be seen (the original required: two are a 409; a bare
    ``+``: the language is chosen among every answer's), else a short grace after the first
    usable answer. For an owned prefix the owner's answer ends the round (the fan-out)."""
    if required_original or any(
        step.name == "GetTranslation" and step.parameter is None for step in relation.steps
    ):
        return Patience(usable=never, preferred=never)

    def onward(answer: PairList) -> bool:
        return leads_onward(answer, relation, asked)

    if involves_editions(relation):  # a copy's claim to be the last edition ends no round

        def edition_usable(answer: PairList) -> bool:
            return onward(answer) or (
                claims_original(answer, relation) and bool(url_pair(answer, relation))
            )

        def edition_preferred(answer: PairList) -> bool:
            return claims_original(answer, relation) and (
                bool(url_pair(answer, relation)) or onward(answer)
            )

        return Patience(usable=edition_usable, preferred=edition_preferred)

    def usable(answer: PairList) -> bool:
        return bool(url_pair(answer, relation)) or onward(answer)

    def preferred(answer: PairList) -> bool:
        return claims_asked_original(answer, relation, asked) and usable(answer)

    return Patience(usable=usable, preferred=preferred)


def _has_url(answer: PairList) -> bool:
    return bool(word(answer, "url"))


def _offers(answer: PairList) -> bool:
    """Whether ``answer`` gives any location (``url`` or ``url<r>``)."""
    return any(name.startswith("url") and name != "urlkey" for name in answer.names())


def any_answer(_: PairList) -> bool:
    """Any answer at all (the owner's, whatever it says, is the authority's word)."""
    return True


# Copies for a damaged original: a grace after the first copy's answer (up to the timeout).
COPIES = Patience(usable=_has_url, preferred=never, everyone=True)
# Copies a 410 names: a grace after the first answer, so a silent Archive costs nothing.
COPIES_NAMED = Patience(usable=any_answer, preferred=never, everyone=True)


def _tombstone(pairs: PairList, asked: str) -> Tombstone:
    return Tombstone(ibi_of(pairs, "ibi") or asked, pairs)


MAX_KEPT_KEY = 1024  # bytes; DynamoDB takes 2,048 in a partition key


def kept_key(ibi: str, verb_list: str, file_path: str) -> str:
    """The key of what an authority said to one request: the IBI, the verbs, the path (a
    long one by its SHA-256, so that every request has a key the table takes)."""
    key = f"{canonical_label(ibi)} {verb_list.replace(' ', '+')} {file_path}".rstrip()
    if len(key.encode()) <= MAX_KEPT_KEY:
        return key
    return f"{canonical_label(ibi)} sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def _files(pairs: PairList) -> dict[str, str] | None:
    """path -> SHA-256 of the holdings pairs' file list (None: no list)."""
    from ibi.core.holdings import from_pairs

    try:
        report = from_pairs(pairs)
    except InvalidInput:
        return None
    if report is None or not report.files:
        return None
    files = {f.path: f.sha256 for f in report.files}
    if report.default_file:
        files.setdefault("", files.get(report.default_file, ""))
    elif len(report.files) == 1:
        files[""] = report.files[0].sha256
    return files


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
    known: bool = False  # an authority said the IBI asked (or a related one) exists
    conflicts: list[Conflict] = field(default_factory=list)
    degraded: list[Degraded] = field(default_factory=list)

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
        key = (canonical_label(self.current), str(self.relation))
        if key in self.asked:
            return False
        self.asked.add(key)
        return True

    def verb_list(self) -> str:
        verbs = [*self.relation.steps, *([Verb.file_list()] if self.url.wants_file_list else [])]
        return " ".join(str(verb) for verb in verbs)

    def note(self, verdict: Verdict) -> None:
        for conflict in verdict.conflicts:
            if conflict not in self.conflicts:
                self.conflicts.append(conflict)

    def alert(self, status: int, title: str, message: str, **more: object) -> Alert:
        return Alert(
            status,
            title,
            message,
            conflicts=tuple(self.conflicts),
            degraded=tuple(self.degraded),
            **more,  # type: ignore[arg-type]
        )

    def conclusion(self) -> Alert:
        """The alert when no round found the URL."""
        label = self.url.ibi.label
        if not self.anyone_answered:
            return self.alert(
                504, "No Archive answered", "No Archive answered in time; try again shortly."
            )
        if self.known:
            wanted = self.relation.modifier_text or "the item"
            path = f" {self.url.file_path}" if self.url.file_path else ""
            if self.required_original:
                return self.alert(
                    404,
                    "No Archive holds the original",
                    f"{self.current} is known, but no Archive offers its original "
                    "(ibiurl.requireditemstatus=Original).",
                )
            return self.alert(
                404,
                "Not available",
                f"{label} is known, but no Archive offers what was asked ({wanted}{path}).",
            )
        return self.alert(404, "Unknown IBI", f"No Archive knows {label}.")


def _copy_line(answer: ArchiveAnswer, note: str) -> str:
    return f"{answer.archive} at {answer.address} ({note})"


class Resolver:
    """One resolution: rounds of urlRequest, the authority's answer, chasing (§5.3)."""

    def __init__(
        self,
        ask_all: AskAll,
        *,
        accept_language: str | None = None,
        kept: KeptAnswers | None = None,
        owner_of: OwnerOf | None = None,
    ) -> None:
        self._ask_all = ask_all
        self._accept_language = accept_language
        self._kept = kept
        self._owner_of = owner_of
        self.trace = Trace()

    def resolve(self, url: PersistentURL, client_ips: str) -> Found | Alert:
        walk = _Walk.start(url, client_ips)
        for hop in range(MAX_HOPS + 1):
            if not walk.first_time():
                break
            step = self._round(walk, hop)
            if isinstance(step, Found | Alert):
                return step
            if step is _Step.STOP:
                break
        return walk.conclusion()

    # ------------------------------------------------------------------------ one round

    def _round(self, walk: _Walk, hop: int) -> Found | Alert | _Step:
        """Ask about the current IBI; read its authority's answer (module notes)."""
        wait = patience(walk.relation, walk.current, required_original=walk.required_original)
        answers = self._ask(walk, wait)
        verdict = authority_of(answers, walk.current, walk.relation)
        if verdict.owner is None and verdict.answer is not None:  # unowned: who had it before
            before = self._established(walk)
            if before is not None and before != verdict.answer.archive:
                verdict = authority_of(answers, walk.current, walk.relation, known=before)
        walk.note(verdict)
        refused = self._two_originals(walk, verdict)
        if refused is not None:
            return refused
        speaker, degraded = verdict.answer, None
        if speaker is None or speaker.pairs is None:
            if verdict.owner is None:
                return _Step.STOP  # no Archive answered at all
            kept = self._kept.get(self._key(walk)) if self._kept is not None else None
            if kept is None:
                return self._unavailable(walk, verdict)
            speaker = ArchiveAnswer(
                kept.archive, kept.address, kept.pairs, trust=Trust.OWNER, owner=verdict.owner
            )
            degraded = Degraded(AUTHORITY_DOWN, walk.current, kept.archive, at=kept.at)
        elif knows(speaker.pairs) and (verdict.owner is not None or speaker in verdict.claims):
            self._keep(walk, speaker)  # an authority's answer (never a copy's, nor a suspect's)
        pairs = speaker.pairs
        assert pairs is not None
        if not knows(pairs):  # the authority does not know it
            return _Step.STOP
        walk.known = True
        if degraded is not None and degraded not in walk.degraded:
            walk.degraded.append(degraded)
        if is_deleted(pairs):
            return self._deleted(walk, verdict, pairs)
        negotiated = self._negotiate(walk.relation, pairs)
        if negotiated != walk.relation:
            walk.relation = negotiated
            if not url_pair(pairs, negotiated) and not leads_onward(
                pairs, negotiated, walk.current
            ):
                return _Step.NEXT  # the language chosen (or the item itself): ask exactly that
        return self._read(walk, verdict, speaker, hop)

    def _read(
        self, walk: _Walk, verdict: Verdict, speaker: ArchiveAnswer, hop: int
    ) -> Found | Alert | _Step:
        """The authority's answer: its URL, the IBI to ask next, or a verified copy."""
        pairs = speaker.pairs
        assert pairs is not None
        url = url_pair(pairs, walk.relation)
        vouched = self._vouches(speaker.archive, verdict.owner, pairs, walk.relation, walk.current)
        if url and vouched:
            if walk.required_original and verdict.owner is None and not verdict.claims:
                return _Step.STOP  # unowned, and nobody claims the original
            return Found(
                url=url,
                answer=speaker,
                relation=walk.relation,
                ibi=walk.current,
                hops=hop,
                conflicts=tuple(walk.conflicts),
                degraded=tuple(walk.degraded),
            )
        onward = self._onward(speaker.archive, verdict.owner, pairs, walk)
        if onward is not None:
            walk.current, walk.relation = onward
            return _Step.NEXT
        if not walk.relation.steps and not walk.required_original:
            return self._verified_copy(walk, speaker, hop) or _Step.STOP
        return _Step.STOP

    def _ask(
        self, walk: _Walk, wait: Patience | None, extra: Sequence[tuple[str, str]] = ()
    ) -> list[ArchiveAnswer]:
        """One round of urlRequest about the current IBI; every Archive's outcome."""
        verb_list = walk.verb_list()
        pairs = [*walk.base_pairs, ("parsedibiurl.ibi", walk.current)]
        if verb_list:
            pairs.append(("parsedibiurl.verblist", verb_list))
        pairs += [pair for pair in extra if pair not in pairs]
        self.trace.rounds.append((walk.current, verb_list))
        answers = self._ask_all(walk.current, pairs, wait)
        walk.anyone_answered = walk.anyone_answered or any(a.pairs is not None for a in answers)
        return answers

    def _established(self, walk: _Walk) -> str | None:
        """For a prefix no Archive owns: the Archive whose answer was kept as the authority's,
        for this request or for the item itself."""
        if self._kept is None:
            return None
        for key in (self._key(walk), kept_key(walk.current, "", "")):
            before = self._kept.get(key)
            if before is not None:
                return before.archive
        return None

    def _key(self, walk: _Walk) -> str:
        return kept_key(walk.current, walk.verb_list(), walk.url.file_path or "")

    def _keep(self, walk: _Walk, speaker: ArchiveAnswer) -> None:
        """What the authority said, for when it does not answer (its urlkey is no use then)."""
        if self._kept is None or not speaker.pairs:
            return
        # Not its urlkey (of no use later), nor the holdings pairs a negotiated request adds:
        # a browser's and a citation manager's requests then keep the same answer (no write).
        pairs = speaker.pairs.filter(
            lambda name: name != "urlkey" and not name.startswith(HOLDINGS)
        )
        self._kept.keep(self._key(walk), speaker.archive, speaker.address, pairs)

    @staticmethod
    def _two_originals(walk: _Walk, verdict: Verdict) -> Alert | None:
        """With the original required, two claims of it for a prefix no Archive owns: 409."""
        if not walk.required_original or verdict.owner is not None:
            return None
        holding = [a for a in verdict.claims if a.pairs and url_pair(a.pairs, walk.relation)]
        if len(holding) < 2:
            return None
        return walk.alert(
            409,
            "Two or more Archives claim the original",
            f"{len(holding)} Archives answer that they hold the original of {walk.current}; "
            "at most one can. They are under suspicion and an investigation is needed.",
            suspects=tuple(f"{a.archive} at {a.address}" for a in holding),
        )

    def _unavailable(self, walk: _Walk, verdict: Verdict) -> Alert:
        """504: the authority did not answer and nothing of it is kept for this request."""
        copies = tuple(
            _copy_line(a, "says it holds a copy; not verified")
            for a in verdict.copies
            if a.pairs
            and _offers(a.pairs)
            and not is_deleted(a.pairs)
            and a not in verdict.suspects
        )
        return walk.alert(
            504,
            "The Archive responsible did not answer",
            f"{walk.current} is answered for by {verdict.owner}, which did not answer in time, "
            "and this resolver has kept no answer of it for this request. Try again shortly.",
            copies=copies,
        )

    def _deleted(self, walk: _Walk, verdict: Verdict, pairs: PairList) -> Alert:
        """410 with the authority's tombstone, whatever copies remain (named on the page)."""
        heard = list(verdict.copies)
        if verdict.owner is not None and not heard:  # the owner alone was asked
            heard = self._ask(walk, COPIES_NAMED)
        copies = tuple(
            _copy_line(a, "still holds a copy")
            for a in sorted(heard, key=lambda a: a.archive)
            if a.pairs
            and _has_url(a.pairs)
            and not is_deleted(a.pairs)
            and (verdict.answer is None or a.archive != verdict.answer.archive)
        )
        return walk.alert(
            410,
            "Deleted",
            f"{walk.url.ibi.label} was deleted from its Archive.",
            tombstone=_tombstone(pairs, walk.current),
            copies=copies,
        )

    def _verified_copy(self, walk: _Walk, speaker: ArchiveAnswer, hop: int) -> Found | None:
        """A copy whose holdings list the file served with the SHA-256 the authority lists,
        when the authority says the item exists and offers no location (module notes)."""
        answers = self._ask(walk, COPIES, [HOLDINGS_PAIR])
        listed = _files(speaker.pairs) if speaker.pairs else None
        for answer in answers:
            if listed is None and answer.archive == speaker.archive and answer.pairs:
                listed = _files(answer.pairs)
        if not listed:
            return None
        path = (walk.url.file_path or "").strip("/")
        wanted = listed.get(path)
        for answer in sorted(answers, key=lambda a: a.archive):
            pairs = answer.pairs
            if answer.archive == speaker.archive or not pairs or not _has_url(pairs):
                continue
            if word(pairs, "state") != "Copy" or wanted is None:
                continue
            if (_files(pairs) or {}).get(path) != wanted:
                continue
            copy = Degraded(VERIFIED_COPY, walk.current, speaker.archive, copy=answer.archive)
            return Found(
                url=word(pairs, "url") or "",
                answer=answer,
                relation=walk.relation,
                ibi=walk.current,
                hops=hop,
                conflicts=tuple(walk.conflicts),
                degraded=(*walk.degraded, copy),
            )
        return None

    # ------------------------------------------------------------------------ relations

    def _vouches(
        self, archive: str, owner: str | None, pairs: PairList, relation: Relation, current: str
    ) -> bool:
        """Whether ``archive``'s ``url<relation>`` counts: it is about ``current`` itself, or
        ``archive`` is also the authority of the related item it names (module notes)."""
        if not relation.steps:
            return True
        related = labels_of(pairs, spelled(pairs, relation.pair_name("ibi")))
        here = canonical_label(current)
        if not related:
            # No IBI named: a URL of the item's own (its metadata page, a translation known
            # only by its URL) — for a last edition, only when the chain goes no further.
            if involves_editions(relation):
                following = labels_of(pairs, "ibi.nextedition")
                return not following or here in following
            return True
        if here in related:
            return True
        return self._speaks_for(archive, owner, current, related, state_of(pairs, relation))

    def _speaks_for(
        self,
        archive: str,
        owner: str | None,
        current: str,
        related: frozenset[str],
        state: str | None,
    ) -> bool:
        """Whether ``archive`` is the authority of the related IBI (any of its forms)."""
        if self._owner_of is not None:
            owners = {self._owner_of(label) for label in related}
        else:  # no directory: the current IBI's owner, for related IBIs of its prefix
            prefix = _prefix(current)
            owners = {owner if _prefix(label) == prefix else None for label in related}
        known = {canonical_label(o) for o in owners if o is not None}
        if known:
            return canonical_label(archive) in known
        return state == "Original"  # a prefix no Archive owns: a claim of its original counts

    def _onward(
        self, archive: str, owner: str | None, pairs: PairList, walk: _Walk
    ) -> tuple[str, Relation] | None:
        """The (IBI, relation) to ask next, from the authority's answer: the longest
        ``ibi<prefix of r>`` it names (a last edition's only when it speaks for that edition
        too), then ``ibi.nextedition``; None when nothing leads further."""
        relation, here = walk.relation, canonical_label(walk.current)
        for hop in hops(relation):
            name = spelled(pairs, hop.pair_name)
            target = ibi_of(pairs, name)
            if target is None:
                continue
            related = labels_of(pairs, name)
            if here in related:
                if hop.relation == relation:
                    continue  # the item is its own next edition: no progress
                candidate = (walk.current, hop.relation)
            else:
                last = ".lastedition" in hop.pair_name
                taken = Relation(relation.steps[: len(relation) - len(hop.relation)])
                state = state_of(pairs, taken)
                if last and not self._speaks_for(archive, owner, walk.current, related, state):
                    continue  # another edition's authority says what follows it
                candidate = (target, hop.relation)
            if (canonical_label(candidate[0]), str(candidate[1])) not in walk.asked:
                return candidate
        steps = relation.steps
        if steps and steps[0].name == "GetLastEdition" and not ibi_of(pairs, "ibi.nextedition"):
            rest = Relation(steps[1:])  # no next edition: the item is its own last edition
            if (here, str(rest)) not in walk.asked:
                return walk.current, rest
        return None

    def _negotiate(self, relation: Relation, pairs: PairList) -> Relation:
        """A bare ``+`` becomes ``+(ll)`` by Accept-Language (§7.8) among the languages the
        authority names, or the item itself."""
        steps = list(relation.steps)
        for index, step in enumerate(steps):
            if step.name == "GetTranslation" and step.parameter is None:
                chosen = choose_language(self._accept_language, languages_offered([pairs]))
                if chosen is None:
                    del steps[index]
                else:
                    steps[index] = Verb.translation(chosen)
                return Relation(tuple(steps))
        return relation


def _prefix(label: str) -> str | None:
    try:
        return parse_label(label).prefix
    except InvalidInput:
        return None
