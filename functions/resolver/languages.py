"""The language of a bare ``+`` (spec §7.8): Accept-Language against the languages offered."""

from __future__ import annotations

import re
from collections.abc import Sequence

from functions.shared.headers import quality as q_value
from ibi.core.pairlist import PairList

# url.translation(pt-BR)…, ibi.translation(en).lastedition …: the first translation step.
_TRANSLATION_PAIR = re.compile(r"(?:url|ibi)\.translation\(([A-Za-z]{2}(?:-[A-Za-z]{2})?)\)")


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
