"""A peer measured in the same run: arklet (the Internet Archive's ARK minter and resolver).

arklet 0.2.3 runs as it is deployed: gunicorn, two sync worker processes, its Django settings
(``bench/arklet_settings.py``) on one SQLite file. ibi runs as ``ibi local`` with two worker
processes per API (the API Gateway stand-in over local mode's tables and SeaweedFS). Both
serve at the same time; one load generator drives them: N client threads, each with its own ``http.client``
connection (kept alive when the server keeps it; neither does), sending requests back to back,
every answer checked:

- mint an identifier bound to a URL: arklet ``POST /mint`` with a url (200, an ARK); ibi's
  bare ``POST /mint`` on the minting API (200, an IBI; bound to nothing), and an Archive
  deposit with ``url`` (``POST /api/items``, what ``ArchiveClient.create`` sends: 201, an IBI);
- a warm resolution: ``GET /<identifier>`` of identifiers minted with a URL and resolved
  before, answered 302 with ``Location`` that very URL.

Each operation runs at 1, 4 and 16 clients, its time cut in slices that alternate between the
two systems, so that the machine's other work weighs on both alike. The server CPU of a slice
is the user + system time (``/proc/<pid>/stat``) of every process of the server's tree — for
ibi every API's gateway workers (the tables in them) and SeaweedFS; for arklet the gunicorn
master and its workers — from the slice's start to :data:`SETTLE` after its end (work left in the background
counts), divided by the answers. For ibi a few sequential requests then show where a
resolution's time goes.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.common import cpu_seconds, percentile, plot, process_tree, save, summary_ms
from ibi.core.pairlist import encode_query
from ibi_tools.local.stores import die_with_parent, free_port

CLIENTS = (1, 4, 16)
ITEMS = 8  # identifiers bound to a URL, resolved in turn
SETTLE = 0.3  # seconds after a phase whose CPU still counts (background work)
JSON = {"Content-Type": "application/json", "Accept": "application/json"}

# One request: (method, target, body, headers) for the n-th request of a phase.
Ask = Callable[[int], tuple[str, str, bytes, dict[str, str]]]
# The answer's check: (n, status, Location, body) -> what is wrong, or None.
Check = Callable[[int, int, str | None, bytes], str | None]


@dataclass(frozen=True)
class Operation:
    """One kind of request to one server, and how its answer is checked."""

    port: int
    ask: Ask
    check: Check


def exchange(
    connection: http.client.HTTPConnection,
    method: str,
    target: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, str | None, bytes]:
    """One request on ``connection`` (reopened when the server closed it): status, Location, body."""
    connection.request(method, target, body=body or None, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    return response.status, response.getheader("Location"), data


def _client(operation: Operation, deadline: float, counter: Any, out: dict[str, Any]) -> None:
    """One client: requests back to back until ``deadline``; latencies of right answers."""
    connection = http.client.HTTPConnection("127.0.0.1", operation.port, timeout=60)
    while time.perf_counter() < deadline:
        n = next(counter)
        method, target, body, headers = operation.ask(n)
        started = time.perf_counter()
        try:
            status, location, data = exchange(connection, method, target, body, headers)
            wrong = operation.check(n, status, location, data)
        except (OSError, http.client.HTTPException) as error:
            connection.close()
            wrong = f"{type(error).__name__}: {error}"
        elapsed = time.perf_counter() - started
        if wrong is None:
            out["latencies"].append(elapsed)
        else:
            out["wrong"].append(wrong)
    connection.close()


@dataclass
class Slice:
    """What ``clients`` clients got from one server in a stretch of time."""

    latencies: list[float]  # seconds, of the right answers
    wrong: list[str]
    seconds: float
    cpu_seconds: float  # the server's tree, from the start to SETTLE after the end
    processes: int


def run_slice(
    operation: Operation, clients: int, seconds: float, server: Callable[[], list[int]]
) -> Slice:
    """``clients`` clients sending ``operation`` back to back for ``seconds``."""
    counter = itertools.count()
    outs: list[dict[str, Any]] = [{"latencies": [], "wrong": []} for _ in range(clients)]
    pids = process_tree(server())
    cpu = cpu_seconds(pids)
    started = time.perf_counter()
    threads = [
        threading.Thread(target=_client, args=(operation, started + seconds, counter, out))
        for out in outs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    time.sleep(SETTLE)
    return Slice(
        [s for out in outs for s in out["latencies"]],
        [w for out in outs for w in out["wrong"]],
        elapsed,
        cpu_seconds(pids) - cpu,
        len(pids),
    )


def summarize(clients: int, slices: Sequence[Slice]) -> dict[str, Any]:
    """A phase from its slices: right answers per second, latency, server CPU per answer."""
    latencies = [s * 1000 for part in slices for s in part.latencies]
    wrong = [w for part in slices for w in part.wrong]
    seconds = sum(part.seconds for part in slices)
    answered = len(latencies) + len(wrong)
    return {
        "clients": clients,
        "right": len(latencies),
        "wrong": len(wrong),
        **({"first_wrong": wrong[0][:200]} if wrong else {}),
        "seconds": round(seconds, 2),
        "ops_per_second": round(len(latencies) / seconds, 1),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "cpu_ms_per_op": round(sum(p.cpu_seconds for p in slices) * 1000 / max(1, answered), 2),
        "server_processes": max(part.processes for part in slices),
    }


@dataclass
class System:
    """A server under test: what serves it (its processes' roots) and its operations."""

    name: str
    server: Callable[[], list[int]]
    operations: dict[str, Operation]
    warm: dict[str, int]  # requests sent before an operation is measured


KINDS = ("mint", "deposit", "resolve")


def _warm(operation: Operation, count: int) -> None:
    for n in range(count):
        method, target, body, headers = operation.ask(n)
        connection = http.client.HTTPConnection("127.0.0.1", operation.port, timeout=60)
        try:
            exchange(connection, method, target, body, headers)
        finally:
            connection.close()


def idle_cpu(system: System, seconds: float = 1.0) -> float:
    """The server's CPU while nobody asks it anything, in ms per second."""
    pids = process_tree(system.server())
    cpu = cpu_seconds(pids)
    time.sleep(seconds)
    return round((cpu_seconds(pids) - cpu) * 1000 / seconds, 2)


def measure(systems: Sequence[System], seconds: float, slices: int) -> dict[str, dict[str, Any]]:
    """Every operation of every system at each of :data:`CLIENTS` for ``seconds``, in
    ``slices`` stretches that alternate between the systems (the machine's other work then
    weighs on both alike)."""
    results: dict[str, dict[str, Any]] = {system.name: {} for system in systems}
    for kind in KINDS:
        asked = [system for system in systems if kind in system.operations]
        for system in asked:
            _warm(system.operations[kind], system.warm.get(kind, 4))
            results[system.name][kind] = []
        for clients in CLIENTS:
            parts: dict[str, list[Slice]] = {system.name: [] for system in asked}
            for _ in range(slices):
                for system in asked:
                    part = run_slice(
                        system.operations[kind], clients, seconds / slices, system.server
                    )
                    parts[system.name].append(part)
            for system in asked:
                results[system.name][kind].append(summarize(clients, parts[system.name]))
    return results


def _redirect_to(urls: Sequence[str]) -> Check:
    def check(n: int, status: int, location: str | None, body: bytes) -> str | None:
        expected = urls[n % len(urls)]
        if status != 302 or location != expected:
            return f"{status} to {location}, expected 302 to {expected}"
        return None

    return check


def _identifier(status_expected: int, find: Callable[[Any], Any]) -> Check:
    def check(n: int, status: int, location: str | None, body: bytes) -> str | None:
        if status != status_expected:
            return f"{status}, expected {status_expected}: {body[:120]!r}"
        try:
            found = find(json.loads(body))
        except (ValueError, KeyError, IndexError, TypeError):
            found = None
        return None if isinstance(found, str) and found else f"no identifier in {body[:120]!r}"

    return check


def _get(paths: Sequence[str]) -> Ask:
    return lambda n: ("GET", paths[n % len(paths)], b"", {})


def _post(path: str, body: Callable[[int], dict[str, Any]], headers: dict[str, str]) -> Ask:
    return lambda n: ("POST", path, json.dumps(body(n)).encode(), headers)


def _url(n: int) -> str:
    return f"https://example.org/item/{n}"


# ----------------------------------------------------------------------------------- arklet


def _arklet_database(folder: Path) -> str:
    """arklet's SQLite file, migrated, with a NAAN and an API key: the key."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.arklet_settings"
    os.environ["ARKLET_BENCH_DB"] = str(folder / "arklet.sqlite3")
    import django
    from django.core.management import call_command

    django.setup()
    # arklet targets PostgreSQL; its migration 0003 only sets column defaults with SQL that
    # SQLite does not speak (the ORM sets the same defaults), so it is recorded, not run.
    call_command("migrate", "ark", "0002", verbosity=0, interactive=False)
    call_command("migrate", "ark", "0003", fake=True, verbosity=0, interactive=False)
    call_command("migrate", verbosity=0, interactive=False)
    from arklet.ark.models import APIKey, Naan

    naan = Naan.objects.create(
        naan=99999, name="bench", description="bench", url="https://example.org"
    )
    key: str = APIKey.objects.create_key(naan, "bench")
    from django.db import connections

    connections.close_all()
    return key


def _gunicorn(port: int, folder: Path) -> subprocess.Popen[bytes]:
    """gunicorn serving arklet on loopback with two sync workers, once it answers."""
    log = (folder / "gunicorn.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--workers=2",
            "--worker-class=sync",
            f"--bind=127.0.0.1:{port}",
            f"--chdir={Path(__file__).parents[1]}",
            "--log-level=warning",
            "arklet.entrypoints.wsgi:application",
        ],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "bench.arklet_settings"},
        stdout=subprocess.DEVNULL,
        stderr=log,
        preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, no locks taken
    )
    log.close()  # the child holds it
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {(folder / 'gunicorn.log').read_text()}")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            exchange(connection, "GET", "/ark:/99999/none")
            return process
        except OSError:
            time.sleep(0.1)
        finally:
            connection.close()
    process.kill()
    raise RuntimeError("gunicorn did not answer within 30 s")


@contextlib.contextmanager
def _arklet(folder: Path) -> Iterator[System]:
    """arklet under gunicorn, with identifiers bound to URLs to resolve."""
    key = _arklet_database(folder)
    port = free_port()
    server = _gunicorn(port, folder)
    try:
        headers = {**JSON, "Authorization": f"Bearer {key}"}

        def body(n: int) -> dict[str, Any]:
            return {"naan": 99999, "shoulder": "/b1", "url": _url(n)}

        mint = Operation(port, _post("/mint", body, headers), _identifier(200, lambda a: a["ark"]))
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        arks = [json.loads(exchange(connection, *mint.ask(n))[2])["ark"] for n in range(ITEMS)]
        connection.close()
        urls = [_url(n) for n in range(ITEMS)]
        resolve = Operation(port, _get([f"/{ark}" for ark in arks]), _redirect_to(urls))
        yield System(
            "arklet",
            lambda: [server.pid],
            {"mint": mint, "resolve": resolve},
            {"mint": 4, "resolve": 2 * ITEMS},
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


# -------------------------------------------------------------------------------------- ibi


def _ibi_server(federation: Any) -> list[int]:
    """The processes that serve ``ibi local``: every API's workers (the tables are SQLite in
    each of them) and SeaweedFS."""
    s3 = federation._s3
    pids = [pid for gateway in federation.gateways for pid in gateway.worker_pids]
    return pids + ([s3.pid] if s3 is not None and s3.pid else [])


@dataclass
class Federation:
    """``ibi local`` under test, an Archive's client and identifiers bound to URLs."""

    system: System
    federation: Any
    archive: Any
    labels: list[str]


@contextlib.contextmanager
def _ibi(folder: Path) -> Iterator[Federation]:
    from ibi.client import ArchiveClient
    from ibi_tools.local.federation import LocalFederation

    ports = [free_port() for _ in range(4)]
    federation = LocalFederation(
        data_dir=folder / "ibi",
        minting_port=ports[0],
        archive_ports=(ports[1], ports[2]),
        resolver_port=ports[3],
        demo=False,
        workers=2,
    ).start()
    try:
        found = _identifier(200, lambda a: a["ibis"][0]["ibip"])
        mint = Operation(ports[0], _post("/mint", lambda n: {}, JSON), found)
        deposited = _identifier(201, lambda a: a["ibi"]["ibip"])
        deposit = Operation(
            ports[1], _post("/api/items", lambda n: {"url": _url(n)}, JSON), deposited
        )
        archive = ArchiveClient(f"http://127.0.0.1:{ports[1]}", sign=False)
        labels = [archive.create({"url": _url(n)})["ibi"]["ibip"] for n in range(ITEMS)]
        resolve = Operation(
            ports[3],
            _get([f"/{label}" for label in labels]),
            _redirect_to([_url(n) for n in range(ITEMS)]),
        )
        system = System(
            "ibi",
            lambda: _ibi_server(federation),
            {"mint": mint, "deposit": deposit, "resolve": resolve},
            {"resolve": 4 * ITEMS},  # every worker and its location hint
        )
        yield Federation(system, federation, archive, labels)
    finally:
        federation.stop()


def _timed(port: int, target: str, expect: int, headers: dict[str, str] | None = None) -> float:
    """One sequential request on a new connection: its duration (the answer checked)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.perf_counter()
    try:
        status, _, _ = exchange(connection, "GET", target, headers=headers)
    finally:
        connection.close()
    elapsed = time.perf_counter() - started
    if status != expect:
        raise RuntimeError(f"{target}: {status}, expected {expect}")
    return elapsed


def _breakdown(ibi: Federation, rounds: int) -> dict[str, Any]:
    """Where a resolution's time goes (sequential, one client): one hop through the gateway to
    a handler that does no I/O (the resolver's landing page), the Archive's urlRequest asked
    directly, and the whole resolution beside them; the requests each Archive's gateway
    counted over those resolutions (urlRequests, acknowledgments)."""
    resolver, label = ibi.federation.resolver_port, ibi.labels[0]
    protocol = ibi.archive.service()["protocol_url"]
    where = urlsplit(protocol)
    query = encode_query(
        [
            ("servicesubject", "urlRequest"),
            ("clientinformation.ipaddress", "127.0.0.1"),
            ("parsedibiurl.ibi", label),
        ]
    )
    archives = [g for g in ibi.federation.gateways if g.name.startswith("archive")]
    hop, whole = [], []
    time.sleep(SETTLE)  # what the phases before left in the background
    before = [g.requests_served for g in archives]
    for _ in range(rounds):
        hop.append(_timed(resolver, "/", 200))
        whole.append(_timed(resolver, f"/{label}", 302))
    time.sleep(SETTLE)  # the last acknowledgments
    counted = [g.requests_served - b for g, b in zip(archives, before, strict=True)]
    asked = [_timed(where.port or 80, f"{where.path or '/'}?{query}", 200) for _ in range(rounds)]
    return {
        "hop": summary_ms(hop),
        "archive_url_request": summary_ms(asked),
        "sequential_resolve": summary_ms(whole),
        "archive_requests_per_resolution": [round(c / rounds, 2) for c in counted],
    }


BIBTEX = {"Accept": "application/x-bibtex"}
FORMATTED = {"Accept": "text/x-bibliography; style=apa"}


def _negotiated(archive: Any, resolver_url: str, rounds: int) -> dict[str, Any]:
    """A warm negotiated answer (BibTeX from the Archive's Dublin Core) beside the redirect of
    the same item, alternating, so that both see the same machine (issue 16)."""
    dc = {"title": "A benchmark report", "creator": ["Banon, G. J. F."], "date": "2014"}
    item = archive.create({"url": "https://example.org/report", "dc": dc})
    port = int(resolver_url.rsplit(":", 1)[1])
    target = f"/{item['ibi']['ibip']}"
    for _ in range(4):  # warm every worker, its location hint and citeproc's import
        _timed(port, target, 200, BIBTEX)
        _timed(port, target, 200, FORMATTED)
    redirects: list[float] = []
    citations: list[float] = []
    formatted: list[float] = []
    for _ in range(rounds):
        redirects.append(_timed(port, target, 302))
        citations.append(_timed(port, target, 200, BIBTEX))
        formatted.append(_timed(port, target, 200, FORMATTED))
    return {
        "redirect": summary_ms(redirects),
        "bibtex": summary_ms(citations),
        "formatted": summary_ms(formatted),
    }


def _exact_counts(archive: Any, resolver_port: int, resolutions: int) -> dict[str, Any]:
    """Access counts under load (issue 14: "with access counts still exact"): a new item
    resolved ``resolutions`` times by 16 clients at once (kept connections), then, once the
    acknowledgments are drained, the accesses its Archive counted."""
    item = archive.create({"url": "https://example.org/counted"})
    target = f"/{item['ibi']['ibip']}"
    redirects = [0]
    lock = threading.Lock()

    def client(share: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", resolver_port, timeout=30)
        try:
            for _ in range(share):
                status, _, _ = exchange(connection, "GET", target)
                if status == 302:
                    with lock:
                        redirects[0] += 1
        finally:
            connection.close()

    shares = [resolutions // 16 + (1 if n < resolutions % 16 else 0) for n in range(16)]
    threads = [threading.Thread(target=client, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deadline = time.monotonic() + 30
    counted = archive.item(item["ibi"]["ibip"])["accesses"]
    while counted < redirects[0] and time.monotonic() < deadline:
        time.sleep(0.2)  # the acknowledgments still in the queue
        counted = archive.item(item["ibi"]["ibip"])["accesses"]
    time.sleep(1.0)  # and none counted twice
    counted = archive.item(item["ibi"]["ibip"])["accesses"]
    return {"resolutions": resolutions, "redirects": redirects[0], "accesses": counted}


def run(quick: bool) -> dict[str, Any]:
    seconds, slices, rounds = (1.2, 2, 20) if quick else (6.0, 4, 200)
    load = round(os.getloadavg()[0], 2)  # the machine's other work, at the start and the end
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        ibi = stack.enter_context(_ibi(Path(folder)))
        peer = stack.enter_context(_arklet(Path(folder)))
        idle = {system.name: idle_cpu(system) for system in (ibi.system, peer)}
        measured = measure([ibi.system, peer], seconds, slices)
        ours = measured["ibi"] | _breakdown(ibi, rounds)
        ours["negotiated"] = _negotiated(ibi.archive, ibi.federation.resolver_url, rounds)
        ours["exact_counts"] = _exact_counts(
            ibi.archive, ibi.federation.resolver_port, 400 if quick else 2000
        )
    theirs = {"server": "gunicorn, 2 sync workers, SQLite (WAL)", **measured["arklet"]}
    result = {
        "load_average": [load, round(os.getloadavg()[0], 2)],
        "seconds_per_phase": seconds,
        "slices_per_phase": slices,
        "idle_cpu_ms_per_second": idle,
        "clients": list(CLIENTS),
        "ibi": ours,
        "arklet": theirs,
    }
    save("peer", result)
    _plot(ours, theirs)
    return result


def _plot(ours: dict[str, Any], theirs: dict[str, Any]) -> Path:
    def throughput(rows: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
        return [float(r["clients"]) for r in rows], [r["ops_per_second"] for r in rows]

    return plot(
        "peer",
        "ibi and arklet in the same run: right answers per second",
        "clients",
        "answers/s",
        {
            "arklet: warm resolution": throughput(theirs["resolve"]),
            "ibi: warm resolution": throughput(ours["resolve"]),
            "arklet: mint with url": throughput(theirs["mint"]),
            "ibi: bare mint": throughput(ours["mint"]),
            "ibi: deposit with url": throughput(ours["deposit"]),
        },
        logx=True,
    )
