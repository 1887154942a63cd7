"""A peer measured in the same run: arklet (the Internet Archive's ARK minter and resolver).

Both sit behind the standard library's HTTP server on loopback: arklet as a WSGI app
(``wsgiref``, SQLite), ibi as ``ibi local`` (the API Gateway stand-in, dynalite). Measured
sequentially from one client: minting one identifier, and a warm resolution to a redirect.
For ibi the resolution goes resolver -> Archive (one Archive request, by location hint) -> 302.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import bars, save, summary_ms
from ibi.core.pairlist import encode_query
from ibi_tools.local.stores import free_port


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _timed(request: urllib.request.Request, expect: int) -> float:
    started = time.perf_counter()
    try:
        with _OPENER.open(request, timeout=30) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    elapsed = time.perf_counter() - started
    if status != expect:
        raise RuntimeError(f"{request.full_url}: {status}, expected {expect}")
    return elapsed


def arklet(rounds: int, folder: Path) -> dict[str, Any]:
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
    from arklet.entrypoints.wsgi import application

    naan = Naan.objects.create(
        naan=99999, name="bench", description="bench", url="https://example.org"
    )
    key = APIKey.objects.create_key(naan, "bench")
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = make_server("127.0.0.1", free_port(), application, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    body = b'{"naan": 99999, "shoulder": "/b1", "url": "https://example.org/item"}'
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    mints = [
        _timed(
            urllib.request.Request(base + "/mint", data=body, headers=headers, method="POST"), 200
        )
        for _ in range(rounds)
    ]
    with _OPENER.open(
        urllib.request.Request(base + "/mint", data=body, headers=headers, method="POST"),
        timeout=30,
    ) as response:
        import json

        ark = json.loads(response.read())["ark"]
    _timed(urllib.request.Request(f"{base}/{ark}"), 302)
    resolves = [_timed(urllib.request.Request(f"{base}/{ark}"), 302) for _ in range(rounds)]
    server.shutdown()
    return {"mint": summary_ms(mints), "resolve": summary_ms(resolves)}


def ibi(rounds: int, folder: Path) -> dict[str, Any]:
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
        mint_url = f"http://127.0.0.1:{ports[0]}/mint"
        mints = [
            _timed(urllib.request.Request(mint_url, data=b"{}", method="POST"), 200)
            for _ in range(rounds)
        ]
        archive = ArchiveClient(f"http://127.0.0.1:{ports[1]}", sign=False)
        item = archive.create({"url": "https://example.org/item"})
        persistent = f"{federation.resolver_url}/{item['ibi']['ibip']}"
        for _ in range(4):  # warm every worker and its location hint
            _timed(urllib.request.Request(persistent), 302)
        archives = [g for g in federation.gateways if g.name.startswith("archive")]
        time.sleep(0.5)  # the last acknowledgments, sent in the background
        before = [g.requests_served for g in archives]
        resolves = [_timed(urllib.request.Request(persistent), 302) for _ in range(rounds)]
        time.sleep(0.5)
        counted = [g.requests_served - b for g, b in zip(archives, before, strict=True)]
        negotiated = _negotiated(archive, federation.resolver_url, rounds)
        # Where the time goes: one hop through the gateway to a handler that does no I/O (the
        # resolver's landing page), and the Archive's urlRequest asked directly.
        hop = [
            _timed(urllib.request.Request(federation.resolver_url + "/"), 200)
            for _ in range(rounds)
        ]
        protocol = archive.service()["protocol_url"]
        query = encode_query(
            [
                ("servicesubject", "urlRequest"),
                ("clientinformation.ipaddress", "127.0.0.1"),
                ("parsedibiurl.ibi", item["ibi"]["ibip"]),
            ]
        )
        url_requests = [
            _timed(urllib.request.Request(f"{protocol}?{query}"), 200) for _ in range(rounds)
        ]
    finally:
        federation.stop()
    return {
        "mint": summary_ms(mints),
        "resolve": summary_ms(resolves),
        # urlRequest and acknowledgment, as each Archive's gateway counted them.
        "archive_requests_per_resolution": [round(c / rounds, 2) for c in counted],
        "hop": summary_ms(hop),
        "archive_url_request": summary_ms(url_requests),
        "negotiated": negotiated,
    }


BIBTEX = {"Accept": "application/x-bibtex"}
FORMATTED = {"Accept": "text/x-bibliography; style=apa"}


def _negotiated(archive: Any, resolver_url: str, rounds: int) -> dict[str, Any]:
    """A warm negotiated answer (BibTeX from the Archive's Dublin Core) beside the redirect of
    the same item, alternating, so that both see the same machine (issue 16)."""
    dc = {"title": "A benchmark report", "creator": ["Banon, G. J. F."], "date": "2014"}
    item = archive.create({"url": "https://example.org/report", "dc": dc})
    persistent = f"{resolver_url}/{item['ibi']['ibip']}"
    for _ in range(4):  # warm every worker, its location hint and citeproc's import
        _timed(urllib.request.Request(persistent, headers=BIBTEX), 200)
        _timed(urllib.request.Request(persistent, headers=FORMATTED), 200)
    redirects: list[float] = []
    citations: list[float] = []
    formatted: list[float] = []
    for _ in range(rounds):
        redirects.append(_timed(urllib.request.Request(persistent), 302))
        citations.append(_timed(urllib.request.Request(persistent, headers=BIBTEX), 200))
        formatted.append(_timed(urllib.request.Request(persistent, headers=FORMATTED), 200))
    return {
        "redirect": summary_ms(redirects),
        "bibtex": summary_ms(citations),
        "formatted": summary_ms(formatted),
    }


def run(quick: bool) -> dict[str, Any]:
    rounds = 30 if quick else 200
    with tempfile.TemporaryDirectory() as folder:
        ours = ibi(rounds, Path(folder))
        theirs = arklet(rounds, Path(folder))
    result = {
        "ibi": ours,
        "arklet": theirs,
        "ratio_resolve_p50": round(ours["resolve"]["p50_ms"] / theirs["resolve"]["p50_ms"], 2),
        "ratio_mint_p50": round(ours["mint"]["p50_ms"] / theirs["mint"]["p50_ms"], 2),
    }
    save("peer", result)
    bars(
        "peer",
        "ibi and arklet on the same machine (p50)",
        "ms",
        ["mint one identifier", "warm resolution"],
        {
            "ibi": [ours["mint"]["p50_ms"], ours["resolve"]["p50_ms"]],
            "arklet": [theirs["mint"]["p50_ms"], theirs["resolve"]["p50_ms"]],
        },
    )
    return result
