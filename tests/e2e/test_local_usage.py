"""Public usage figures and RIS through `ibi local` (issue 28, points 5 and 7): the real
resolver and Archives, real HTTP. An item is resolved a few times; once the resolver's
acknowledgments are delivered, the Archive's metadata page and the resolver's holdings view
(JSON and page) show the accesses by month, with no key; a reference manager gets its RIS."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import rispy

from ibi.client import ArchiveClient
from ibi.core import citation
from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun
from tests.e2e.test_local_federation import BROWSER, fetch

pytestmark = pytest.mark.e2e
RESOLUTIONS = 3
TITLE = "Sensoriamento remoto:\numa introdução"
CREATORS = ["Câmara, Gilberto", "Banon, Gerald Jean Francis"]
ROW = re.compile(r"<tr><td>(\d{4}-\d{2})</td><td>(\d+)</td></tr>")
TOTAL = re.compile(r'<tr><th scope="row">total</th><td>(\d+)</td></tr>')


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRun]:
    local = LocalRun(tmp_path_factory.mktemp("usage") / "data", free_port())
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def item(run: LocalRun) -> str:
    """An item of Archive A's, with a file and Dublin Core, resolved by RESOLUTIONS readers —
    and, not to be counted (issue 35, COUNTER Release 5), by a crawler and a script, and again
    by the first reader within 30 s (a double-click)."""
    archive = ArchiveClient(run.archives[0], sign=False)
    dc = {"title": TITLE, "creator": CREATORS, "date": "2024-05-01", "type": "Technical report"}
    label: str = archive.create({"dc": dc})["ibi"]["ibip"]
    archive.upload_files(label, [("report.txt", b"The report.\n", "text/plain")])
    readers = [{"User-Agent": BROWSER, "X-Forwarded-For": f"198.51.100.{n}"} for n in range(1, 4)]
    assert len(readers) == RESOLUTIONS
    for reader in readers:
        assert fetch(f"{run.resolver}/{label}", **reader)[0] == 302
    crawler = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
    for agent in (crawler, "python-requests/2.32.3"):
        assert fetch(f"{run.resolver}/{label}", **{"User-Agent": agent})[0] == 302
    assert fetch(f"{run.resolver}/{label}", **readers[0])[0] == 302  # a double-click
    return label


def read(url: str, accept: str = "text/html") -> str:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(response.read().decode())


def figures(page: str) -> tuple[dict[str, int], int]:
    """The usage table of a page: (accesses by month, total)."""
    table = page[page.index('<table id="usage">') :]
    table = table[: table.index("</table>")]
    total = TOTAL.search(table)
    assert total is not None, table
    return {m: int(n) for m, n in ROW.findall(table)}, int(total.group(1))


def counted(run: LocalRun, label: str) -> str:
    """The metadata page once every access is counted (acknowledgments are delivered
    asynchronously, from the resolver's queue)."""
    deadline = time.monotonic() + 60
    while True:
        page = read(f"{run.archives[0]}/metadata/{label}")
        if figures(page)[1] >= RESOLUTIONS or time.monotonic() > deadline:
            return page
        time.sleep(0.25)


def months_now() -> set[str]:
    """This month in UTC (and the one two minutes ago, should the test cross a month's end)."""
    now = datetime.now(UTC)
    return {
        now.strftime("%Y-%m"),
        datetime.fromtimestamp(now.timestamp() - 120, UTC).strftime("%Y-%m"),
    }


def test_the_metadata_page_shows_the_accesses_by_month_with_no_key(
    run: LocalRun, item: str
) -> None:
    counted(run, item)
    time.sleep(1.0)  # what else was acknowledged (the crawler, the script, the double-click)
    months, total = figures(counted(run, item))
    assert total == RESOLUTIONS
    assert sum(months.values()) == RESOLUTIONS and set(months) <= months_now()
    shown = ArchiveClient(run.archives[0], sign=False).item(item)  # the deposit API agrees
    assert shown["accesses"] == RESOLUTIONS


def test_the_holdings_view_shows_them_per_archive_and_in_all(run: LocalRun, item: str) -> None:
    counted(run, item)
    view: dict[str, Any] = json.loads(read(f"{run.resolver}/holdings/{item}", "application/json"))
    assert view["usage"]["total"] == RESOLUTIONS
    assert sum(view["usage"]["months"].values()) == RESOLUTIONS
    assert set(view["usage"]["months"]) <= months_now()
    (held,) = [h for h in view["archives"] if h["state"] == "Original"]
    assert held["usage"] == view["usage"]  # one Archive holds it
    months, total = figures(read(f"{run.resolver}/holdings/{item}"))
    assert (months, total) == (view["usage"]["months"], RESOLUTIONS)


def test_a_reference_manager_gets_the_items_ris(run: LocalRun, item: str) -> None:
    request = urllib.request.Request(f"{run.resolver}/{item}", headers={"Accept": citation.RIS})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == f"{citation.RIS}; charset=utf-8"
        body = response.read().decode()
    assert body.endswith("ER  - \r\n")
    (entry,) = rispy.loads(body)
    assert entry["type_of_reference"] == "RPRT"
    assert entry["title"] == "Sensoriamento remoto: uma introdução"
    assert entry["authors"] == CREATORS
    assert entry["urls"] == [f"{run.resolver}/{item}"]
