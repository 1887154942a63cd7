"""``ibi``: the command line of the IBI system.

``label`` and ``inspect`` print the contract outputs that conformance suites read; ``mint``
and ``mints`` talk to a minting API; ``deposit``, ``archive`` and ``resolver`` to an Archive's
deposit API and a resolver; ``local`` runs the services on loopback. Every command that prints
JSON does so with ``--json`` only, and prints text for people without it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import signal
import sqlite3
import sys
import uuid
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ibi import __version__
from ibi.core.dates import format_date, parse_date
from ibi.core.distributor import Granularity, TemporalDistributor
from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import DEFAULT_IBIP_PORT, DEFAULT_REP_PORT, IBI, parse_label
from ibi.defaults import ADMIN_EMAIL, RESOLVER_SERVICE_IBI

if TYPE_CHECKING:
    from ibi.client import UploadProgress

    _Commands = argparse._SubParsersAction["_Parser"]

DESCRIPTION = (
    "ibi: the command line of the IBI system: make and decode IBIs, mint them, deposit items "
    "in an Archive and manage it, ask a resolver, run the federation locally."
)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(Exception):
    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2, and an unknown
    option is refused by the command it was given to, with the option it is likely to mean."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"ibi: {message} (see `{self.prog} --help`)\n")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command: argparse.ArgumentParser = getattr(parsed, "command_parser", self)
            command.error(unrecognized(extras, command))
        return parsed


def unrecognized(extras: Sequence[str], command: argparse.ArgumentParser) -> str:
    """``unrecognized arguments: --idempotency-keys (did you mean --idempotency-key?)``."""
    import difflib

    known = [option for action in command._actions for option in action.option_strings]
    guesses = []
    for extra in extras:
        if extra.startswith("--"):
            close = difflib.get_close_matches(extra.partition("=")[0], known, n=1, cutoff=0.6)
            guesses += close
    meant = f" (did you mean {' and '.join(guesses)}?)" if guesses else ""
    return f"unrecognized arguments: {' '.join(extras)}{meant}"


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value) + "\n")


def invalid_ibi(text: str, error: InvalidIBI) -> CommandError:
    """``invalid IBI 'x': <reason>``, the label named once."""
    if error.part == "ibi" and repr(text) in error.reason:
        return CommandError(f"invalid IBI: {error.reason}")
    if error.part == "ibi":
        return CommandError(f"invalid IBI {text!r}: {error.reason}")
    return CommandError(f"invalid IBI {text!r}: {error}")


def read_ibi(text: str, *, related: bool = False) -> str:
    """The canonical label of an IBI given as a label or as a persistent URL pasted whole.

    A URL's file path and query are dropped (the IBI is the item holding the file). A modifier
    (``!``, ``:``, ``(pt)`` …) names a related item, not the IBI itself: refused unless
    ``related`` (``inspect``, which decodes the IBI in the URL whatever follows it).
    """
    from ibi.core.persistent_url import parse_ibi_or_persistent_url

    try:
        url = parse_ibi_or_persistent_url(text)
    except InvalidIBI as error:
        raise invalid_ibi(text, error) from None
    except InvalidInput as error:
        raise CommandError(f"invalid persistent URL {text!r}: {error.reason}") from None
    label = url.ibi.label
    if url.modifier and not related:
        raise CommandError(
            f"{text!r} names a related item of {label} (the modifier "
            f"{url.modifier.modifier_text!r}), not one IBI: give {label} itself"
        )
    return label


def ibi_argument(text: str) -> str:
    """argparse ``type`` of every IBI a command takes (see :func:`read_ibi`)."""
    return read_ibi(text)


# ---------------------------------------------------------------------------- label


def _port(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number")
    return int(text)


def _ports(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    if len(parts) not in (2, 3) or not all(part.isdigit() for part in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not two or three ports, e.g. 8810,8820 or 8810,8820,8830"
        )
    return tuple(int(part) for part in parts)


def _labels(args: argparse.Namespace, date: Decimal) -> dict[str, str]:
    ibi = IBI.build(
        date, host=args.host, rep_port=args.rep_port, ip=args.ip, ibip_port=args.ibip_port
    )
    forms: dict[str, str] = {}
    if ibi.rep is not None:
        forms["rep"] = ibi.rep
    if ibi.ibip is not None:
        forms["ibip"] = ibi.ibip
    return forms


def _parse_at(text: str) -> tuple[Decimal, Granularity | None]:
    date_text, at, granularity = text.partition("@")
    date = parse_date(date_text, "--at")
    return date, (Granularity(granularity) if at else None)


def cmd_label(args: argparse.Namespace) -> int:
    if (args.date is None) == (not args.at):
        raise CommandError("give either --date EPOCH, or one or more --at EPOCH[@R]")
    if args.date is not None:
        if args.host is None and args.ip is None:
            raise CommandError(
                "--date: say which labels: --host HOST (the rep form), --ip IP (the ibip form), "
                "or both"
            )
        date = parse_date(args.date, "--date")
        row: dict[str, str] = {"date": format_date(date), **_labels(args, date)}
        if args.json:
            _print_json(row)
        else:
            sys.stdout.write("\n".join(v for k, v in row.items() if k != "date") + "\n")
        return EXIT_OK
    distributor = TemporalDistributor(Granularity(args.granularity))
    requests = [_parse_at(text) for text in args.at]
    for request, distribution in distributor.replay(requests):
        date = distribution.date_for_suffix
        row = {"request": format_date(request), "date": format_date(date), **_labels(args, date)}
        if args.json:
            _print_json(row)
        else:
            sys.stdout.write(" ".join(row.values()) + "\n")
    return EXIT_OK


# ---------------------------------------------------------------------------- inspect


def cmd_inspect(args: argparse.Namespace) -> int:
    info = parse_label(read_ibi(args.label, related=True)).describe()
    if args.json:
        _print_json(info)
    else:
        width = max(len(key) for key in info)
        for key, value in info.items():
            sys.stdout.write(f"{key:<{width}}  {value}\n")
    return EXIT_OK


# ---------------------------------------------------------------------------- mint, mints


def _api_client(args: argparse.Namespace, client_class: str, api: tuple[str, str]) -> Any:
    """``ibi.client.<client_class>`` for ``--endpoint`` (or the variable naming the ``api``)."""
    from ibi import client

    what, variable = api
    endpoint = args.endpoint or os.environ.get(variable)
    if not endpoint:
        raise CommandError(f"--endpoint URL (or {variable}) names {what}")
    try:
        return getattr(client, client_class)(
            endpoint, sign=args.sign, region=args.region, timeout=args.timeout
        )
    except client.ApiError as error:
        raise CommandError(error.message) from None


def _client(args: argparse.Namespace) -> Any:
    return _api_client(args, "MintingClient", MINTING_API)


def cmd_mint(args: argparse.Namespace) -> int:
    if not 1 <= args.count <= 1000:
        raise CommandError("--count must be from 1 to 1000")
    # Without a key of the caller's, one per invocation: this command's own retries
    # can then never mint twice.
    key = args.idempotency_key or f"ibi-cli-{uuid.uuid4()}"
    answer = _client(args).mint(subsystem=args.subsystem, count=args.count, idempotency_key=key)
    if args.json:
        _print_json(answer)
        return EXIT_OK
    for ibi in answer["ibis"]:
        forms = [ibi["rep"], ibi["ibip"]] if args.form == "both" else [ibi[args.form]]
        sys.stdout.write(" ".join(forms) + "\n")
    return EXIT_OK


def cmd_mints(args: argparse.Namespace) -> int:
    client = _client(args)
    args.json = args.json or args.format == "json"
    args.jsonl = args.jsonl or args.format == "jsonl"
    if args.verify:
        return _verify_mints(client.verify(subsystem=args.subsystem), as_json=args.json)
    asked = None
    if args.ibi:
        from ibi.core.dates import format_date
        from ibi.core.labels import parse_label

        try:
            asked = format_date(parse_label(args.ibi).date)
        except ValueError as error:
            raise CommandError(f"--ibi: {error}") from None
        records = iter([client.record_of(args.ibi)])
    else:
        records = client.records(
            subsystem=args.subsystem,
            after=args.after,
            newest_first=args.newest,
            since=args.since,
            until=args.until,
        )
    if args.jsonl:  # the record as the API keeps it, one request per line, for archiving
        for shown, record in enumerate(records, 1):
            _print_json(record)
            if args.limit and shown >= args.limit:
                break
        return EXIT_OK
    shown = 0
    for record in records:
        for ibi in record["ibis"]:
            row = {
                **ibi,
                "subsystem": record["subsystem"],
                "requester": record["requester"],
                "idempotency_key": record["idempotency_key"],
                "recorded_at": record["recorded_at"],
            }
            if args.json:
                _print_json(row)
            elif args.ibi:  # the IBI asked about, and who was issued it
                if ibi["date"] != asked:
                    continue
                sys.stdout.write(
                    f"{ibi['iso']} {ibi['rep']} {ibi['ibip']} {record['requester']}"
                    f" request {record['request_id']} key {record['idempotency_key'] or '-'}\n"
                )
            else:
                sys.stdout.write(
                    f"{ibi['iso']} {ibi['rep']} {ibi['ibip']} {record['requester']}"
                    f" {record['idempotency_key'] or '-'}\n"
                )
            shown += 1
            if args.limit and shown >= args.limit:
                return EXIT_OK
    return EXIT_OK


def _verify_mints(found: dict[str, Any], *, as_json: bool) -> int:
    """``ibi mints --verify``: the walk's summary, every problem; exit 1 on a problem."""
    if as_json:
        _print_json(found)
    else:
        last = found["last_date"] or "-"
        sys.stdout.write(
            f"{found['subsystem']}: {found['records']} records, {found['ibis']} IBIs, "
            f"{found['reservations']} reservations up to {last}; "
            f"{len(found['unused'])} spans reserved and never issued, "
            f"{len(found['unrecorded'])} reserved by requests killed in flight\n"
        )
        for problem in found["problems"]:
            sys.stdout.write(
                f"{problem['kind']} after {problem['after'] or 'the first date'} until "
                f"{problem['until']}: {problem['message']}\n"
            )
        if found["ok"]:
            sys.stdout.write("ok: no gap, no overlap, no date issued twice\n")
    return EXIT_OK if found["ok"] else EXIT_FAILED


# ---------------------------------------------------------------------------- archives


def _archive(args: argparse.Namespace) -> Any:
    return _api_client(args, "ArchiveClient", ARCHIVE_API)


def _read_metadata(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CommandError(f"--metadata {path}: {error}") from None
    if not isinstance(data, dict):
        raise CommandError('--metadata: a JSON object of Dublin Core elements, e.g. {"title": "…"}')
    return data


Upload = tuple[str, Any, str]  # (path in the item, an ibi.client.LocalFile, content type)


def _item_path(name: str) -> str:
    """A FILE argument's path in the item: as given when relative (``sub/b.txt``), its name
    when absolute or when it climbs out of the current directory (``..``)."""
    path = Path(name)
    if path.is_absolute() or ".." in path.parts:
        return path.name
    return path.as_posix()


def _read(path: Path, item_path: str) -> Upload:
    """A FILE to upload: checked readable now, read a block at a time when sent."""
    import mimetypes

    from ibi.client import LocalFile

    try:
        with path.open("rb"):
            pass
    except OSError as error:
        raise CommandError(f"{path}: {error.strerror}") from None
    kind, encoding = mimetypes.guess_type(path.name)
    if encoding is not None:  # data.csv.gz holds gzip bytes, not CSV
        kind = COMPRESSED_TYPES.get(encoding)
    return item_path, LocalFile(path), kind or "application/octet-stream"


# What a compressed file is (mimetypes names the type of what it holds, and the compression).
COMPRESSED_TYPES = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "br": "application/x-brotli",
    "compress": "application/x-compress",
}


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
            files += [_read(p, p.relative_to(path).as_posix()) for p in tree]
        else:
            files.append(_read(path, _item_path(name)))
            if position == 0:
                default = files[0][0]
    paths = [f[0] for f in files]
    duplicated = sorted({p for p in paths if paths.count(p) > 1})
    if duplicated:
        raise CommandError(f"two FILEs have the same path in the item: {duplicated[0]}")
    if default is None and "index.html" in paths:
        default = "index.html"
    return files, default


def resolver_url(args: argparse.Namespace) -> str | None:
    """``--resolver`` (or ``IBI_RESOLVER_URL``), an http(s) URL as ``--endpoint`` must be."""
    from urllib.parse import urlsplit

    url = args.resolver or os.environ.get("IBI_RESOLVER_URL")
    if not url:
        return None
    split = urlsplit(url)
    if split.scheme not in {"http", "https"} or not split.netloc:
        where = "--resolver" if args.resolver else "IBI_RESOLVER_URL"
        hint = f" (e.g. http://{url})" if "://" not in url else ""
        raise CommandError(f"{where} {url!r} is not an http(s) URL of a resolver{hint}")
    return str(url).rstrip("/")


def _resolver_client(url: str, timeout: float) -> Any:
    from ibi.client import ApiError, ResolverClient

    try:
        return ResolverClient(url, sign=False, timeout=timeout)
    except ApiError as error:
        raise CommandError(error.message) from None


def _original(args: argparse.Namespace, resolver: str | None) -> dict[str, Any]:
    """The original's holding, from the resolver's holdings view (never the depositor's word)."""
    if not resolver:
        raise CommandError(
            "--copy-of: give --resolver URL (or IBI_RESOLVER_URL): the original's files, "
            "checksums and links are read from its Archive through the resolver"
        )
    view = _resolver_client(resolver, args.timeout).holdings(args.copy_of)
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


def shows_progress(args: argparse.Namespace) -> bool:
    """A progress bar on a terminal; none with ``--json`` or when the output is piped."""
    return not args.json and sys.stdout.isatty() and sys.stderr.isatty()


class ProgressBar:
    """Bytes and files sent, as a bar on stderr (rich), for :class:`ibi.client.UploadProgress`."""

    def __init__(self, files: Sequence[Upload]) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        from ibi.client import LocalFile

        self.files = len(files)
        self.started = 0
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True, force_terminal=True),
        )
        total = sum(
            c.path.stat().st_size if isinstance(c, LocalFile) else len(c) for _, c, _ in files
        )
        self.task = self.bar.add_task("uploading", total=total)

    def start(self, path: str, size: int) -> None:
        self.started += 1
        self.bar.update(self.task, description=f"file {self.started}/{self.files} {path}")

    def sent(self, count: int) -> None:
        self.bar.advance(self.task, count)


@contextlib.contextmanager
def upload_progress(
    args: argparse.Namespace, files: Sequence[Upload]
) -> Iterator[UploadProgress | None]:
    """A :class:`ProgressBar` while files are sent when :func:`shows_progress`, else None."""
    if not shows_progress(args):
        yield None
        return
    progress = ProgressBar(files)
    with progress.bar:
        yield progress


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
    client = _archive(args)
    body: dict[str, Any] = {}
    if args.url:
        body["url"] = args.url
    if args.language:
        body["language"] = args.language
    dc = _read_metadata(args.metadata)
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
        _print_json({**item, "persistent_url": persistent, **linked})
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
    view = _resolver_client(resolver, args.timeout).holdings(args.ibi)
    if args.json:
        _print_json(view)
    else:
        sys.stdout.write(holdings_text(view))
    return EXIT_OK if view["verdict"]["ok"] else EXIT_FAILED


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
    view = _resolver_client(resolver, args.timeout).holdings(args.ibi)
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


def cmd_archive_service(args: argparse.Namespace) -> int:
    service = _archive(args).service()
    if args.json:
        _print_json(service)
    else:
        forms = service["archiveserviceibi"]
        sys.stdout.write((forms.get("ibip") or forms["rep"]) + "\n")
    return EXIT_OK


def _label_of(forms: dict[str, Any]) -> str:
    return str(forms.get("ibip") or forms.get("rep") or "")


def item_text(item: dict[str, Any]) -> str:
    """An item for a terminal: its IBI, state, flags, links, files and URLs."""
    forms = item.get("ibi") or {}
    rows: list[tuple[str, str]] = [
        ("ibi", " ".join(forms[f] for f in ("ibip", "rep") if forms.get(f))),
        ("state", str(item.get("state") or "-") + (" (pending)" if item.get("pending") else "")),
        ("timestamp", str(item.get("timestamp") or "-")),
    ]
    if item.get("language"):
        rows.append(("language", str(item["language"])))
    flags = [f"{name} {'yes' if item.get(name) else 'no'}" for name in ("listable", "transferable")]
    rows.append(("flags", ", ".join(flags)))
    titles = (item.get("dc") or {}).get("title") or []
    if titles:
        rows.append(("title", str(titles[0])))
    if item.get("next_edition"):
        rows.append(("next edition", _label_of(item["next_edition"])))
    translations = item.get("translations") or []
    for link in translations if isinstance(translations, list) else []:
        target = _label_of(link.get("ibi") or {}) or link.get("url") or "-"
        rows.append(("translation", f"{link.get('language')} {target}"))
    for name in ("metadata", "metadata_oai_dc"):
        if item.get(name):
            rows.append((name.replace("_", " "), _label_of(item[name])))
    if item.get("url"):
        rows.append(("url", str(item["url"])))
    for held in item.get("files") or []:
        default = " (default)" if held["path"] == item.get("default_file") else ""
        rows.append(("file", f"{held['path']}{default} {held['size']} bytes {held['sha256']}"))
    for name, url in (item.get("urls") or {}).items():
        if url:
            rows.append((f"{name} URL", str(url)))
    if "accesses" in item:
        rows.append(("accesses", str(item["accesses"])))
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name:<{width}}  {value}\n" for name, value in rows)


def _print_item(args: argparse.Namespace, item: dict[str, Any]) -> None:
    if args.json:
        _print_json(item)
    else:
        sys.stdout.write(item_text(item))


def cmd_archive_item(args: argparse.Namespace) -> int:
    _print_item(args, _archive(args).item(args.ibi))
    return EXIT_OK


def cmd_archive_delete(args: argparse.Namespace) -> int:
    """Delete an item: a tombstone stays (the resolver answers 410 Gone)."""
    _print_item(args, _archive(args).delete(args.ibi))
    return EXIT_OK


def item_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The ``PATCH /api/item`` body from ``ibi archive update``'s options."""
    changes: dict[str, Any] = {}
    for name in ("listable", "transferable", "language", "url", "default_file"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.content_type is not None:
        changes["content_type"] = args.content_type
    if args.metadata is not None:
        changes["dc"] = _read_metadata(args.metadata)
    if not changes:
        raise CommandError(
            "say what to change: --listable/--no-listable, --transferable/--no-transferable, "
            "--language, --url, --default-file, --content-type or --metadata"
        )
    return changes


def cmd_archive_update(args: argparse.Namespace) -> int:
    """Change an item (``PATCH /api/item``): its flags, language, URL, default file, record."""
    _print_item(args, _archive(args).update(args.ibi, item_changes(args)))
    return EXIT_OK


def _target(text: str) -> dict[str, Any]:
    """A translation's target: an URL, or an IBI (either form)."""
    if text.startswith(("http://", "https://")):
        return {"url": text}
    return {"ibi": text}


def item_links(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The ``POST /api/item/links`` bodies from ``ibi archive link``'s options, in order."""
    links: list[dict[str, Any]] = []
    if args.next_edition:
        links.append({"next_edition": args.next_edition})
    for language, target in args.translation or []:
        links.append({"translation": {"language": language, **_target(target)}})
    if args.metadata:
        links.append({"metadata": {"ibi": args.metadata}})
    if args.oai_dc:
        links.append({"metadata": {"ibi": args.oai_dc, "format": "oai_dc"}})
    if not links:
        raise CommandError(
            "say what to link: --next-edition IBI, --translation LANG IBI|URL, --metadata IBI "
            "or --oai-dc IBI"
        )
    return links


def _linked(link: dict[str, Any]) -> tuple[str, str, str | None]:
    """A link body's target: (what it is, the ``unlink`` option removing it, its IBI or None)."""
    if "next_edition" in link:
        return "next edition", "--next-edition", link["next_edition"]
    if "translation" in link:
        translation = link["translation"]
        language = translation["language"]
        return f"translation into {language}", f"--translation {language}", translation.get("ibi")
    oai_dc = link["metadata"].get("format") == "oai_dc"
    return "metadata", "--oai-dc" if oai_dc else "--metadata", link["metadata"]["ibi"]


def warn_unheld(args: argparse.Namespace, links: list[dict[str, Any]]) -> None:
    """A warning for each linked IBI no Archive holds, as the resolver's holdings view says
    (with ``--resolver`` or ``IBI_RESOLVER_URL``): readers the link sends there get a 404."""
    from ibi.client import ApiError

    resolver = resolver_url(args)
    if resolver is None:
        return
    client = _resolver_client(resolver, args.timeout)
    for link in links:
        what, option, target = _linked(link)
        if target is None:
            continue
        try:
            states = {h.get("state") for h in client.holdings(target)["archives"]}
        except ApiError as error:
            sys.stderr.write(f"ibi: warning: cannot ask {resolver} who holds {target}: {error}\n")
            continue
        if states & {"Original", "Copy", "held"}:
            continue
        held = "was deleted" if "Deleted" in states else "is held by no Archive"
        unanswered = " that answered" if "unreachable" in states else ""
        sys.stderr.write(
            f"ibi: warning: {target}, the {what}, {held}{unanswered} at {resolver}: the link "
            f"leads readers to an error until one holds it (`ibi archive unlink {args.ibi} "
            f"{option}` removes it)\n"
        )


def cmd_archive_link(args: argparse.Namespace) -> int:
    """Link related items (``POST /api/item/links``, one link a request)."""
    links = item_links(args)
    warn_unheld(args, links)
    client = _archive(args)
    item: dict[str, Any] = {}
    for link in links:
        item = client.link(args.ibi, link)
    _print_item(args, item)
    return EXIT_OK


def item_unlinks(args: argparse.Namespace) -> list[str]:
    """The links ``ibi archive unlink`` removes, as ``DELETE /api/item/links?link=`` names them."""
    removed = ["next_edition"] if args.next_edition else []
    removed += [f"translation({language})" for language in args.translation or []]
    if args.metadata:
        removed.append("metadata")
    if args.oai_dc:
        removed.append("metadata_oai_dc")
    if not removed:
        raise CommandError(
            "say what to unlink: --next-edition, --translation LANG, --metadata or --oai-dc"
        )
    return removed


def cmd_archive_unlink(args: argparse.Namespace) -> int:
    """Remove links (``DELETE /api/item/links``, one a request; each kept in the history)."""
    client = _archive(args)
    item: dict[str, Any] = {}
    for link in item_unlinks(args):
        item = client.unlink(args.ibi, link)
    _print_item(args, item)
    return EXIT_OK


def cmd_archive_transfer(args: argparse.Namespace) -> int:
    answer = _archive(args).transfer(args.ibi, args.to, args.leave)
    if args.json:
        _print_json(answer)
        return EXIT_OK
    here, there = answer["here"], answer["there"]
    where = (there.get("urls") or {}).get("item") or args.to.rstrip("/")
    sys.stdout.write(
        f"{_label_of(here['ibi'])}: moved; the original is at {where}; "
        f"here: {'a copy' if here['state'] == 'Copy' else 'a tombstone'}\n"
    )
    return EXIT_OK


def cmd_archive_offer(args: argparse.Namespace) -> int:
    """An offer of an original to another institution's Archive (docs/archive.md)."""
    body = {"to": args.to, "leave": args.leave, "expires_in": args.expires_in}
    answer = _archive(args).call("POST", "/api/item/offers", body, ibi=args.ibi)
    if args.json:
        _print_json(answer)
    else:
        sys.stdout.write(answer["offer"] + "\n")
    return EXIT_OK


def cmd_archive_accept(args: argparse.Namespace) -> int:
    """Take an original another institution's Archive offered (``-``: the offer on stdin)."""
    offer = _offer_text(args.offer)
    _print_item(args, _archive(args).call("POST", "/api/transfers/accept", {"offer": offer}))
    return EXIT_OK


def _offer_text(given: str) -> str:
    """The offer as given (``-``: read from stdin): ASCII, as `ibi archive offer` prints it."""
    raw = sys.stdin.buffer.read() if given == "-" else given.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("ascii").strip()
    except UnicodeDecodeError:
        raise CommandError(
            "the offer is the text `ibi archive offer` printed (ibioffer1.…, ASCII only): "
            "give it whole and unchanged"
        ) from None


def cmd_archive_replace(args: argparse.Namespace) -> int:
    """An operator's revision: add or replace files of an item (kept and recorded)."""
    files = [_read(Path(name), args.path or Path(name).name) for name in args.files]
    if args.path and len(files) != 1:
        raise CommandError("--path names the item's file for one FILE only")
    with upload_progress(args, files) as progress:
        item = _archive(args).replace_files(
            args.ibi, files, reason=args.reason, default_file=args.default_file, progress=progress
        )
    _print_item(args, item)
    return EXIT_OK


def cmd_archive_verify(args: argparse.Namespace) -> int:
    problems = 0
    for entry in _archive(args).verify(args.ibi):
        problems += len(entry["problems"])
        if args.json:
            if entry["problems"] or not args.quiet:
                _print_json(entry)
            continue
        label = _label_of(entry["ibi"])
        for problem in entry["problems"]:
            sys.stdout.write(f"PROBLEM {label} {problem['path']}: {problem['problem']}\n")
        if entry.get("state") == "Copy":
            _copy_check_line(label, entry.get("original_check"))
        if not entry["problems"] and not args.quiet:
            sys.stdout.write(f"ok {label} ({entry['files']} file(s))\n")
    return EXIT_FAILED if problems else EXIT_OK


def _copy_check_line(label: str, check: dict[str, Any] | None) -> None:
    """A copy whose original's files could not be read: why, and since when (not a failure:
    its bytes are intact; the next verify tries again)."""
    if check is None:
        sys.stdout.write(f"UNVERIFIED {label}: made before copies were checked\n")
    elif check.get("status") == "unverified":
        sys.stdout.write(f"UNVERIFIED {label}: {check.get('reason')} (since {check.get('at')})\n")


def _key(args: argparse.Namespace) -> str:
    """The registration key: from a file (``--key-file``) or an SSM SecureString."""
    if args.key_file:
        try:
            return Path(args.key_file).read_text().strip()
        except OSError as error:
            raise CommandError(f"--key-file {args.key_file}: {error.strerror}") from None
    if args.key_ssm:
        import boto3

        parameter = boto3.client("ssm").get_parameter(Name=args.key_ssm, WithDecryption=True)
        return str(parameter["Parameter"]["Value"]).strip()
    if args.key_secret:
        import boto3

        secret = boto3.client("secretsmanager").get_secret_value(SecretId=args.key_secret)
        return str(secret["SecretString"]).strip()
    raise CommandError(
        "give the registration key with --key-file FILE, --key-ssm NAME or --key-secret ID"
    )


def cmd_archive_switch(args: argparse.Namespace) -> int:
    from ibi.client import ApiError, switch_archive

    try:
        answer = switch_archive(
            _archive(args),
            str(resolver_url(args)),
            _key(args),
            on=args.archive_command == "on",
            resolver_service_ibi=args.resolver_service_ibi,
            admin_email=args.admin_email,
            timeout=args.timeout,
        )
    except ApiError as error:
        if error.status != 403:
            raise
        raise ApiError(
            error.status,
            f"{error.message} (the resolver knows no Archive of this service IBI with this "
            "registration key: see `ibi resolver register`)",
        ) from None
    if args.json:
        _print_json(switch_pairs(answer))
    else:
        sys.stdout.write(answer.replace("\r\n", "\n") + "\n")
    return EXIT_OK if ("included" in answer or "excluded" in answer) else EXIT_FAILED


def switch_pairs(answer: str) -> dict[str, str]:
    """The resolver's answer to a switch, as ``{"status.archive": "included", …}``."""
    from ibi.client import pair_list_text

    pairs: dict[str, str] = {}
    for line in answer.splitlines():
        name, _, value = pair_list_text(line.strip()).partition(" ")
        if name:
            pairs[name] = value
    return pairs


def _resolver_admin(args: argparse.Namespace) -> Any:
    return _api_client(args, "ResolverClient", RESOLVER_API)


def cmd_resolver_register(args: argparse.Namespace) -> int:
    answer = _resolver_admin(args).register(args.archive, _key(args), args.prefix or [])
    if args.json:
        _print_json(answer)
    else:
        state = "included" if answer.get("included") else "not included yet (`ibi archive on`)"
        sys.stdout.write(f"registered {_label_of(answer['archiveserviceibi'])}: {state}\n")
        if "owns" in answer:  # (a resolver that knows owners)
            sys.stdout.write(f"owns {' '.join(answer['owns']) or 'no prefix'}\n")
    return EXIT_OK


def cmd_resolver_prefixes(args: argparse.Namespace) -> int:
    """Add or remove prefixes an Archive owns, its registration key unchanged."""
    answer = _resolver_admin(args).change_prefixes(
        args.archive, add=args.add or [], remove=args.remove or []
    )
    if args.json:
        _print_json(answer)
    else:
        label = _label_of(answer["archiveserviceibi"])
        sys.stdout.write(f"{label} owns {' '.join(answer.get('owns') or []) or 'no prefix'}\n")
    return EXIT_OK


def archive_line(archive: dict[str, Any]) -> str:
    """One registered Archive for a terminal (no ``None``: ``-`` for what is not known)."""
    state = "included" if archive.get("included") else "excluded"
    if archive.get("included") and not archive.get("confirmed"):
        state += " (unconfirmed)"
    last = archive.get("last_answer_at")
    outcome = f" ({archive['last_outcome']})" if archive.get("last_outcome") else ""
    return (
        f"{_label_of(archive.get('archiveserviceibi') or {}):<24} "
        f"{archive.get('address') or '-':<24} {state:<10} "
        f"last answer {last or '-'}{outcome}"
    )


def cmd_resolver_archives(args: argparse.Namespace) -> int:
    for archive in _resolver_admin(args).archives():
        if args.json:
            _print_json(archive)
        else:
            sys.stdout.write(archive_line(archive) + "\n")
    return EXIT_OK


# ---------------------------------------------------------------------------- local


PORT_OPTIONS = {"minting": "--port", "resolver": "--resolver-port"}  # else an Archive's


def local_failure(error: OSError | sqlite3.Error, data_dir: Path) -> str:
    """One line for a start that failed on the data directory's files: its disk when full."""
    from ibi_tools.local.stores import full_disk

    full = (isinstance(error, OSError) and error.errno == errno.ENOSPC) or (
        getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    )
    if full:
        return full_disk(data_dir)
    if isinstance(error, OSError) and error.filename:
        return f"{error.filename}: {error.strerror}"
    return f"{data_dir}: {error}"


def cmd_local(args: argparse.Namespace) -> int:
    from ibi_tools.local.federation import DataDirInUseError, LocalFederation
    from ibi_tools.local.gateway import PortInUseError
    from ibi_tools.local.s3 import S3PortInUseError
    from ibi_tools.local.stores import LocalStoreError
    from ibi_tools.local.subsystems import SubsystemError

    os.umask(0o077)  # every file this run and its children write: the user's only
    if args.rotate_key:
        from ibi_tools.local.federation import rotate_key

        try:
            sys.stdout.write(rotate_key(Path(args.data_dir), args.rotate_key) + "\n")
        except (ValueError, RuntimeError, OSError) as error:
            raise CommandError(f"local --rotate-key: {error}", EXIT_FAILED) from None
        return EXIT_OK
    federation = LocalFederation(
        data_dir=Path(args.data_dir),
        minting_port=args.port,
        archive_ports=args.archive_ports,
        resolver_port=args.resolver_port,
        s3_port=args.s3_port,
        demo=not args.no_demo,
        log_level=args.log_level,
    )
    try:
        federation.start()
    except S3PortInUseError as error:
        raise CommandError(f"local: {error}; choose another with --s3-port", EXIT_FAILED) from None
    except (LocalStoreError, DataDirInUseError, SubsystemError) as error:
        raise CommandError(f"local: {error}", EXIT_FAILED) from error
    except PortInUseError as error:
        option = PORT_OPTIONS.get(error.name, "--archive-ports")
        raise CommandError(f"local: {error}; choose another with {option}", EXIT_FAILED) from None
    except (OSError, sqlite3.Error) as error:  # the data directory's disk, its files
        reason = local_failure(error, Path(args.data_dir))
        raise CommandError(f"local: {reason}", EXIT_FAILED) from None

    def stop(signum: int, _: object) -> None:
        federation.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sys.stdout.write(federation.describe() + "\n")
    sys.stdout.flush()
    try:
        federation.wait()  # restarts a store or worker that dies, a few times
    except LocalStoreError as error:
        raise CommandError(f"local: {error}", EXIT_FAILED) from error
    return EXIT_OK


# ---------------------------------------------------------------------------- the parser


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ibi", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"ibi {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )
    _add_label_commands(commands)
    _add_minting_commands(commands)
    _add_archive_commands(commands)
    _add_resolver_commands(commands)
    _add_holdings_command(commands)
    _add_cite_command(commands)
    _add_local_command(commands)
    _name_commands(parser)
    return parser


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Each (sub)command records itself in what it parses: its errors are its own."""
    parser.set_defaults(command_parser=parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _name_commands(child)


# The API a command calls: what it is and the variable that names it when --endpoint does not.
MINTING_API = ("the minting API", "IBI_MINT_ENDPOINT")
ARCHIVE_API = ("the Archive's deposit API", "IBI_ARCHIVE_ENDPOINT")
RESOLVER_API = ("the resolver", "IBI_RESOLVER_URL")


def _api_options(
    command: argparse.ArgumentParser,
    *,
    api: tuple[str, str] = ARCHIVE_API,
    json_help: str = "print the API's JSON answer instead of text",
    subsystem: str | None = None,
) -> None:
    """The options of every command that calls an API (``--subsystem`` where it is used)."""
    what, variable = api
    command.add_argument(
        "--endpoint", metavar="URL", help=f"base URL of {what} (default: ${variable})"
    )
    sign = command.add_mutually_exclusive_group()
    sign.add_argument(
        "--sign",
        action="store_true",
        default=None,
        help="always sign with SigV4 (default: when the endpoint is an AWS API)",
    )
    sign.add_argument("--no-sign", dest="sign", action="store_false", help="never sign")
    command.add_argument("--region", help="AWS region for signing (from the endpoint)")
    command.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="per request (30)"
    )
    if subsystem is not None:
        command.add_argument("--subsystem", metavar="NAME", help=subsystem)
    command.add_argument("--json", action="store_true", help=json_help)


def _key_options(command: argparse.ArgumentParser) -> None:
    """Where a registration key is read from (see :func:`_key`)."""
    command.add_argument("--key-file", metavar="FILE", help="the registration key")
    command.add_argument("--key-ssm", metavar="NAME", help="…or an SSM SecureString")
    command.add_argument("--key-secret", metavar="ID", help="…or a Secrets Manager secret")


def _add_label_commands(commands: _Commands) -> None:
    label = commands.add_parser(
        "label",
        help="make the labels of a date, or dry-run a fresh identification subsystem",
        description=(
            "With --date: the rep and ibip labels of that date. With --at (repeatable): "
            "run the temporal distributor (Algorithm 4) of a fresh subsystem over those "
            "request dates; EPOCH@R changes the granularity from that request on."
        ),
    )
    label.add_argument("--date", metavar="EPOCH", help="seconds since 1970, e.g. 1287588115.047")
    label.add_argument(
        "--at",
        metavar="EPOCH[@R]",
        action="append",
        default=[],
        help="a request date (repeatable); @R changes the granularity from it on",
    )
    label.add_argument("--granularity", metavar="R", default="1", help="60, 1, 0.1, ... (1)")
    label.add_argument("--host", help="host name of the subsystem (rep form)")
    label.add_argument(
        "--rep-port", type=_port, default=DEFAULT_REP_PORT, metavar="N", help="rep form port (80)"
    )
    label.add_argument("--ip", help="IPv4 or IPv6 address of the subsystem (ibip form)")
    label.add_argument(
        "--ibip-port",
        type=_port,
        default=DEFAULT_IBIP_PORT,
        metavar="N",
        help="ibip form port (800)",
    )
    label.add_argument("--json", action="store_true", help="JSON (one object per line)")
    label.set_defaults(run=cmd_label)

    inspect = commands.add_parser("inspect", help="decode an IBI: where and when it was minted")
    inspect.add_argument(
        "label", metavar="LABEL", help="an IBI in either form, or a persistent URL"
    )
    inspect.add_argument("--json", action="store_true", help="one JSON object")
    inspect.set_defaults(run=cmd_inspect)


def _add_minting_commands(commands: _Commands) -> None:
    mint = commands.add_parser("mint", help="mint IBIs through a minting API")
    _api_options(
        mint, api=MINTING_API, subsystem="identification subsystem (default: the service's)"
    )
    mint.add_argument("--count", type=int, default=1, metavar="N", help="1-1000 (1)")
    mint.add_argument(
        "--idempotency-key",
        metavar="K",
        help="the same key returns the same IBIs, never new ones (default: one per call)",
    )
    mint.add_argument(
        "--form", choices=["both", "rep", "ibip"], default="both", help="the forms printed (both)"
    )
    mint.set_defaults(run=cmd_mint)

    mints = commands.add_parser("mints", help="list the record of minted IBIs")
    _api_options(
        mints,
        api=MINTING_API,
        json_help="one JSON object per IBI",
        subsystem="only this subsystem's",
    )
    mints.add_argument("--after", metavar="EPOCH", help="only requests after this date")
    mints.add_argument("--since", metavar="DATE", help="from this date (epoch or ISO 8601, UTC)")
    mints.add_argument("--until", metavar="DATE", help="up to this date (epoch or ISO 8601, UTC)")
    mints.add_argument("--newest", action="store_true", help="newest first")
    mints.add_argument("--limit", type=int, default=0, metavar="N", help="at most N IBIs")
    mints.add_argument(
        "--ibi",
        type=ibi_argument,
        metavar="IBI",
        help="the record that issued this IBI (either form)",
    )
    mints.add_argument(
        "--jsonl",
        action="store_true",
        help="export: one JSON line per request, the record as the API keeps it",
    )
    mints.add_argument(
        "--format", choices=["text", "json", "jsonl"], help="text; json (= --json); jsonl"
    )
    mints.add_argument(
        "--verify",
        action="store_true",
        help="walk the record: any gap, overlap or date issued twice is reported, exit 1",
    )
    mints.set_defaults(run=cmd_mints)


LEAVE = "what stays here once the original moved (copy)"


def _add_offer_commands(archive_commands: _Commands) -> None:
    """A transfer between institutions: the sender's ``offer``, the receiver's ``accept``."""
    offer = archive_commands.add_parser(
        "offer", help="offer an original to another institution's Archive (prints the offer)"
    )
    _api_options(offer, json_help="the offer and its details as JSON")
    offer.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the original offered")
    offer.add_argument(
        "--to", required=True, type=ibi_argument, metavar="SERVICE_IBI", help="the receiver's IBI"
    )
    offer.add_argument("--leave", choices=["copy", "tombstone"], default="copy", help=LEAVE)
    offer.add_argument(
        "--expires-in", type=int, default=3600, metavar="SECONDS", help="offer lifetime (3600)"
    )
    offer.set_defaults(run=cmd_archive_offer)
    accept = archive_commands.add_parser("accept", help="take an original offered to this Archive")
    _api_options(accept, json_help="the item as JSON")
    accept.add_argument("offer", metavar="OFFER", help="the offer (- to read it from stdin)")
    accept.set_defaults(run=cmd_archive_accept)


def _add_deposit_command(commands: _Commands) -> None:
    deposit = commands.add_parser(
        "deposit", help="deposit files in an Archive: mint, upload, register; print the IBI"
    )
    _api_options(
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


def _add_archive_commands(commands: _Commands) -> None:
    _add_deposit_command(commands)
    archive = commands.add_parser(
        "archive", help="an Archive: items, links, changes, integrity, moves, on/off"
    )
    archive_commands = archive.add_subparsers(
        dest="archive_command", required=True, metavar="COMMAND"
    )
    service = archive_commands.add_parser(
        "service", help="the Archive's service IBI (--json: address, base URL, platform)"
    )
    _api_options(service, json_help="the service's details as JSON")
    service.set_defaults(run=cmd_archive_service)
    item = archive_commands.add_parser("item", help="show an item")
    _api_options(item, json_help="the item as JSON")
    item.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    item.set_defaults(run=cmd_archive_item)
    _add_item_commands(archive_commands)
    verify = archive_commands.add_parser(
        "verify",
        help="check stored files against their SHA-256 (exit 1 on a problem), and copies "
        "against their originals (UNVERIFIED: the original's files could not be read)",
    )
    _api_options(verify, json_help="one JSON object per item")
    verify.add_argument(
        "ibi", type=ibi_argument, metavar="IBI", nargs="?", help="only this item (default: all)"
    )
    verify.add_argument("--quiet", action="store_true", help="print problems only")
    verify.set_defaults(run=cmd_archive_verify)

    transfer = archive_commands.add_parser(
        "transfer", help="move a transferable original to another Archive"
    )
    _api_options(transfer, json_help="both Archives' items as JSON")
    transfer.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the original to move")
    transfer.add_argument("--to", required=True, metavar="URL", help="the receiving Archive's API")
    transfer.add_argument("--leave", choices=["copy", "tombstone"], default="copy", help=LEAVE)
    transfer.set_defaults(run=cmd_archive_transfer)
    _add_offer_commands(archive_commands)

    replace = archive_commands.add_parser(
        "replace",
        help="add or replace files of an item (an operator's; the previous versions are kept "
        "and every change recorded in the item's history)",
    )
    _api_options(replace, json_help="the item as JSON (and no progress bar)")
    replace.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    replace.add_argument("files", nargs="+", metavar="FILE", help="the new files")
    replace.add_argument("--reason", required=True, help="why: kept in the item's history")
    replace.add_argument("--path", help="the item's file FILE replaces (default: FILE's name)")
    replace.add_argument("--default-file", metavar="PATH", help="the item's default file")
    replace.set_defaults(run=cmd_archive_replace)

    for verb in ("on", "off"):
        switch = archive_commands.add_parser(
            verb, help=f"switch the Archive {verb} at a resolver (spec §4)"
        )
        _api_options(switch, json_help="the resolver's answer as a JSON object")
        switch.add_argument("--resolver", required=True, metavar="URL", help="the resolver")
        _key_options(switch)
        switch.add_argument(
            "--admin-email", default=ADMIN_EMAIL, help=f"the Archive's contact ({ADMIN_EMAIL})"
        )
        switch.add_argument(
            "--resolver-service-ibi",
            default=RESOLVER_SERVICE_IBI,
            type=ibi_argument,
            metavar="IBI",
            help=f"the resolver's service IBI ({RESOLVER_SERVICE_IBI})",
        )
        switch.set_defaults(run=cmd_archive_switch)


def _add_item_commands(archive_commands: _Commands) -> None:
    """Change, link and delete an item (``PATCH``/``DELETE /api/item``, ``/api/item/links``)."""
    update = archive_commands.add_parser(
        "update", help="change an item: listable, transferable, language, URL, record"
    )
    _api_options(update, json_help="the item as JSON")
    update.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    for flag, what in (("listable", "its file list is shown"), ("transferable", "it may move")):
        update.add_argument(
            f"--{flag}", action=argparse.BooleanOptionalAction, default=None, help=what
        )
    update.add_argument("--language", help="ISO 639-1 language (pt, pt-BR)")
    update.add_argument("--url", help="the item is a file hosted elsewhere, at this URL")
    update.add_argument("--default-file", metavar="PATH", help="the item's default file")
    update.add_argument(
        "--content-type", choices=["Data", "Metadata"], help="what the item is (spec §4)"
    )
    update.add_argument("--metadata", metavar="FILE", help="Dublin Core elements as JSON")
    update.set_defaults(run=cmd_archive_update)

    link = archive_commands.add_parser(
        "link", help="link an item to its next edition, a translation or a metadata item"
    )
    _api_options(link, json_help="the item as JSON")
    link.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    link.add_argument(
        "--next-edition", type=ibi_argument, metavar="IBI", help="the item's next edition"
    )
    link.add_argument(
        "--translation",
        nargs=2,
        action="append",
        metavar=("LANG", "IBI|URL"),
        help="a translation into LANG (pt-BR), an item or a URL (repeatable)",
    )
    link.add_argument(
        "--metadata", type=ibi_argument, metavar="IBI", help="the item holding its metadata"
    )
    link.add_argument(
        "--oai-dc", type=ibi_argument, metavar="IBI", help="the item holding it as OAI Dublin Core"
    )
    link.add_argument(
        "--resolver",
        metavar="URL",
        help="warn when no Archive at this resolver holds a linked IBI (IBI_RESOLVER_URL)",
    )
    link.set_defaults(run=cmd_archive_link)

    unlink = archive_commands.add_parser(
        "unlink", help="remove links of an item (each removal kept in the item's history)"
    )
    _api_options(unlink, json_help="the item as JSON")
    unlink.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    unlink.add_argument("--next-edition", action="store_true", help="its next edition link")
    unlink.add_argument(
        "--translation",
        action="append",
        metavar="LANG",
        help="its translation into LANG (repeatable)",
    )
    unlink.add_argument("--metadata", action="store_true", help="its metadata item link")
    unlink.add_argument("--oai-dc", action="store_true", help="its OAI Dublin Core item link")
    unlink.set_defaults(run=cmd_archive_unlink)

    delete = archive_commands.add_parser(
        "delete", help="delete an item (a tombstone stays: the resolver answers 410 Gone)"
    )
    _api_options(delete, json_help="the tombstone as JSON")
    delete.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    delete.set_defaults(run=cmd_archive_delete)


def _add_resolver_commands(commands: _Commands) -> None:
    resolver = commands.add_parser("resolver", help="a resolver's administration")
    resolver_commands = resolver.add_subparsers(
        dest="resolver_command", required=True, metavar="COMMAND"
    )
    register = resolver_commands.add_parser("register", help="register an Archive and its key")
    _api_options(register, api=RESOLVER_API, json_help="the registration as JSON")
    register.add_argument(
        "--archive", required=True, type=ibi_argument, metavar="IBI", help="its service IBI"
    )
    register.add_argument(
        "--prefix",
        action="append",
        metavar="PREFIX",
        help="a prefix (identification subsystem) it mints under, besides its service IBI's "
        "(repeatable; e.g. 8JMKD3MGP8W or sid.inpe.br/mtc-m18)",
    )
    _key_options(register)
    register.set_defaults(run=cmd_resolver_register)
    prefixes = resolver_commands.add_parser(
        "prefixes", help="add or remove prefixes an Archive owns (its key unchanged)"
    )
    _api_options(prefixes, api=RESOLVER_API, json_help="the Archive as JSON")
    prefixes.add_argument(
        "--archive", required=True, type=ibi_argument, metavar="IBI", help="its service IBI"
    )
    prefixes.add_argument("--add", action="append", metavar="PREFIX", help="repeatable")
    prefixes.add_argument("--remove", action="append", metavar="PREFIX", help="repeatable")
    prefixes.set_defaults(run=cmd_resolver_prefixes)
    listing = resolver_commands.add_parser("archives", help="list registered Archives")
    _api_options(listing, api=RESOLVER_API, json_help="one JSON object per Archive")
    listing.set_defaults(run=cmd_resolver_archives)


def _add_cite_command(commands: _Commands) -> None:
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


def _add_holdings_command(commands: _Commands) -> None:
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


def _add_local_command(commands: _Commands) -> None:
    local = commands.add_parser("local", help="run the services on 127.0.0.1 (no AWS account)")
    local.add_argument(
        "--data-dir",
        default=os.environ.get("IBI_DATA_DIR", ".ibi-data"),
        metavar="DIR",
        help="where the data is kept (IBI_DATA_DIR, else .ibi-data)",
    )
    local.add_argument("--port", type=_port, default=8800, help="minting API port (8800)")
    local.add_argument(
        "--archive-ports",
        type=_ports,
        default=(8810, 8820),
        metavar="A,B[,C]",
        help="ports of the Archives: two, or three for a third one (8810,8820)",
    )
    local.add_argument("--resolver-port", type=_port, default=8080, help="resolver port (8080)")
    local.add_argument(
        "--s3-port",
        type=_port,
        metavar="N",
        help="the S3 server's endpoint; it takes the 9 ports after N too (default: --port + 100)",
    )
    local.add_argument(
        "--no-demo", action="store_true", help="do not seed demo items in a new data directory"
    )
    local.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING"],
        help="the services' log level (WARNING)",
    )
    local.add_argument(
        "--rotate-key",
        metavar="ARCHIVE",
        help="give an Archive (archive-a…) a new registration key, kept in DIR/keys/ for every "
        "later start (registered at once if ibi local runs on DIR), then exit",
    )
    local.set_defaults(run=cmd_local)


def main(argv: Sequence[str] | None = None) -> int:
    from ibi.client import ApiError

    try:
        # An IBI argument is read while parsing (ibi_argument): its refusal is a CommandError.
        args = build_parser().parse_args(argv)
        status: int = args.run(args)
        return status
    except CommandError as error:
        sys.stderr.write(f"ibi: {error}\n")
        return error.status
    except InvalidInput as error:
        sys.stderr.write(f"ibi: {error}\n")
        return EXIT_USAGE
    except ApiError as error:
        sys.stderr.write(f"ibi: {error}\n")
        return EXIT_FAILED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
