"""`ibi local` as a real federation (issue 24): each Archive mints from its own identification
subsystem, owns its prefixes at the resolver, and is the one Archive asked about its IBIs.

The federation runs in this process, so that each API's request counter (what its workers
answered, ``LocalGateway.requests_served``) shows which Archive the resolver asked.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ibi.client import ApiError, ArchiveClient
from ibi.core.labels import parse_label
from ibi_tools.local.federation import LocalFederation
from ibi_tools.local.stores import free_port

pytestmark = pytest.mark.e2e

SETTLE = 1.5  # seconds for the acknowledgments of a resolution to reach their Archive


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def fetch(url: str) -> tuple[int, str | None, dict[str, str]]:
    """The status, ``Location`` and headers of a GET, redirects not followed."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=30) as answer:
            return answer.status, answer.headers.get("Location"), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location"), dict(error.headers)


def start(data_dir: Path, ports: list[int]) -> LocalFederation:
    minting, archive_a, archive_b, resolver = ports
    return LocalFederation(
        data_dir=data_dir,
        minting_port=minting,
        archive_ports=(archive_a, archive_b),
        resolver_port=resolver,
        demo=False,
        workers=2,
    ).start()


@pytest.fixture
def federation(tmp_path: Path) -> Iterator[LocalFederation]:
    local = start(tmp_path / "data", [free_port() for _ in range(4)])
    yield local
    local.stop()


def archive(local: LocalFederation, index: int) -> ArchiveClient:
    return ArchiveClient(f"http://127.0.0.1:{local.archive_ports[index]}", sign=False)


def served(local: LocalFederation) -> dict[str, int]:
    """How many requests each Archive's workers answered so far."""
    return {g.name: g.requests_served for g in local.gateways if g.name.startswith("archive")}


def asked_while(local: LocalFederation, url: str) -> tuple[int, str | None, dict[str, int]]:
    """Resolve ``url`` once: its status and Location, and the requests each Archive answered
    meanwhile (the urlRequest, the acknowledgment of the access)."""
    before = served(local)
    status, location, _ = fetch(url)
    time.sleep(SETTLE)
    after = served(local)
    return status, location, {name: after[name] - before[name] for name in after}


def deposit(client: ArchiveClient, url: str) -> str:
    ibi: str = client.create({"url": url})["ibi"]["ibip"]
    return ibi


def service_ibi(client: ArchiveClient) -> str:
    forms = client.service()["archiveserviceibi"]
    return parse_label(forms.get("ibip") or forms["rep"]).label


def service_prefix(client: ArchiveClient) -> str:
    return parse_label(service_ibi(client)).prefix


def owned(local: LocalFederation) -> dict[str, list[str]]:
    """What the resolver's registry says each Archive owns (``GET /admin/archives``)."""
    with urllib.request.urlopen(f"{local.resolver_url}/admin/archives", timeout=30) as answer:
        archives = json.loads(answer.read())["archives"]
    return {a["archiveserviceibi"]["ibip"]: sorted(a["owns"]) for a in archives}


def test_each_archive_mints_under_its_own_prefix_and_is_the_only_archive_asked_about_it(
    federation: LocalFederation,
) -> None:
    """Both Archives minted from one subsystem: every prefix was shared, nobody owned it, and
    every first resolution asked both Archives."""
    a, b = archive(federation, 0), archive(federation, 1)
    mine = deposit(a, "https://example.org/of-archive-a")
    theirs = deposit(b, "https://example.org/of-archive-b")
    port_a, port_b = federation.archive_ports
    assert parse_label(mine).prefix == service_prefix(a) != service_prefix(b)
    assert parse_label(mine).port == port_a and parse_label(theirs).port == port_b
    assert parse_label(theirs).prefix == service_prefix(b)
    rep = a.item(mine)["ibi"]["rep"]
    assert rep.startswith(f"localhost/archive-a.{port_a}/")

    for ibi, url, owner, other in (
        (mine, "https://example.org/of-archive-a", "archive-a", "archive-b"),
        (theirs, "https://example.org/of-archive-b", "archive-b", "archive-a"),
        (rep, "https://example.org/of-archive-a", "archive-a", "archive-b"),  # the rep form
    ):
        status, location, asked = asked_while(federation, f"{federation.resolver_url}/{ibi}")
        assert (status, location) == (302, url)
        assert asked[other] == 0 and asked[owner] >= 1, (ibi, asked)


def test_archive_b_cannot_plant_an_original_of_archive_a_and_a_forced_one_is_not_followed(
    federation: LocalFederation,
) -> None:
    """archive-b accepted `POST /api/items {"ibi": <archive-a's IBI>}` (one subsystem for
    both), and resolution then alternated between the two Archives. Now refused, and an
    original forced in by archive-b's operator changes no answer: archive-a is the authority."""
    a, b = archive(federation, 0), archive(federation, 1)
    mine = deposit(a, "https://example.org/original")
    with pytest.raises(ApiError) as refused:
        b.create({"ibi": mine, "url": "https://example.org/planted"})
    assert (refused.value.status, refused.value.code) == (403, "NotOwnSubsystem")

    # Forced in anyway, by archive-b's operator: an original of archive-a's IBI in its table.
    forced = {"ibi": mine, "url": "https://example.org/planted", "reason": "a hostile operator"}
    assert b.import_original(forced)["state"] == "Original"
    for _ in range(5):
        status, location, asked = asked_while(federation, f"{federation.resolver_url}/{mine}")
        assert (status, location) == (302, "https://example.org/original")
        assert asked["archive-b"] == 0  # the owner's original settles it: b is never asked
    required = f"{federation.resolver_url}/{mine}?ibiurl.requireditemstatus=Original"
    assert fetch(required)[:2] == (302, "https://example.org/original")  # the owner's (issue 34)

    # An original archive-a deleted, planted at archive-b: the owner's tombstone is the answer
    # (410), archive-b's claim brings nothing back.
    fresh = deposit(a, "https://example.org/deleted-later")
    a.delete(fresh)
    b.import_original({"ibi": fresh, "url": "https://example.org/planted", "reason": "again"})
    for _ in range(3):
        status, location, _ = fetch(f"{federation.resolver_url}/{fresh}")
        assert (status, location) == (410, None)
        assert fetch(f"{fresh_url(federation, fresh)}?ibiurl.requireditemstatus=Original")[0] == 410


def fresh_url(federation: LocalFederation, ibi: str) -> str:
    return f"{federation.resolver_url}/{ibi}"


def test_a_restart_keeps_each_archives_subsystem_and_what_it_owns(tmp_path: Path) -> None:
    """Restarted, and restarted with archive-a on another port: its items keep their IBIs and
    their owner, and it mints from a new subsystem of its new port, which it owns too."""
    ports = [free_port() for _ in range(4)]
    local = start(tmp_path / "data", ports)
    try:
        a = archive(local, 0)
        mine = deposit(a, "https://example.org/before")
        service = a.service()["archiveserviceibi"]["ibip"]
        owns = owned(local)
        subsystems = (tmp_path / "data" / "subsystems.json").read_text()
    finally:
        local.stop()
    assert parse_label(service).prefix in owns[service]
    assert f"localhost/archive-a.{ports[1]}" in owns[service]

    local = start(tmp_path / "data", ports)
    try:
        assert (tmp_path / "data" / "subsystems.json").read_text() == subsystems
        assert owned(local) == owns
        status, location, asked = asked_while(local, f"{local.resolver_url}/{mine}")
        assert (status, location, asked["archive-b"]) == (302, "https://example.org/before", 0)
    finally:
        local.stop()

    moved = [ports[0], free_port(), ports[2], ports[3]]
    local = start(tmp_path / "data", moved)
    try:
        a = archive(local, 0)
        assert a.service()["archiveserviceibi"]["ibip"] == service  # the same Archive
        after = deposit(a, "https://example.org/after")
        assert parse_label(after).port == moved[1]
        now = owned(local)[service]
        assert set(owns[service]) < set(now)
        assert f"localhost/archive-a.{moved[1]}" in now and parse_label(after).prefix in now
        for ibi, url in (
            (mine, "https://example.org/before"),
            (after, "https://example.org/after"),
        ):
            status, location, asked = asked_while(local, f"{local.resolver_url}/{ibi}")
            assert (status, location, asked["archive-b"]) == (302, url, 0)
    finally:
        local.stop()
