"""Which identification subsystem a data directory mints as, and which directory holds a port.

An IBI's prefix is made from its subsystem's host, IP and port (spec §1): two federations
minting as one port hand out the same IBIs as soon as their temporal distributors meet the
same date. So:

- a data directory's subsystems (``subsystems.json``) are written only once the ports they
  name are bound: the minting service's own (``local``, the minting port: what ``ibi mint``
  mints) and one per Archive (``archive-a-8810``: ``archive-a.localhost``, 127.0.0.1 and the
  Archive's own port), from which that Archive mints its service IBI and its items, as each
  Archive of a real federation has its own prefix;
- a data directory never mints as a port it does not serve: started on another minting port,
  it is refused (:class:`SubsystemError`, saying which port to use); an Archive started on
  another port gets a new subsystem for it, and keeps the old ones (the prefixes it owns:
  its items keep their IBIs), which it no longer mints under. A port one of the directory's
  subsystems named for another Archive is refused;
- each prefix is claimed, machine-wide for the user, by the data directory that last minted
  under it (``<state dir>/local-subsystems.json``, under a lock). When another data directory
  takes the port over, it takes the previous one's last date with it (read from that
  directory's tables, or the date kept in the claim at its last stop), so the temporal
  distributor carries on after it, as one subsystem (spec §1.3).

Two federations running at once can never share a subsystem: each binds its minting and
Archive ports for as long as it runs, and mints only as those ports.

A data directory from before the Archives' own subsystems (one ``local`` subsystem for all)
keeps it as the minting service's default: its items keep their IBIs (under a prefix the two
Archives' service IBIs share, which no Archive owns), and each Archive mints from its own
subsystem from its next start on.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from ibi.core.subsystem import Subsystem, check_distinct
from ibi_tools.local.stores import private_dir, write_private

SUBSYSTEMS_FILE = "subsystems.json"
CLAIMS_FILE = "local-subsystems.json"
STATE_DIR_VARIABLE = "IBI_STATE_DIR"  # else $XDG_STATE_HOME/ibi, else ~/.local/state/ibi


class SubsystemError(RuntimeError):
    """A data directory cannot mint as the port it would serve (the message says what to do)."""


def state_dir() -> Path:
    """Where ``ibi local`` keeps what outlives a data directory: the claims of ports."""
    chosen = os.environ.get(STATE_DIR_VARIABLE)
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ibi"


def new_subsystems(port: int) -> list[dict[str, Any]]:
    """The subsystem of a new data directory: ``mint.localhost``, 127.0.0.1, ``port``."""
    return [
        {
            "name": "local",
            "host": "mint.localhost",
            "ip": "127.0.0.1",
            "rep_port": port,
            "ibip_port": port,
            "granularity": "0.001",
        }
    ]


def archive_subsystem(archive: str, port: int) -> dict[str, Any]:
    """``archive``'s own subsystem while it serves ``port``: ``<archive>.localhost``, 127.0.0.1,
    ``port`` (rep prefix ``localhost/<archive>.<port>``), named ``<archive>-<port>``."""
    return {
        "name": f"{archive}-{port}",
        "host": f"{archive}.localhost",
        "ip": "127.0.0.1",
        "rep_port": port,
        "ibip_port": port,
        "granularity": "0.001",
    }


def archive_of(item: Mapping[str, Any]) -> str | None:
    """The Archive whose own subsystem ``item`` is (exactly :func:`archive_subsystem`'s), or
    None: one of the minting service's."""
    archive, _, port = str(item.get("name", "")).rpartition("-")
    if archive and port.isdigit() and dict(item) == archive_subsystem(archive, int(port)):
        return archive
    return None


def archive_prefixes(configured: Iterable[Mapping[str, Any]], archive: str) -> list[str]:
    """Every prefix ``archive`` minted under (its subsystems, on every port it served), in both
    forms: the prefixes it owns at the resolver and takes originals for."""
    return [
        prefix
        for item in configured
        if archive_of(item) == archive
        for subsystem in [Subsystem.from_mapping(item)]
        for prefix in (subsystem.rep_prefix, subsystem.ibip_prefix)
    ]


def read_subsystems(data_dir: Path) -> list[dict[str, Any]] | None:
    """The data directory's subsystems, checked (None before its first start)."""
    path = data_dir / SUBSYSTEMS_FILE
    if not path.exists():
        return None
    configured: list[dict[str, Any]] = json.loads(path.read_text())
    check_distinct(Subsystem.from_mapping(item) for item in configured)
    return configured


def check_served(data_dir: Path, configured: list[dict[str, Any]], port: int) -> None:
    """Refuse a data directory whose minting service's subsystems name another port than the
    one it serves (the Archives' own are each minted only while the Archive serves its port)."""
    for item in configured:
        if archive_of(item) is not None:
            continue
        subsystem = Subsystem.from_mapping(item)
        if subsystem.rep_port == port and subsystem.ibip_port == port:
            continue
        named = sorted({subsystem.rep_port, subsystem.ibip_port})
        raise SubsystemError(
            f"{data_dir} mints as port {', '.join(map(str, named))} (its subsystem "
            f"{subsystem.name!r}, prefixes {subsystem.rep_prefix} and {subsystem.ibip_prefix}, "
            f"in {data_dir / SUBSYSTEMS_FILE}), not {port}: minting there while serving "
            f"{port} could repeat the IBIs of whoever serves {named[0]}. Start it with "
            f"--port {named[0]}, or give --data-dir a new directory for port {port}"
        )


def subsystems_for(
    data_dir: Path, port: int, archives: Mapping[str, int] | None = None
) -> list[dict[str, Any]]:
    """The subsystems ``data_dir`` mints as, its minting service on ``port`` and each of
    ``archives`` (name → port) on its own port — to be called once all those ports are bound.
    The minting service's first (its default), then each Archive's; a new directory's, and an
    Archive's subsystem for a port it never served, are written down now; the minting
    service's must name ``port``."""
    known = read_subsystems(data_dir)
    configured = list(known) if known is not None else new_subsystems(port)
    check_served(data_dir, configured, port)
    served = [item for item in configured if archive_of(item) is None]
    for archive, archive_port in (archives or {}).items():
        wanted = archive_subsystem(archive, archive_port)
        if wanted not in configured:
            _check_free(data_dir, configured, archive, wanted)
            configured.append(wanted)
        served.append(wanted)
    if configured != known:
        write_private(data_dir / SUBSYSTEMS_FILE, json.dumps(configured, indent=2) + "\n")
    return served


def _check_free(
    data_dir: Path, configured: list[dict[str, Any]], archive: str, wanted: dict[str, Any]
) -> None:
    """Refuse ``archive``'s new subsystem when one of the directory's subsystems has one of its
    prefixes (the port another of its Archives, or its minting service, minted as)."""
    new = Subsystem.from_mapping(wanted)
    for item in configured:
        other = Subsystem.from_mapping(item)
        shared = {other.rep_prefix, other.ibip_prefix} & {new.rep_prefix, new.ibip_prefix}
        if shared:
            raise SubsystemError(
                f"{archive} cannot mint as port {new.ibip_port}: {data_dir}'s subsystem "
                f"{other.name!r} minted as that port (prefix {min(shared)}, in "
                f"{data_dir / SUBSYSTEMS_FILE}), and their IBIs could repeat. Give {archive} "
                "another port with --archive-ports, or give --data-dir a new directory"
            )


LastDate = Callable[[Path, str], Decimal | None]  # (data dir, subsystem name) → its last date


@dataclass(frozen=True)
class Claims:
    """The machine-wide claims of subsystem prefixes: ``{prefix: {data_dir, subsystem,
    last_date}}``, read and written under an exclusive lock."""

    directory: Path

    @property
    def path(self) -> Path:
        return self.directory / CLAIMS_FILE

    def claim(
        self, data_dir: Path, configured: list[dict[str, Any]], last_date: LastDate
    ) -> dict[str, Decimal]:
        """Claim every prefix of ``configured`` for ``data_dir``; for each subsystem whose
        prefix another data directory (or another subsystem) held, the latest date minted
        there (to carry on from)."""
        owner = str(data_dir.resolve())
        handed: dict[str, Decimal] = {}
        with self._held() as claims:
            for item in configured:
                subsystem = Subsystem.from_mapping(item)
                name = subsystem.name
                for prefix in (subsystem.rep_prefix, subsystem.ibip_prefix):
                    held = claims.get(prefix)
                    if held is not None and (held.get("data_dir"), held.get("subsystem")) == (
                        owner,
                        name,
                    ):
                        continue  # this subsystem's already: its own state carries on
                    date = _last_of(held, last_date) if held is not None else None
                    if date is not None and (name not in handed or date > handed[name]):
                        handed[name] = date
                    claims[prefix] = {
                        "data_dir": owner,
                        "subsystem": name,
                        "last_date": _text(handed.get(name)),
                    }
        return handed

    def note_last_dates(self, data_dir: Path, dates: dict[str, Decimal | None]) -> None:
        """Keep the last dates of ``data_dir``'s subsystems in the claims it still holds (at
        its stop: the next holder of the port carries on from them even if it is deleted)."""
        owner = str(data_dir.resolve())
        with self._held() as claims:
            for held in claims.values():
                date = dates.get(str(held.get("subsystem")))
                if held.get("data_dir") == owner and date is not None:
                    held["last_date"] = _text(date)

    @contextmanager
    def _held(self) -> Iterator[dict[str, dict[str, Any]]]:
        private_dir(self.directory)
        with open(self.directory / (CLAIMS_FILE + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            claims: dict[str, dict[str, Any]] = (
                json.loads(self.path.read_text()) if self.path.exists() else {}
            )
            yield claims
            partial = self.path.with_name(CLAIMS_FILE + ".partial")
            write_private(partial, json.dumps(claims, indent=2, sort_keys=True) + "\n")
            partial.replace(self.path)


def _last_of(held: dict[str, Any], last_date: LastDate) -> Decimal | None:
    """The latest date the claim's data directory minted: in its tables if it still exists,
    and in the claim (kept at its last stop)."""
    dates = [_decimal(held.get("last_date"))]
    previous = Path(str(held.get("data_dir")))
    if previous.is_dir():
        dates.append(last_date(previous, str(held.get("subsystem"))))
    known = [date for date in dates if date is not None]
    return max(known) if known else None


def _decimal(value: Any) -> Decimal | None:
    return Decimal(str(value)) if value not in (None, "") else None


def _text(value: Decimal | None) -> str | None:
    return str(value) if value is not None else None
