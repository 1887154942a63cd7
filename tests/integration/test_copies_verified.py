"""Issue 24, item 5 over HTTP: a resolver and two Archives on loopback (local mode's tables).
``POST /api/copies`` at archive b reads the original's files from archive a through the
resolver's holdings view: declared checksums of tampered bytes are a 409 naming the file; with
archive a down, the copy is made ``unverified`` and ``POST /api/verify`` says so; once a is back,
a verify records ``verified`` with a's list.

The pieces in memory: ``tests/unit/test_copies_verified.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.archive import wiring
from functions.archive.content import ContentService
from functions.archive.model import Forms
from functions.archive.service import ArchiveService
from functions.archive.settings import ArchiveSettings
from functions.archive.store import DynamoItemStore, ensure_table
from functions.archive.views import ArchiveViews
from ibi.client import ApiError, ArchiveClient
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.stores import free_port
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryFileStore
from tests.integration.test_archive_robustness import include, start_resolver

A_SERVICE = Forms(ibip="8JMKD3MGP8W/3FSUP4L")  # owns the prefix 8JMKD3MGP8W
B_SERVICE = Forms(ibip="LK47B6W/362SFKH")
ITEM, OTHER = "8JMKD3MGP8W/35MME4E", "8JMKD3MGP8W/35MMLL8"
REPORT = b"The report, as deposited.\n"
TAMPERED = b"The report, with a payload.\n"


def declared(data: bytes) -> dict[str, Any]:
    return {"path": "report.txt", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def settings(table: str, port: int, resolver: str) -> ArchiveSettings:
    return ArchiveSettings.from_environment(
        {
            "IBI_ARCHIVE_TABLE": table,
            "IBI_ARCHIVE_BASE_URL": f"http://127.0.0.1:{port}",
            "IBI_RESOLVER_URL": resolver,
            "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
        }
    )


def serve(name: str, tables: Any, config: ArchiveSettings, files: MemoryFileStore) -> Any:
    port = int(str(config.base_url).rsplit(":", 1)[1])

    def handler() -> Any:  # in the worker
        from functions.archive.handler import lambda_handler

        runtime = wiring.build(config, dynamodb=tables.client())
        runtime.files = files
        wiring.install(runtime)
        return lambda_handler

    return LocalGateway(name, handler, port, workers=2).start()


def deposit_originals(tables: Any) -> MemoryFileStore:
    """Archive a's table: the originals of ITEM and OTHER, each with REPORT."""
    ensure_table(tables.client(), "a-items")
    store = DynamoItemStore(tables.client(), "a-items")
    store.claim_service_item(A_SERVICE)
    service = ArchiveService(
        store, clock=FakeClock(Decimal(1795473000)), own_prefixes={"8JMKD3MGP8W"}
    )
    files = MemoryFileStore()
    content = ContentService(
        service, views=ArchiveViews("http://x"), files=files, serve_inline_bytes=1 << 20
    )
    for label in (ITEM, OTHER):
        service.create_original({"ibi": label})
        files.upload(label, "report.txt", REPORT)
        content.commit_files(label, {"files": [declared(REPORT)]})
    return files


@pytest.fixture
def federation(local_tables: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    tables, _ = local_tables
    resolver = start_resolver(tables, tmp_path)
    gateways = [resolver]
    try:
        ensure_table(tables.client(), "b-items")
        DynamoItemStore(tables.client(), "b-items").claim_service_item(B_SERVICE)
        b = serve("b", tables, settings("b-items", free_port(), resolver.url), MemoryFileStore())
        gateways.append(b)
        # Started last: no other process inherits its socket, so that it can go down.
        a_files = deposit_originals(tables)
        a_settings = settings("a-items", free_port(), resolver.url)
        a = serve("a", tables, a_settings, a_files)
        gateways.append(a)
        include(resolver.url, A_SERVICE, a)
        yield {
            "tables": tables,
            "a": a,
            "a_settings": a_settings,
            "a_files": a_files,
            "b": b,
            "gateways": gateways,
        }
    finally:
        for gateway in gateways:
            gateway.shutdown()


def test_a_copy_is_checked_against_the_original_its_archive_lists(
    federation: dict[str, Any],
) -> None:
    b = ArchiveClient(federation["b"].url, timeout=30)
    with pytest.raises(ApiError) as refused:
        b.copy({"ibi": ITEM, "original_files": [declared(TAMPERED)]})
    assert refused.value.status == 409, refused.value
    assert "'report.txt': SHA-256 " + hashlib.sha256(TAMPERED).hexdigest() in str(refused.value)
    assert hashlib.sha256(REPORT).hexdigest() in str(refused.value)  # the original's

    made = b.copy({"ibi": ITEM})
    assert made["original_files"] == [declared(REPORT)]
    assert made["original_check"]["status"] == "verified"
    assert made["original_check"]["archive"] == A_SERVICE.ibip


def test_a_copy_of_an_unreachable_original_is_unverified_until_a_verify_reads_it(
    federation: dict[str, Any],
) -> None:
    b = ArchiveClient(federation["b"].url, timeout=30)
    federation["a"].shutdown()
    made = b.copy({"ibi": OTHER, "original_files": [declared(TAMPERED)]})  # the depositor's word
    check = made["original_check"]
    assert check["status"] == "unverified" and made["original_files"] == [declared(TAMPERED)]
    assert "no Archive that answered holds the original" in check["reason"]
    assert A_SERVICE.ibip in check["reason"]  # did not answer

    report = b.call("POST", "/api/verify", None, ibi=OTHER)
    assert [u["ibi"] for u in report["unverified"]] == [OTHER]
    assert report["items"][0]["original_check"]["status"] == "unverified"

    again = serve("a", federation["tables"], federation["a_settings"], federation["a_files"])
    federation["gateways"].append(again)
    report = b.call("POST", "/api/verify", None, ibi=OTHER)
    assert report["unverified"] == []
    assert report["items"][0]["original_check"]["status"] == "verified"
    held = b.item(OTHER)
    assert held["original_files"] == [declared(REPORT)]  # a's list, not the depositor's
    assert held["original_check"]["archive"] == A_SERVICE.ibip
