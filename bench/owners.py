"""Owners at scale (issue 24, item 7): first-time resolutions across 1,000 Archives.

1,000 fake Archives on loopback, in one process of their own (``bench.archives``: one asyncio
server per port, answering urlRequests with pair lists after 20 ms), each with a service IBI of
its own prefix, so each owns it. They are registered and included in the project's resolver,
built by its own wiring over local mode's tables (``ibi_tools.local.tables``), in this process:
the fan-out, the transport and the resolution logic are the real ones, and the CPU column is the
resolver's alone. Each resolution asks for an IBI never asked before (first-time: no hint).

Scenarios: (a) the owner holds the original; (b) the owner transferred it (a Copy with a
transfer record naming the receiver); (c) the owner is down and a copy is elsewhere, down as a
closed port (refused) or as a black hole (takes the request, never answers): since issue 34 the
answer is 504 naming the copy (nothing kept of the owner, the copy not vouched for), and what is
measured is what finding that out costs; (d) a prefix no
Archive owns, whose original one Archive holds (the fan-out, as before owners). Then the
owner's head start, design by design (``functions.resolver.fanout.OwnerPace``): the owner
waited for up to the Archive timeout (before), a fixed 50 ms, and the adaptive head start with
the down-owner memory, on owners that are down, that have a cold start every 25 requests, and
that always take 300 ms.

Also measured, not built: a Bloom filter of the IBIs an Archive holds (size, false positives,
lookup time), for (c) (docs/decisions.md).

``python -m bench owners`` (``--quick``: fewer rounds); ``measure(archives=12, rounds=2,
profile_rounds=2, waited_rounds=1, timeout=0.5, pause=0.05)`` is the smoke run the tests make
(tests/integration/test_bench_owners.py).
"""

from __future__ import annotations

import hashlib
import math
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench.archives import FakeArchives, FakeSpec
from bench.common import bars, save, summary_ms
from bench.scale import cost_per_million_resolutions
from functions.resolver import wiring
from functions.resolver.fanout import OwnerPace
from functions.resolver.registry import Contact
from functions.resolver.resolution import Alert, Found, Resolver
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi.core.labels import IBI
from ibi.core.persistent_url import parse_persistent_url
from ibi_tools.local.stores import free_port
from ibi_tools.local.tables import LocalTables

KEY = "1234567890-0987654321"
DELAY = 0.02  # every fake Archive answers a urlRequest in 20 ms
TIMEOUT = 3.0  # the resolver's per-Archive timeout (its default)
URLKEY = "urlkey 1427244889-5349022633744855\n"


def _ip(index: int) -> str:
    return f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"


def _label(seconds: int, ip: str) -> str:
    return IBI.build(Decimal(seconds), ip=ip).ibip or ""


def _answer(ibi: str, where: str, state: str = "Original", extra: str = "") -> str:
    return (
        f"ibi {{ibip {ibi}}}\nstate {state}\ncontenttype Data\nurl http://{where}/{ibi}\n"
        f"{URLKEY}{extra}"
    )


class Waited(OwnerPace):
    """Before: the owner alone until it answers or its timeout passes."""

    def head_start(self, owner: str) -> float:
        return 1e9


class Fixed(OwnerPace):
    """A fixed head start, without remembering an owner that is down."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def head_start(self, owner: str) -> float:
        return self.seconds


DESIGNS: dict[str, Callable[[], OwnerPace]] = {
    "waited (before)": Waited,
    "fixed 50 ms": lambda: Fixed(0.05),
    "adaptive, floor 50 ms": lambda: OwnerPace(floor=0.05),
    "adaptive (chosen)": OwnerPace,
}
CHOSEN = "adaptive (chosen)"
WAITED = "waited (before)"  # seconds per resolution with an owner down: fewer rounds
COLD_EVERY = 25  # the cold owner's period; each design gets this many resolutions of it
PAUSE = 0.5  # s after each resolution: the requests its round did not wait for end


@dataclass
class Federation:
    """Which fake Archive plays which part (indices into the specs)."""

    count: int
    owner_a: int = 0  # (a) holds its originals
    owner_b: int = 1  # (b) transferred them to ``receiver``
    receiver: int = 2
    copier: int = 3  # (c) holds copies of the down owners' items
    silent: int = 4  # (c) a black hole
    holder: int = 5  # (d) the original of an unowned prefix
    cold: int = 6  # an owner with a cold start every 25 requests
    far: int = 7  # an owner that always takes 300 ms
    refused_ip: str = _ip(65_000)  # (c) an owner registered at a closed port
    unowned_ip: str = "192.0.2.77"
    unowned_copy_ip: str = "192.0.2.78"

    def service(self, index: int) -> str:
        return _label(1_600_000_000 + index, _ip(index))

    def items(self, ip: str, count: int, start: int) -> list[str]:
        return [_label(1_700_000_000 + start + k, ip) for k in range(count)]


def _specs(fed: Federation, items: dict[str, list[str]]) -> list[FakeSpec]:
    specs = []
    for index in range(fed.count):
        answers: dict[str, str] = {}
        delay, silent, slow_every, slow_delay = DELAY, False, 0, 0.0
        if index == fed.owner_a:
            answers = {i: _answer(i, "owner") for i in items["a"]}
        elif index == fed.owner_b:
            record = f"transfer.archiveservice {{ibip {fed.service(fed.receiver)}}}\n"
            record += "transfer.timestamp 2024-05-01T12:00:00Z\n"
            answers = {i: _answer(i, "owner", "Copy", record) for i in items["b"]}
        elif index == fed.receiver:
            answers = {i: _answer(i, "receiver") for i in items["b"]}
        elif index == fed.copier:
            down = items["c refused"] + items["c silent"] + items["d copy"]
            answers = {i: _answer(i, "copier", "Copy") for i in down}
        elif index == fed.silent:
            silent = True
        elif index == fed.holder:
            answers = {i: _answer(i, "holder") for i in items["d"]}
        elif index == fed.cold:
            answers = {i: _answer(i, "owner") for i in items["cold"]}
            slow_every, slow_delay = COLD_EVERY, 0.4
        elif index == fed.far:
            answers = {i: _answer(i, "owner") for i in items["far"]}
            delay = 0.3
        specs.append(FakeSpec(fed.service(index), delay, answers, silent, slow_every, slow_delay))
    return specs


SCENARIOS = {  # name: (where the resolution leads, in words, short)
    "a": ("owner", "(a) the owner holds the original", "a"),
    "b": ("receiver", "(b) transferred once", "b"),
    "c refused": ("copier", "(c) owner down (refused), a copy elsewhere", "c refused"),
    "c silent": ("copier", "(c) owner down (black hole), a copy elsewhere", "c silent"),
    "d": ("holder", "(d) a prefix with no owner (the fan-out)", "d"),
    "d copy": ("copier", "(d) no owner, only a copy (the fan-out that (c) is held to)", "d copy"),
}
PROFILES = {  # the head start's designs, on these owners
    "c silent": "owner down (black hole)",
    "cold": "owner with a 400 ms cold start every 25 requests",
    "far": "owner always answering in 300 ms",
}


def measure(
    archives: int = 1000,
    rounds: int = 20,
    profile_rounds: int = COLD_EVERY,
    waited_rounds: int = 5,
    *,
    timeout: float = TIMEOUT,
    pause: float = PAUSE,
) -> dict[str, Any]:
    """Every scenario with the chosen head start, then the designs on each profile. The
    resolutions of one batch take turns (scenario after scenario, design after design), so
    that the machine's other work weighs on each alike."""
    fed = Federation(archives)
    batches = [[(scenario, CHOSEN) for scenario in SCENARIOS]]
    for profile in PROFILES:
        batches.append([(profile, d) for d in DESIGNS if d != CHOSEN or profile not in SCENARIOS])
    turns = {key: rounds for key in batches[0]}
    for batch in batches[1:]:
        turns.update({k: waited_rounds if k[1] == WAITED else profile_rounds for k in batch})
    ips = {
        "a": _ip(fed.owner_a),
        "b": _ip(fed.owner_b),
        "c refused": fed.refused_ip,
        "c silent": _ip(fed.silent),
        "d": fed.unowned_ip,
        "d copy": fed.unowned_copy_ip,
        "cold": _ip(fed.cold),
        "far": _ip(fed.far),
    }
    need = dict.fromkeys(ips, 0)
    for (scenario, _), count in turns.items():
        need[scenario] += count
    items = {name: fed.items(ip, need[name], 0) for name, ip in ips.items()}
    with tempfile.TemporaryDirectory() as folder:
        dynamodb = LocalTables(Path(folder) / "tables.sqlite3").client()
        ensure_tables(dynamodb, "registry")
        settings = ResolverSettings.from_environment(
            {
                "IBI_RESOLVER_TABLE": "registry",
                "IBI_PEPPER_FILE": str(Path(folder) / "pepper"),
                "IBI_ALLOW_NETWORKS": "127.0.0.0/8",
                "IBI_ARCHIVE_TIMEOUT_SECONDS": str(timeout),
            }
        )
        runtime = wiring.build(settings, dynamodb=dynamodb)
        specs = _specs(fed, items)
        with FakeArchives(specs) as served:
            started = time.perf_counter()
            for spec, address in zip(specs, served.addresses, strict=True):
                _include(runtime, spec.service_ibi, address)
            refused = _label(1_600_000_000 + 65_000, fed.refused_ip)
            _include(runtime, refused, f"127.0.0.1:{free_port()}")  # nothing listens there
            runtime.directory.forget()
            registered = time.perf_counter() - started
            _warm(runtime, fed)
            load_before = os.getloadavg()[0]
            unused = {name: list(labels) for name, labels in items.items()}
            samples: dict[tuple[str, str], list[tuple[float, int, float]]] = {}
            totals = []
            for batch in batches:
                # one execution environment's memory per design, fresh for each batch
                paces = {design: DESIGNS[design]() for design in {d for _, d in batch}}
                sent, seen = runtime.fanout.requests_made, served.counted()
                for turn in range(max(turns[key] for key in batch)):
                    for scenario, design in batch:
                        if turn >= turns[(scenario, design)]:
                            continue
                        runtime.fanout.pace = paces[design]
                        label = unused[scenario].pop(0)
                        where = SCENARIOS[scenario][0] if scenario in SCENARIOS else "owner"
                        sample = _resolve(runtime, label, where, pause)
                        samples.setdefault((scenario, design), []).append(sample)
                totals.append(
                    {
                        "sent": runtime.fanout.requests_made - sent,
                        "counted_by_archives": served.counted() - seen,
                    }
                )
    rows = [_row(scenario, design, got) for (scenario, design), got in samples.items()]
    return {
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "archives": archives + 1,  # and the refused one
        "registration_seconds": round(registered, 1),
        "timeout_s": timeout,
        "rows": rows,
        "requests_per_batch": totals,
    }


def _include(runtime: Any, service_ibi: str, address: str) -> None:
    runtime.registration.register(service_ibi, KEY)
    contact = Contact(address=address, protocol="HTTP")
    runtime.registry.include(service_ibi, contact, at="now", confirmed=False)


def _warm(runtime: Any, fed: Federation) -> None:
    """One fan-out before measuring: connections opened (as many as the transport keeps)."""
    url = parse_persistent_url(f"/{_label(1_650_000_000, fed.unowned_ip)}")
    Resolver(runtime.fanout.for_request("warm")).resolve(url, "127.0.0.1")
    time.sleep(0.3)


def _resolve(runtime: Any, label: str, where: str, pause: float) -> tuple[float, int, float]:
    """One first-time resolution: its seconds, the requests it sent, the resolver's CPU (its
    own, and its requests' that ended after it, in the ``pause`` that follows)."""
    sent = runtime.fanout.requests_made
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    found = Resolver(runtime.fanout.for_request("bench")).resolve(
        parse_persistent_url(f"/{label}"), "127.0.0.1"
    )
    took = time.perf_counter() - began
    time.sleep(pause)  # the requests the round did not wait for end (their CPU counts)
    after = resource.getrusage(resource.RUSAGE_SELF)
    if where == "copier" and isinstance(found, Alert):
        # The owner down, nothing kept of it: 504, the copy named, not followed (issue 34).
        assert found.status == 504, found
        assert any("says it holds a copy" in line for line in found.copies), found
    else:  # (a prefix whose down owner is not registered has no owner: the copy is the answer)
        assert isinstance(found, Found) and found.url == f"http://{where}/{label}", found
        assert not found.conflicts, found.conflicts
    used = (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime)
    return took, runtime.fanout.requests_made - sent, used


def _row(scenario: str, design: str, got: list[tuple[float, int, float]]) -> dict[str, Any]:
    times, requests, cpu = zip(*got, strict=True)
    return {
        "scenario": scenario,
        "design": design,
        **summary_ms(times),
        "max_ms": round(max(times) * 1000, 2),
        "requests_per_resolution": round(statistics.fmean(requests), 2),
        "first_requests": requests[0],
        "later_requests_median": statistics.median(requests[1:] or requests),
        "cpu_ms_per_resolution": round(statistics.fmean(cpu) * 1000, 2),
    }


# -- a Bloom filter of the IBIs an Archive holds: measured, not built ------------------------


class Bloom:
    """A Bloom filter: ``bits`` bits, ``hashes`` probes by double hashing of one BLAKE2b."""

    def __init__(self, items: int, false_positives: float) -> None:
        self.bits = max(8, math.ceil(-items * math.log(false_positives) / math.log(2) ** 2))
        self.hashes = max(1, round(self.bits / items * math.log(2)))
        self.array = bytearray((self.bits + 7) // 8)

    def _probes(self, label: str) -> list[int]:
        digest = hashlib.blake2b(label.upper().encode(), digest_size=16).digest()
        first, second = int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")
        return [(first + k * second) % self.bits for k in range(self.hashes)]

    def add(self, label: str) -> None:
        for probe in self._probes(label):
            self.array[probe >> 3] |= 1 << (probe & 7)

    def __contains__(self, label: str) -> bool:
        return all(self.array[p >> 3] & (1 << (p & 7)) for p in self._probes(label))


def filters(items: int = 100_000, probes: int = 50_000) -> list[dict[str, Any]]:
    """Bloom filters of ``items`` IBIs at 1 % and 0.1 %: size, false positives measured on
    ``probes`` IBIs not held, and the lookup time (this process, pure Python)."""
    held = [_label(1_700_000_000 + k, "10.9.9.9") for k in range(items)]
    absent = [_label(1_700_000_000 + k, "10.9.9.8") for k in range(probes)]
    rows = []
    for rate in (0.01, 0.001):
        bloom = Bloom(items, rate)
        for label in held:
            bloom.add(label)
        started = time.perf_counter()
        wrong = sum(1 for label in absent if label in bloom)
        lookup = (time.perf_counter() - started) / probes
        assert all(label in bloom for label in held[:1000])  # never a false negative
        rows.append(
            {
                "items": items,
                "target_false_positives": rate,
                "measured_false_positives": round(wrong / probes, 5),
                "bits_per_item": round(bloom.bits / items, 2),
                "hashes": bloom.hashes,
                "bytes": len(bloom.array),
                "lookup_us": round(lookup * 1e6, 2),
            }
        )
    return rows


def run(quick: bool) -> dict[str, Any]:
    result = measure(rounds=8 if quick else 20, waited_rounds=3 if quick else 5)  # 1,000
    result["bloom"] = filters(items=20_000 if quick else 100_000)
    chosen = {r["scenario"]: r for r in result["rows"] if r["design"] == CHOSEN}
    result["usd_per_million"] = {
        scenario: cost_per_million_resolutions(row["requests_per_resolution"])["total_usd"]
        for scenario, row in chosen.items()
        if scenario in SCENARIOS
    }
    save("owners", result)
    bars(
        "owners",
        f"First-time resolution across {result['archives']:,} Archives (p50)",
        "ms",
        [short for _, _, short in SCENARIOS.values()],
        {"p50 ms": [chosen[name]["p50_ms"] for name in SCENARIOS]},
    )
    return result
