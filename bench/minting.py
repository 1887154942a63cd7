"""Minting throughput and latency on one subsystem.

The minting service (logic + DynamoDB store) is driven in-process by N client threads over
local mode's tables (SQLite: a connection per thread, each write one transaction), each with
its own service (as N Lambda execution environments: each keeps its own block of dates), so
the conditional writes, the conflicts and the waits can be counted. A second run goes through the local API Gateway stand-in (HTTP) over
local mode's tables, as ``ibi local`` serves it: with one handler process per concurrent
request (as Lambda scales), and with two (as the peer run's ``ibi local``); its counters are
summed over the processes.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import multiprocessing
import tempfile
import threading
import time
import urllib.request
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.common import plot, save, summary_ms
from functions.minting import wiring
from functions.minting.service import MintingService, MintRequest, MintStats
from functions.minting.settings import Settings
from functions.minting.store import ensure_tables
from ibi_tools.local.federation import LOCAL_MINT_BLOCK_SECONDS
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.tables import LocalTables

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
TABLES = {"state": "bench-state", "record": "bench-record", "idempotency": "bench-idempotency"}


def _counters(stats: list[MintStats], requests: int) -> dict[str, Any]:
    """Conflicts and waits summed over the execution environments, per request."""
    conflicts = sum(s.conflicts for s in stats)
    waited = sum(s.waited_seconds for s in stats)
    return {
        "conflicts_per_request": round(conflicts / requests, 4),
        "blocks_per_request": round(sum(s.blocks for s in stats) / requests, 4),
        "wait_ms_total": round(waited * 1000, 1),
        "wait_ms_per_request": round(waited * 1000 / requests, 2),
    }


def _settings(granularity: str, subsystems: int = 1) -> Settings:
    return Settings.from_environment(
        {
            "IBI_STATE_TABLE": TABLES["state"],
            "IBI_RECORD_TABLE": TABLES["record"],
            "IBI_IDEMPOTENCY_TABLE": TABLES["idempotency"],
            "IBI_SUBSYSTEMS": json.dumps(
                [
                    {
                        "name": "bench" if n == 0 else f"bench{n}",
                        "host": "mint.example.org",
                        "ip": "192.0.2.10",
                        "rep_port": 80 + n,
                        "ibip_port": 800 + n,
                        "granularity": granularity,
                    }
                    for n in range(subsystems)
                ]
            ),
            "IBI_MAX_WAIT_SECONDS": "20",
        }
    )


def in_process(
    tables: LocalTables,
    clients: int,
    requests_per_client: int,
    count: int,
    granularity: str,
    subsystems: int = 1,
) -> dict[str, Any]:
    """N client threads; with several subsystems, client i mints from subsystem i mod S."""
    conflicts = [0]
    lock = threading.Lock()
    settings = _settings(granularity, subsystems)
    names = list(settings.subsystems)
    dynamodb = tables.client()
    # Writes to the state table, as the client sends them (conflicting attempts included).
    state_writes = [0]
    call = dynamodb._make_api_call  # type: ignore[attr-defined]

    def counted(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        if operation in WRITES and params.get("TableName") == TABLES["state"]:
            with lock:
                state_writes[0] += 1
        answer: dict[str, Any] = call(operation, params)
        return answer

    dynamodb._make_api_call = counted  # type: ignore[attr-defined]

    def on_conflict() -> None:
        with lock:
            conflicts[0] += 1

    services: list[MintingService] = [
        wiring.build(settings, dynamodb=dynamodb, on_conflict=on_conflict).service
        for _ in range(clients)
    ]
    latencies: list[float] = []
    minted = [0]
    requests = [0]
    barrier = threading.Barrier(clients)

    def client(index: int) -> None:
        barrier.wait()
        for n in range(requests_per_client):
            started = time.perf_counter()
            request = MintRequest(
                requester="bench",
                request_id=f"{n}",
                count=count,
                subsystem=names[index % len(names)],
            )
            answer = services[index].mint(request)
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                requests[0] += 1
                minted[0] += len(answer.answer["ibis"])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {
        "subsystems": subsystems,
        "clients": clients,
        "count": count,
        "granularity": granularity,
        "ibis": minted[0],
        "ibis_per_second": round(minted[0] / wall, 1),
        "limit_per_second": float(subsystems / Decimal(granularity)),
        "conflicts_per_ibi": round(conflicts[0] / minted[0], 4),
        "state_writes_per_request": round(state_writes[0] / requests[0], 4),
        **_counters([s.stats for s in services], requests[0]),
        **summary_ms(latencies),
    }


def through_gateway(
    tables: LocalTables,
    clients: int,
    requests_per_client: int,
    *,
    workers: int,
    block_seconds: str = "0",
    keep_alive: bool = False,
) -> dict[str, Any]:
    """Mints through the gateway; ``keep_alive``: each client keeps its connection (as the
    peer run's load generator does), else a new one per request."""
    settings = dataclasses.replace(_settings("0.001"), block_seconds=Decimal(block_seconds))
    fork = multiprocessing.get_context("fork")
    # Summed over the worker processes: requests, state writes, blocks, conflicts, wait (µs).
    shared = [fork.Value("Q", 0) for _ in range(5)]

    def handler() -> Any:  # in each worker process, after the fork
        from functions.minting.handler import lambda_handler

        stats = wiring.install(wiring.build(settings, dynamodb=tables.client())).service.stats

        def counted(event: dict[str, Any], context: Any) -> Any:
            before = _totals(stats)
            try:
                return lambda_handler(event, context)
            finally:
                for value, was, now in zip(shared, before, _totals(stats), strict=True):
                    with value.get_lock():
                        value.value += now - was

        return counted

    gateway = LocalGateway("minting", handler, 0, workers=workers).start()
    latencies: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        kept = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
        for _ in range(requests_per_client):
            started = time.perf_counter()
            if keep_alive:
                kept.request("POST", "/mint", body=b"{}")
                with kept.getresponse() as response:
                    response.read()
                    assert response.status == 200, response.status
            else:
                request = urllib.request.Request(gateway.url + "/mint", data=b"{}", method="POST")
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
            with lock:
                latencies.append(time.perf_counter() - started)
        kept.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        gateway.shutdown()
    wall = time.perf_counter() - started
    requests, writes, blocks, conflicts, waited_us = (value.value for value in shared)
    total = MintStats(requests, writes, conflicts, blocks, waited_us / 1e6)
    return {
        "clients": clients,
        "workers": workers,
        "block_seconds": block_seconds,
        "keep_alive": keep_alive,
        "ibis_per_second": round(len(latencies) / wall, 1),
        "state_writes_per_request": round(writes / max(requests, 1), 4),
        **_counters([total], max(requests, 1)),
        **summary_ms(latencies),
    }


def _totals(stats: MintStats) -> tuple[int, int, int, int, int]:
    return (
        stats.requests,
        stats.state_writes,
        stats.blocks,
        stats.conflicts,
        round(stats.waited_seconds * 1e6),
    )


def run(quick: bool) -> dict[str, Any]:
    client_counts = [1, 4, 16] if quick else [1, 2, 4, 8, 16]
    per_client = 20 if quick else 60
    results: dict[str, Any] = {
        "single": [],
        "batch": [],
        "coarse": [],
        "subsystems": [],
        "gateway": [],
        "gateway_two_workers": [],
    }
    with tempfile.TemporaryDirectory() as folder:
        tables = LocalTables(Path(folder) / "tables.sqlite3")
        ensure_tables(tables.client(), TABLES)
        for clients in client_counts:
            results["single"].append(
                in_process(tables, clients, max(2, per_client // clients * 2), 1, "0.001")
            )
        for clients in [1, 4, 16]:  # 16 x 1000 IBIs take 16 s at r = 0.001 s: fewer rounds
            rounds = (2 if quick else 5) if clients < 16 else (1 if quick else 2)
            results["batch"].append(in_process(tables, clients, rounds, 1000, "0.001"))
        # The limit set by the granularity: at r = 1 s, one IBI per second per subsystem...
        results["coarse"].append(in_process(tables, 2, 3 if quick else 5, 1, "1"))
        # ...and more subsystems (prefixes) add to it: 4 subsystems at r = 1 s.
        results["subsystems"].append(in_process(tables, 4, 3 if quick else 5, 1, "1", subsystems=4))
        # Contention spread: 16 clients over 4 subsystems at r = 0.001 s.
        results["subsystems"].append(
            in_process(tables, 16, max(2, per_client // 8), 1, "0.001", subsystems=4)
        )
        for clients in [1, 4, 16] if quick else [1, 4, 8, 16]:
            requests = 20 if quick else 40
            results["gateway"].append(
                through_gateway(tables, clients, requests, workers=max(2, clients))
            )
        for clients in [1, 4, 16]:  # as the peer run's ibi local: two workers, kept connections
            for block in ("0", LOCAL_MINT_BLOCK_SECONDS):
                results["gateway_two_workers"].append(
                    through_gateway(
                        tables,
                        clients,
                        40 if quick else 100,
                        workers=2,
                        block_seconds=block,
                        keep_alive=True,
                    )
                )
    save("minting", results)
    plot(
        "minting",
        "Minting on one subsystem (r = 0.001 s), in-process over local mode's tables",
        "concurrent clients",
        "IBIs per second",
        {
            "single requests": (
                [r["clients"] for r in results["single"]],
                [r["ibis_per_second"] for r in results["single"]],
            ),
            "batches of 1000": (
                [r["clients"] for r in results["batch"]],
                [r["ibis_per_second"] for r in results["batch"]],
            ),
            "through the gateway (HTTP)": (
                [r["clients"] for r in results["gateway"]],
                [r["ibis_per_second"] for r in results["gateway"]],
            ),
        },
        logx=True,
    )
    return results
