"""Whose word counts (issue 34): the one authority of each IBI, among one round's answers.

Pure. :func:`authority_of` reads one round of ``urlRequest`` answers about one IBI and says
whose answer counts (``resolution.py``, module notes): the owner of the IBI's prefix, or the
Archive its transfer records name once that Archive answers as the original's holder; for a
prefix no Archive owns, the single Archive claiming its original (two: a conflict, the first
by service IBI chosen). The readers of answers' pairs used by the resolution are here too:
an Archive's answer is never trusted to be well formed (a braced ``state`` reads as none).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList, label_of, parse_forms
from ibi.core.relations import Relation, hops, involves_editions, parse_pair_name
from ibi.core.transfers import moved_to

MAX_RECORD_HOPS = 4  # transfer records followed from the owner


class Trust(enum.Enum):
    """What an Archive is for the IBI asked (set by the fan-out)."""

    OWNER = "owner"  # it owns the IBI's prefix
    NAMED = "named"  # a transfer record of a trusted Archive names it
    UNOWNED = "unowned"  # no registered Archive owns the prefix
    UNTRUSTED = "untrusted"  # the prefix has an owner, and it is neither it nor named


@dataclass(frozen=True, slots=True)
class ArchiveAnswer:
    """What one Archive said to one urlRequest (``pairs`` is None if it did not answer)."""

    archive: str  # the Archive's service IBI (its key in the registry)
    address: str
    pairs: PairList | None
    problem: str | None = None  # why there is no answer: timeout, refused, not included …
    trust: Trust = Trust.UNOWNED
    owner: str | None = None  # the service IBI of the owner of the IBI's prefix, if any

    @property
    def trusted(self) -> bool:
        return self.trust is not Trust.UNTRUSTED


TWO_ORIGINALS = "two-originals"
UNTRUSTED_ORIGINAL = "untrusted-original"


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two or more Archives claimed the original of ``ibi`` (``relation`` asked), or
    (``untrusted-original``) Archives that may not claim it did: never followed."""

    ibi: str
    relation: Relation
    archives: tuple[str, ...]  # their service IBIs
    kind: str = TWO_ORIGINALS
    owner: str | None = None  # the prefix's owner (``untrusted-original``)


def word(pairs: PairList, name: str) -> str | None:
    value = pairs.get(name)
    return value if isinstance(value, str) else None


def url_pair(answer: PairList, relation: Relation) -> str | None:
    return word(answer, relation.pair_name("url")) or None


def state_of(answer: PairList, relation: Relation) -> str | None:
    return word(answer, relation.pair_name("state"))


def ibi_of(answer: PairList, pair_name: str) -> str | None:
    """A label from an ``ibi…`` pair's forms (ibip preferred)."""
    return label_of(answer, pair_name)


def labels_of(answer: PairList, pair_name: str) -> frozenset[str]:
    """Every form an ``ibi…`` pair names, canonical (empty when absent or malformed)."""
    value = answer.get(pair_name)
    if not value or isinstance(value, str):
        return frozenset()
    try:
        return frozenset(canonical_label(label) for label in parse_forms(value).values())
    except InvalidInput:
        return frozenset()


def canonical_label(text: str) -> str:
    try:
        return parse_label(text).label
    except InvalidInput:
        return text


ANONYMOUS = frozenset(
    {"servicesubject", "archiveaddress", "ibi.archiveservice", "ibi.platformsoftware", "urlkey"}
)


def knows(pairs: PairList | None) -> bool:
    """Whether an answer says anything of the IBI asked (an Archive that does not hold it
    answers an empty list, or only its own identification)."""
    return bool(pairs) and any(name not in ANONYMOUS for name in pairs.names())  # type: ignore[union-attr]


def is_deleted(pairs: PairList) -> bool:
    return word(pairs, "state") == "Deleted"


def claims_original(answer: PairList, relation: Relation) -> bool:
    return word(answer, "state") == "Original" or state_of(answer, relation) == "Original"


def claims_asked_original(answer: PairList, relation: Relation, asked: str) -> bool:
    """Whether ``answer`` claims the original of the IBI asked itself (not of a related IBI,
    which has a prefix and an authority of its own)."""
    if word(answer, "state") == "Original":
        return True
    if state_of(answer, relation) != "Original":
        return False
    related = labels_of(answer, relation.pair_name("ibi"))
    return not related or canonical_label(asked) in related


def untrusted_claims(
    held: Sequence[ArchiveAnswer], relation: Relation, asked: str
) -> list[ArchiveAnswer]:
    """The answers claiming the original of ``asked`` from Archives that may not (module notes)."""
    return [
        a
        for a in held
        if a.pairs and not a.trusted and claims_asked_original(a.pairs, relation, asked)
    ]


def leads_onward(answer: PairList, relation: Relation, asked: str) -> bool:
    """Whether ``answer`` names another IBI that serves ``relation`` (a hop to chase)."""
    here = canonical_label(asked)
    names = {pair_canonical(name) for name, value in answer if value}
    return any(
        hop.pair_name in names and here not in labels_of(answer, spelled(answer, hop.pair_name))
        for hop in hops(relation)
    )


def pair_canonical(name: str) -> str:
    try:
        kind, relation = parse_pair_name(name)
        return relation.pair_name(kind)
    except InvalidInput:
        return name.lower()


def spelled(answer: PairList, canonical: str) -> str:
    """The name ``answer`` gives a pair (relation qualifiers may come in any case)."""
    if canonical in answer:
        return canonical
    return next((name for name in answer.names() if pair_canonical(name) == canonical), canonical)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Who speaks for one IBI in one round (:func:`authority_of`)."""

    answer: ArchiveAnswer | None  # the authority's answer (empty pairs: it does not know it)
    owner: str | None  # the prefix's owner (None: no registered Archive owns it)
    conflicts: tuple[Conflict, ...] = ()
    suspects: tuple[ArchiveAnswer, ...] = ()  # claims of the original that do not count
    claims: tuple[ArchiveAnswer, ...] = ()  # unowned: every claim of the original heard
    copies: tuple[ArchiveAnswer, ...] = ()  # what every other Archive answered, unused

    @property
    def down(self) -> bool:
        """Owned, and the authority's word did not come."""
        return self.owner is not None and self.answer is None


def authority_of(
    answers: Sequence[ArchiveAnswer], asked: str, relation: Relation, *, known: str | None = None
) -> Verdict:
    """The authority's answer for ``asked`` among one round's ``answers`` (module notes).

    ``known``: the Archive whose answer was the authority's before (kept), for a prefix no
    Archive owns: while it answers for the IBI it stays the authority, so that a claim made
    later never takes the IBI over (the claim is named); else the first claim by service IBI.
    """
    owner = next((a.owner for a in answers if a.owner), None)
    if owner is not None:
        return _owned(answers, asked, relation, owner)
    heard = [a for a in answers if a.pairs is not None]
    claims = sorted(
        (a for a in heard if a.pairs and claims_asked_original(a.pairs, relation, asked)),
        key=lambda a: (a.archive != known, a.archive),
    )
    established = next((a for a in heard if a.archive == known and knows(a.pairs)), None)
    if established is not None and established not in claims:
        others = tuple(a for a in heard if a is not established)
        claimed = tuple(a.archive for a in claims)
        conflict = (Conflict(asked, relation, (established.archive, *claimed)),) if claims else ()
        return Verdict(established, None, conflict, claims=(established,), copies=others)
    if claims:
        conflict = (
            (Conflict(asked, relation, tuple(a.archive for a in claims)),)
            if len(claims) > 1
            else ()
        )
        others = tuple(a for a in heard if a is not claims[0])
        return Verdict(claims[0], None, conflict, claims=tuple(claims), copies=others)
    # No claim of the original: the copies' answers are all there is (unowned prefixes).
    ordered = sorted(
        (a for a in heard if a.pairs),
        key=lambda a: (not claims_original(a.pairs or PairList(), relation), a.archive),
    )
    onward = [a for a in ordered if a.pairs and leads_onward(a.pairs, relation, asked)]
    with_url = [a for a in ordered if a.pairs and url_pair(a.pairs, relation)]
    # A copy knows the editions it was made with: one leading onward comes first for ``!``.
    usable = onward + with_url if involves_editions(relation) else with_url + onward
    candidates = usable or ordered or heard
    chosen = candidates[0] if candidates else None
    return Verdict(chosen, None, copies=tuple(a for a in heard if a is not chosen))


def _owned(answers: Sequence[ArchiveAnswer], asked: str, relation: Relation, owner: str) -> Verdict:
    """The owner's answer, or the answer of the Archive its transfer records name once that
    Archive answers as the original's holder (the sender's answer stands until then)."""
    current = next((a for a in answers if a.trust is Trust.OWNER and a.pairs is not None), None)
    for _ in range(MAX_RECORD_HOPS):
        if current is None or current.pairs is None or word(current.pairs, "state") == "Original":
            break
        receiver_label = moved_to(current.pairs)
        if receiver_label is None:
            break
        named = canonical_label(receiver_label)
        receiver = next(
            (a for a in answers if a.trust is Trust.NAMED and canonical_label(a.archive) == named),
            None,
        )
        if receiver is None or not receiver.pairs:
            break  # the receiver has not answered for it yet: the sender's answer stands
        if not claims_asked_original(receiver.pairs, relation, asked) and not moved_to(
            receiver.pairs
        ):
            break
        current = receiver  # the original's holder, or a receiver that passed it on
    suspects = tuple(
        a
        for a in answers
        if a is not current
        and a.trust is Trust.UNTRUSTED
        and a.pairs
        and claims_asked_original(a.pairs, relation, asked)
    )
    conflicts = (
        (Conflict(asked, relation, tuple(a.archive for a in suspects), UNTRUSTED_ORIGINAL, owner),)
        if suspects
        else ()
    )
    copies = tuple(a for a in answers if a is not current and a.pairs is not None)
    return Verdict(current, owner, conflicts, suspects, copies=copies)
