"""`ibi local` always starts (issue 23) and a data directory mints only as the port it serves,
carrying on after whoever minted as that port before (issue 24, item 3).

No socket here: the registration service over its fakes, the subsystems and their claims over
files and local tables in a temporary directory.
"""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.minting.service import MintingService, MintRequest
from functions.minting.store import ensure_tables
from functions.resolver.service import RegistrationService
from ibi.core.labels import parse_label
from ibi.core.pairlist import format_pair_list
from ibi.core.subsystem import Subsystem, check_distinct
from ibi_tools.local.federation import (
    MINTING_TABLES,
    TABLES_FILE,
    LocalFederation,
    carry_on_after,
    last_date_in,
    mint_store,
)
from ibi_tools.local.subsystems import (
    SUBSYSTEMS_FILE,
    Claims,
    SubsystemError,
    archive_of,
    archive_prefixes,
    archive_subsystem,
    new_subsystems,
    read_subsystems,
    subsystems_for,
)
from ibi_tools.local.tables import LocalTables
from tests.fakes import FakeClock
from tests.fakes_resolver import FixedPepper, MemoryRegistry, MemoryThrottle, ScriptedTransport

ARCHIVE = "LK47B6W/3FSUP4L"
KEY = "123456789012-123456789012"
WRONG = "999999999999-999999999999"
NOW = 1_700_000_000
LOOPBACK = "127.0.0.1"


def inclusion(key: str) -> dict[str, str]:
    return {
        "servicesubject": "inclusionRequest",
        "archiveaddress": "127.0.0.1:8810",
        "archiveserviceibi": ARCHIVE,
        "archiveip": LOOPBACK,
        "archiveprotocol": "HTTP",
        "archiveplatformversion": "ibi-test",
        "archiveadmemailaddress": "admin@localhost",
        "registrationkey": key,
    }


def registration() -> tuple[RegistrationService, MemoryRegistry]:
    registry = MemoryRegistry()
    service = RegistrationService(
        registry=registry,
        throttle=MemoryThrottle(),
        transport=ScriptedTransport(answers={ARCHIVE: "confirmation yes"}),
        pepper=FixedPepper().load(),
        clock=FakeClock(Decimal(NOW)),
        confirmation_timeout=1.0,
    )
    return service, registry


# ---------------------------------------------------------------------------- issue 23


def test_the_registry_owner_includes_its_archive_however_many_wrong_keys_loopback_sent() -> None:
    """Five wrong keys from any process on the machine blocked 127.0.0.1 for the Archive, and
    `ibi local`, switching its Archives on from loopback, could not start for 15 minutes."""
    service, registry = registration()
    service.register(ARCHIVE, KEY)
    for _ in range(5):
        service.switch(inclusion(WRONG), client_ip=LOOPBACK)
    assert service.switch(inclusion(KEY), client_ip=LOOPBACK).status == 429

    admitted = service.admit(inclusion(KEY))

    assert (admitted.status, format_pair_list(admitted.pairs)) == (
        200,
        "status.archive included\r\nstatus.confirmation successful",
    )
    label = parse_label(ARCHIVE).label
    assert registry.items[label].included and registry.items[label].confirmed
    # The public route stays throttled for loopback: the owner only went around it.
    assert service.switch(inclusion(KEY), client_ip=LOOPBACK).status == 429


def test_admitting_registers_the_key_it_is_given() -> None:
    """A first start: the Archive was never registered; afterwards its key opens its record."""
    service, _ = registration()
    assert service.admit(inclusion(KEY)).status == 200
    assert service.switch(inclusion(KEY), client_ip="192.0.2.1").status == 200
    assert service.switch(inclusion(WRONG), client_ip="192.0.2.1").status == 403


def test_admitting_a_malformed_request_says_what_is_wrong() -> None:
    service, registry = registration()
    answer = service.admit({**inclusion(KEY), "registrationkey": "12"})
    assert answer.status == 400 and "registrationkey" in format_pair_list(answer.pairs)
    assert registry.items == {}


# ---------------------------------------------------------------------------- issue 24, item 3


def test_a_new_data_directory_mints_as_the_port_it_serves(tmp_path: Path) -> None:
    configured = subsystems_for(tmp_path, 8801)
    assert configured == new_subsystems(8801)
    assert json.loads((tmp_path / SUBSYSTEMS_FILE).read_text()) == configured
    assert subsystems_for(tmp_path, 8801) == configured  # the next start: the same


def test_a_data_directory_is_refused_on_a_port_it_does_not_mint_as(tmp_path: Path) -> None:
    """It minted as 8800 whatever port it served; another federation on 8800 then minted the
    same IBIs (999 of 1,000)."""
    subsystems_for(tmp_path, 8800)
    with pytest.raises(SubsystemError) as refused:
        subsystems_for(tmp_path, 8801)
    message = str(refused.value)
    assert "mints as port 8800" in message and "--port 8800" in message
    assert "not 8801" in message and "--data-dir" in message
    assert json.loads((tmp_path / SUBSYSTEMS_FILE).read_text()) == new_subsystems(8800)


def _tables_of(data_dir: Path) -> Any:
    data_dir.mkdir(parents=True, exist_ok=True)
    client = LocalTables(data_dir / TABLES_FILE).client()
    ensure_tables(client, MINTING_TABLES)
    return client


def _mint(
    client: Any, port: int, now: Decimal, configured: list[dict[str, Any]] | None = None
) -> Decimal:
    """One IBI minted in ``client``'s tables at ``now`` (from the first of ``configured``, by
    default the minting service's subsystem on ``port``): its date."""
    configured = configured or new_subsystems(port)
    subsystems = check_distinct(Subsystem.from_mapping(s) for s in configured)
    clock = FakeClock(now)
    service = MintingService(
        mint_store(client),
        subsystems,
        default_subsystem=configured[0]["name"],
        clock=clock,
        sleep=clock.sleep,
    )
    answer = service.mint(MintRequest(requester="test", request_id="r")).answer
    return Decimal(answer["ibis"][0]["date"])


def test_a_data_directory_taking_a_port_over_carries_on_after_the_last_one(
    tmp_path: Path,
) -> None:
    """Two data directories on one port, one after the other, are one subsystem: the second
    carries on after the first's last date, even one ahead of the clock (blocks of dates)."""
    claims = Claims(tmp_path / "state")
    first, second = tmp_path / "first", tmp_path / "second"
    ahead = Decimal(NOW + 3)  # minted ahead of the clock, as a block of dates may be
    tables = _tables_of(first)
    assert claims.claim(first, new_subsystems(8800), last_date_in) == {}
    first_date = _mint(tables, 8800, ahead)

    handed = claims.claim(second, new_subsystems(8800), last_date_in)

    assert handed == {"local": first_date}
    own = _tables_of(second)
    carry_on_after(mint_store(own), "local", handed["local"], "0.001")
    assert _mint(own, 8800, Decimal(NOW)) > first_date


def test_the_last_date_outlives_a_deleted_data_directory(tmp_path: Path) -> None:
    claims = Claims(tmp_path / "state")
    first, second = tmp_path / "first", tmp_path / "second"
    claims.claim(first, new_subsystems(8800), last_date_in)
    first_date = _mint(_tables_of(first), 8800, Decimal(NOW + 60))
    claims.note_last_dates(first, {"local": first_date})  # at its stop
    shutil.rmtree(first)

    assert claims.claim(second, new_subsystems(8800), last_date_in) == {"local": first_date}


def test_a_data_directory_claiming_its_own_port_again_is_handed_nothing(tmp_path: Path) -> None:
    claims = Claims(tmp_path / "state")
    data = tmp_path / "data"
    claims.claim(data, new_subsystems(8800), last_date_in)
    claims.note_last_dates(data, {"local": Decimal(NOW)})
    assert claims.claim(data, new_subsystems(8800), last_date_in) == {}
    kept = json.loads(claims.path.read_text())
    assert {held["last_date"] for held in kept.values()} == {str(Decimal(NOW))}
    assert claims.claim(tmp_path / "other", new_subsystems(8801), last_date_in) == {}


# ---------------------------------------------------------------------------- issue 24: owners


ARCHIVES = {"archive-a": 8810, "archive-b": 8820}


def prefixes(item: dict[str, Any]) -> set[str]:
    subsystem = Subsystem.from_mapping(item)
    return {subsystem.rep_prefix, subsystem.ibip_prefix}


def test_each_archive_mints_from_its_own_subsystem_on_its_own_port(tmp_path: Path) -> None:
    """One subsystem minted for both Archives: every prefix was shared, and nobody owned it."""
    served = subsystems_for(tmp_path, 8800, ARCHIVES)

    assert [item["name"] for item in served] == ["local", "archive-a-8810", "archive-b-8820"]
    assert served[1] == archive_subsystem("archive-a", 8810)
    assert Subsystem.from_mapping(served[1]).rep_prefix == "localhost/archive-a.8810"
    assert [archive_of(item) for item in served] == [None, "archive-a", "archive-b"]
    assert prefixes(served[1]).isdisjoint(prefixes(served[0]) | prefixes(served[2]))
    assert read_subsystems(tmp_path) == served
    assert subsystems_for(tmp_path, 8800, ARCHIVES) == served  # the next start: the same


def test_an_older_data_directory_keeps_its_shared_subsystem_as_the_minting_default(
    tmp_path: Path,
) -> None:
    """A data directory from before: its one subsystem (every item's IBI so far) stays the
    minting service's default, and each Archive gets its own beside it."""
    (tmp_path / SUBSYSTEMS_FILE).write_text(json.dumps(new_subsystems(8800)))

    served = subsystems_for(tmp_path, 8800, ARCHIVES)

    assert served[0] == new_subsystems(8800)[0]
    assert [archive_of(item) for item in served] == [None, "archive-a", "archive-b"]
    own = Subsystem.from_mapping(served[1])
    assert archive_prefixes(served, "archive-a") == [own.rep_prefix, own.ibip_prefix]


def test_an_archive_on_another_port_mints_from_a_new_subsystem_and_keeps_the_old_prefixes(
    tmp_path: Path,
) -> None:
    subsystems_for(tmp_path, 8800, ARCHIVES)

    served = subsystems_for(tmp_path, 8800, {"archive-a": 8811, "archive-b": 8820})

    assert [item["name"] for item in served] == ["local", "archive-a-8811", "archive-b-8820"]
    kept = read_subsystems(tmp_path)
    assert kept is not None and len(kept) == 4  # archive-a-8810's IBIs keep their prefix
    owned = set(archive_prefixes(kept, "archive-a"))
    assert owned == prefixes(archive_subsystem("archive-a", 8810)) | prefixes(served[1])


def test_an_archive_is_refused_the_port_another_archive_of_the_directory_minted_as(
    tmp_path: Path,
) -> None:
    """Swapped ports: archive-a minting as 8820 would repeat archive-b's IBIs of that port."""
    subsystems_for(tmp_path, 8800, ARCHIVES)
    before = (tmp_path / SUBSYSTEMS_FILE).read_text()
    with pytest.raises(SubsystemError) as refused:
        subsystems_for(tmp_path, 8800, {"archive-a": 8820, "archive-b": 8810})
    message = str(refused.value)
    assert "archive-a cannot mint as port 8820" in message and "'archive-b-8820'" in message
    assert "--archive-ports" in message
    assert (tmp_path / SUBSYSTEMS_FILE).read_text() == before  # nothing recorded


def test_a_prefix_another_subsystem_of_the_same_directory_held_carries_on_after_it(
    tmp_path: Path,
) -> None:
    """The claims skipped every prefix the directory held already, whichever subsystem had
    minted under it: a subsystem new to that prefix started from its own (empty) state."""
    claims = Claims(tmp_path / "state")
    data = tmp_path / "data"
    tables = _tables_of(data)
    before = [archive_subsystem("archive-b", 8820)]
    claims.claim(data, before, last_date_in)
    date = _mint(tables, 8820, Decimal(NOW + 3), before)
    other = [{**before[0], "name": "renamed"}]  # the same prefixes, another state

    assert claims.claim(data, other, last_date_in) == {"renamed": date}
    carry_on_after(mint_store(tables), "renamed", date, "0.001")
    assert _mint(tables, 8820, Decimal(NOW), other) > date


def federation_with(tmp_path: Path, owned: dict[str, list[str]]) -> LocalFederation:
    """A federation not started, knowing its Archives' prefixes."""
    local = LocalFederation(data_dir=tmp_path)
    local._prefixes = owned
    return local


def test_each_archive_is_registered_with_the_prefixes_of_its_subsystems_in_both_forms(
    tmp_path: Path,
) -> None:
    """The owner check is on the prefix of the form resolved: a service IBI registered in its
    ibip form made its Archive the owner of that form's prefix only."""
    service, registry = registration()
    assert service.admit(inclusion(KEY)).status == 200
    own = ["localhost/archive-a.8810", parse_label(ARCHIVE).prefix]
    local = federation_with(tmp_path, {"archive-a": own})
    assert service.owned().keys() == {parse_label(ARCHIVE).prefix}

    local._own_prefixes(service, "archive-a", ARCHIVE)

    owned = service.owned()
    assert {p: owned[p].service_ibi for p in own} == dict.fromkeys(own, ARCHIVE)
    assert registry.items[ARCHIVE].prefixes == ("localhost/archive-a.8810",)  # only the missing


def test_archives_of_an_older_data_directory_own_their_new_subsystems_explicitly(
    tmp_path: Path,
) -> None:
    """Service IBIs of one shared subsystem: their prefix has no owner; each Archive's own
    subsystem's prefixes are registered with it."""
    service, _ = registration()
    other = "LK47B6W/3FSUP4M"  # the same prefix: minted by the one shared subsystem
    service.register(other, KEY)
    assert service.admit(inclusion(KEY)).status == 200
    assert service.owned() == {}
    own = ["localhost/archive-a.8810", "LK47B6W3JAK"]

    federation_with(tmp_path, {"archive-a": own})._own_prefixes(service, "archive-a", ARCHIVE)

    owned = service.owned()
    assert {p: a.service_ibi for p, a in owned.items()} == dict.fromkeys(own, ARCHIVE)


def test_an_archive_whose_prefix_another_owns_stops_the_start_with_one_line(
    tmp_path: Path,
) -> None:
    service, _ = registration()
    other = "LK47B6W3GDJ/3FSUP4M"
    service.register(other, KEY, prefixes=["localhost/archive-a.8810"])
    assert service.admit(inclusion(KEY)).status == 200
    local = federation_with(tmp_path, {"archive-a": ["localhost/archive-a.8810"]})

    with pytest.raises(SubsystemError) as refused:
        local._own_prefixes(service, "archive-a", ARCHIVE)

    message = str(refused.value)
    assert "archive-a mints under localhost/archive-a.8810" in message and other in message
    assert "--archive-ports" in message
