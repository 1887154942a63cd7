"""``ibi deposit`` (mint, upload, register; a copy of an original checked against it; a next
version linked after the last), ``ibi holdings`` (who holds an IBI, and do they agree) and
``ibi cite`` (CITATION.cff for a version)."""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ibi_tools.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    Upload,
    api_options,
    archive_client,
    ibi_argument,
    print_json,
    read_metadata,
    read_upload,
    resolver_client,
    resolver_url,
    upload_progress,
)

if TYPE_CHECKING:
    from ibi_tools.cli.common import Commands


# ---------------------------------------------------------------------------- deposit


def add_deposit_command(commands: Commands) -> None:
    deposit = commands.add_parser(
        "deposit", help="deposit files in an Archive: mint, upload, register; print the IBI"
    )
    api_options(
        deposit,
        json_help="print the item as JSON (and no progress bar)",
        subsystem="the subsystem the Archive mints the IBI in",
    )
    deposit.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="files (kept at their relative path, e.g. sub/b.txt) or directories (their tree)",
    )
    deposit.add_argument("--url", help="the item is a file hosted elsewhere, at this URL")
    deposit.add_argument("--metadata", metavar="FILE", help="Dublin Core elements as JSON")
    deposit.add_argument(
        "--copy-of",
        type=ibi_argument,
        metavar="IBI",
        help="deposit a copy of this original: its files, checksums, metadata and links are "
        "read from its Archive through --resolver, and the FILEs must be its bytes",
    )
    deposit.add_argument("--language", help="ISO 639-1 language of the item (pt, pt-BR)")
    deposit.add_argument(
        "--resolver",
        metavar="URL",
        help="the resolver, for the persistent URL printed and --copy-of (default: "
        "$IBI_RESOLVER_URL)",
    )
    deposit.add_argument(
        "--idempotency-key",
        metavar="K",
        help="a retried deposit with the same key gets the same IBI (e.g. run id + SHA-256)",
    )
    deposit.add_argument(
        "--next-version-of",
        type=ibi_argument,
        metavar="IBI",
        help="a new version of the work this IBI (e.g. its first version) names: linked as "
        "the next edition of the last version reached from it, in the same Archive",
    )
    deposit.set_defaults(run=cmd_deposit)


def gather_files(names: Sequence[str]) -> tuple[list[Upload], str | None]:
    """The files to deposit and the default one.

    A FILE keeps its relative path (``sub/b.txt``); a directory gives every file of its tree,
    each at its path inside it. The default file is the first FILE, or a directory's
    ``index.html``.
    """
    files: list[Upload] = []
    default: str | None = None
    for position, name in enumerate(names):
        path = Path(name)
        if path.is_dir():
            tree = sorted(p for p in path.rglob("*") if p.is_file())
            if not tree:
                raise CommandError(f"{name}: the directory holds no file")
            files += [read_upload(p, p.relative_to(path).as_posix()) for p in tree]
        else:
            files.append(read_upload(path, _item_path(name)))
            if position == 0:
                default = files[0][0]
    paths = [f[0] for f in files]
    duplicated = sorted({p for p in paths if paths.count(p) > 1})
    if duplicated:
        raise CommandError(f"two FILEs have the same path in the item: {duplicated[0]}")
    if default is None and "index.html" in paths:
        default = "index.html"
    return files, default


def _item_path(name: str) -> str:
    """A FILE argument's path in the item: as given when relative (``sub/b.txt``), its name
    when absolute or when it climbs out of the current directory (``..``)."""
    path = Path(name)
    if path.is_absolute() or ".." in path.parts:
        return path.name
    return path.as_posix()


def _original(args: argparse.Namespace, resolver: str | None) -> dict[str, Any]:
    """The original's holding, from the resolver's holdings view (never the depositor's word)."""
    if not resolver:
        raise CommandError(
            "--copy-of: give --resolver URL (or IBI_RESOLVER_URL): the original's files, "
            "checksums and links are read from its Archive through the resolver"
        )
    view = resolver_client(resolver, args.timeout).holdings(args.copy_of)
    originals = [
        h
        for h in view["archives"]
        if h.get("state") == "Original" and h.get("trust") != "untrusted"  # as the Archive reads it
    ]
    if len(originals) != 1:
        claims = ", ".join(h["archive"] for h in originals)
        raise CommandError(
            f"{args.copy_of}: no Archive at {resolver} holds its original"
            if not originals
            else f"{args.copy_of}: {len(originals)} Archives claim its original ({claims}): "
            f"see {resolver.rstrip('/')}/holdings/{args.copy_of}",
            EXIT_FAILED,
        )
    return dict(originals[0])


def match_original(
    files: list[Upload], default: str | None, original: dict[str, Any]
) -> tuple[list[Upload], str | None, list[dict[str, Any]] | None]:
    """The copy's files checked against the original's: the same paths and bytes.

    A single FILE copying a single-file original takes the original's path. Returns the files
    (renamed so), the default file, and the expected files to send (None when the original's
    Archive does not list them: the copy then cannot be checked).
    """
    from ibi.client import digest

    listed = original.get("files") if original.get("listable") else None
    if not original.get("extension") or listed is None or original.get("truncated"):
        return files, default, None
    expected = {f["path"]: f for f in listed}
    if len(files) == 1 and len(expected) == 1 and files[0][0] not in expected:
        only = next(iter(expected))
        files, default = [(only, files[0][1], files[0][2])], only
    where = original["archive"]
    for path, content, _ in files:
        wanted = expected.get(path)
        given = _given_name(path, content)
        if wanted is None:
            such = f"file at {path}" if given != path else "such file"
            raise CommandError(
                f"{given}: the original in {where} has no {such} "
                f"({', '.join(sorted(expected)[:10]) or 'no files'})",
                EXIT_FAILED,
            )
        if digest(content) != (wanted["sha256"], wanted["size"]):
            raise CommandError(
                f"{given}: not the original's bytes (the original's {path} in {where} has "
                f"SHA-256 {wanted['sha256']}, {wanted['size']} bytes); a copy holds the same "
                "bytes",
                EXIT_FAILED,
            )
    missing = sorted(set(expected) - {f[0] for f in files})
    if files and missing:
        raise CommandError(
            f"the original in {where} also has {', '.join(missing[:10])}: give every file",
            EXIT_FAILED,
        )
    chosen = original.get("default_file") if original.get("default_file") in expected else default
    return (
        files,
        chosen,
        [{"path": p, "sha256": f["sha256"], "size": f["size"]} for p, f in expected.items()],
    )


def _warn_unverified(copy: dict[str, Any]) -> None:
    """Say so when the Archive could not read the original's files to check the copy."""
    check = copy.get("original_check") or {}
    if check.get("status") == "unverified":
        label = copy["ibi"].get("ibip") or copy["ibi"]["rep"]
        sys.stderr.write(
            f"ibi: warning: the Archive could not check this copy against its original "
            f"({check.get('reason')}): it is unverified; `ibi archive verify {label}` "
            "tries again\n"
        )


def _given_name(path: str, content: Any) -> str:
    """The FILE as the user named it (``x1mod.txt``, ``site/a.txt``), not its path in the item."""
    from ibi.client import LocalFile

    return str(content.path) if isinstance(content, LocalFile) else path


def copy_links(original: dict[str, Any]) -> list[dict[str, Any]]:
    """The original's links, as ``POST /api/item/links`` bodies for the copy."""
    links: list[dict[str, Any]] = []
    if original.get("next_edition"):
        links.append({"next_edition": original["next_edition"]})
    for language, link in sorted((original.get("translations") or {}).items()):
        target = {"ibi": link["ibi"]} if link.get("ibi") else {"url": link.get("url")}
        links.append({"translation": {"language": language, **target}})
    for name, fmt in (("metadata", None), ("metadata_oai_dc", "oai_dc")):
        link = original.get(name) or {}
        if link.get("ibi"):
            links.append({"metadata": {"ibi": link["ibi"], **({"format": fmt} if fmt else {})}})
    return links


def _copy_body(
    args: argparse.Namespace, original: dict[str, Any], body: dict[str, Any]
) -> dict[str, Any]:
    """A copy: the original's IBI (both forms), language, metadata and listability."""
    copy = {**body, "ibi": original.get("ibi") or args.copy_of}
    if original.get("language") and "language" not in copy:
        copy["language"] = original["language"]
    if original.get("dc") and "dc" not in copy:
        copy["dc"] = original["dc"]
    if original.get("extension") and original.get("listable") is False:
        copy["listable"] = False
    return copy


def cmd_deposit(args: argparse.Namespace) -> int:
    """Mint (or take) an IBI, upload the files, register the item; print IBI and URL."""
    from ibi.client import ApiError

    if not args.files and not args.url:
        raise CommandError("give the FILEs to deposit, or --url of a file hosted elsewhere")
    if args.files and args.url:
        raise CommandError(
            "give FILEs or --url, not both: an item is either files deposited here or one "
            "file hosted elsewhere (its persistent URL then redirects to --url)"
        )
    if args.next_version_of and args.copy_of:
        raise CommandError("--next-version-of: a copy takes the original's links (--copy-of)")
    files, default = gather_files(args.files)
    resolver = resolver_url(args)
    original = _original(args, resolver) if args.copy_of else None
    client = archive_client(args)
    body: dict[str, Any] = {}
    if args.url:
        body["url"] = args.url
    if args.language:
        body["language"] = args.language
    dc = read_metadata(args.metadata)
    if dc:
        body["dc"] = dc
    if original is not None:
        files, default, expected = match_original(files, default, original)
        if expected is None and files:
            sys.stderr.write(
                f"ibi: warning: {original['archive']} does not list the original's files: "
                "this copy's bytes cannot be checked against them\n"
            )
        body = _copy_body(args, original, body)
        if expected is not None:
            body["original_files"] = expected
        item = client.copy(body)
        _warn_unverified(item)
    else:
        if args.subsystem:
            body["subsystem"] = args.subsystem
        # Always a key: a deposit whose files fail is finished later under the same IBI.
        key = args.idempotency_key or f"ibi-cli-{uuid.uuid4()}"
        item = client.create(body, idempotency_key=key)
    label = item["ibi"].get("ibip") or item["ibi"]["rep"]
    if files:
        try:
            with upload_progress(args, files) as progress:
                item = client.upload_files(label, files, default_file=default, progress=progress)
        except ApiError as error:
            if original is not None:
                raise
            raise CommandError(
                f"{error}\nibi: {label} was created, but not its files: once the cause above is "
                f"fixed, run the same command with --idempotency-key {key} within the hour to "
                "finish this deposit under the same IBI",
                EXIT_FAILED,
            ) from None
    for link in copy_links(original) if original is not None else []:
        item = client.link(label, link)
    follows = next_version(args, client, item) if args.next_version_of else None
    print_deposit(args, item, f"{resolver}/{label}" if resolver else None, follows)
    return EXIT_OK


def print_deposit(
    args: argparse.Namespace, item: dict[str, Any], persistent: str | None, follows: str | None
) -> None:
    """The deposited item: as JSON, or its IBI forms and URL (and the version it follows)."""
    if args.json:
        linked = {"next_version_of": follows} if args.next_version_of else {}
        print_json({**item, "persistent_url": persistent, **linked})
        return
    forms = " ".join(item["ibi"][form] for form in ("rep", "ibip") if form in item["ibi"])
    sys.stdout.write(f"{forms}\n{persistent or item['urls']['item']}\n")
    if follows:
        sys.stdout.write(f"the next edition of {follows}\n")


def next_version(args: argparse.Namespace, client: Any, item: dict[str, Any]) -> str:
    """Link the deposit after the last version reached from ``--next-version-of`` (a
    conditional link: concurrent releases never fork the chain); the IBI it follows."""
    from ibi_tools.release import ReleaseError, link_next_version

    try:
        return link_next_version(client, args.next_version_of, item["ibi"])
    except ReleaseError as error:
        raise CommandError(
            f"{error}\nibi: {item['ibi'].get('ibip') or item['ibi']['rep']} was deposited but "
            "not linked as a next version: fix the cause and run the same command again (with "
            "the same --idempotency-key)",
            EXIT_FAILED,
        ) from None


# ---------------------------------------------------------------------------- holdings


def add_holdings_command(commands: Commands) -> None:
    holdings = commands.add_parser(
        "holdings",
        help="who holds an IBI, in what state, and do their bytes agree (exit 1 on a problem)",
        description=(
            "Asks the resolver's holdings view (GET /holdings/IBI): every included Archive's "
            "answer, then the verdict (copies against the original, the edition chain, two "
            "originals, Archives that did not answer)."
        ),
    )
    holdings.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    holdings.add_argument("--resolver", metavar="URL", help="the resolver (IBI_RESOLVER_URL)")
    holdings.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="per request (30)"
    )
    holdings.add_argument("--json", action="store_true", help="the view as the resolver's JSON")
    holdings.set_defaults(run=cmd_holdings)


def _holding_line(holding: dict[str, Any]) -> str:
    parts = [f"{holding['state']:<11} {holding['archive']} {holding.get('address') or '-'}"]
    if holding.get("problem"):
        parts.append(f"({holding['problem']})")
    if holding.get("timestamp"):
        parts.append(holding["timestamp"])
    if holding.get("next_edition"):
        forms = holding["next_edition"]
        parts.append("next " + (forms.get("ibip") or forms.get("rep")))
    if holding.get("language"):
        parts.append(f"lang {holding['language']}")
    if holding.get("translations"):
        parts.append("translations " + ",".join(holding["translations"]))
    if holding.get("metadata_formats"):
        parts.append("metadata " + ",".join(holding["metadata_formats"]))
    return " ".join(parts)


def holdings_text(view: dict[str, Any]) -> str:
    """The holdings view for a terminal: one line an Archive, its files, then the verdict."""
    lines = [f"Holdings of {view['ibi']}"]
    for holding in view["archives"]:
        lines.append("  " + _holding_line(holding))
        damaged = set(holding.get("damaged") or [])
        for held in holding.get("files") or []:
            mark = "  DAMAGED" if held["path"] in damaged else ""
            lines.append(f"      {held['sha256']} {held['size']:>10} {held['path']}{mark}")
        if holding.get("extension") and holding.get("listable") is False:
            lines.append("      (files not listable)")
    verdict = view["verdict"]
    chain = " -> ".join(e["ibi"] for e in verdict["edition_chain"])
    if chain:
        lines.append(f"Editions: {chain}")
    for check in verdict["copies"]:
        said = {True: "same files as the original", False: "DIFFERS"}.get(check["agrees"])
        lines.append(f"Copy in {check['archive']}: {said or check['note']}")
    if verdict["ok"]:
        lines.append("Verdict: ok, every Archive that answered agrees")
    else:
        lines += ["Verdict: problems", *(f"  - {p}" for p in verdict["problems"])]
    return "\n".join(lines) + "\n"


def cmd_holdings(args: argparse.Namespace) -> int:
    """Who holds an IBI, in what state, and do their bytes agree (exit 1 on a problem)."""
    resolver = resolver_url(args)
    if not resolver:
        raise CommandError("--resolver URL (or IBI_RESOLVER_URL) names the resolver")
    view = resolver_client(resolver, args.timeout).holdings(args.ibi)
    if args.json:
        print_json(view)
    else:
        sys.stdout.write(holdings_text(view))
    return EXIT_OK if view["verdict"]["ok"] else EXIT_FAILED


# ---------------------------------------------------------------------------- cite


def add_cite_command(commands: Commands) -> None:
    cite = commands.add_parser(
        "cite",
        help="CITATION.cff for a version: its persistent URL and the concept URL (first IBI!)",
    )
    cite.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the version")
    cite.add_argument(
        "--cff", action="store_true", help="write or update --file instead of printing it"
    )
    cite.add_argument("--file", default="CITATION.cff", metavar="PATH", help="(CITATION.cff)")
    cite.add_argument(
        "--concept",
        type=ibi_argument,
        metavar="IBI",
        help="the first version's IBI (default: the file's concept, else IBI itself)",
    )
    cite.add_argument("--version", help="the version's name, e.g. 1.2.0 (default: the file's)")
    cite.add_argument("--resolver", metavar="URL", help="the resolver (IBI_RESOLVER_URL)")
    cite.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="per request (30)"
    )
    cite.set_defaults(run=cmd_cite)


def cmd_cite(args: argparse.Namespace) -> int:
    """CITATION.cff for a version: printed, or written into ``--file`` (``--cff``)."""
    import datetime

    from ibi_tools import cff

    resolver = resolver_url(args)
    if not resolver:
        raise CommandError(
            "--resolver URL (or IBI_RESOLVER_URL): the item's metadata is read through it, and "
            "its persistent URLs start with it"
        )
    path = Path(args.file)
    view = resolver_client(resolver, args.timeout).holdings(args.ibi)
    held = [h for h in view["archives"] if h.get("state") in {"Original", "Copy"}]
    if not held:
        raise CommandError(f"{args.ibi}: no Archive at {resolver} holds it", EXIT_FAILED)
    try:
        citation = cff.citation_for(
            min(held, key=lambda h: h.get("state") != "Original"),
            ibi=args.ibi,
            resolver=resolver,
            existing=cff.read(path) if args.cff else None,
            concept=args.concept,
            version=args.version,
            today=datetime.datetime.now(datetime.UTC).date(),
        )
    except cff.CitationFileError as error:
        raise CommandError(str(error), EXIT_FAILED) from None
    if args.cff:
        path.write_text(cff.dump(citation), encoding="utf-8")
        sys.stdout.write(f"{path}: {args.ibi}, concept {citation['identifiers'][1]['value']}\n")
    else:
        sys.stdout.write(cff.dump(citation))
    return EXIT_OK
