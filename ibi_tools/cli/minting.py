"""``ibi mint`` (IBIs from a minting API) and ``ibi mints`` (its record: list, export,
verify)."""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import TYPE_CHECKING, Any

from ibi_tools.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    MINTING_API,
    CommandError,
    api_client,
    api_options,
    ibi_argument,
    print_json,
)

if TYPE_CHECKING:
    from ibi_tools.cli.common import Commands


def add_minting_commands(commands: Commands) -> None:
    mint = commands.add_parser("mint", help="mint IBIs through a minting API")
    api_options(
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
    api_options(
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


def _client(args: argparse.Namespace) -> Any:
    return api_client(args, "MintingClient", MINTING_API)


def cmd_mint(args: argparse.Namespace) -> int:
    if not 1 <= args.count <= 1000:
        raise CommandError("--count must be from 1 to 1000")
    # Without a key of the caller's, one per invocation: this command's own retries
    # can then never mint twice.
    key = args.idempotency_key or f"ibi-cli-{uuid.uuid4()}"
    answer = _client(args).mint(subsystem=args.subsystem, count=args.count, idempotency_key=key)
    if args.json:
        print_json(answer)
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
            print_json(record)
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
                print_json(row)
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
        print_json(found)
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
