"""Tombstones that keep the citation, through `ibi local` (issue 28, point 4): an item deposited
with metadata, then deleted with `ibi archive delete --reason`; the resolver's 410 page, the
Archive's 410 page and the BibTeX by content negotiation (a 410 too) all say what was there
and when and why it was withdrawn. Real processes, real HTTP on loopback."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bibtexparser
import pytest

from ibi.client import ArchiveClient
from ibi.core import citation
from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun, cli

pytestmark = pytest.mark.e2e
REASON = "Retracted: the <figures> & tables were wrong"
DC = {
    "title": ["Mapping deforestation"],
    "creator": ["Câmara, Gilberto", "Banon, Gerald"],
    "date": ["2024-05-01"],
}


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalRun]:
    run = LocalRun(tmp_path / "data", free_port()).start()
    yield run
    run.stop()


def gone(url: str, accept: str) -> tuple[str, str]:
    """The 410 answer's content type and body."""
    request = urllib.request.Request(url, headers={"Accept": accept})
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=30)
    assert raised.value.code == 410
    return str(raised.value.headers["Content-Type"]), raised.value.read().decode()


def test_a_deleted_item_keeps_its_citation_at_the_resolver_and_the_archive(
    local: LocalRun,
) -> None:
    archive = local.archives[0]
    item = ArchiveClient(archive).create({"dc": DC, "url": "https://example.org/report"})
    ibi = item["ibi"]["ibip"]
    landing = urllib.request.urlopen(f"{archive}/metadata/{ibi}", timeout=30).read().decode()
    assert '<meta name="citation_title" content="Mapping deforestation">' in landing
    assert '<script type="application/ld+json">' in landing

    deleted = cli("archive", "delete", ibi, "--reason", REASON, "--endpoint", archive, "--json")
    assert deleted.returncode == 0, deleted.stderr
    tombstone = json.loads(deleted.stdout)
    assert tombstone["state"] == "Deleted"
    assert tombstone["history"][-1]["action"] == "deleted"
    assert tombstone["history"][-1]["reason"] == REASON
    when = tombstone["history"][-1]["at"][:19] + "Z"  # shown to the second

    escaped = "Retracted: the &lt;figures&gt; &amp; tables were wrong"
    kind, page = gone(f"{local.resolver}/{ibi}", "text/html")
    assert kind.startswith("text/html")
    assert "<dt>Title</dt><dd>Mapping deforestation</dd>" in page
    assert "<dt>Creators</dt><dd>Câmara, Gilberto; Banon, Gerald</dd>" in page
    assert f"<dt>Deleted</dt><dd>{when}</dd>" in page and escaped in page

    _, own = gone(f"{archive}/col/{ibi}", "text/html")
    assert "<dt>Title</dt><dd>Mapping deforestation</dd>" in own and escaped in own

    kind, body = gone(f"{local.resolver}/{ibi}", "application/x-bibtex")
    assert kind == "application/x-bibtex; charset=utf-8"
    (entry,) = bibtexparser.parse_string(body).entries
    assert entry["title"] == "Mapping deforestation"
    note = f"IBI: {ibi}. Withdrawn on {when[:10]}: {REASON}"
    assert entry["note"] == citation.bibtex_text(note)
