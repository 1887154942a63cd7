"""``ibi label`` (the labels of a date; a dry run of the temporal distributor) and
``ibi inspect`` (decode an IBI): the contract outputs conformance suites read."""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal
from typing import TYPE_CHECKING

from ibi.core.dates import format_date, parse_date
from ibi.core.distributor import Granularity, TemporalDistributor
from ibi.core.labels import DEFAULT_IBIP_PORT, DEFAULT_REP_PORT, IBI, parse_label
from ibi_tools.cli.common import EXIT_OK, CommandError, port_argument, print_json, read_ibi

if TYPE_CHECKING:
    from ibi_tools.cli.common import Commands


def add_label_commands(commands: Commands) -> None:
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
        "--rep-port",
        type=port_argument,
        default=DEFAULT_REP_PORT,
        metavar="N",
        help="rep form port (80)",
    )
    label.add_argument("--ip", help="IPv4 or IPv6 address of the subsystem (ibip form)")
    label.add_argument(
        "--ibip-port",
        type=port_argument,
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
            print_json(row)
        else:
            sys.stdout.write("\n".join(v for k, v in row.items() if k != "date") + "\n")
        return EXIT_OK
    distributor = TemporalDistributor(Granularity(args.granularity))
    requests = [_parse_at(text) for text in args.at]
    for request, distribution in distributor.replay(requests):
        date = distribution.date_for_suffix
        row = {"request": format_date(request), "date": format_date(date), **_labels(args, date)}
        if args.json:
            print_json(row)
        else:
            sys.stdout.write(" ".join(row.values()) + "\n")
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    info = parse_label(read_ibi(args.label, related=True)).describe()
    if args.json:
        print_json(info)
    else:
        width = max(len(key) for key in info)
        for key, value in info.items():
            sys.stdout.write(f"{key:<{width}}  {value}\n")
    return EXIT_OK
