"""A release from CI: its artefacts deposited as one item, linked as the next edition of the
last version, CITATION.cff updated (``python -m ibi_tools.release``; the GitHub Action's step).

The program reads what GitHub gives a step (``GITHUB_REPOSITORY``, ``GITHUB_RUN_ID``,
``GITHUB_REF_NAME``, ``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY`` …) and the action's inputs as
``IBI_*`` variables (:class:`Settings`), and does five things:

1. Asks the Archive who it is (``GET /api/service``): a wrong endpoint or a role the Archive's
   API refuses fails here, before anything is minted, with what to check.
2. Deposits the files matched by the globs in one item (one IBI a version), under the
   Idempotency-Key ``gh:<repository>:<run id>:<version>``: a re-run of the same run (any
   attempt) gets the same IBI back, and its files again are a no-op.
3. Links the item as the next edition of the last version (:func:`link_next_version`): from
   the previous version given, else the concept IBI of CITATION.cff, the chain is followed
   through the Archive's ``next_edition`` links to its end, and the link there is a conditional
   write (``"if_none": true``): if another release linked first, the walk goes on from it. So
   concurrent releases make one chain, and the first version's IBI with ``!`` leads to the
   newest.
4. Writes CITATION.cff with the version's persistent URL and the concept URL.
5. Writes the step's outputs and a job summary with each file's SHA-256.
"""

from __future__ import annotations

import datetime
import glob
import hashlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ibi import __version__
from ibi.client import ApiError, ArchiveClient
from ibi_tools import cff

MAX_CHAIN = 10_000  # editions followed from the previous version before giving up (a loop)
LINK_ATTEMPTS = 20  # links tried after the last edition while other releases keep linking first
MAX_KEY = 200  # the Archive's longest Idempotency-Key
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._:/+=@-]")
_V_TAG = re.compile(r"[vV]\d.*")


class ReleaseError(Exception):
    """What stops a release: the message says what to check or change."""


# ---------------------------------------------------------------------------- the chain


def labels_of(forms: Mapping[str, Any] | None) -> set[str]:
    """The labels of an IBI as the Archive's JSON gives it (``{"ibip": …, "rep": …}``)."""
    return {str(forms[f]) for f in ("ibip", "rep") if forms and forms.get(f)}


def label_of(forms: Mapping[str, Any]) -> str:
    """The label an item is named by: its ibip form when it has one."""
    return str(forms.get("ibip") or forms["rep"])


@dataclass(frozen=True, slots=True)
class ChainEnd:
    """Where a walk along the next-edition links stopped: at ``last`` (no next edition), or
    at ``before`` the release itself (already linked: a re-run)."""

    last: str
    linked: bool


def walk(client: ArchiveClient, start: str, release: set[str]) -> ChainEnd:
    """Follow ``next_edition`` from ``start`` in the Archive to the chain's end, or to the
    release (an item labelled by one of ``release``)."""
    current, seen = start, set[str]()
    for _ in range(MAX_CHAIN):
        try:
            item = client.item(current)
        except ApiError as error:
            if error.status == 404:
                came = f", reached from {start}," if current != start else ""
                raise ReleaseError(
                    f"{current}{came} is not held by the Archive at {client.endpoint}: a release "
                    "is linked in the Archive that holds the last version (give the previous "
                    "version held there)"
                ) from None
            raise
        here = labels_of(item["ibi"])
        if here & release:
            raise ReleaseError(f"{current} is this release itself: give an earlier version")
        if here & seen:
            raise ReleaseError(f"the edition chain from {start} loops at {current}")
        seen |= here
        following = labels_of(item.get("next_edition"))
        if not following:
            return ChainEnd(label_of(item["ibi"]), linked=False)
        if following & release:
            return ChainEnd(label_of(item["ibi"]), linked=True)
        current = min(following)
    raise ReleaseError(f"the edition chain from {start} is longer than {MAX_CHAIN} versions")


def link_next_version(client: ArchiveClient, previous: str, release: Mapping[str, Any]) -> str:
    """Link ``release`` (its IBI's forms) as the next edition of the last version reached from
    ``previous``; the IBI it now follows. Never forks the chain: the link is set only where
    there is none (409 ``NextEditionExists`` otherwise: the walk goes on from there)."""
    own, start = labels_of(release), previous
    for _ in range(LINK_ATTEMPTS):
        end = walk(client, start, own)
        if end.linked:
            return end.last  # linked before (a re-run of the same release)
        try:
            client.link(end.last, {"next_edition": label_of(release), "if_none": True})
        except ApiError as error:
            if error.status == 409 and error.code == "NextEditionExists":
                start = end.last  # another release linked first: go on after it
                continue
            raise
        return end.last
    raise ReleaseError(
        f"other releases kept linking after {start} ({LINK_ATTEMPTS} attempts): run again"
    )


# ---------------------------------------------------------------------------- settings


def _lines(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


@dataclass(frozen=True, slots=True)
class Settings:
    """The step's environment: the action's inputs (``IBI_*``) and what GitHub sets."""

    files: tuple[str, ...]
    endpoint: str
    resolver: str
    repository: str
    run_id: str
    title: str | None = None
    creators: tuple[str, ...] = ()
    version: str | None = None
    previous: str | None = None
    citation: Path = Path("CITATION.cff")
    subsystem: str | None = None
    sign: bool | None = None
    tag: str | None = None
    workspace: Path = Path()
    outputs: Path | None = None
    summary: Path | None = None
    annotate: bool = False

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> Settings:
        def need(name: str, what: str, hint: str) -> str:
            value = (env.get(name) or "").strip()
            if not value:
                raise ReleaseError(f"{what} is missing ({name}): {hint}")
            return value

        def path(name: str) -> Path | None:
            return Path(env[name]) if env.get(name) else None

        workspace = Path(env.get("GITHUB_WORKSPACE") or ".")
        files = _lines(env.get("IBI_FILES"))
        if not files:
            raise ReleaseError("files: give the release's files, one glob a line (IBI_FILES)")
        sign = (env.get("IBI_SIGN") or "auto").strip().lower()
        if sign not in {"auto", "true", "false"}:
            raise ReleaseError(f"sign is auto, true or false, not {sign!r} (IBI_SIGN)")
        return cls(
            files=tuple(files),
            endpoint=need(
                "IBI_ARCHIVE_ENDPOINT",
                "archive-endpoint",
                "the Archive's URL (IbiArchive.ArchiveUrl)",
            ),
            resolver=need(
                "IBI_RESOLVER_URL", "resolver-url", "the base of persistent URLs (ResolverUrl)"
            ),
            repository=need("GITHUB_REPOSITORY", "the repository", "GitHub sets it (owner/name)"),
            run_id=need("GITHUB_RUN_ID", "the workflow run's id", "GitHub sets it"),
            title=(env.get("IBI_TITLE") or "").strip() or None,
            creators=tuple(_lines(env.get("IBI_CREATORS"))),
            version=(env.get("IBI_VERSION") or "").strip() or None,
            previous=(env.get("IBI_PREVIOUS_VERSION") or "").strip() or None,
            citation=workspace / (env.get("IBI_CITATION_FILE") or "CITATION.cff"),
            subsystem=(env.get("IBI_SUBSYSTEM") or "").strip() or None,
            sign=None if sign == "auto" else sign == "true",
            tag=env.get("GITHUB_REF_NAME") if env.get("GITHUB_REF_TYPE") == "tag" else None,
            workspace=workspace,
            outputs=path("GITHUB_OUTPUT"),
            summary=path("GITHUB_STEP_SUMMARY"),
            annotate=env.get("GITHUB_ACTIONS") == "true",
        )


def idempotency_key(repository: str, run_id: str, version: str) -> str:
    """``gh:<repository>:<run id>:<version>``: every attempt of one run's release gets one IBI
    (the Archive's key alphabet; a key too long keeps its start and a digest of the whole)."""
    key = _KEY_UNSAFE.sub("-", f"gh:{repository}:{run_id}:{version}")
    if len(key) <= MAX_KEY:
        return key
    return key[: MAX_KEY - 17] + "-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def version_of_tag(tag: str | None) -> str | None:
    """The version a release's tag names: ``v1.2.0`` is 1.2.0; another tag, its name."""
    if not tag:
        return None
    return tag[1:] if _V_TAG.fullmatch(tag) else tag


@dataclass(frozen=True, slots=True)
class Metadata:
    """The release's title, creators and version (:func:`metadata`)."""

    title: str
    creators: tuple[str, ...]
    version: str
    dc: dict[str, list[str]] = field(default_factory=dict)


def metadata(
    settings: Settings, citation: Mapping[str, Any] | None, today: datetime.date
) -> Metadata:
    """The release's metadata, each field from the input, else CITATION.cff; the version from
    the input, else the tag being released (``v1.2.0`` as ``1.2.0``), else CITATION.cff (which
    a committed file would give as the previous release's)."""
    given = dict(citation or {})
    title = settings.title or given.get("title")
    creators = settings.creators or tuple(cff.creators_of(given.get("authors")))
    version = settings.version or version_of_tag(settings.tag) or given.get("version")
    missing = [
        what
        for what, value in (("title", title), ("creators", creators), ("version", version))
        if not value
    ]
    if missing:
        raise ReleaseError(
            f"give the release's {' and '.join(missing)}: the action's inputs, or "
            f"{settings.citation.name} (title, authors, version)"
        )
    described = {
        **given,
        "title": str(title),
        "authors": cff.authors_of(creators),
        "date-released": today.isoformat(),
    }
    return Metadata(str(title), tuple(creators), str(version), cff.dublin_core(described))


# ---------------------------------------------------------------------------- artefacts


@dataclass(frozen=True, slots=True)
class Artefact:
    path: str  # in the item: the file's name
    local: Path
    sha256: str
    size: int
    content_type: str


def artefacts(settings: Settings) -> list[Artefact]:
    """The files the globs match (in the workspace), each at its name in the item."""
    from ibi.client import digest
    from ibi_tools.cli.common import CommandError, read_upload

    found: dict[str, Path] = {}
    for pattern in settings.files:
        matched = sorted(
            Path(p)
            for p in glob.glob(str(settings.workspace / pattern), recursive=True)
            if Path(p).is_file()
        )
        if not matched:
            raise ReleaseError(f"files: nothing matches {pattern!r} in {settings.workspace}")
        for local in matched:
            other = found.setdefault(local.name, local)
            if other.resolve() != local.resolve():
                raise ReleaseError(
                    f"files: two files are named {local.name} ({other} and {local}); an item "
                    "holds each at its name"
                )
    listed: list[Artefact] = []
    for name, local in found.items():
        try:
            _, content, kind = read_upload(local, name)
        except CommandError as error:
            raise ReleaseError(f"files: {error}") from None
        sha256, size = digest(content)
        listed.append(Artefact(name, local, sha256, size, kind))
    return listed


# ---------------------------------------------------------------------------- the release


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a release made: the item and where it sits in the chain."""

    ibi: str
    rep: str | None
    persistent_url: str
    concept: str
    concept_url: str
    follows: str | None
    version: str
    files: tuple[Artefact, ...]
    citation: Path

    def file_url(self, artefact: Artefact) -> str:
        return f"{self.persistent_url}/{quote(artefact.path)}"


def _reach(client: ArchiveClient, settings: Settings) -> None:
    """The Archive answers, and lets this caller in: else what to check."""
    try:
        client.service()
    except ApiError as error:
        if error.status == 0:
            raise ReleaseError(
                f"{error.message} (check archive-endpoint: the Archive's URL, stack output "
                "IbiArchive.ArchiveUrl)"
            ) from None
        if error.status in (401, 403):
            raise ReleaseError(
                f"the Archive at {settings.endpoint} refused these credentials ({error}): "
                "check role-to-assume is the stack's CiRoleArn, that the job runs in the "
                "environment (or branch) the role trusts, with permissions: id-token: write, "
                "and that aws-region is the stacks' region"
            ) from None
        raise ReleaseError(f"the Archive at {settings.endpoint} answered {error}") from None


def release(
    settings: Settings,
    *,
    client: ArchiveClient,
    today: datetime.date,
) -> Outcome:
    """Deposit, link, cite (see the module's description); idempotent for one run."""
    _reach(client, settings)
    try:
        citation = cff.read(settings.citation)
    except cff.CitationFileError as error:
        raise ReleaseError(str(error)) from None
    described = metadata(settings, citation, today)
    files = artefacts(settings)
    body: dict[str, Any] = {"dc": described.dc}
    if settings.subsystem:
        body["subsystem"] = settings.subsystem
    key = idempotency_key(settings.repository, settings.run_id, described.version)
    item = client.create(body, idempotency_key=key)
    label = label_of(item["ibi"])
    from ibi.client import LocalFile

    client.upload_files(
        label,
        [(f.path, LocalFile(f.local), f.content_type) for f in files],
        default_file=files[0].path,
    )
    previous = settings.previous or cff.concept_of(citation, settings.resolver)
    if previous in labels_of(item["ibi"]):
        previous = None  # the concept is this release: the first version, run again
    follows = link_next_version(client, previous, item["ibi"]) if previous else None
    concept = cff.concept_of(citation, settings.resolver) or previous or label
    resolver = settings.resolver.rstrip("/")
    outcome = Outcome(
        ibi=label,
        rep=item["ibi"].get("rep"),
        persistent_url=f"{resolver}/{label}",
        concept=concept,
        concept_url=f"{resolver}/{concept}!",
        follows=follows,
        version=described.version,
        files=tuple(files),
        citation=settings.citation,
    )
    version = cff.Version(
        title=described.title,
        creators=described.creators,
        version=described.version,
        released=today,
        persistent_url=outcome.persistent_url,
        concept_url=outcome.concept_url,
    )
    settings.citation.write_text(cff.dump(cff.with_version(citation, version)), encoding="utf-8")
    return outcome


# ---------------------------------------------------------------------------- what GitHub shows


def outputs(outcome: Outcome) -> Iterator[tuple[str, str]]:
    """The step's outputs."""
    yield "ibi", outcome.ibi
    yield "ibi-rep", outcome.rep or ""
    yield "persistent-url", outcome.persistent_url
    yield "concept-ibi", outcome.concept
    yield "concept-url", outcome.concept_url
    yield "previous-ibi", outcome.follows or ""
    yield "citation-file", str(outcome.citation)


def summary(outcome: Outcome) -> str:
    """The job summary (GitHub-flavoured Markdown): the IBI, the chain, each file's SHA-256."""
    place = (
        f"the next edition of `{outcome.follows}`"
        if outcome.follows
        else "the first version: its IBI is the concept"
    )
    lines = [
        f"### Release {outcome.version}: IBI `{outcome.ibi}`",
        "",
        f"- persistent URL: {outcome.persistent_url}",
        f"- every version, leading to the latest: {outcome.concept_url}",
        f"- {place}",
        f"- the files and their checksums at the persistent URL: "
        f"{outcome.persistent_url}?ibiurl.verblist=GetFileList",
        "",
        "| file | bytes | SHA-256 |",
        "|---|---:|---|",
    ]
    lines += [
        f"| [`{f.path}`]({outcome.file_url(f)}) | {f.size} | `{f.sha256}` |" for f in outcome.files
    ]
    lines += [
        "",
        "A download is these bytes when `sha256sum FILE` prints the SHA-256 above.",
        "",
    ]
    return "\n".join(lines)


def _append(path: Path | None, text: str) -> None:
    if path is not None:
        with path.open("a", encoding="utf-8") as stream:
            stream.write(text)


def report(settings: Settings, outcome: Outcome) -> None:
    """Outputs and summary where GitHub reads them, and the IBI and URLs on stdout."""
    _append(settings.outputs, "".join(f"{name}={value}\n" for name, value in outputs(outcome)))
    _append(settings.summary, summary(outcome))
    sys.stdout.write(f"{outcome.ibi}\n{outcome.persistent_url}\n{outcome.concept_url}\n")
    for artefact in outcome.files:
        sys.stdout.write(f"{artefact.sha256}  {artefact.path}\n")


def fail(annotate: bool, message: str) -> int:
    """Exit status 1, the message on stderr (and as a GitHub annotation in a workflow)."""
    sys.stderr.write(f"ibi release: {message}\n")
    if annotate:  # a GitHub annotation: the message on the run's page
        flat = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        sys.stdout.write(f"::error title=IBI release::{flat}\n")
    return 1


def main(
    env: Mapping[str, str] | None = None,
    *,
    client_for: Callable[[Settings], ArchiveClient] | None = None,
    today: Callable[[], datetime.date] | None = None,
    argv: Sequence[str] | None = None,
) -> int:
    """The action's program: settings from ``env`` (default: the process's environment)."""
    if argv and argv[0] in {"-h", "--help", "--version"}:
        sys.stdout.write(f"ibi {__version__}\n{__doc__}")
        return 0
    env = os.environ if env is None else env
    annotate = env.get("GITHUB_ACTIONS") == "true"
    try:
        settings = Settings.from_environ(env)
        make = client_for or _client
        outcome = release(
            settings,
            client=make(settings),
            today=(today or (lambda: datetime.datetime.now(datetime.UTC).date()))(),
        )
    except ReleaseError as error:
        return fail(annotate, str(error))
    except ApiError as error:
        return fail(annotate, f"the Archive answered {error}")
    report(settings, outcome)
    return 0


def _client(settings: Settings) -> ArchiveClient:
    try:
        return ArchiveClient(settings.endpoint, sign=settings.sign)
    except ApiError as error:
        raise ReleaseError(f"archive-endpoint: {error.message}") from None


if __name__ == "__main__":
    sys.exit(main(argv=sys.argv[1:]))
