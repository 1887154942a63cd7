"""``ibi resolver``: a resolver's administration (register an Archive and its key, change the
prefixes it owns, list the registered Archives, deregister one)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ibi_tools.cli.common import (
    EXIT_OK,
    RESOLVER_API,
    api_client,
    api_options,
    ibi_argument,
    key_options,
    label_of,
    print_json,
    registration_key,
)

if TYPE_CHECKING:
    from ibi_tools.cli.common import Commands


def add_resolver_commands(commands: Commands) -> None:
    resolver = commands.add_parser("resolver", help="a resolver's administration")
    resolver_commands = resolver.add_subparsers(
        dest="resolver_command", required=True, metavar="COMMAND"
    )
    register = resolver_commands.add_parser("register", help="register an Archive and its key")
    api_options(register, api=RESOLVER_API, json_help="the registration as JSON")
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
    register.add_argument(
        "--share-prefix",
        action="store_true",
        help="its service IBI's prefix is another Archive's (one minting subsystem serving "
        "several Archives): register it all the same, and that prefix then has no owner",
    )
    key_options(register)
    register.set_defaults(run=cmd_resolver_register)
    prefixes = resolver_commands.add_parser(
        "prefixes", help="add or remove prefixes an Archive owns (its key unchanged)"
    )
    api_options(prefixes, api=RESOLVER_API, json_help="the Archive as JSON")
    prefixes.add_argument(
        "--archive", required=True, type=ibi_argument, metavar="IBI", help="its service IBI"
    )
    prefixes.add_argument("--add", action="append", metavar="PREFIX", help="repeatable")
    prefixes.add_argument("--remove", action="append", metavar="PREFIX", help="repeatable")
    prefixes.set_defaults(run=cmd_resolver_prefixes)
    listing = resolver_commands.add_parser("archives", help="list registered Archives")
    api_options(listing, api=RESOLVER_API, json_help="one JSON object per Archive")
    listing.set_defaults(run=cmd_resolver_archives)
    deregister = resolver_commands.add_parser(
        "deregister", help="remove a registered Archive (its prefixes are freed)"
    )
    api_options(deregister, api=RESOLVER_API, json_help="the resolver's answer as JSON")
    deregister.add_argument("archive", type=ibi_argument, metavar="IBI", help="its service IBI")
    deregister.set_defaults(run=cmd_resolver_deregister)


def _resolver_admin(args: argparse.Namespace) -> Any:
    return api_client(args, "ResolverClient", RESOLVER_API)


def cmd_resolver_register(args: argparse.Namespace) -> int:
    answer = _resolver_admin(args).register(
        args.archive, registration_key(args), args.prefix or [], share_prefix=args.share_prefix
    )
    if args.json:
        print_json(answer)
    else:
        state = "included" if answer.get("included") else "not included yet (`ibi archive on`)"
        sys.stdout.write(f"registered {label_of(answer['archiveserviceibi'])}: {state}\n")
        if "owns" in answer:  # (a resolver that knows owners)
            sys.stdout.write(f"owns {' '.join(answer['owns']) or 'no prefix'}\n")
    return EXIT_OK


def cmd_resolver_prefixes(args: argparse.Namespace) -> int:
    """Add or remove prefixes an Archive owns, its registration key unchanged."""
    answer = _resolver_admin(args).change_prefixes(
        args.archive, add=args.add or [], remove=args.remove or []
    )
    if args.json:
        print_json(answer)
    else:
        label = label_of(answer["archiveserviceibi"])
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
        f"{label_of(archive.get('archiveserviceibi') or {}):<24} "
        f"{archive.get('address') or '-':<24} {state:<10} "
        f"last answer {last or '-'}{outcome}"
    )


def cmd_resolver_archives(args: argparse.Namespace) -> int:
    for archive in _resolver_admin(args).archives():
        if args.json:
            print_json(archive)
        else:
            sys.stdout.write(archive_line(archive) + "\n")
    return EXIT_OK


def cmd_resolver_deregister(args: argparse.Namespace) -> int:
    """Remove a registered Archive: never asked again, the prefixes it owned freed."""
    answer = _resolver_admin(args).deregister(args.archive)
    if args.json:
        print_json(answer)
    else:
        freed = " ".join(answer.get("freed") or []) or "none"
        label = label_of(answer["archiveserviceibi"])
        sys.stdout.write(f"deregistered {label}; prefixes freed: {freed}\n")
    return EXIT_OK
