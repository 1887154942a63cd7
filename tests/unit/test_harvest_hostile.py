"""Issue 35, the importer's parser and loops: a hostile repository's answers (entities smuggled
past a DOCTYPE guard, 40k subjects, a list that never ends, a 12 MiB record, control characters)
and the Archive's refusals (422 IdempotencyKeyReused), against the in-memory Archive."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from ibi.client import ApiError, Raw
from ibi_tools.harvest import HarvestError, dublin_core, parse_page
from ibi_tools.harvest.command import print_summary
from ibi_tools.harvest.importer import MAX_IDLE_PAGES
from ibi_tools.harvest.oai import MAX_RECORD_BYTES
from tests.oai_fixtures import RecordedRepository, pages_of
from tests.unit.test_harvest import MemoryArchive, importer

NS = (
    'xmlns="http://www.openarchives.org/OAI/2.0/" '
    'xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/"'
)


def page(records: str, token: str | None = None) -> bytes:
    """A ListRecords answer holding ``records`` (XML text), with ``token`` when given."""
    resumption = f"<resumptionToken>{token}</resumptionToken>" if token else ""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><OAI-PMH {NS}><responseDate>2026-12-01T00:00:00Z'
        f"</responseDate><request>http://repository.example/oai</request><ListRecords>"
        f"{records}{resumption}</ListRecords></OAI-PMH>"
    ).encode()


def record(identifier: str, metadata: str = "<dc:title>A title</dc:title>") -> str:
    return (
        f"<record><header><identifier>{identifier}</identifier><datestamp>2026-01-01</datestamp>"
        f"</header><metadata><oai_dc:dc>{metadata}</oai_dc:dc></metadata></record>"
    )


class Bounded:
    """A repository's ``get`` port that fails the test past ``limit`` requests (today's code
    looped forever on these lists)."""

    def __init__(self, answer: Callable[[str], Raw], limit: int = 50) -> None:
        self.answer, self.limit, self.urls = answer, limit, list[str]()

    def get(self, url: str, timeout: float) -> Raw:
        self.urls.append(url)
        assert len(self.urls) <= self.limit, f"the import asked {len(self.urls)} pages: a loop"
        return self.answer(url)


def bounded(repository: RecordedRepository) -> RecordedRepository:
    recorded = repository.get
    guard = Bounded(lambda url: recorded(url, 5.0))
    repository.get = guard.get  # type: ignore[method-assign]
    return repository


# ---------------------------------------------------------------------------- the parser

BOMB = (
    '<!DOCTYPE OAI-PMH [<!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">'
    '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
)
ENTITY_RECORD = record("oai:x:1", "<dc:title>&c;</dc:title>")


@pytest.mark.parametrize(
    "body",
    [
        # a comment holding "<a" before the DOCTYPE: the old guard took it for the root
        b'<?xml version="1.0"?><!-- <a -->' + BOMB.encode() + page(ENTITY_RECORD).split(b"?>")[1],
        # UTF-16: the old guard looked for the ASCII bytes of "<!DOCTYPE"
        (
            '<?xml version="1.0" encoding="UTF-16"?>'
            + BOMB
            + page(ENTITY_RECORD).decode().split("?>")[1]
        ).encode("utf-16"),
    ],
    ids=["doctype-after-a-comment", "utf-16"],
)
def test_a_doctype_is_refused_wherever_and_however_it_is_written(body: bytes) -> None:
    with pytest.raises(HarvestError, match="declares a DOCTYPE") as raised:
        parse_page(body)
    assert "refused" in str(raised.value)


def test_an_answer_in_utf_16_without_a_doctype_is_read() -> None:
    text = page(record("oai:x:1", "<dc:title>Título</dc:title>")).decode()
    body = text.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")
    assert parse_page(body).records[0].dc == {"title": ("Título",)}


def test_forty_thousand_distinct_subjects_are_read_in_linear_time() -> None:
    subjects = "".join(f"<dc:subject>s{n}</dc:subject>" for n in range(40_000))
    metadata = ElementTree.fromstring(
        f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">{subjects}'
        "<dc:subject>s7</dc:subject></metadata>"
    )
    started = time.perf_counter()
    dc = dublin_core(metadata)
    elapsed = time.perf_counter() - started
    assert len(dc["subject"]) == 40_000 and dc["subject"][:2] == ("s0", "s1")
    assert elapsed < 1.0, f"{elapsed:.2f} s (the quadratic deduplication took 8.7 s)"


def test_a_record_over_the_record_limit_is_unusable_with_its_reason_and_the_page_read() -> None:
    huge = "<dc:description>" + "x" * (MAX_RECORD_BYTES + 10) + "</dc:description>"
    many = "<dc:subject>x</dc:subject>" * (MAX_RECORD_BYTES // 20)
    body = page(record("oai:x:1") + record("oai:x:2", huge) + record("oai:x:3", many))
    records = parse_page(body).records
    assert [r.identifier for r in records] == ["oai:x:1", "oai:x:2", "oai:x:3"]
    assert records[0].unusable is None and records[0].dc == {"title": ("A title",)}
    for oversized in records[1:]:
        assert oversized.dc == {} and oversized.unusable is not None
        assert f"over {MAX_RECORD_BYTES} bytes" in oversized.unusable


# ---------------------------------------------------------------------------- the list


def test_a_token_given_again_stops_the_list_naming_it_and_the_state_stays_resumable(
    tmp_path: Path,
) -> None:
    first = pages_of("eprints")[0]  # its token is "from%3D2015…"; the page after: the same
    repository = bounded(RecordedRepository("eprints", pages=[first, first]))
    state = tmp_path / "state.json"
    summary = importer(MemoryArchive(), repository, state).run()
    assert summary.stopped is not None and "gave the resumption token" in summary.stopped
    assert "again" in summary.stopped and summary.pages == 2
    assert len(summary.created) == 1
    saved = json.loads(state.read_text())
    assert saved["token"] is not None and not saved["complete"]
    assert saved["stopped"] == summary.stopped

    again = importer(MemoryArchive(), repository, state).run()  # the same command: one page
    assert again.pages == 1 and again.stopped is not None


def test_two_alternating_tokens_stop_the_list(tmp_path: Path) -> None:
    live = record("oai:x:1")

    def alternating(url: str) -> Raw:
        token = "B" if url.endswith("resumptionToken=A") else "A"
        return Raw(200, {}, page(live, token))

    repository = Bounded(alternating)
    run = importer(MemoryArchive(), RecordedRepository("eprints"), tmp_path / "s.json")
    run._get = repository.get
    summary = run.run()
    assert summary.stopped is not None and "'A' again" in summary.stopped
    assert len(repository.urls) == 3


def test_pages_that_bring_nothing_new_stop_the_list(tmp_path: Path) -> None:
    counter = iter(range(1, 10**6))

    def empty(url: str) -> Raw:  # a new token every time, and no record (or the same again)
        n = next(counter)
        return Raw(200, {}, page(record("oai:x:1") if n % 2 else "", f"t{n}"))

    repository = Bounded(empty)
    run = importer(MemoryArchive(), RecordedRepository("eprints"), tmp_path / "s.json")
    run._get = repository.get
    summary = run.run()
    assert summary.stopped is not None
    assert f"{MAX_IDLE_PAGES} pages in a row brought no record not read before" in summary.stopped
    assert len(repository.urls) == 1 + MAX_IDLE_PAGES


# ---------------------------------------------------------------------------- one record


class GatewayArchive(MemoryArchive):
    """As the Archive behind its gateway: a body over 10 MiB is cut off (no answer)."""

    def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> Any:
        if len(json.dumps(body)) > 10 << 20:
            raise ApiError(0, "cannot reach the Archive: Connection reset by peer")
        return super().create(body, idempotency_key=idempotency_key)


def test_a_12_mib_record_is_skipped_with_its_reason_and_every_run_goes_on(
    tmp_path: Path,
) -> None:
    huge = "<dc:description>" + "x" * (12 << 20) + "</dc:description>"
    body = page(record("oai:x:1") + record("oai:x:big", huge) + record("oai:x:3"))
    repository = RecordedRepository("eprints", pages=[body])
    archive, state = GatewayArchive(), tmp_path / "state.json"
    summary = importer(archive, repository, state).run()
    assert [i for i, _ in summary.created] == ["oai:x:1", "oai:x:3"]
    ((skipped, why),) = summary.skipped
    assert skipped == "oai:x:big" and f"over {MAX_RECORD_BYTES} bytes" in why
    saved = json.loads(state.read_text())
    assert saved["skipped"] == {"oai:x:big": why} and saved["complete"]

    again = importer(archive, repository, state).run()
    assert again.skipped == summary.skipped and len(again.present) == 2


def test_a_record_with_no_identifier_is_skipped_and_the_rest_go_on(tmp_path: Path) -> None:
    body = page(record("") + "<record><metadata/></record>" + record("oai:x:3"))
    summary = importer(
        MemoryArchive(), RecordedRepository("eprints", pages=[body]), tmp_path / "s.json"
    ).run()
    assert summary.skipped == [("(none)", "a record with no identifier")] * 2
    assert [i for i, _ in summary.created] == ["oai:x:3"]


def test_an_idempotency_key_reused_by_the_archive_is_that_records_error(tmp_path: Path) -> None:
    class Reused(MemoryArchive):
        def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> Any:
            if body["oai_source"]["identifier"] == "hdl:1765/449":
                raise ApiError(
                    422, "this Idempotency-Key was used with another body", "IdempotencyKeyReused"
                )
            return super().create(body, idempotency_key=idempotency_key)

    state = tmp_path / "state.json"
    summary = importer(Reused(), RecordedRepository("dspace"), state).run()
    expected = "422 IdempotencyKeyReused: this Idempotency-Key was used with another body"
    assert summary.errors == [("hdl:1765/449", expected)]
    assert len(summary.created) == 11
    assert json.loads(state.read_text())["failed"] == {"hdl:1765/449": expected}


def test_an_archive_answer_without_an_ibi_is_that_records_error(tmp_path: Path) -> None:
    class Odd(MemoryArchive):
        def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> Any:
            return {"message": "created?"}

    summary = importer(Odd(), RecordedRepository("eprints"), tmp_path / "s.json").run()
    ((identifier, why),) = summary.errors
    assert identifier == "oai:www.ucm.es:28974" and "answered no IBI" in why


# ---------------------------------------------------------------------------- the terminal

ESCAPE = "\x1b]0;owned\x07\x1b[2J"


def test_remote_text_reaches_the_terminal_with_its_controls_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class Refusing(MemoryArchive):
        def create(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> Any:
            raise ApiError(422, f"refused {ESCAPE}", "IdempotencyKeyReused")

    body = page(record("oai:x:1\u009b2J"))  # (a C1 control: XML 1.0 allows them)
    progress = io.StringIO()
    run = importer(Refusing(), RecordedRepository("eprints", pages=[body]), tmp_path / "s.json")
    run._progress = progress
    run.say(f"the repository said {ESCAPE}")
    summary = run.run()
    print_summary(summary, tmp_path / "s.json", as_json=False)
    printed = capsys.readouterr().out + progress.getvalue()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", printed), printed
    assert "\\x1b[2J" in printed and "refused \\x1b]0;owned\\x07" in printed
    assert "oai:x:1\\x9b2J" in printed
