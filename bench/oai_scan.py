"""Items read and time of one OAI-PMH request whose ``from`` matches nothing (issue 26, 2).

    .venv/bin/python -m bench.oai_scan [items ...]

In memory (``tests.fakes_archive.MemoryItemStore``): it counts the items the repository reads
through ``scan``, which is what the read budget bounds; the time is the repository's own.
"""

from __future__ import annotations

import sys
import time
from decimal import Decimal
from urllib.parse import urlencode

from functions.archive.oai import archive_repository
from functions.archive.service import ArchiveService
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryItemStore, MemoryMinter
from tests.unit.test_oai_read_budget import CountingItems

START = Decimal(1795473000)


def measure(count: int) -> tuple[int, float]:
    store = MemoryItemStore()
    clock = FakeClock(START)
    service = ArchiveService(store, clock=clock, mint=MemoryMinter())
    service_item = service.bootstrap("https://archive.example.org")
    for n in range(count):
        service.create_original({"dc": {"title": [f"t{n}"]}})
    counting = CountingItems(store)
    repository = archive_repository(
        counting,
        address="archive.example.org",
        service_ibi=service_item.key,
        base_url="https://archive.example.org",
        admin_email="ibi-admin@example.org",
        clock=clock,
    )
    query = urlencode({"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2030-01-01"})
    began = time.perf_counter()
    repository.answer(query)
    return counting.read, time.perf_counter() - began


if __name__ == "__main__":
    for count in [int(a) for a in sys.argv[1:]] or [20_000]:
        read, seconds = measure(count)
        sys.stdout.write(f"{count} items: {read} read, {seconds * 1000:.1f} ms\n")
