"""``ibi archive import URL``: the command's options, its run, and the summary it prints."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ibi.client import ApiError
from ibi_tools.harvest.files import MAX_FILE_BYTES
from ibi_tools.harvest.importer import Importer, ImportOptions, Summary
from ibi_tools.harvest.oai import HarvestError
from ibi_tools.harvest.outbound import plain
from ibi_tools.harvest.state import ImportState, default_state_path

if TYPE_CHECKING:
    import argparse

    from ibi_tools.cli.common import Commands


def add_import_command(archive_commands: Commands) -> None:
    """``ibi archive import URL [--set SPEC] [--from DATE] [--fetch] [--state FILE] …``."""
    from ibi_tools.cli.common import api_options

    command = archive_commands.add_parser(
        "import",
        help="harvest an OAI-PMH repository into the Archive: one item per record (resumable, "
        "never twice)",
    )
    api_options(command, json_help="the summary as JSON")
    command.add_argument("url", metavar="URL", help="the repository's OAI-PMH base URL")
    command.add_argument("--set", dest="set_spec", metavar="SPEC", help="only this set")
    command.add_argument(
        "--from", dest="from_date", metavar="DATE", help="only records changed since (YYYY-MM-DD)"
    )
    command.add_argument(
        "--fetch",
        action="store_true",
        help="copy each record's files in (checksums recorded) instead of pointing at them",
    )
    command.add_argument(
        "--max-file-size",
        type=int,
        default=MAX_FILE_BYTES,
        metavar="BYTES",
        help=f"--fetch: larger files are left out ({MAX_FILE_BYTES})",
    )
    command.add_argument(
        "--state", metavar="FILE", help="where progress is kept (default: ./ibi-import-….json)"
    )
    command.add_argument(
        "--restart", action="store_true", help="read the list from its start again"
    )
    command.set_defaults(run=cmd_archive_import)


def cmd_archive_import(args: argparse.Namespace) -> int:
    """Harvest ``args.url`` into the Archive; exit 1 when a record could not be imported or
    the list was stopped short."""
    from ibi_tools.cli.common import EXIT_FAILED, EXIT_OK, CommandError, archive_client

    try:
        options = ImportOptions(
            args.url.rstrip("?"),
            args.set_spec,
            args.from_date,
            fetch=args.fetch,
            max_file_bytes=args.max_file_size,
            timeout=args.timeout,
            restart=args.restart,
        )
    except HarvestError as error:
        raise CommandError(str(error)) from None
    client = archive_client(args)
    forms = client.service()["archiveserviceibi"]
    archive = str(forms.get("ibip") or forms["rep"])
    path = (
        Path(args.state)
        if args.state
        else default_state_path(archive, options.repository, options.set_spec, options.from_date)
    )
    try:
        state = ImportState.load(
            path,
            archive=archive,
            repository=options.repository,
            set_spec=options.set_spec,
            from_date=options.from_date,
        )
        summary = Importer(client, options, state).run()
    except (HarvestError, ApiError) as error:
        raise CommandError(
            f"{plain(str(error))}\nibi: what was imported is kept in {path}: the same command "
            "continues",
            EXIT_FAILED,
        ) from None
    except KeyboardInterrupt:
        sys.stderr.write(f"ibi: interrupted; {path} keeps what was done: run it again\n")
        return 130
    print_summary(summary, path, as_json=args.json)
    return EXIT_FAILED if summary.errors or summary.stopped else EXIT_OK


def print_summary(summary: Summary, state: Path, *, as_json: bool) -> None:
    """The summary on stdout: its remote text (identifiers, reasons) with controls escaped."""
    if as_json:
        sys.stdout.write(json.dumps({**summary.to_mapping(), "state": str(state)}) + "\n")
        return
    pages = f"{summary.pages} page{'' if summary.pages == 1 else 's'} read"
    lines = [f"{summary.counts()} ({pages}; state in {state})"]
    for title, rows in (
        ("skipped", summary.skipped),
        ("errors", summary.errors),
        ("files left out", summary.files),
    ):
        if rows:
            lines.append(f"{title}:")
            lines += [f"  {plain(identifier)}: {plain(why)}" for identifier, why in rows]
    if summary.stopped is not None:
        lines.append(f"stopped: {plain(summary.stopped)}")
    sys.stdout.write("\n".join(lines) + "\n")
