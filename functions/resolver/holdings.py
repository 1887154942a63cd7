"""The holdings view: who holds an IBI, in what state, and do their bytes agree?

``GET /holdings/<ibi>`` asks every included Archive at once, through the resolution's own
fan-out (registered Archives only, the address policy, the answer cap, the per-Archive timeout),
one ``urlRequest`` that also carries the holdings extension (``ibi/core/holdings.py``). Each
Archive's answer becomes a :class:`Holding`; the verdict compares them: every copy's files
against the original's (path, SHA-256, size), two or more claimed originals, the chain of next
editions as the original's holder gives it (and who says otherwise), damaged files, and the
Archives that did not answer. A claim of the original by an Archive that may not make it (the
prefix has an owner, which is not it and did not name it in a transfer record: issue 24) is
named as such, and is never the original the copies are compared with. The edition chain is
followed one fan-out per edition, at most :data:`MAX_EDITIONS`, and only while a round still
fits in the resolution deadline.

Pure but for the fan-out and the clock: the route answers :meth:`HoldingsView.to_mapping` as
JSON, or the page made from it (``pages.holdings_page``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from functions.resolver.authority import ArchiveAnswer, Trust
from functions.resolver.fanout import FanOut
from functions.shared.headers import prefers
from ibi.core.errors import InvalidInput
from ibi.core.holdings import REQUEST_PAIR, Report, from_pairs
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList, parse_forms
from ibi.core.usage import MONTH, Usage, combined

MAX_EDITIONS = 8  # as the resolution's hops (spec §7.9)
# Unique_Item_Requests, as an Archive that counts them reports them (functions/archive/holdings.py)
UNIQUE_PAIR, UNIQUE_MONTHS_PAIR = "holdings.uniqueaccesses", "holdings.uniqueaccessesbymonth"
COUNTED = (
    "Requests through the persistent URL as COUNTER Release 5 counts them: a robot's or a "
    "machine's (the COUNTER-Robots list) never, one client's requests for the item within 30 "
    "seconds once; unique: once per client (address and User-Agent) per UTC hour. Summed over "
    "the item's authority and the copies whose files match its own."
)
STATE_ORDER = ("Original", "Copy", "Deleted", "held", "none", "unreachable")


@dataclass(frozen=True, slots=True)
class Holding:
    """One Archive's answer about one IBI."""

    archive: str
    address: str
    state: str  # Original | Copy | Deleted | held (no state said) | none | unreachable
    problem: str | None = None  # why it did not answer (unreachable)
    ibi: dict[str, str] | None = None
    timestamp: str | None = None
    url: str | None = None
    next_edition: dict[str, str] | None = None
    report: Report | None = None  # None: the Archive did not answer the holdings extension
    report_problem: str | None = None
    unique: Usage | None = None  # its Unique_Item_Requests (None: it does not report them)
    trust: str = Trust.UNOWNED.value  # whether it may claim the original (resolution.Trust)
    owner: str | None = None  # the owner of the IBI's prefix, if any

    @property
    def live(self) -> bool:
        return self.state in {"Original", "Copy", "held"}

    @property
    def untrusted_original(self) -> bool:
        """A claim of the original from an Archive that may not make it."""
        return self.state == "Original" and self.trust == Trust.UNTRUSTED.value

    def to_mapping(self) -> dict[str, Any]:
        report = self.report
        return {
            "archive": self.archive,
            "address": self.address,
            "state": self.state,
            "problem": self.problem,
            "ibi": self.ibi,
            "timestamp": self.timestamp,
            "url": self.url,
            "next_edition": self.next_edition,
            "extension": report is not None,
            "extension_problem": self.report_problem,
            "trust": self.trust,
            **(_report_mapping(report) if report is not None else {}),
            **({"unique_usage": self.unique.to_mapping()} if self.unique is not None else {}),
        }


def _report_mapping(report: Report) -> dict[str, Any]:
    return {
        "language": report.language,
        "listable": report.listable,
        "files": [f.to_mapping() for f in report.files],
        "file_count": report.file_count,
        "default_file": report.default_file,
        "damaged": list(report.damaged),
        "damaged_count": report.damaged_count,
        "metadata_formats": list(report.metadata_formats),
        "metadata": report.metadata.to_mapping() if report.metadata else None,
        "metadata_oai_dc": report.metadata_oai_dc.to_mapping() if report.metadata_oai_dc else None,
        "translations": {k: v.to_mapping() for k, v in sorted(report.translations.items())},
        "dc": {k: list(v) for k, v in report.dc.items()},
        "truncated": report.truncated,
        "usage": report.usage.to_mapping() if report.usage is not None else None,
        "link": _link_mapping(report),
    }


def _link_mapping(report: Report) -> dict[str, Any] | None:
    """The item's external URL as its Archive's last link check found it (None: unchecked)."""
    if report.link is None:
        return None
    return {
        "status": report.link,
        "checked": report.link_checked,
        "broken_since": report.link_broken_since,
        "reason": report.link_reason or None,
    }


def _forms(pairs: PairList, name: str) -> dict[str, str] | None:
    value = pairs.get(name)
    if value is None or isinstance(value, str):
        return None
    try:
        return parse_forms(value) or None
    except InvalidInput:
        return None


def _word(pairs: PairList, name: str) -> str | None:
    value = pairs.get(name)
    return value if isinstance(value, str) else None


def _unique(pairs: PairList) -> Usage | None:
    """The Unique_Item_Requests an answer reports (None: none, or malformed)."""
    total = _word(pairs, UNIQUE_PAIR)
    if total is None or not total.isdigit() or len(total) > 15:
        return None
    value = pairs.get(UNIQUE_MONTHS_PAIR)
    words = (value,) if isinstance(value, str) else tuple(value or ())
    months = dict(zip(words[::2], words[1::2], strict=False))
    if len(words) % 2 or not all(
        MONTH.fullmatch(m) and n.isdigit() and len(n) <= 15 for m, n in months.items()
    ):
        return None
    return Usage.of(int(total), {m: int(n) for m, n in months.items()})


def holding_of(answer: ArchiveAnswer) -> Holding:
    """What one Archive's answer (or silence) says."""
    pairs = answer.pairs
    trust, owner = answer.trust.value, answer.owner
    if pairs is None:
        failed = answer.problem or "failed"
        return Holding(
            answer.archive, answer.address, "unreachable", failed, trust=trust, owner=owner
        )
    if len(pairs) == 0:
        return Holding(answer.archive, answer.address, "none", trust=trust, owner=owner)
    report: Report | None = None
    problem: str | None = None
    try:
        report = from_pairs(pairs)
    except InvalidInput as error:
        problem = f"malformed holdings pairs: {error.reason}"[:200]
    state = _word(pairs, "state") or (report.state if report else None) or "held"
    if state not in STATE_ORDER:
        state = "held"
    return Holding(
        archive=answer.archive,
        address=answer.address,
        state=state,
        ibi=_forms(pairs, "ibi"),
        timestamp=_word(pairs, "timestamp") or (report.timestamp if report else None),
        url=_word(pairs, "url"),
        next_edition=_forms(pairs, "ibi.nextedition"),
        report=report if state != "Deleted" else None,
        report_problem=problem,
        unique=_unique(pairs) if report is not None and report.usage is not None else None,
        trust=answer.trust.value,
        owner=answer.owner,
    )


def _label(forms: dict[str, str] | None) -> str | None:
    if not forms:
        return None
    return forms.get("ibip") or forms.get("rep")


def _same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    return parse_label(a).label == parse_label(b).label


@dataclass(frozen=True, slots=True)
class CopyCheck:
    """A copy's files against the original's: ``agrees`` None when they cannot be compared."""

    archive: str
    agrees: bool | None
    differences: tuple[str, ...] = ()
    note: str | None = None

    def to_mapping(self) -> dict[str, Any]:
        return {
            "archive": self.archive,
            "agrees": self.agrees,
            "differences": list(self.differences),
            "note": self.note,
        }


def compare_copy(copy: Holding, original: Holding | None) -> CopyCheck:
    """Every file of the original, at the same path in the copy, with the same bytes."""
    if original is None:
        return CopyCheck(copy.archive, None, note="no single original to compare with")
    for holding in (original, copy):
        if holding.report is None:
            return CopyCheck(copy.archive, None, note=f"{holding.archive} does not list its files")
        if not holding.report.listable:
            return CopyCheck(copy.archive, None, note=f"{holding.archive}: files not listable")
    assert original.report is not None and copy.report is not None
    theirs = {f.path: f for f in original.report.files}
    ours = {f.path: f for f in copy.report.files}
    differences: list[str] = []
    for path, expected in theirs.items():
        held = ours.get(path)
        if held is None:
            differences.append(f"{path}: missing in the copy")
        elif held.sha256 != expected.sha256:
            differences.append(f"{path}: SHA-256 {held.sha256[:12]}… not {expected.sha256[:12]}…")
        elif held.size != expected.size:
            differences.append(f"{path}: {held.size} bytes, not {expected.size}")
    differences += [f"{path}: not in the original" for path in ours if path not in theirs]
    truncated = original.report.truncated or copy.report.truncated
    return CopyCheck(
        copy.archive,
        not differences,
        tuple(differences),
        "file lists cut short: compared what was listed" if truncated else None,
    )


@dataclass(frozen=True, slots=True)
class Edition:
    """One IBI of the edition chain and who holds it."""

    ibi: str
    holders: dict[str, str]  # archive -> state (live holders only)
    next_edition: str | None

    def to_mapping(self) -> dict[str, Any]:
        return {"ibi": self.ibi, "holders": self.holders, "next_edition": self.next_edition}


def authority_of(holdings: Sequence[Holding]) -> Holding | None:
    """The holding whose word counts (issue 34): the owner's (or the Archive its transfer
    record names, holding the original), else the one original claimed; None: none."""
    trusted = [h for h in holdings if h.trust in (Trust.OWNER.value, Trust.NAMED.value)]
    named = [h for h in trusted if h.trust == Trust.NAMED.value and h.state == "Original"]
    owner = [h for h in trusted if h.trust == Trust.OWNER.value and h.state != "unreachable"]
    if named or owner:
        return (named or owner)[0]
    if any(h.owner for h in holdings):
        return None  # owned, and its owner did not answer
    originals = [h for h in holdings if h.state == "Original"]
    return originals[0] if len(originals) == 1 else None


def _next_of(holdings: Sequence[Holding]) -> tuple[str | None, list[str]]:
    """The next edition as the IBI's authority says it (:func:`authority_of`; else the first
    live answer), and every live holder that says otherwise (a copy made before the link)."""
    live = [h for h in holdings if h.live and not h.untrusted_original]
    authority = authority_of(holdings)
    if authority is None or not authority.live:
        authority = live[0] if live else None
    if authority is None:
        return None, []
    chosen = _label(authority.next_edition)
    said = "none" if chosen is None else chosen
    disagreements = [
        f"{h.archive} ({h.state}) says next edition {_label(h.next_edition) or 'none'}; "
        f"{authority.archive} ({authority.state}) says {said}"
        for h in live
        if h is not authority and not _same(_label(h.next_edition), chosen)
    ]
    return chosen, disagreements


@dataclass
class HoldingsView:
    ibi: str
    holdings: list[Holding]
    chain: list[Edition] = field(default_factory=list)
    chain_note: str | None = None
    edition_disagreements: list[str] = field(default_factory=list)

    @property
    def originals(self) -> list[Holding]:
        """The claims of the original that may be made (an untrusted one: :meth:`untrusted`)."""
        return [h for h in self.holdings if h.state == "Original" and not h.untrusted_original]

    @property
    def untrusted(self) -> list[Holding]:
        return [h for h in self.holdings if h.untrusted_original]

    def copy_checks(self) -> list[CopyCheck]:
        originals = self.originals
        original = originals[0] if len(originals) == 1 else None
        return [compare_copy(h, original) for h in self.holdings if h.state == "Copy"]

    def problems(self) -> list[str]:
        """What the owner of the item should look at, in words (empty: all agree)."""
        found: list[str] = []
        originals = self.originals
        claims = [h for h in self.holdings if h.state == "Original"]  # trusted or not
        if len(claims) > 1:
            names = ", ".join(h.archive for h in claims)
            found.append(f"{len(claims)} Archives claim the original: {names}")
        found += [
            f"{h.archive} claims the original, but the prefix is owned by {h.owner}, which "
            "did not say the original moved there: the claim is not followed"
            for h in self.untrusted
        ]
        live = [h for h in self.holdings if h.live]
        if not live and not any(h.state == "Deleted" for h in self.holdings):
            found.append("no Archive that answered holds this IBI")
        elif live and not originals:
            found.append("no Archive that answered holds the original")
        for check in self.copy_checks():
            if check.agrees is False:
                found.append(
                    f"the copy in {check.archive} differs from the original: "
                    + "; ".join(check.differences[:5])
                )
        for h in self.holdings:
            if h.report is not None and h.report.damaged_count:
                paths = ", ".join(h.report.damaged) or f"{h.report.damaged_count} file(s)"
                found.append(f"{h.archive} holds damaged files (failed their SHA-256): {paths}")
            if h.state == "unreachable":
                found.append(f"{h.archive} did not answer: {h.problem}")
            if h.report is not None and h.report.link == "broken":
                since = h.report.link_broken_since or h.report.link_checked
                found.append(
                    f"{h.archive} leads to a broken URL ({h.url or 'its url'}) since {since}: "
                    f"{h.report.link_reason or 'no answer'}"
                )
        found += self.edition_disagreements
        if self.chain_note:
            found.append(self.chain_note)
        return found

    def counted(self) -> list[Holding]:
        """Whose figures are summed: the authority's and each copy's whose files match the
        authority's (each counts the resolutions that went to it); never a stranger's (issue
        34: no resolution goes to an unverified copy or an untrusted claim, and any registered
        Archive could report any number)."""
        authority = authority_of(self.holdings)
        if authority is None:
            return []
        verified = [
            h
            for h in self.holdings
            if h.state == "Copy" and compare_copy(h, authority).agrees is True
        ]
        return [authority, *verified]

    def usage(self) -> Usage:
        """The item's accesses (Total_Item_Requests), summed over :meth:`counted`."""
        return combined(
            h.report.usage for h in self.counted() if h.report is not None and h.report.usage
        )

    def unique_usage(self) -> Usage:
        """Its Unique_Item_Requests, summed over :meth:`counted` (those that report them)."""
        return combined(h.unique for h in self.counted() if h.unique is not None)

    def to_mapping(self) -> dict[str, Any]:
        ordered = sorted(self.holdings, key=lambda h: (STATE_ORDER.index(h.state), h.archive))
        problems = self.problems()
        return {
            "ibi": self.ibi,
            "usage": self.usage().to_mapping(),
            "unique_usage": self.unique_usage().to_mapping(),
            "usage_counted": COUNTED,
            "archives": [h.to_mapping() for h in ordered],
            "verdict": {
                "authority": (
                    authority.archive if (authority := authority_of(self.holdings)) else None
                ),
                "ok": not problems,
                "problems": problems,
                "originals": [h.archive for h in self.originals],
                "untrusted_originals": [h.archive for h in self.untrusted],
                "conflict": len(self.originals) > 1 or bool(self.untrusted),
                "copies": [c.to_mapping() for c in self.copy_checks()],
                "edition_chain": [e.to_mapping() for e in self.chain],
                "last_edition": self.chain[-1].ibi if self.chain else None,
                "edition_disagreements": self.edition_disagreements,
                "failed": [
                    {"archive": h.archive, "problem": h.problem}
                    for h in ordered
                    if h.state == "unreachable"
                ],
            },
        }


class HoldingsService:
    """Builds the holdings view of an IBI over the resolver's fan-out."""

    def __init__(
        self,
        fanout: FanOut,
        *,
        deadline: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fanout = fanout
        self.deadline = deadline  # for the whole view, the edition chain included
        self.clock = clock

    def _ask(self, label: str, client_ips: str, correlation_id: str) -> list[Holding]:
        pairs = [
            ("clientinformation.ipaddress", client_ips),
            ("parsedibiurl.ibi", label),
            REQUEST_PAIR,
        ]
        answers = self.fanout.ask(label, pairs, None, correlation_id=correlation_id)
        return [holding_of(answer) for answer in answers]

    def view(self, ibi: str, *, client_ips: str, correlation_id: str = "") -> HoldingsView:
        """Every included Archive's answer about ``ibi``; then its edition chain."""
        started = self.clock()
        label = parse_label(ibi).label
        holdings = self._ask(label, client_ips, correlation_id)
        view = HoldingsView(label, holdings)
        current, answers, seen = label, holdings, {label}
        for _ in range(MAX_EDITIONS):
            following, disagreements = _next_of(answers)
            view.edition_disagreements += disagreements
            holders = {h.archive: h.state for h in answers if h.live}
            view.chain.append(Edition(current, holders, following))
            if following is None:
                return view
            following = parse_label(following).label
            if following in seen:
                view.chain_note = f"the edition chain loops back to {following}"
                return view
            if self.clock() - started + self.fanout.timeout > self.deadline:
                view.chain_note = f"the edition chain was followed no further than {current}"
                return view
            seen.add(following)
            current, answers = following, self._ask(following, client_ips, correlation_id)
        view.chain_note = f"the edition chain is longer than {MAX_EDITIONS} editions"
        return view


def prefers_json(accept: str | None) -> bool:
    """Whether the client prefers ``application/json`` to ``text/html`` (by q-values)."""
    return prefers(accept, "application/json", over=("text/html",))
