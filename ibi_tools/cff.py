"""``CITATION.cff`` (Citation File Format 1.2.0) for a work whose versions have IBIs.

A release's file names its version's persistent URL and its concept URL in ``identifiers``:
the concept is the first version's IBI followed by ``!`` (the resolver's last edition, spec
§5.1), so that it always leads to the newest version, as a concept DOI does. The concept is
read back from the same field (the identifier whose persistent URL ends in ``!``), which is how
a later release finds the chain it extends.

Metadata goes both ways: the CFF's title and authors are the deposit's Dublin Core (``title``,
``creator`` as ``Family, Given``), which is what the persistent URL's content negotiation cites
(``ibi/core/citation.py``), so the file and the resolver give the same citation.

YAML is read with PyYAML's safe loader, dates kept as the text they are (the CFF schema wants
strings), and written back in the file's own key order; comments are not kept.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.persistent_url import parse_ibi_or_persistent_url

CFF_VERSION = "1.2.0"
MESSAGE = "If you use this work, please cite it using the metadata from this file."
CONCEPT_DESCRIPTION = "The concept IBI: the first version's, with ! it leads to the latest version"
VERSION_DESCRIPTION = "The IBI of this version"
# CFF's work types and the Dublin Core type the resolver's citations read (ibi/core/citation.py).
DC_TYPES = {"software": "software", "dataset": "dataset"}


class CitationFileError(Exception):
    """A CITATION.cff that cannot be read or used: the message says what to fix."""


class _TextDates(yaml.SafeLoader):
    """The safe loader, but ``2024-05-01`` stays text (CFF's dates are strings)."""


_TextDates.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load(text: str, where: str = "CITATION.cff") -> dict[str, Any]:
    """A CITATION.cff's mapping (an empty file is an empty mapping)."""
    try:
        data = yaml.load(text, Loader=_TextDates)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        raise CitationFileError(f"{where} is not YAML: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CitationFileError(f"{where} is not a YAML mapping (cff-version: 1.2.0, title: …)")
    return data


def read(path: Path) -> dict[str, Any] | None:
    """The file's mapping, or None when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CitationFileError(f"{path}: {error.strerror}") from None
    return load(text, str(path))


def dump(data: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, width=100)


# ---------------------------------------------------------------------------- people


def authors_of(creators: Sequence[str]) -> list[dict[str, str]]:
    """Dublin Core creators as CFF authors: ``Family, Given`` a person, any other an entity."""
    authors: list[dict[str, str]] = []
    for creator in creators:
        family, comma, given = creator.partition(",")
        if comma and family.strip() and given.strip():
            authors.append({"family-names": family.strip(), "given-names": given.strip()})
        elif creator.strip():
            authors.append({"name": creator.strip()})
    return authors


def creators_of(authors: Any) -> list[str]:
    """CFF authors as Dublin Core creators (``Family, Given``; an entity by its name)."""
    if not isinstance(authors, list):
        return []
    creators: list[str] = []
    for author in authors:
        if not isinstance(author, dict):
            continue
        family = " ".join(
            str(author[part]).strip()
            for part in ("name-particle", "family-names", "name-suffix")
            if author.get(part)
        )
        given = str(author.get("given-names") or "").strip()
        if family and given:
            creators.append(f"{family}, {given}")
        elif family or given:
            creators.append(family or given)
        elif author.get("name"):
            creators.append(str(author["name"]).strip())
    return creators


# ---------------------------------------------------------------------------- identifiers


def ibi_in(url: str, resolver: str | None = None) -> tuple[str, bool] | None:
    """(the IBI, whether the URL asks for its last edition) of a persistent URL; None for a
    URL that names no IBI (a DOI, a repository). With ``resolver``, only its URLs count."""
    if not isinstance(url, str):
        return None
    tail = url
    if resolver is not None:
        base = resolver.rstrip("/") + "/"
        if not url.startswith(base):
            return None
        tail = url[len(base) :]
    last = tail.endswith("!")
    try:
        named = parse_ibi_or_persistent_url(tail[:-1] if last else tail)
    except (InvalidIBI, InvalidInput):
        return None
    if named.modifier or named.file_path:
        return None
    return named.ibi.label, last


def concept_of(data: Mapping[str, Any] | None, resolver: str | None = None) -> str | None:
    """The concept IBI a CITATION.cff names: its identifier whose persistent URL ends in ``!``."""
    for identifier in (data or {}).get("identifiers") or []:
        if isinstance(identifier, dict) and identifier.get("type") == "url":
            found = ibi_in(str(identifier.get("value", "")), resolver)
            if found is not None and found[1]:
                return found[0]
    return None


@dataclass(frozen=True, slots=True)
class Version:
    """One version of the work, as a CITATION.cff states it."""

    title: str
    creators: tuple[str, ...]
    version: str | None
    released: datetime.date
    persistent_url: str
    concept_url: str
    kind: str = "software"


def with_version(data: Mapping[str, Any] | None, version: Version) -> dict[str, Any]:
    """``data`` (a CITATION.cff's mapping, or None for a new file) describing ``version``.

    Its title and authors are kept when it has them; ``version``, ``date-released`` and the
    two IBI identifiers are this version's (an earlier version's persistent URLs, at any
    resolver, are dropped; other identifiers, a DOI say, are kept).
    """
    cff: dict[str, Any] = dict(data or {})
    cff.setdefault("cff-version", CFF_VERSION)
    cff.setdefault("message", MESSAGE)
    cff.setdefault("type", version.kind)
    if not cff.get("title"):
        cff["title"] = version.title
    if not cff.get("authors"):
        cff["authors"] = authors_of(version.creators)
    if version.version is not None:
        cff["version"] = version.version
    cff["date-released"] = version.released.isoformat()
    kept = [
        identifier
        for identifier in cff.get("identifiers") or []
        if not (
            isinstance(identifier, dict)
            and identifier.get("type") == "url"
            and ibi_in(str(identifier.get("value", ""))) is not None
        )
    ]
    cff["identifiers"] = [
        {"type": "url", "value": version.persistent_url, "description": VERSION_DESCRIPTION},
        {"type": "url", "value": version.concept_url, "description": CONCEPT_DESCRIPTION},
        *kept,
    ]
    return cff


def dublin_core(cff: Mapping[str, Any]) -> dict[str, list[str]]:
    """What a CITATION.cff says as the deposit's Dublin Core (the resolver's citation)."""
    dc: dict[str, list[str]] = {}
    if cff.get("title"):
        dc["title"] = [str(cff["title"])]
    if creators := creators_of(cff.get("authors")):
        dc["creator"] = creators
    if cff.get("date-released"):
        dc["date"] = [str(cff["date-released"])]
    dc["type"] = [DC_TYPES.get(str(cff.get("type") or "software"), "software")]
    if cff.get("abstract"):
        dc["description"] = [str(cff["abstract"])]
    keywords = cff.get("keywords")
    if isinstance(keywords, list) and keywords:
        dc["subject"] = [str(k) for k in keywords]
    if isinstance(cff.get("license"), str):
        dc["rights"] = [cff["license"]]
    return dc


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def released_on(dc: Mapping[str, Any], default: datetime.date) -> datetime.date:
    """The item's ``dc:date`` when it is a whole date, else ``default``."""
    for value in dc.get("date") or ():
        match = _DATE.match(str(value))
        if match:
            try:
                return datetime.date.fromisoformat(match.group())
            except ValueError:
                continue
    return default


def citation_for(
    holding: Mapping[str, Any],
    *,
    ibi: str,
    resolver: str,
    existing: Mapping[str, Any] | None,
    concept: str | None,
    version: str | None,
    today: datetime.date,
) -> dict[str, Any]:
    """``existing`` (or a new CITATION.cff) for the version ``ibi``, from its Archive's
    holding (the resolver's holdings view): title and creators from its Dublin Core where the
    file has none, the persistent URL, and the concept URL (``concept``, else the file's, else
    ``ibi`` itself: the first version)."""
    dc = holding.get("dc") or {}
    titles = [str(t) for t in dc.get("title") or () if str(t).strip()]
    creators = tuple(str(c) for c in dc.get("creator") or () if str(c).strip())
    given = existing or {}
    if not (titles or given.get("title")) or not (creators or given.get("authors")):
        raise CitationFileError(
            f"{ibi} has no title or creator in its metadata, and the file gives none: add "
            "title and authors to the file"
        )
    types = " ".join(str(t) for t in dc.get("type") or ()).lower()
    base = resolver.rstrip("/")
    concept = concept or concept_of(existing, resolver) or ibi
    return with_version(
        existing,
        Version(
            title=titles[0] if titles else str(given["title"]),
            creators=creators,
            version=version,
            released=released_on(dc, today),
            persistent_url=f"{base}/{ibi}",
            concept_url=f"{base}/{concept}!",
            kind="dataset" if "dataset" in types else "software",
        ),
    )
