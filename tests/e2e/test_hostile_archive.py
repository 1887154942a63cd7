"""A hostile registered Archive (issue 24, item 1), speaking the protocol on loopback.

The resolver's real handler runs behind the local gateway (3 worker processes) over local
mode's tables; three fake Archives, each registered with the administrator's API and switched
on with the protocol's inclusionRequest: archive-a (owns its service IBI's prefix, under which
the IBIs below were minted; it holds none of them yet, or one original), archive-c (holds a
copy of one of them), and a hostile Archive registered under its own prefix that answers
"Original, here is my URL" for every IBI. The reader never ends at the hostile URL: the
owner's word is the answer (404 for what it does not hold, issue 34), and with the owner down
what it said last, with ``IBI-Conflict`` naming the hostile claim heard and the
``TwoOriginals`` metric. Before owners, 23 of 24 such resolutions went to the hostile URL (a
prefix hint), with no header and no metric.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from functions.resolver import resolving, wiring
from functions.resolver.resolving import Lookup
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.client import ResolverClient
from ibi.core.pairlist import encode_query
from ibi.core.persistent_url import parse_persistent_url
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.stores import free_port
from ibi_tools.local.tables import LocalTables
from tests.integration.archives import FakeArchive, serving

RESOLVER_SERVICE = "J8LNKB5R7W/3FUQHC5"
KEY = "1234567890-0987654321"
ARCHIVE_A = "8JMKD3MGP8W/3FSUP4L"  # owns 8JMKD3MGP8W
ARCHIVE_C = "LK47B6W/362SFKH"
HOSTILE = "D7N2UA7W/3EPGUE5"  # registered under its own prefix, D7N2UA7W
FRESH = [f"8JMKD3MGP8W/35MML{c}" for c in "23456789ABCDEFGHJKLMNPQR"]  # minted, not deposited
COPIED = FRESH[0]  # archive-c holds a copy of this one


def holding(label: str, url: str, state: str = "Original") -> str:
    return (
        f"ibi {{ibip {label}}}\nstate {state}\ncontenttype Data\n"
        f"timestamp 2024-05-01T12:00:00Z\nurl {url}\nurlkey 1427244889-5349022633744855\n"
    )


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def get(url: str) -> tuple[int, dict[str, str], str]:
    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    try:
        with opener.open(request, timeout=10) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, ""
    except urllib.error.HTTPError as error:
        body = error.read().decode("utf-8", "replace")
        return error.code, {k.lower(): v for k, v in error.headers.items()}, body


def settings_of(tmp_path: Path) -> ResolverSettings:
    return ResolverSettings.from_environment(
        {
            "IBI_RESOLVER_TABLE": "resolver",
            "IBI_PEPPER_FILE": str(tmp_path / "pepper"),
            "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
            "IBI_ARCHIVE_TIMEOUT_SECONDS": "1",
            "IBI_RESOLUTION_DEADLINE_SECONDS": "3",
        }
    )


@pytest.fixture
def tables(tmp_path: Path) -> LocalTables:
    tables = LocalTables(tmp_path / "tables.sqlite3")
    ensure_tables(tables.client(), "resolver")
    return tables


@pytest.fixture
def resolver(tables: LocalTables, tmp_path: Path) -> Iterator[str]:
    settings = settings_of(tmp_path)

    def handler() -> Any:  # in each worker process
        from functions.resolver.handler import lambda_handler

        wiring.install(wiring.build(settings, dynamodb=tables.client()))
        return lambda_handler

    gateway = LocalGateway("resolver", handler, free_port(), workers=3).start()
    yield gateway.url
    gateway.shutdown()


def include(resolver: str, *archives: FakeArchive) -> None:
    admin = ResolverClient(resolver, sign=False)
    for archive in archives:
        admin.register(archive.service_ibi, KEY)
        pairs = [
            ("servicesubject", "inclusionRequest"),
            ("archiveaddress", archive.address),
            ("archiveserviceibi", archive.service_ibi),
            ("archiveip", "127.0.0.1"),
            ("archiveprotocol", "HTTP"),
            ("archiveplatformversion", "fake-1.0"),
            ("archiveadmemailaddress", "admin@example.org"),
            ("registrationkey", KEY),
        ]
        status, _, _ = get(f"{resolver}/{RESOLVER_SERVICE}?{encode_query(pairs)}")
        assert status == 200


def test_a_hostile_archive_never_captures_another_archives_prefix(
    resolver: str, tables: LocalTables, tmp_path: Path
) -> None:
    archive_a = FakeArchive(ARCHIVE_A)
    archive_c = FakeArchive(
        ARCHIVE_C, {COPIED: holding(COPIED, "http://c.example/copy", state="Copy")}
    )
    hostile = FakeArchive(HOSTILE, {ibi: holding(ibi, "http://hostile.example/x") for ibi in FRESH})
    with serving(archive_a, archive_c, hostile):
        include(resolver, archive_a, archive_c, hostile)
        # archive-a owns the prefix and holds none of them: its word is the answer (issue 34).
        for ibi in FRESH:
            status, headers, body = get(f"{resolver}/{ibi}")
            assert status == 404 and "location" not in headers, (ibi, status)
            status, _, _ = get(f"{resolver}/{ibi}?ibiurl.requireditemstatus=Original")
            assert status == 404
        assert hostile.requests == [] and archive_c.requests == []  # not even asked
        archive_a.answers[FRESH[2]] = holding(FRESH[2], "http://a.example/original")
        for _ in range(3):  # deposited at its owner: one request, the owner's
            status, headers, _ = get(f"{resolver}/{FRESH[2]}")
            assert (status, headers["location"]) == (302, "http://a.example/original")
            assert "ibi-conflict" not in headers
        assert hostile.requests == []
        holdings = ResolverClient(resolver, sign=False).holdings(FRESH[2])
        assert holdings["verdict"]["untrusted_originals"] == [HOSTILE]
        assert holdings["verdict"]["authority"] == ARCHIVE_A
        # archive-a now answers garbage (down): what it said last is the answer, said so; the
        # hostile claim, heard now that everyone is asked, is named and changes nothing.
        archive_a.mode = "garbage"
        for _ in range(3):
            status, headers, _ = get(f"{resolver}/{FRESH[2]}")
            assert (status, headers["location"]) == (302, "http://a.example/original")
            assert headers["ibi-degraded"].startswith(f'authority-down; ibi="{FRESH[2]}"')
            assert headers["ibi-conflict"] == (
                f'untrusted-original; ibi="{FRESH[2]}"; archives="{HOSTILE}"; owner="{ARCHIVE_A}"'
            )
        status, headers, body = get(f"{resolver}/{FRESH[4]}")  # never resolved: nothing kept
        assert status == 504 and "location" not in headers and "hostile.example" not in body
        # The metric the alarm watches (the workers' metrics are off in tests: the same
        # resolution, in this process, over the same tables and the real transport).
        runtime = wiring.build(settings_of(tmp_path), dynamodb=tables.client())
        resolving.metrics.clear_metrics()
        url = parse_persistent_url(f"/{FRESH[2]}")
        runtime.resolving.resolve(Lookup(url, f"{resolver}/{FRESH[2]}", "127.0.0.1", "c"))
        assert resolving.metrics.metric_set["TwoOriginals"]["Value"] == [1.0]
        assert resolving.metrics.metric_set["UntrustedOriginals"]["Value"] == [1.0]
        assert resolving.metrics.metric_set["DegradedAnswers"]["Value"] == [1.0]
        resolving.metrics.clear_metrics()
