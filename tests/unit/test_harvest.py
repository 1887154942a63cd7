"""`ibi archive import` (ibi_tools/harvest/): reading recorded OAI-PMH answers of Zenodo, DSpace
and EPrints (tests/fixtures/oai/), what each record becomes, and the import loop against an
in-memory Archive: resumed after an interruption, run again, records deleted at the source."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from lxml import etree
from sickle.models import Record as SickleRecord

from ibi.client import ApiError, LocalFile
from ibi_tools.harvest import (
    Fetch,
    Fetched,
    HarvestError,
    Importer,
    ImportOptions,
    ImportState,
    OaiError,
    download,
    dublin_core,
    idempotency_key,
    item_body,
    landing_page,
    parse_page,
    retry_after,
)
from tests.oai_fixtures import SOURCES, RecordedRepository, pages_of

BASE = "http://repository.example/oai"
ARCHIVE = "J8LNKB5R7W/3ARCHIVE"
OAI_NS = "{http://www.openarchives.org/OAI/2.0/}"


def records_of(source: str) -> list[Any]:
    return [record for page in pages_of(source) for record in parse_page(page).records]


# ---------------------------------------------------------------------------- reading


@pytest.mark.parametrize("source", SOURCES)
def test_each_recorded_page_reads_as_sickle_reads_it(source: str) -> None:
    for page in pages_of(source):
        ours = parse_page(page).records
        theirs = [
            SickleRecord(element) for element in etree.fromstring(page).iter(f"{OAI_NS}record")
        ]
        assert [r.identifier for r in ours] == [r.header.identifier for r in theirs]
        assert [r.datestamp for r in ours] == [r.header.datestamp for r in theirs]
        assert [r.deleted for r in ours] == [r.header.deleted for r in theirs]
        for mine, sickle in zip(ours, theirs, strict=True):
            if mine.deleted:
                continue
            expected = {
                name: {v.strip() for v in values if v and v.strip()}
                for name, values in sickle.metadata.items()
            }
            assert {name: set(values) for name, values in mine.dc.items()} == {
                name: values for name, values in expected.items() if values
            }


@pytest.mark.parametrize(
    ("source", "count", "deleted"),
    [
        ("zenodo", 9, ["oai:zenodo.org:8433364"]),
        ("dspace", 14, ["hdl:1765/1160", "hdl:1765/1161"]),
        ("eprints", 2, ["oai:www.ucm.es:1543"]),
    ],
)
def test_pages_chain_by_resumption_token_to_every_record(
    source: str, count: int, deleted: list[str]
) -> None:
    repository = RecordedRepository(source)
    token: str | None = None
    records = []
    for _ in range(10):
        query = {"verb": "ListRecords", **({"resumptionToken": token} if token else {})}
        page = parse_page(repository.get(f"{BASE}?{urlencode(query)}", 5).content)
        records += page.records
        token = page.token
        if token is None:
            break
    assert len(records) == count
    assert [r.identifier for r in records if r.deleted] == deleted


def test_an_oai_error_answer_names_its_code() -> None:
    body = (Path(__file__).parents[1] / "fixtures/oai/zenodo/noRecordsMatch.xml").read_bytes()
    with pytest.raises(OaiError) as raised:
        parse_page(body)
    assert raised.value.code == "noRecordsMatch"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"<html><body>Welcome</body></html>", "root element is <html>"),
        (b"<OAI-PMH", "not well-formed XML"),
        (
            b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]>'
            b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">&a;</OAI-PMH>',
            "DOCTYPE",
        ),
        (b'<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"/>', "no <ListRecords>"),
    ],
)
def test_an_answer_that_is_no_list_of_records_says_what_it_is(body: bytes, says: str) -> None:
    with pytest.raises(HarvestError, match=says):
        parse_page(body)


def test_dublin_core_is_read_wherever_the_elements_sit_each_value_once() -> None:
    metadata = etree.fromstring(
        b'<metadata xmlns="http://www.openarchives.org/OAI/2.0/" '
        b'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc><dc:title>  A title \n</dc:title>'
        b"<dc:date>2001</dc:date><dc:date>2001</dc:date><dc:bogus>x</dc:bogus>"
        b"<dc:subject></dc:subject><dc:rights>a\xc2\x85b</dc:rights></dc></metadata>"
    )
    from xml.etree import ElementTree

    dc = dublin_core(ElementTree.fromstring(etree.tostring(metadata)))
    assert dc == {"title": ("A title",), "date": ("2001",), "rights": ("a\ufffdb",)}


# ---------------------------------------------------------------------------- the item


def test_a_zenodo_record_points_at_its_doi() -> None:
    record = records_of("zenodo")[0]
    body = item_body(record, "https://zenodo.org/oai2d")
    assert body["url"] == "https://doi.org/10.5281/zenodo.8435696"
    assert body["oai_source"] == {
        "repository": "https://zenodo.org/oai2d",
        "identifier": "oai:zenodo.org:8435696",
        "datestamp": "2023-10-12T14:26:07Z",
    }
    assert body["dc"]["publisher"] == ["Zenodo"]


def test_a_dspace_record_points_at_its_handle_and_keeps_its_language() -> None:
    record = records_of("dspace")[0]
    body = item_body(record, "http://dspace.ubib.eur.nl/oai/")
    assert body["url"] == "http://hdl.handle.net/1765/9"
    assert body["language"] == "en"
    assert body["dc"]["language"] == ["en", "en_US"]
    assert body["dc"]["creator"] == ["Jong, G. de", "Nooteboom, B."]


def test_an_eprints_record_points_at_its_landing_page_not_its_pdf() -> None:
    record = records_of("eprints")[0]
    body = item_body(record, "http://eprints.ucm.es/cgi/oai2")
    assert body["url"] == "http://eprints.ucm.es/28974/"
    assert body["dc"]["identifier"] == ["http://eprints.ucm.es/28974/1/T35886.pdf"]
    assert body["language"] == "es"


@pytest.mark.parametrize(
    ("dc", "url"),
    [
        ({"identifier": ("10.5281/zenodo.3268395",)}, "https://doi.org/10.5281/zenodo.3268395"),
        ({"identifier": ("doi:10.1000/x y",)}, None),
        ({"identifier": ("http://dx.doi.org/10.1016/j.physb.2012.12.047",)},
         "https://doi.org/10.1016/j.physb.2012.12.047"),
        ({"identifier": ("Wu, Z. Q. and Harris",), "relation": ("http://eprints.x/1/",)},
         "http://eprints.x/1/"),
        ({"identifier": ("https://r.x/files/a.pdf",)}, "https://r.x/files/a.pdf"),
        ({"identifier": ("https://r.x/a.pdf", "https://r.x/record/1")}, "https://r.x/record/1"),
        ({"title": ("no URL",)}, None),
    ],
)  # fmt: skip
def test_the_url_is_a_doi_a_handle_a_page_or_else_a_file(
    dc: dict[str, tuple[str, ...]], url: str | None
) -> None:
    assert landing_page(dc) == url


def test_the_idempotency_key_is_the_same_for_the_same_record_into_the_same_archive() -> None:
    key = idempotency_key(ARCHIVE, BASE, "oai:x:1")
    assert key == idempotency_key(ARCHIVE, BASE, "oai:x:1")
    assert key != idempotency_key(ARCHIVE, BASE, "oai:x:2")
    assert key != idempotency_key("OTHER/ARCHIVE", BASE, "oai:x:1")
    assert len(key) <= 200 and key.startswith("ibi-import-")


def test_retry_after_takes_seconds_or_a_date_and_is_capped() -> None:
    assert retry_after({"Retry-After": "7"}, 0) == 7
    assert retry_after({"retry-after": "99999"}, 0) == 600
    assert retry_after({}, 2) == 20
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0) == 0


# ---------------------------------------------------------------------------- the import


class MemoryArchive:
    """The deposit API's calls an import makes, in memory (the Archive's own rules: a retried
    create with the same Idempotency-Key gets the same item; a tombstone cannot be deleted)."""

    def __init__(self) -> None:
        self.held: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, str] = {}
        self.creates = 0
        self.uploads: dict[str, list[tuple[str, str, int, str]]] = {}
        self._serial = itertools.count(1)

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        self.creates += 1
        if idempotency_key in self.keys:
            return self.held[self.keys[idempotency_key]]
        label = f"J8LNKB5R7W/3TEST{next(self._serial)}"
        self.held[label] = {"ibi": {"ibip": label}, "state": "Original", **body}
        if idempotency_key:
            self.keys[idempotency_key] = label
        return self.held[label]

    def delete(self, ibi: str) -> dict[str, Any]:
        if self.held[ibi]["state"] == "Deleted":
            raise ApiError(410, f"{ibi} was deleted")
        self.held[ibi]["state"] = "Deleted"
        return self.held[ibi]

    def items(self) -> Iterator[dict[str, Any]]:
        yield from list(self.held.values())

    def upload_files(
        self, ibi: str, files: Sequence[Any], *, default_file: str | None = None
    ) -> dict[str, Any]:
        for path, content, kind in files:
            sha256, size = content.digest() if isinstance(content, LocalFile) else ("", 0)
            self.uploads.setdefault(ibi, []).append((path, sha256, size, kind))
        return self.held[ibi]

    def imported(self) -> dict[str, str]:
        """OAI identifier -> state of every item imported."""
        return {i["oai_source"]["identifier"]: i["state"] for i in self.held.values()}


class Crash(Exception):
    """Injected: the import stops here, as a killed process would."""


class CrashingArchive(MemoryArchive):
    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        if self.creates == self.after:
            raise Crash
        return super().create(body, idempotency_key=idempotency_key)


def importer(
    archive: MemoryArchive,
    repository: RecordedRepository,
    state_path: Path,
    *,
    sleep: Callable[[float], None] = lambda seconds: None,
    downloader: Fetch = download,
    **options: Any,
) -> Importer:
    state = ImportState.load(
        state_path, archive=ARCHIVE, repository=BASE, set_spec=None, from_date=None
    )
    return Importer(
        archive,
        ImportOptions(BASE, **options),
        state,
        get=repository.get,
        fetch=downloader,
        sleep=sleep,
        progress=io.StringIO(),
    )


@pytest.mark.parametrize("source", SOURCES)
def test_every_record_becomes_one_item_and_a_rerun_creates_nothing(
    source: str, tmp_path: Path
) -> None:
    archive, repository = MemoryArchive(), RecordedRepository(source)
    summary = importer(archive, repository, tmp_path / "state.json").run()
    records = records_of(source)
    live = {r.identifier for r in records if not r.deleted}
    assert archive.imported() == dict.fromkeys(live, "Original")
    assert {i for i, _ in summary.created} == live
    assert [i for i, _ in summary.skipped] == [r.identifier for r in records if r.deleted]
    assert summary.errors == []

    again = importer(archive, repository, tmp_path / "state.json").run()
    assert again.created == [] and {i for i, _ in again.present} == live
    assert archive.creates == len(live)


def test_an_interrupted_import_continues_where_it_stopped(tmp_path: Path) -> None:
    repository, state = RecordedRepository("dspace"), tmp_path / "state.json"
    crashing = CrashingArchive(after=8)  # the 9th record: on the second page
    with pytest.raises(Crash):
        importer(crashing, repository, state).run()
    saved = json.loads(state.read_text())
    assert len(saved["done"]) == 8 and saved["token"] is not None and not saved["complete"]

    archive = MemoryArchive()
    archive.held, archive.keys, archive._serial = crashing.held, crashing.keys, crashing._serial
    summary = importer(archive, repository, state).run()
    live = {r.identifier for r in records_of("dspace") if not r.deleted}
    assert archive.imported() == dict.fromkeys(live, "Original")
    assert len(archive.held) == len(live)  # nothing twice, nothing missed
    assert len(summary.created) == len(live) - 8
    assert repository.requests[-2:] == [
        {"verb": "ListRecords", "resumptionToken": saved["token"]},
        {"verb": "ListRecords", "resumptionToken": saved["token"]},
    ]


def test_a_lost_state_file_creates_nothing_twice(tmp_path: Path) -> None:
    archive, repository = MemoryArchive(), RecordedRepository("zenodo")
    importer(archive, repository, tmp_path / "first.json").run()
    summary = importer(archive, repository, tmp_path / "second.json").run()
    assert summary.created == [] and len(summary.present) == 8
    assert len(archive.held) == 8


def test_a_record_deleted_at_the_source_after_its_import_becomes_a_tombstone(
    tmp_path: Path,
) -> None:
    only = re.sub(rb"<resumptionToken>.*</resumptionToken>", b"", pages_of("eprints")[0])
    first = RecordedRepository("eprints", pages=[only])
    archive = MemoryArchive()
    importer(archive, first, tmp_path / "state.json").run()
    assert archive.imported() == {"oai:www.ucm.es:28974": "Original"}

    gone = only.replace(b"<header>", b'<header status="deleted">')
    summary = importer(
        archive, RecordedRepository("eprints", pages=[gone]), tmp_path / "state.json"
    ).run()
    assert [i for i, _ in summary.tombstoned] == ["oai:www.ucm.es:28974"]
    assert archive.imported() == {"oai:www.ucm.es:28974": "Deleted"}

    back = importer(archive, first, tmp_path / "other.json").run()  # state lost, record back
    assert back.created == [] and "tombstone" in back.skipped[0][1]


def test_a_busy_repository_is_asked_again_after_its_retry_after(tmp_path: Path) -> None:
    repository = RecordedRepository("eprints")
    repository.queued.append((503, {"Retry-After": "42"}, b"busy"))
    waits: list[float] = []
    run = importer(MemoryArchive(), repository, tmp_path / "state.json", sleep=waits.append)
    assert len(run.run().created) == 1
    assert waits == [42.0]


def test_a_repository_that_stays_busy_stops_the_import_saying_so(tmp_path: Path) -> None:
    repository = RecordedRepository("eprints")
    repository.queued += [(503, {}, b"busy")] * 6
    with pytest.raises(HarvestError, match="still answered 503 after 5 retries"):
        importer(MemoryArchive(), repository, tmp_path / "state.json").run()


def test_an_expired_token_reads_the_list_again_from_its_start(tmp_path: Path) -> None:
    repository, state = RecordedRepository("zenodo"), tmp_path / "state.json"
    crashing = CrashingArchive(after=4)
    with pytest.raises(Crash):
        importer(crashing, repository, state).run()
    saved = json.loads(state.read_text())
    saved["token"] = "expired"
    state.write_text(json.dumps(saved))
    archive = MemoryArchive()
    archive.held, archive.keys, archive._serial = crashing.held, crashing.keys, crashing._serial
    summary = importer(archive, repository, state).run()
    assert len(summary.created) == 4 and len(summary.present) == 4
    assert len(archive.held) == 8
    assert repository.requests[-4]["resumptionToken"] == "expired"
    assert "resumptionToken" not in repository.requests[-3]


def test_no_matching_records_is_an_empty_import(tmp_path: Path) -> None:
    body = (Path(__file__).parents[1] / "fixtures/oai/zenodo/noRecordsMatch.xml").read_bytes()
    repository = RecordedRepository("zenodo")
    repository.queued.append((422, {"Content-Type": "text/xml"}, body))
    summary = importer(MemoryArchive(), repository, tmp_path / "state.json").run()
    assert summary.pages == 0 and summary.created == []


def test_an_archive_refusal_is_that_records_error_and_the_rest_go_on(tmp_path: Path) -> None:
    class Refusing(MemoryArchive):
        def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> Any:
            if body["oai_source"]["identifier"] == "hdl:1765/449":
                raise ApiError(400, "dc: too long")
            return super().create(body, idempotency_key=idempotency_key)

    archive = Refusing()
    summary = importer(archive, RecordedRepository("dspace"), tmp_path / "state.json").run()
    assert summary.errors == [("hdl:1765/449", "400 Bad Request: dc: too long")]
    assert len(summary.created) == 11
    assert json.loads((tmp_path / "state.json").read_text())["failed"] == {
        "hdl:1765/449": "400 Bad Request: dc: too long"
    }


def test_a_state_file_of_another_import_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    importer(MemoryArchive(), RecordedRepository("eprints"), path).run()
    with pytest.raises(HarvestError, match="state of another import"):
        ImportState.load(path, archive=ARCHIVE, repository=BASE, set_spec="x", from_date=None)


def test_fetch_copies_files_in_and_reports_pages_left_out(tmp_path: Path) -> None:
    def fetch(url: str, directory: Path, max_bytes: int, timeout: float) -> Fetched | str:
        if url.endswith(".pdf"):
            path = directory / "a"
            path.write_bytes(b"%PDF-1.4 thesis")
            return Fetched(path, "T35886.pdf", "application/pdf", url)
        return f"{url}: a web page (text/html), not a file"

    archive = MemoryArchive()
    repository = RecordedRepository("eprints")
    summary = importer(archive, repository, tmp_path / "s.json", downloader=fetch, fetch=True).run()
    ((label, item),) = archive.held.items()
    assert "url" not in item
    sha256 = hashlib.sha256(b"%PDF-1.4 thesis").hexdigest()
    assert archive.uploads[label] == [("T35886.pdf", sha256, 15, "application/pdf")]
    assert summary.files == [
        ("oai:www.ucm.es:28974", "http://eprints.ucm.es/28974/: a web page (text/html), not a file")
    ]
