"""OAI-PMH list requests over a large Archive (issue 26, point 2): what they read, how long.

    .venv/bin/python -m bench.oai_scan [--label after] [items ...]   (default 20000 200000)

The items (one a minute, every tenth a Metadata item) are written straight into local mode's
tables (SQLite, in process) through the Archive's store, then two selections are harvested,
following resumption tokens to the end: a ``from`` that matches nothing, and a ``from``/
``until`` that matches 1% of the items. For each: the first request's DynamoDB requests,
items read (DynamoDB's ScannedCount) and time; then the whole harvest's. The time is the
repository's over the local tables (SQLite reads, JSON, XML), not DynamoDB's.

It runs on the code it finds: ``--label before`` on a copy of the version before OAI-PMH's
index (``git archive <commit> | tar -x -C DIR``, then this file copied in), ``after`` on this
one. Each label's figures are kept in bench/results/oai_scan.json; with the index it adds
what a page of records costs in read capacity, as projected (``INCLUDE data, version``) and as
the alternative would (``KEYS_ONLY``, then ``BatchGetItem`` of the records).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from lxml import etree

from bench.common import RESULTS, machine
from functions.archive.model import ContentType, Forms, Item, State
from functions.archive.oai import archive_repository, datestamp
from functions.archive.store import DynamoItemStore, ensure_table
from ibi.core.labels import IBI
from ibi_tools.local.tables import LocalTables, item_size

START = Decimal(1795473000)  # 2026-11-23T22:30:00Z
MINUTE = 60
TABLE = "ibi-bench-items"
OAI = {"o": "http://www.openarchives.org/OAI/2.0/"}
DESCRIPTION = (
    "Séries temporais de imagens de sensoriamento remoto para o monitoramento da cobertura "
    "da terra na Amazônia Legal, com dados de campo e resultados de classificação. " * 2
)
READ_UNIT = 4096  # bytes a read capacity unit reads (strongly consistent; eventually: twice)


class CountingClient:
    """A DynamoDB client that counts the Scan and Query requests made and the items they read."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.requests = 0
        self.read = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name not in ("scan", "query"):
            return method

        def counted(**parameters: Any) -> Any:
            answer = method(**parameters)
            self.requests += 1
            self.read += answer.get("ScannedCount", len(answer.get("Items", [])))
            return answer

        return counted


def item(n: int) -> Item:
    ibi = IBI.build(START + n, host="ibi.example.org", ip="192.0.2.10")
    kind = ContentType.METADATA if n % 10 == 9 else ContentType.DATA
    return Item(
        ibi=Forms(ibip=ibi.ibip),
        state=State.ORIGINAL,
        timestamp=START + n * MINUTE,
        content_type=kind,
        language="pt-BR",
        dc={
            "title": (f"Relatório técnico {n}",),
            "creator": ("Silva, Maria", "Souza, João"),
            "description": (DESCRIPTION,),
            "date": ("2026",),
            "publisher": ("INPE",),
        },
    )


def fill(client: Any, count: int) -> float:
    """``count`` items into the table; the seconds it took."""
    ensure_table(client, TABLE)
    store = DynamoItemStore(client, TABLE)
    began = time.perf_counter()
    for n in range(count):
        store.create(item(n))
    return time.perf_counter() - began


def harvest(client: Any, count: int, arguments: dict[str, str]) -> dict[str, Any]:
    """The first request of a ListIdentifiers with ``arguments``, and the whole harvest."""
    counting = CountingClient(client)
    repository = archive_repository(
        DynamoItemStore(counting, TABLE),  # type: ignore[arg-type]
        address="archive.example.org",
        service_ibi=str(IBI.build(START - 86400, host="ibi.example.org", ip="192.0.2.10").rep),
        base_url="https://archive.example.org",
        admin_email="ibi-admin@example.org",
        clock=lambda: START + count * MINUTE,
    )
    query = urlencode({"verb": "ListIdentifiers", "metadataPrefix": "oai_dc", **arguments})
    figures: dict[str, Any] = {}
    requests = sent = 0
    began = time.perf_counter()
    while True:
        answer = etree.fromstring(repository.answer(query))
        requests += 1
        sent += len(answer.findall(".//o:header", OAI))
        if requests == 1:
            figures["first_request"] = {
                "dynamodb_requests": counting.requests,
                "items_read": counting.read,
                "ms": round((time.perf_counter() - began) * 1000, 1),
            }
        resume = answer.find(".//o:resumptionToken", OAI)
        if resume is None or not resume.text:
            break
        query = urlencode({"verb": "ListIdentifiers", "resumptionToken": resume.text})
    figures["harvest"] = {
        "requests": requests,
        "records": sent,
        "dynamodb_requests": counting.requests,
        "items_read": counting.read,
        "ms": round((time.perf_counter() - began) * 1000, 1),
    }
    return figures


def read_units(sizes: list[int]) -> float:
    """Eventually consistent read units of one Query reading items of ``sizes`` bytes."""
    return math.ceil(sum(sizes) / READ_UNIT) / 2


def capacity(client: Any, page: int = 100) -> dict[str, Any]:
    """A page of ``page`` records: its read units as the index projects them (keys, data,
    version) and as a KEYS_ONLY index would cost (its Query, then BatchGetItem's records,
    each rounded up to 4 KB), from the records' sizes as DynamoDB counts them."""
    records = [r for r in client.scan(TableName=TABLE, Limit=page + 10)["Items"] if "data" in r]
    records = records[:page]
    keys = ("label", "oai_set", "oai_datestamp")
    entries = [item_size({k: r[k] for k in (*keys, "data", "version")}) for r in records]
    keys_only = [item_size({k: r[k] for k in keys}) for r in records]
    full = [item_size(r) for r in records]
    return {
        "record_bytes_mean": round(sum(full) / len(full)),
        "index_entry_bytes_mean": round(sum(entries) / len(entries)),
        "page_read_units_include": read_units(entries),
        "page_read_units_keys_only_then_batch_get": read_units(keys_only)
        + sum(math.ceil(size / READ_UNIT) / 2 for size in full),
        "dynamodb_requests_include": 1,
        "dynamodb_requests_keys_only": 2,
    }


def measure(count: int, directory: Path, *, with_index: bool) -> dict[str, Any]:
    client = LocalTables(directory / f"tables-{count}.sqlite3").client()
    figures: dict[str, Any] = {"fill_s": round(fill(client, count), 1)}
    middle, width = count // 2, max(1, count // 100)
    selections = {
        "nothing": {"from": "2030-01-01"},
        "one_percent": {
            "from": datestamp(START + middle * MINUTE),
            "until": datestamp(START + (middle + width - 1) * MINUTE),
        },
    }
    for name, arguments in selections.items():
        figures[name] = {"arguments": arguments, **harvest(client, count, arguments)}
    if with_index:
        figures["capacity"] = capacity(client)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.oai_scan")
    parser.add_argument("counts", nargs="*", type=int, default=[20_000, 200_000])
    parser.add_argument("--label", default="after", help="before: the version before the index")
    options = parser.parse_args(argv)
    with_index = options.label != "before"
    path = RESULTS / "oai_scan.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    run: dict[str, Any] = {"machine": machine(), "items": {}}
    with tempfile.TemporaryDirectory() as directory:
        for count in options.counts:
            figures = measure(count, Path(directory), with_index=with_index)
            run["items"][str(count)] = figures
            for name in ("nothing", "one_percent"):
                first, whole = figures[name]["first_request"], figures[name]["harvest"]
                sys.stdout.write(
                    f"{options.label} {count} items, {name}: first request"
                    f" {first['items_read']} read in {first['dynamodb_requests']} requests,"
                    f" {first['ms']} ms; harvest {whole['records']} records in"
                    f" {whole['requests']} requests, {whole['items_read']} read, {whole['ms']} ms\n"
                )
    results[options.label] = run
    path.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
