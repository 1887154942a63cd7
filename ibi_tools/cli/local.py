"""``ibi local``: the services on 127.0.0.1, no AWS account (``ibi_tools.local``)."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ibi_tools.cli.common import EXIT_FAILED, EXIT_OK, CommandError, port_argument

if TYPE_CHECKING:
    from ibi_tools.cli.common import Commands


def add_local_command(commands: Commands) -> None:
    local = commands.add_parser("local", help="run the services on 127.0.0.1 (no AWS account)")
    local.add_argument(
        "--data-dir",
        default=os.environ.get("IBI_DATA_DIR", ".ibi-data"),
        metavar="DIR",
        help="where the data is kept (IBI_DATA_DIR, else .ibi-data)",
    )
    local.add_argument("--port", type=port_argument, default=8800, help="minting API port (8800)")
    local.add_argument(
        "--archive-ports",
        type=_ports,
        default=(8810, 8820),
        metavar="A,B[,C]",
        help="ports of the Archives: two, or three for a third one (8810,8820)",
    )
    local.add_argument(
        "--resolver-port", type=port_argument, default=8080, help="resolver port (8080)"
    )
    local.add_argument(
        "--s3-port",
        type=port_argument,
        metavar="N",
        help="the S3 server's endpoint; it takes the 9 ports after N too (default: --port + 100)",
    )
    local.add_argument(
        "--no-demo", action="store_true", help="do not seed demo items in a new data directory"
    )
    local.add_argument(
        "--check-links-every",
        type=_seconds,
        default=DAY_SECONDS,
        metavar="SECONDS",
        help="check the Archives' external URLs this often, as the scheduled Lambda does "
        "(86400: daily; 0: never; ibi archive check-links checks now)",
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


DAY_SECONDS = 86400


def _seconds(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds (0: never)")
    return int(text)


def _ports(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    if len(parts) not in (2, 3) or not all(part.isdigit() for part in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not two or three ports, e.g. 8810,8820 or 8810,8820,8830"
        )
    return tuple(int(part) for part in parts)


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
        check_links_every=args.check_links_every,
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
