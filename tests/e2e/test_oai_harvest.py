"""End to end: Sickle, a public OAI-PMH harvester, harvests a local Archive whole.

The Archive holds more items than one page (``IBI_OAI_PAGE_SIZE=3`` here), one of them
deleted; every answer Sickle gets is checked against OAI-PMH.xsd and oai_dc.xsd.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from sickle import Sickle
from sickle.response import OAIResponse

from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun
from tests.schemas import validated

pytestmark = pytest.mark.e2e

PAGE_SIZE = 3
PREFIX = "oai:urlib.net:"
NS = {"o": "http://www.openarchives.org/OAI/2.0/"}


class CheckedSickle(Sickle):  # type: ignore[misc]
    """Sickle, keeping every answer it gets once it is valid OAI-PMH."""

    def __init__(self, endpoint: str, **options: Any) -> None:
        super().__init__(endpoint, timeout=30, max_retries=0, **options)
        self.answers: list[bytes] = []

    def harvest(self, **kwargs: Any) -> OAIResponse:
        response = super().harvest(**kwargs)
        validated(response.http_response.content)
        self.answers.append(response.http_response.content)
        return response


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("IBI_OAI_PAGE_SIZE", str(PAGE_SIZE))
    run = LocalRun(tmp_path / "data", free_port()).start()
    yield run.archives[0]
    run.stop()


def deposit(archive: str, title: str, content_type: str = "Data") -> str:
    body = {"dc": {"title": [title], "creator": ["Banon, G."]}, "content_type": content_type}
    answer = requests.post(f"{archive}/api/items", json=body, timeout=30)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["ibi"]["ibip"])


def test_sickle_harvests_every_record_of_an_archive_larger_than_a_page(archive: str) -> None:
    held = [deposit(archive, f"Report {n}") for n in range(7)]
    held.append(deposit(archive, "A catalogue", "Metadata"))
    gone = held[2]
    assert requests.delete(f"{archive}/api/item", params={"ibi": gone}, timeout=30).ok

    sickle = CheckedSickle(f"{archive}/oai")
    identify = sickle.Identify()
    assert identify.baseURL == f"{archive}/oai" and identify.deletedRecord == "persistent"

    records = list(sickle.ListRecords(metadataPrefix="oai_dc"))
    assert sorted(r.header.identifier for r in records) == sorted(PREFIX + i for i in held)
    assert len(sickle.answers) == 1 + 3  # Identify, then 8 records three a page
    deleted = [r.header.identifier for r in records if r.header.deleted]
    assert deleted == [PREFIX + gone]
    titles = {r.metadata["title"][0] for r in records if not r.header.deleted}
    assert titles == {f"Report {n}" for n in range(7) if n != 2} | {"A catalogue"}

    catalogue = sickle.GetRecord(identifier=PREFIX + held[-1], metadataPrefix="oai_dc")
    assert catalogue.header.setSpecs == ["Metadata"]
    assert [s.setSpec for s in sickle.ListSets()] == ["Data", "Metadata"]
    assert [f.metadataPrefix for f in sickle.ListMetadataFormats()] == ["oai_dc"]


def test_post_harvest_and_protocol_errors(archive: str) -> None:
    held = [deposit(archive, f"Dataset {n}") for n in range(PAGE_SIZE + 1)]
    sickle = CheckedSickle(f"{archive}/oai", http_method="POST")
    headers = list(sickle.ListIdentifiers(metadataPrefix="oai_dc", set="Data"))
    assert sorted(h.identifier for h in headers) == sorted(PREFIX + i for i in held)
    assert len(sickle.answers) == 2

    for query, code in (
        ({"verb": "Harvest"}, "badVerb"),
        ({"verb": "ListRecords"}, "badArgument"),
        ({"verb": "ListRecords", "resumptionToken": "forged"}, "badResumptionToken"),
        ({"verb": "ListRecords", "metadataPrefix": "mods"}, "cannotDisseminateFormat"),
        ({"verb": "GetRecord", "metadataPrefix": "oai_dc", "identifier": "x"}, "idDoesNotExist"),
        (
            {"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "2999-01-01"},
            "noRecordsMatch",
        ),
    ):
        answer = requests.get(f"{archive}/oai", params=query, timeout=30)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/xml")
        errors = validated(answer.content).findall("o:error", NS)
        assert [e.get("code") for e in errors] == [code], query
