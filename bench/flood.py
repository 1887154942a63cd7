"""Resolution and /status latency before, during and after a flood of refused inclusion requests.

Issue 11, finding 1: anonymous inclusion requests with random valid IBIs and wrong keys each
wrote a throttle record into the registry, and /status and resolution scanned it (6 → 192 ms
and 25 → 393 ms during a flood of 20,000). Here the resolver's real handler runs behind the
local API Gateway stand-in (its worker processes, over local mode's tables, as ``ibi local``),
with one fake Archive on loopback holding the IBI and answering in 20 ms. One client measures a
resolution (302) then a /status (200), one after the other: first alone, then while
``FLOOD_THREADS`` clients send refused inclusion requests (nine in ten for random unregistered
IBIs, one in ten a wrong key for the registered Archive, from several loopback addresses),
then alone again. The CPU time all processes (gateway workers, the tables in them, the clients) spend
while each flood runs is divided by its requests. A control phase then sends as many requests, at the refused flood's own rate, that touch no
table at all (``/inspect`` of random IBIs): what the refused flood adds beyond that control is
what it does to the stores; what both add is the machine's two cores shared with the flood.
Recorded: p50/p99 of each phase, the flood's rate and answers, and the items
in the registry and throttle tables before and after. The gateway has two workers more than
there are flooding clients, so the measuring client never waits for a free worker: what is
measured is what the flood does to the registry, not the size of this machine.
"""

from __future__ import annotations

import http.client
import random
import socket
import struct
import tempfile
import threading
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.archives import FakeArchives, FakeSpec
from bench.common import cpu_seconds, save, summary_ms
from functions.resolver import wiring
from functions.resolver.registry import Contact
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.core.labels import IBI
from ibi.core.pairlist import encode_query
from ibi.defaults import RESOLVER_SERVICE_IBI
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.stores import free_port
from ibi_tools.local.tables import LocalTables

ITEM = "8JMKD3MGP8W/35MMLL8"
ARCHIVE = "8JMKD3MGP8W/3FSUP4L"
KEY = "1234567890-0987654321"
ANSWER = (
    f"archiveaddress x\nibi {{ibip {ITEM}}}\nstate Original\ncontenttype Data\n"
    "timestamp 2009-07-21T14:43:31Z\nurl http://a.example/doc.pdf\nurlkey 1427244889-5349022633744855\n"
)
FLOOD_THREADS = 4
NO_LINGER = struct.pack("ii", 1, 0)  # close with a reset: no TIME_WAIT left behind
FLOOD_SOURCES = 8  # 127.0.0.10 … 127.0.0.17: the registered Archive's guessers


def _get(port: int, target: str, source: str = "127.0.0.1") -> int:
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=30, source_address=(source, 0)
    )
    try:
        connection.request("GET", target, headers={"Accept": "text/plain"})
        answer = connection.getresponse()
        answer.read()
        return answer.status
    finally:
        # The gateway keeps connections alive, so this side closes first: without a reset,
        # 40,000 connections bound to a few source addresses would leave their ports in
        # TIME_WAIT and run out of them (each request keeps its own connection, as before).
        if connection.sock is not None:
            connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, NO_LINGER)
        connection.close()


def _refused_inclusion(draw: random.Random, address: str) -> tuple[str, str]:
    """A request that must be refused, and the loopback address it is sent from."""
    if draw.random() < 0.1:
        archive, source = ARCHIVE, f"127.0.0.{10 + draw.randrange(FLOOD_SOURCES)}"
    else:
        when = Decimal(draw.randrange(10**9, 2 * 10**9))
        ip = f"198.51.{draw.randrange(256)}.{draw.randrange(256)}"
        archive, source = IBI.build(when, ip=ip).ibip or "", "127.0.0.1"
    key = f"{draw.randrange(10**10, 10**11)}-{draw.randrange(10**10, 10**11)}"
    pairs = [
        ("servicesubject", "inclusionRequest"),
        ("archiveaddress", address),
        ("archiveserviceibi", archive),
        ("archiveip", "127.0.0.1"),
        ("archiveprotocol", "HTTP"),
        ("archiveplatformversion", "flood-1"),
        ("archiveadmemailaddress", "flood@example.org"),
        ("registrationkey", key),
    ]
    return f"/{RESOLVER_SERVICE_IBI}?{encode_query(pairs)}", source


def _control(draw: random.Random) -> tuple[str, str]:
    """A request as cheap to send that reads nothing: the inspector of a random IBI."""
    when = Decimal(draw.randrange(10**9, 2 * 10**9))
    ip = f"198.51.{draw.randrange(256)}.{draw.randrange(256)}"
    return f"/inspect?ibi={IBI.build(when, ip=ip).ibip}", "127.0.0.1"


class Flood:
    """``FLOOD_THREADS`` clients sending ``total`` requests, all at once: refused inclusion
    requests, or (``control``) inspector requests that touch no table."""

    def __init__(
        self, port: int, total: int, address: str, *, control: bool = False, rate: float = 0
    ) -> None:
        self.port, self.total, self.address = port, total, address
        self.control = control
        self.interval = FLOOD_THREADS / rate if rate else 0.0  # per client, when paced
        self.answers: Counter[int] = Counter()
        self._sent = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._send, args=(seed,), daemon=True)
            for seed in range(FLOOD_THREADS)
        ]
        self.seconds = 0.0

    def start(self) -> Flood:
        self._started = time.perf_counter()
        for thread in self._threads:
            thread.start()
        return self

    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()
        self.seconds = time.perf_counter() - self._started

    def _send(self, seed: int) -> None:
        draw = random.Random(seed)
        due = time.perf_counter()
        while True:
            if self.interval:
                due += self.interval
                time.sleep(max(0.0, due - time.perf_counter()))
            with self._lock:
                if self._sent >= self.total:
                    return
                self._sent += 1
            if self.control:
                target, source = _control(draw)
            else:
                target, source = _refused_inclusion(draw, self.address)
            status = _get(self.port, target, source)
            with self._lock:
                self.answers[status] += 1


def _measure(port: int, rounds: int, *, until: Flood | None = None) -> dict[str, Any]:
    """``rounds`` resolutions and /status (or, with ``until``, as many as the flood lasts)."""
    resolution: list[float] = []
    status: list[float] = []
    while len(resolution) < rounds or (until is not None and until.running()):
        started = time.perf_counter()
        assert _get(port, f"/{ITEM}") == 302
        resolution.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert _get(port, "/status") == 200
        status.append(time.perf_counter() - started)
    return {"resolution": summary_ms(resolution), "status": summary_ms(status)}


def _flooded(port: int, rounds: int, flood: Flood, pids: list[int]) -> dict[str, Any]:
    """Measure while ``flood`` runs; with the CPU time the flood's requests took, per request."""
    cpu = cpu_seconds(pids, this_process=True)
    measured = _measure(port, rounds, until=flood.start())
    flood.join()
    measured["cpu_ms_per_request"] = round(
        (cpu_seconds(pids, this_process=True) - cpu) * 1000 / flood.total, 2
    )
    return measured


def _count(client: Any, table: str) -> int:
    """The items in ``table``, by the plain paged Scan a store makes (local mode's tables
    refuse a ``Select`` no store sends)."""
    counted, request = 0, {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**request)
        counted += int(page["Count"])
        if "LastEvaluatedKey" not in page:
            return counted
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def run(quick: bool) -> dict[str, Any]:
    rounds = 50 if quick else 200
    total = 2_000 if quick else 20_000
    with tempfile.TemporaryDirectory() as folder:
        local = LocalTables(Path(folder) / "tables.sqlite3")
        client = local.client()
        ensure_tables(client, "flood")
        settings = ResolverSettings.from_environment(
            {
                "IBI_RESOLVER_TABLE": "flood",
                "IBI_PEPPER_FILE": str(Path(folder) / "pepper"),
                "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
                "IBI_ARCHIVE_TIMEOUT_SECONDS": "1",
                "IBI_RESOLUTION_DEADLINE_SECONDS": "3",
            }
        )
        with FakeArchives([FakeSpec(ARCHIVE, 0.02, {ITEM: ANSWER})]) as archives:
            (address,) = archives.addresses
            runtime = wiring.build(settings, dynamodb=client)
            runtime.registration.register(ARCHIVE, KEY)
            contact = Contact(address=address, protocol="HTTP")
            runtime.registry.include(ARCHIVE, contact, at="now", confirmed=True)

            def handler() -> Any:  # in each worker process: its own client, its own runtime
                from functions.resolver.handler import lambda_handler

                wiring.install(wiring.build(settings, dynamodb=local.client()))
                return lambda_handler

            gateway = LocalGateway("resolver", handler, free_port(), workers=FLOOD_THREADS + 2)
            gateway.start()
            try:
                port = int(gateway.url.rsplit(":", 1)[1])
                _measure(port, 5)  # warm: each worker's snapshot, connections
                tables = (settings.table, settings.throttle_table)
                items_before = {table: _count(client, table) for table in tables}
                before = _measure(port, rounds)
                pids = list(gateway.worker_pids)
                flood = Flood(port, total, address)
                during = _flooded(port, rounds, flood, pids)
                control = Flood(port, total, address, control=True, rate=total / flood.seconds)
                during_control = _flooded(port, rounds, control, pids)
                after = _measure(port, rounds)
                items_after = {table: _count(client, table) for table in tables}
            finally:
                gateway.shutdown()
    result = {
        "flood": {
            "requests": total,
            "clients": FLOOD_THREADS,
            "per_second": round(total / flood.seconds, 1),
            "answers": {str(status): count for status, count in sorted(flood.answers.items())},
        },
        "control": {
            "per_second": round(total / control.seconds, 1),
            "answers": {str(status): count for status, count in sorted(control.answers.items())},
        },
        "before": before,
        "during_control": during_control,
        "during": during,
        "after": after,
        "items_before": items_before,
        "items_after": items_after,
    }
    save("flood", result)
    return result
