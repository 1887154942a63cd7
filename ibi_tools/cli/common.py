"""What the ``ibi`` commands share: exit statuses and usage errors, reading an IBI, the API
clients and their options, JSON printing, the files to upload and their progress bar."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ibi.core.errors import InvalidIBI, InvalidInput
from ibi_tools.cli.terminal import raw

if TYPE_CHECKING:
    from ibi.client import UploadProgress
    from ibi_tools.cli import Parser

    # What ``add_subparsers`` returns: a command group's ``add_parser``.
    Commands = argparse._SubParsersAction[Parser]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(Exception):
    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value) + "\n")


def label_of(forms: dict[str, Any]) -> str:
    return str(forms.get("ibip") or forms.get("rep") or "")


# ---------------------------------------------------------------------------- IBIs, ports


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


def port_argument(text: str) -> int:
    """argparse ``type`` of a port number."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number")
    return int(text)


# ---------------------------------------------------------------------------- the APIs

# The API a command calls: what it is and the variable that names it when --endpoint does not.
MINTING_API = ("the minting API", "IBI_MINT_ENDPOINT")
ARCHIVE_API = ("the Archive's deposit API", "IBI_ARCHIVE_ENDPOINT")
RESOLVER_API = ("the resolver", "IBI_RESOLVER_URL")


def api_options(
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


def api_client(args: argparse.Namespace, client_class: str, api: tuple[str, str]) -> Any:
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


def archive_client(args: argparse.Namespace) -> Any:
    return api_client(args, "ArchiveClient", ARCHIVE_API)


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


def resolver_client(url: str, timeout: float) -> Any:
    """A resolver's public side (its holdings view), never signed."""
    from ibi.client import ApiError, ResolverClient

    try:
        return ResolverClient(url, sign=False, timeout=timeout)
    except ApiError as error:
        raise CommandError(error.message) from None


def key_options(command: argparse.ArgumentParser) -> None:
    """Where a registration key is read from (see :func:`registration_key`)."""
    command.add_argument("--key-file", metavar="FILE", help="the registration key")
    command.add_argument("--key-ssm", metavar="NAME", help="…or an SSM SecureString")
    command.add_argument("--key-secret", metavar="ID", help="…or a Secrets Manager secret")


def registration_key(args: argparse.Namespace) -> str:
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


# ---------------------------------------------------------------------------- files to upload


def read_metadata(path: str | None) -> dict[str, Any]:
    """``--metadata FILE``: Dublin Core elements as a JSON object."""
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


def read_upload(path: Path, item_path: str) -> Upload:
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
            # its own escape sequences, under the command's plain stream (terminal.py)
            console=Console(file=raw(sys.stderr), force_terminal=True),
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
