"""`ibi archive import` over a 2,000-record harvest (issue 35): how long the importer takes.

    .venv/bin/python -m bench.importer [--label after] [--records 2000] [--rounds 3]

The recorded oai_dc records of Zenodo, DSpace and EPrints (tests/fixtures/oai/) are replicated
to ``--records`` with distinct identifiers, 100 a page chained by resumption tokens, and served
on 127.0.0.1 (tests/oai_fixtures.py); the importer reads them through its own HTTP path into an
in-process Archive (each body sent through JSON, as the client does). Each round is a new
Archive and state file; the figures are the rounds' median. ``--label before`` is run on a
worktree of the commit before the change (this file and tests/oai_fixtures.py copied in);
each label's figures are kept in bench/results/importer.json.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.common import RESULTS, machine
from ibi_tools.harvest import Importer, ImportOptions, ImportState
from tests.oai_fixtures import SOURCES, RecordedRepository, pages_of, serve

PER_PAGE = 100
ARCHIVE = "J8LNKB5R7W/3ARCHIVE"
_RECORD = re.compile(rb"<record>.*?</record>", re.DOTALL)
_IDENTIFIER = re.compile(rb"(<header[^>]*>\s*<identifier>)([^<]*)(</identifier>)")


def templates() -> list[tuple[bytes, list[bytes], bytes]]:
    """Each recorded page with live records: the text before its first record, its records
    (deleted ones left out), and the text after its last."""
    found = []
    for source in SOURCES:
        for page in pages_of(source):
            records = [r for r in _RECORD.findall(page) if b'status="deleted"' not in r]
            if records:
                head = page[: page.index(b"<record>")]
                tail = page[page.rindex(b"</record>") + len(b"</record>") :]
                tail = re.sub(
                    rb"<resumptionToken[^>]*>[^<]*</resumptionToken>|<resumptionToken[^>]*/>",
                    b"",
                    tail,
                )
                found.append((head, records, tail))
    return found


def harvest_pages(count: int) -> list[bytes]:
    """``count`` records (each a recorded one, its identifier made distinct), ``PER_PAGE`` a
    page, each page but the last ending with the next one's token."""
    shapes = templates()
    pages = []
    serial = itertools.count(1)
    for number in range((count + PER_PAGE - 1) // PER_PAGE):
        head, records, tail = shapes[number % len(shapes)]
        size = min(PER_PAGE, count - number * PER_PAGE)
        body = []
        for record in itertools.islice(itertools.cycle(records), size):
            distinct = rb"\g<1>\g<2>-bench-%d\g<3>" % next(serial)
            body.append(_IDENTIFIER.sub(distinct, record))
        last = number * PER_PAGE + size >= count
        token = b"" if last else b"<resumptionToken>bench-%d</resumptionToken>" % (number + 1)
        tail_with_token = tail.replace(b"</ListRecords>", token + b"</ListRecords>", 1)
        pages.append(head + b"\n".join(body) + tail_with_token)
    return pages


class BenchArchive:
    """The deposit API's calls an import makes, in process (bodies through JSON each way)."""

    def __init__(self) -> None:
        self.held: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}
        self._serial = itertools.count(1)

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        if idempotency_key in self.keys:
            return self.held[self.keys[idempotency_key]]
        label = f"J8LNKB5R7W/3BENCH{next(self._serial)}"
        item = {"ibi": {"ibip": label}, "state": "Original", **json.loads(json.dumps(body))}
        self.held[label] = item
        if idempotency_key:
            self.keys[idempotency_key] = label
        answer: dict[str, Any] = json.loads(json.dumps(item))
        return answer

    def delete(self, ibi: str) -> dict[str, Any]:
        self.held[ibi]["state"] = "Deleted"
        return self.held[ibi]

    def items(self) -> Iterator[dict[str, Any]]:
        yield from list(self.held.values())

    def upload_files(
        self, ibi: str, files: Sequence[Any], *, default_file: str | None = None
    ) -> dict[str, Any]:
        return self.held[ibi]


def one_round(url: str, directory: Path) -> dict[str, Any]:
    state = ImportState.load(
        directory / f"state-{time.monotonic_ns()}.json",
        archive=ARCHIVE,
        repository=url,
        set_spec=None,
        from_date=None,
    )
    archive = BenchArchive()
    cpu, start = time.process_time(), time.perf_counter()
    summary = Importer(archive, ImportOptions(url), state, progress=io.StringIO()).run()
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    return {
        "s": seconds,
        "cpu_s": cpu_seconds,
        "created": len(summary.created),
        "errors": len(summary.errors),
        "pages": summary.pages,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.importer")
    parser.add_argument("--label", default="after", help="before: the version before the change")
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args(argv)
    os.environ.setdefault("IBI_ALLOW_NETWORKS", "127.0.0.0/8")  # the repository is on loopback
    pages = harvest_pages(options.records)
    rounds = []
    with (
        tempfile.TemporaryDirectory() as directory,
        serve(RecordedRepository("bench", pages=pages)) as url,
    ):
        for _ in range(options.rounds):
            rounds.append(one_round(url, Path(directory)))
    if any(r["created"] != options.records or r["errors"] for r in rounds):
        sys.stderr.write(f"not every record was imported: {rounds}\n")
        return 1
    seconds = statistics.median(r["s"] for r in rounds)
    figures = {
        "machine": machine(),
        "records": options.records,
        "pages": rounds[0]["pages"],
        "page_bytes_mean": round(sum(map(len, pages)) / len(pages)),
        "rounds": len(rounds),
        "median_s": round(seconds, 3),
        "cpu_median_s": round(statistics.median(r["cpu_s"] for r in rounds), 3),
        "records_per_s": round(options.records / seconds, 1),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "each_s": [round(r["s"], 3) for r in rounds],
    }
    path = RESULTS / "importer.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    results[options.label] = figures
    path.write_text(json.dumps(results, indent=2) + "\n")
    sys.stdout.write(
        f"{options.label}: {options.records} records in {figures['pages']} pages, median "
        f"{figures['median_s']} s ({figures['records_per_s']} records/s, CPU "
        f"{figures['cpu_median_s']} s), rounds {figures['each_s']}, max RSS "
        f"{figures['max_rss_mb']} MB\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
