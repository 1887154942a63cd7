"""End to end: `ibi archive import` into `ibi local`'s Archives, from recorded Zenodo, DSpace and
EPrints answers served on loopback (tests/oai_fixtures.py) and from a local Archive's own /oai.

Run again, interrupted and resumed, with a record deleted at the source, with `--fetch`: every
record is one item, never two.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from ibi.client import ArchiveClient
from ibi_tools.harvest import Importer, ImportOptions, ImportState
from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun, cli
from tests.oai_fixtures import RecordedRepository, pages_of, serve

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRun]:
    """One `ibi local` for the module; its Archives' OAI-PMH pages hold 3 records."""
    previous = os.environ.get("IBI_OAI_PAGE_SIZE")
    os.environ["IBI_OAI_PAGE_SIZE"] = "3"
    run = LocalRun(tmp_path_factory.mktemp("import") / "data", free_port()).start()
    try:
        yield run
    finally:
        run.stop()
        if previous is None:
            os.environ.pop("IBI_OAI_PAGE_SIZE", None)
        else:
            os.environ["IBI_OAI_PAGE_SIZE"] = previous


@pytest.fixture(autouse=True)
def loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded repositories and the Archives are on loopback, which the importer contacts
    only when allowed (issue 35: its OAI-PMH requests and downloads reach public addresses)."""
    monkeypatch.setenv("IBI_ALLOW_NETWORKS", "127.0.0.0/8")


def imported(archive: str, repository: str) -> dict[str, dict[str, Any]]:
    """The Archive's items imported from ``repository``, by OAI identifier."""
    items = list(ArchiveClient(archive).items())
    return {
        item["oai_source"]["identifier"]: item
        for item in items
        if (item.get("oai_source") or {}).get("repository") == repository
    }


def import_cli(archive: str, url: str, state: Path, *options: str) -> Any:
    return cli("archive", "import", url, "--endpoint", archive, "--state", str(state), *options)


def test_a_zenodo_list_is_imported_once_however_often_it_is_run(
    local: LocalRun, tmp_path: Path
) -> None:
    archive = local.archives[0]
    with serve(RecordedRepository("zenodo")) as url:
        done = import_cli(archive, url, tmp_path / "state.json")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("8 created, 0 already there, 0 tombstoned, 1 skipped")
        assert "oai:zenodo.org:8433364: deleted at the source, never imported" in done.stdout
        assert "page 3: 3 records" in done.stderr

        items = imported(archive, url)
        assert len(items) == 8
        item = items["oai:zenodo.org:8435696"]
        assert item["state"] == "Original"
        assert item["url"] == "https://doi.org/10.5281/zenodo.8435696"
        assert item["dc"]["publisher"] == ["Zenodo"]
        assert item["oai_source"]["datestamp"] == "2023-10-12T14:26:07Z"

        again = import_cli(archive, url, tmp_path / "state.json", "--json")
        assert again.returncode == 0, again.stderr
        summary = json.loads(again.stdout)
        assert summary["created"] == [] and len(summary["already_there"]) == 8

        lost = import_cli(archive, url, tmp_path / "another-state.json")  # the state file lost
        assert lost.returncode == 0 and lost.stdout.startswith("0 created, 8 already there")
    assert len(imported(archive, url)) == 8


class Interrupted(Exception):
    pass


class Interrupting(ArchiveClient):
    """The Archive's client, killed after ``after`` deposits."""

    def __init__(self, endpoint: str, after: int) -> None:
        super().__init__(endpoint)
        self.after = after

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> Any:
        if self.after == 0:
            raise Interrupted
        self.after -= 1
        return super().create(body, idempotency_key=idempotency_key)


def test_an_interrupted_dspace_import_continues_and_misses_nothing(
    local: LocalRun, tmp_path: Path
) -> None:
    archive, state = local.archives[1], tmp_path / "state.json"
    service = ArchiveClient(archive).service()["archiveserviceibi"]
    with serve(RecordedRepository("dspace")) as url:
        options = ImportOptions(url)
        saved = ImportState.load(
            state, archive=service["ibip"], repository=url, set_spec=None, from_date=None
        )
        run = Importer(Interrupting(archive, after=8), options, saved, progress=io.StringIO())
        with pytest.raises(Interrupted):
            run.run()
        assert len(imported(archive, url)) == 8

        done = import_cli(archive, url, state)
        assert done.returncode == 0, done.stderr
        # resumed on the second page: the 2 records done there before, the 4 after
        assert done.stdout.startswith("4 created, 2 already there, 0 tombstoned, 2 skipped")
        assert "(1 page read;" in done.stdout
        items = imported(archive, url)
        assert len(items) == 12  # 14 records, 2 of them deleted: each other one once
        assert items["hdl:1765/1163"]["url"] == "http://hdl.handle.net/1765/1163"
        assert items["hdl:1765/1163"]["language"] == "en-US"


def test_a_record_deleted_at_the_source_leaves_a_tombstone_and_fetch_copies_files(
    local: LocalRun, tmp_path: Path
) -> None:
    archive = local.archives[0]
    pdf = b"%PDF-1.4 Identificacion y caracterizacion\n"
    page = re.sub(rb"<resumptionToken>.*</resumptionToken>", b"", pages_of("eprints")[0])
    repository = RecordedRepository("eprints", pages=[page])
    with serve(repository) as url:
        base = url.removesuffix("/oai")
        repository.rewrite = {"eprints.ucm.es": f"{base}/eprints"}
        repository.files = {
            "/eprints/28974/1/T35886.pdf": ("application/pdf", pdf),
            "/eprints/28974/": ("text/html; charset=utf-8", b"<html>landing page</html>"),
        }
        done = import_cli(archive, url, tmp_path / "state.json", "--fetch")
        assert done.returncode == 0, done.stderr
        assert f"{base}/eprints/28974/: a web page (text/html), not a file" in done.stdout
        item = imported(archive, url)["oai:www.ucm.es:28974"]
        assert item["url"] is None and item["default_file"] == "T35886.pdf"
        assert [(f["path"], f["sha256"], f["size"]) for f in item["files"]] == [
            ("T35886.pdf", hashlib.sha256(pdf).hexdigest(), len(pdf))
        ]
        served = requests.get(f"{archive}/col/{item['ibi']['ibip']}", timeout=30)
        assert served.status_code == 200 and served.content == pdf

        repository.pages = [page.replace(b"<header>", b'<header status="deleted">')]
        gone = import_cli(archive, url, tmp_path / "state.json")
        assert gone.returncode == 0, gone.stderr
        assert gone.stdout.startswith("0 created, 0 already there, 1 tombstoned")
        assert imported(archive, url)["oai:www.ucm.es:28974"]["state"] == "Deleted"


def test_an_archive_is_imported_into_another_through_its_own_oai_pmh(
    local: LocalRun, tmp_path: Path
) -> None:
    source, target = local.archives
    deposited = []
    for n in range(5):
        body = {"dc": {"title": [f"Report {n}"], "creator": ["Banon, G."]}}
        answer = requests.post(f"{source}/api/items", json=body, timeout=30)
        assert answer.status_code == 201, answer.text
        deposited.append(answer.json()["ibi"]["ibip"])
    assert requests.delete(f"{source}/api/item", params={"ibi": deposited[0]}, timeout=30).ok

    done = import_cli(target, f"{source}/oai", tmp_path / "state.json", "--set", "Data")
    assert done.returncode == 0, done.stderr
    items = imported(target, f"{source}/oai")
    expected = {f"oai:urlib.net:{ibi}" for ibi in deposited[1:]}
    assert expected <= set(items)
    assert f"oai:urlib.net:{deposited[0]}" not in items
    copy = items[f"oai:urlib.net:{deposited[1]}"]
    assert copy["dc"]["title"] == ["Report 1"] and copy["ibi"]["ibip"] != deposited[1]
    assert f"oai:urlib.net:{deposited[0]}: deleted at the source, never imported" in done.stdout
