"""Resolution latency against the number of Archives, concurrent fan-out vs serial.

Fake Archives on loopback, in a process of their own (``bench.archives``), answer each
urlRequest after a fixed delay (20 ms); exactly one holds the IBI. The resolver's real logic
and transport run in this process (``Resolver`` with the runtime's concurrent ``ask_all``, or
a serial one as the baseline), so the fan-out itself is measured, and the CPU column is the
resolver's alone. Variants add one slow Archive (beyond the per-Archive timeout) and one dead
one.
"""

from __future__ import annotations

import resource
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.archives import FakeArchives, FakeSpec
from bench.common import plot, save, summary_ms
from functions.resolver import wiring
from functions.resolver.authority import ArchiveAnswer
from functions.resolver.fanout import LocationHints
from functions.resolver.network import Endpoint
from functions.resolver.registry import Contact
from functions.resolver.resolution import Resolver
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.core.persistent_url import parse_persistent_url
from ibi_tools.local.stores import free_port
from ibi_tools.local.tables import LocalTables

ITEM = "8JMKD3MGP8W/35MMLL8"
KEY = "1234567890-0987654321"
ANSWER = (
    f"archiveaddress x\nibi {{ibip {ITEM}}}\nstate Original\ncontenttype Data\n"
    "timestamp 2009-07-21T14:43:31Z\nurl http://a.example/doc.pdf\nurlkey 1427244889-5349022633744855\n"
)


def _labels(n: int) -> list[str]:
    from decimal import Decimal

    from ibi.core.labels import IBI

    return [IBI.build(Decimal(1500000000 + i), ip="192.0.2.1").ibip or "" for i in range(n)]


def measure(
    archives_count: int, *, slow_and_dead: bool, rounds: int, tables: LocalTables, folder: Path
) -> dict[str, Any]:
    labels = _labels(archives_count + 2)
    specs = [FakeSpec(labels[i], 0.02, {}) for i in range(archives_count - 1)]
    specs.append(FakeSpec(labels[archives_count - 1], 0.02, {ITEM: ANSWER}))  # it holds the IBI
    if slow_and_dead:
        specs.append(FakeSpec(labels[archives_count], 2.0, {}))
    table = f"r{archives_count}{int(slow_and_dead)}{free_port()}"
    ensure_tables(tables.client(), table)
    settings = ResolverSettings.from_environment(
        {
            "IBI_RESOLVER_TABLE": table,
            "IBI_PEPPER_FILE": str(folder / "pepper"),
            "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
            "IBI_ARCHIVE_TIMEOUT_SECONDS": "1",
            "IBI_RESOLUTION_DEADLINE_SECONDS": "3",
        }
    )
    runtime = wiring.build(settings, dynamodb=tables.client())
    url = parse_persistent_url(f"/{ITEM}")
    with FakeArchives(specs) as archives:
        for spec, address in zip(specs, archives.addresses, strict=True):
            # One subsystem serves them all: a prefix no Archive owns (the fan-out measured).
            runtime.registration.register(spec.service_ibi, KEY, share_prefix=True)
            contact = Contact(address=address, protocol="HTTP")
            runtime.registry.include(spec.service_ibi, contact, at="now", confirmed=False)
        if slow_and_dead:
            dead = labels[archives_count + 1]
            runtime.registration.register(dead, KEY, share_prefix=True)
            contact = Contact(address=f"127.0.0.1:{free_port()}", protocol="HTTP")
            runtime.registry.include(dead, contact, at="now", confirmed=False)
        runtime.directory.forget()
        concurrent = runtime.fanout.for_request("bench")
        serial = _serial(runtime)
        results: dict[str, Any] = {"archives": archives_count, "slow_and_dead": slow_and_dead}
        for name, ask in (("no_hints", concurrent), ("concurrent", concurrent), ("serial", serial)):
            if name == "serial" and (slow_and_dead or archives_count > 16):
                continue  # the baseline only where it finishes in reasonable time
            # "no_hints": the full fan-out every time; "concurrent": with location hints.
            runtime.fanout.hints = LocationHints(capacity=0 if name == "no_hints" else 10_000)
            Resolver(ask).resolve(url, "127.0.0.1")  # warm: registry cache, connections, hint
            requests_before = runtime.fanout.requests_made
            seen_before = archives.counted()
            opened_before = runtime.transport.connections_opened
            times = []
            cpu_before = resource.getrusage(resource.RUSAGE_SELF)
            for _ in range(rounds):
                started = time.perf_counter()
                found = Resolver(ask).resolve(url, "127.0.0.1")
                times.append(time.perf_counter() - started)
                assert getattr(found, "url", None) == "http://a.example/doc.pdf", found
            cpu_after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (
                cpu_before.ru_utime + cpu_before.ru_stime
            )
            made = runtime.fanout.requests_made - requests_before
            requests = made / rounds if name != "serial" else archives_count
            # What the Archives themselves counted (urlRequests received), per resolution.
            seen = (archives.counted() - seen_before) / rounds
            opened = (runtime.transport.connections_opened - opened_before) / rounds
            results[name] = {
                **summary_ms(times),
                "cpu_ms_per_resolution": round(cpu / rounds * 1000, 2),
                "archive_requests_per_resolution": round(requests, 2),
                "requests_counted_by_archives": round(seen, 2),
                "connections_opened_per_resolution": round(opened, 2),
            }
        results["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return results


def _serial(runtime: Any) -> Any:
    """The baseline: ask the Archives one after the other."""

    def ask(ibi: str, pairs: Sequence[tuple[str, str]], enough: Any = None) -> list[ArchiveAnswer]:
        answers = []
        for archive in runtime.directory.included():
            endpoint = Endpoint.parse(archive.address, archive.protocol)
            try:
                got = runtime.transport.get(
                    endpoint,
                    archive.service_ibi,
                    [("servicesubject", "urlRequest"), *pairs],
                    timeout=1.0,
                )
                answers.append(ArchiveAnswer(archive.service_ibi, archive.address, got))
            except Exception as error:
                answers.append(
                    ArchiveAnswer(archive.service_ibi, archive.address, None, str(error))
                )
        return answers

    return ask


def run(quick: bool) -> dict[str, Any]:
    counts = [1, 4, 16, 64]
    rounds = 10 if quick else 40
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        tables = LocalTables(Path(folder) / "tables.sqlite3")
        for count in counts:
            rows.append(
                measure(
                    count,
                    slow_and_dead=False,
                    rounds=rounds,
                    tables=tables,
                    folder=Path(folder),
                )
            )
            rows.append(
                measure(
                    count,
                    slow_and_dead=True,
                    rounds=max(3, rounds // 4),
                    tables=tables,
                    folder=Path(folder),
                )
            )
    plain = [r for r in rows if not r["slow_and_dead"]]
    one = plain[0]["no_hints"]["p50_ms"]
    sixty_four = plain[-1]["no_hints"]["p50_ms"]
    result = {"rows": rows, "target_64_over_1": round(sixty_four / one, 2)}
    save("resolution", result)
    plot(
        "resolution",
        "Resolution through N Archives answering in 20 ms (p50)",
        "Archives",
        "ms",
        {
            "concurrent fan-out": (
                [r["archives"] for r in plain],
                [r["concurrent"]["p50_ms"] for r in plain],
            ),
            "with one slow (2 s) and one dead": (
                [r["archives"] for r in rows if r["slow_and_dead"]],
                [r["no_hints"]["p50_ms"] for r in rows if r["slow_and_dead"]],
            ),
            "serial baseline": (
                [r["archives"] for r in plain if "serial" in r],
                [r["serial"]["p50_ms"] for r in plain if "serial" in r],
            ),
        },
        logx=True,
    )
    return result
