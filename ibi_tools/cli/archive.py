"""``ibi archive``: an Archive's items, links, changes, integrity, moves, and switching it on
or off at a resolver (its deposit API, and a resolver's registration for ``on``/``off``).

:func:`add_archive_commands` builds the group: one line per command (or family of commands),
each added by the function beside its code, here or in the module that holds it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ibi.defaults import ADMIN_EMAIL, RESOLVER_SERVICE_IBI
from ibi_tools.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    api_options,
    archive_client,
    ibi_argument,
    key_options,
    label_of,
    print_json,
    read_metadata,
    read_upload,
    registration_key,
    resolver_client,
    resolver_url,
    upload_progress,
)
from ibi_tools.harvest.command import add_import_command

if TYPE_CHECKING:
    from ibi_tools.cli.common import Commands


def add_archive_commands(commands: Commands) -> None:
    """``ibi archive COMMAND``: a new subcommand is one more line here."""
    archive = commands.add_parser(
        "archive", help="an Archive: items, links, changes, integrity, moves, on/off"
    )
    archive_commands = archive.add_subparsers(
        dest="archive_command", required=True, metavar="COMMAND"
    )
    _add_reading_commands(archive_commands)  # service, item
    _add_item_commands(archive_commands)  # update, link, unlink, delete
    _add_verify_command(archive_commands)
    _add_check_links_command(archive_commands)  # check-links: the items' external URLs
    _add_transfer_commands(archive_commands)  # transfer, offer, accept
    _add_replace_command(archive_commands)
    _add_switch_commands(archive_commands)  # on, off
    add_import_command(archive_commands)  # import: an OAI-PMH repository (harvest/)


# ---------------------------------------------------------------------------- service, item


def _add_reading_commands(archive_commands: Commands) -> None:
    service = archive_commands.add_parser(
        "service", help="the Archive's service IBI (--json: address, base URL, platform)"
    )
    api_options(service, json_help="the service's details as JSON")
    service.set_defaults(run=cmd_archive_service)
    item = archive_commands.add_parser("item", help="show an item")
    api_options(item, json_help="the item as JSON")
    item.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    item.set_defaults(run=cmd_archive_item)


def cmd_archive_service(args: argparse.Namespace) -> int:
    service = archive_client(args).service()
    if args.json:
        print_json(service)
    else:
        forms = service["archiveserviceibi"]
        sys.stdout.write((forms.get("ibip") or forms["rep"]) + "\n")
    return EXIT_OK


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
        rows.append(("next edition", label_of(item["next_edition"])))
    translations = item.get("translations") or []
    for link in translations if isinstance(translations, list) else []:
        target = label_of(link.get("ibi") or {}) or link.get("url") or "-"
        rows.append(("translation", f"{link.get('language')} {target}"))
    for name in ("metadata", "metadata_oai_dc"):
        if item.get(name):
            rows.append((name.replace("_", " "), label_of(item[name])))
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
        print_json(item)
    else:
        sys.stdout.write(item_text(item))


def cmd_archive_item(args: argparse.Namespace) -> int:
    _print_item(args, archive_client(args).item(args.ibi))
    return EXIT_OK


# ---------------------------------------------------------------------------- changes, links


def _add_item_commands(archive_commands: Commands) -> None:
    """Change, link and delete an item (``PATCH``/``DELETE /api/item``, ``/api/item/links``)."""
    update = archive_commands.add_parser(
        "update", help="change an item: listable, transferable, language, URL, record"
    )
    api_options(update, json_help="the item as JSON")
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
    api_options(link, json_help="the item as JSON")
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
    api_options(unlink, json_help="the item as JSON")
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
    api_options(delete, json_help="the tombstone as JSON")
    delete.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    delete.add_argument(
        "--reason", help="why it is withdrawn: its 410 pages and citation say it (500 characters)"
    )
    delete.set_defaults(run=cmd_archive_delete)


def item_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The ``PATCH /api/item`` body from ``ibi archive update``'s options."""
    changes: dict[str, Any] = {}
    for name in ("listable", "transferable", "language", "url", "default_file"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.content_type is not None:
        changes["content_type"] = args.content_type
    if args.metadata is not None:
        changes["dc"] = read_metadata(args.metadata)
    if not changes:
        raise CommandError(
            "say what to change: --listable/--no-listable, --transferable/--no-transferable, "
            "--language, --url, --default-file, --content-type or --metadata"
        )
    return changes


def cmd_archive_update(args: argparse.Namespace) -> int:
    """Change an item (``PATCH /api/item``): its flags, language, URL, default file, record."""
    _print_item(args, archive_client(args).update(args.ibi, item_changes(args)))
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
    client = resolver_client(resolver, args.timeout)
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
    client = archive_client(args)
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
    client = archive_client(args)
    item: dict[str, Any] = {}
    for link in item_unlinks(args):
        item = client.unlink(args.ibi, link)
    _print_item(args, item)
    return EXIT_OK


def cmd_archive_delete(args: argparse.Namespace) -> int:
    """Delete an item: a tombstone stays (the resolver answers 410 Gone)."""
    _print_item(args, archive_client(args).delete(args.ibi, reason=args.reason))
    return EXIT_OK


# ---------------------------------------------------------------------------- verify


def _add_verify_command(archive_commands: Commands) -> None:
    verify = archive_commands.add_parser(
        "verify",
        help="check stored files against their SHA-256 (exit 1 on a problem), and copies "
        "against their originals (UNVERIFIED: the original's files could not be read)",
    )
    api_options(verify, json_help="one JSON object per item")
    verify.add_argument(
        "ibi", type=ibi_argument, metavar="IBI", nargs="?", help="only this item (default: all)"
    )
    verify.add_argument("--quiet", action="store_true", help="print problems only")
    verify.set_defaults(run=cmd_archive_verify)


def cmd_archive_verify(args: argparse.Namespace) -> int:
    problems = 0
    for entry in archive_client(args).verify(args.ibi):
        problems += len(entry["problems"])
        if args.json:
            if entry["problems"] or not args.quiet:
                print_json(entry)
            continue
        label = label_of(entry["ibi"])
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


# ---------------------------------------------------------------------------- check-links


def _add_check_links_command(archive_commands: Commands) -> None:
    check = archive_commands.add_parser(
        "check-links",
        help="check the items' URLs outside the Archive now (HEAD, then GET); name each "
        "broken one (exit 1 if any)",
    )
    api_options(check, json_help="one JSON object per item checked")
    check.add_argument(
        "ibis",
        type=ibi_argument,
        metavar="IBI",
        nargs="*",
        help="only these items (default: every item with a url outside the Archive)",
    )
    check.set_defaults(run=cmd_archive_check_links)


def cmd_archive_check_links(args: argparse.Namespace) -> int:
    broken = checked = 0
    for run in archive_client(args).check_links(args.ibis):
        checked += run["checked"]
        for result in run["results"]:
            broken += result["status"] == "broken"
            if args.json:
                print_json(result)
            elif result["status"] == "broken":
                since = f" (broken since {result['broken_since']})"
                sys.stdout.write(
                    f"BROKEN {label_of(result['ibi'])} {result['url']}: {result['reason']}{since}\n"
                )
        if run["left"] and not run["checked"]:
            sys.stderr.write(f"{run['left']} item(s) not reached: run check-links again\n")
    if not args.json and not broken:
        sys.stdout.write(f"{checked} link(s) checked, none broken\n")
    return EXIT_FAILED if broken else EXIT_OK


# ---------------------------------------------------------------------------- moves


LEAVE = "what stays here once the original moved (copy)"


def _add_transfer_commands(archive_commands: Commands) -> None:
    """A move to another Archive (``transfer``), or between institutions: the sender's
    ``offer``, the receiver's ``accept``."""
    transfer = archive_commands.add_parser(
        "transfer", help="move a transferable original to another Archive"
    )
    api_options(transfer, json_help="both Archives' items as JSON")
    transfer.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the original to move")
    transfer.add_argument("--to", required=True, metavar="URL", help="the receiving Archive's API")
    transfer.add_argument("--leave", choices=["copy", "tombstone"], default="copy", help=LEAVE)
    transfer.set_defaults(run=cmd_archive_transfer)
    offer = archive_commands.add_parser(
        "offer", help="offer an original to another institution's Archive (prints the offer)"
    )
    api_options(offer, json_help="the offer and its details as JSON")
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
    api_options(accept, json_help="the item as JSON")
    accept.add_argument("offer", metavar="OFFER", help="the offer (- to read it from stdin)")
    accept.set_defaults(run=cmd_archive_accept)


def cmd_archive_transfer(args: argparse.Namespace) -> int:
    answer = archive_client(args).transfer(args.ibi, args.to, args.leave)
    if args.json:
        print_json(answer)
        return EXIT_OK
    here, there = answer["here"], answer["there"]
    where = (there.get("urls") or {}).get("item") or args.to.rstrip("/")
    sys.stdout.write(
        f"{label_of(here['ibi'])}: moved; the original is at {where}; "
        f"here: {'a copy' if here['state'] == 'Copy' else 'a tombstone'}\n"
    )
    return EXIT_OK


def cmd_archive_offer(args: argparse.Namespace) -> int:
    """An offer of an original to another institution's Archive (docs/archive.md)."""
    body = {"to": args.to, "leave": args.leave, "expires_in": args.expires_in}
    answer = archive_client(args).call("POST", "/api/item/offers", body, ibi=args.ibi)
    if args.json:
        print_json(answer)
    else:
        sys.stdout.write(answer["offer"] + "\n")
    return EXIT_OK


def cmd_archive_accept(args: argparse.Namespace) -> int:
    """Take an original another institution's Archive offered (``-``: the offer on stdin)."""
    offer = _offer_text(args.offer)
    _print_item(args, archive_client(args).call("POST", "/api/transfers/accept", {"offer": offer}))
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


# ---------------------------------------------------------------------------- replace


def _add_replace_command(archive_commands: Commands) -> None:
    replace = archive_commands.add_parser(
        "replace",
        help="add or replace files of an item (an operator's; the previous versions are kept "
        "and every change recorded in the item's history)",
    )
    api_options(replace, json_help="the item as JSON (and no progress bar)")
    replace.add_argument("ibi", type=ibi_argument, metavar="IBI", help="the item")
    replace.add_argument("files", nargs="+", metavar="FILE", help="the new files")
    replace.add_argument("--reason", required=True, help="why: kept in the item's history")
    replace.add_argument("--path", help="the item's file FILE replaces (default: FILE's name)")
    replace.add_argument("--default-file", metavar="PATH", help="the item's default file")
    replace.set_defaults(run=cmd_archive_replace)


def cmd_archive_replace(args: argparse.Namespace) -> int:
    """An operator's revision: add or replace files of an item (kept and recorded)."""
    files = [read_upload(Path(name), args.path or Path(name).name) for name in args.files]
    if args.path and len(files) != 1:
        raise CommandError("--path names the item's file for one FILE only")
    with upload_progress(args, files) as progress:
        item = archive_client(args).replace_files(
            args.ibi, files, reason=args.reason, default_file=args.default_file, progress=progress
        )
    _print_item(args, item)
    return EXIT_OK


# ---------------------------------------------------------------------------- on, off


def _add_switch_commands(archive_commands: Commands) -> None:
    for verb in ("on", "off"):
        switch = archive_commands.add_parser(
            verb, help=f"switch the Archive {verb} at a resolver (spec §4)"
        )
        api_options(switch, json_help="the resolver's answer as a JSON object")
        switch.add_argument("--resolver", required=True, metavar="URL", help="the resolver")
        key_options(switch)
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


def cmd_archive_switch(args: argparse.Namespace) -> int:
    """Through the resolver's administrator's route when this caller authenticates to it
    (never throttled by a stranger's wrong keys), else through the public route (spec §4)."""
    from ibi.client import ApiError, switch_archive

    resolver = str(resolver_url(args))
    try:
        answer = switch_archive(
            archive_client(args),
            resolver,
            registration_key(args),
            on=args.archive_command == "on",
            resolver_service_ibi=args.resolver_service_ibi,
            admin_email=args.admin_email,
            timeout=args.timeout,
            administrator=_administrator(args, resolver),
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
        print_json(switch_pairs(answer))
    else:
        sys.stdout.write(answer.replace("\r\n", "\n") + "\n")
    return EXIT_OK if ("included" in answer or "excluded" in answer) else EXIT_FAILED


def _administrator(args: argparse.Namespace, resolver: str) -> Any:
    """The resolver's administration, when this caller authenticates to it: signed with SigV4
    (``--sign``, or an AWS API), or local mode's resolver on loopback (whose administration
    is its machine's); else None (the public route)."""
    from ipaddress import ip_address
    from urllib.parse import urlsplit

    from ibi.client import ApiError, ResolverClient

    try:
        client = ResolverClient(resolver, sign=args.sign, region=args.region, timeout=args.timeout)
    except ApiError:
        return None
    host = urlsplit(resolver).hostname or ""
    try:
        loopback = host == "localhost" or ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return client if client.signer is not None or loopback else None


def switch_pairs(answer: str) -> dict[str, str]:
    """The resolver's answer to a switch, as ``{"status.archive": "included", …}``."""
    from ibi.client import pair_list_text

    pairs: dict[str, str] = {}
    for line in answer.splitlines():
        name, _, value = pair_list_text(line.strip()).partition(" ")
        if name:
            pairs[name] = value
    return pairs
