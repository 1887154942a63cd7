"""An item keeps the OAI-PMH record it was imported from (``oai_source``, issue 28): given at
``POST /api/items``, checked, kept by the store and by its tombstone, refused elsewhere."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from functions.archive.errors import BadRequest
from functions.archive.mapping import item_from_mapping, item_to_mapping
from functions.archive.service import ArchiveService
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryItemStore, MemoryMinter

SOURCE = {
    "repository": "https://zenodo.org/oai2d",
    "identifier": "oai:zenodo.org:8435696",
    "datestamp": "2023-10-12T14:26:07Z",
}


@pytest.fixture
def service() -> ArchiveService:
    return ArchiveService(
        MemoryItemStore(), clock=FakeClock(Decimal(1795473000)), mint=MemoryMinter()
    )


def test_a_new_original_keeps_the_record_it_was_imported_from(service: ArchiveService) -> None:
    item = service.create_original({"dc": {"title": ["A"]}, "oai_source": SOURCE})
    assert item_to_mapping(item)["oai_source"] == SOURCE
    stored = item_from_mapping(json.loads(json.dumps(item_to_mapping(item))), item.version)
    assert stored == item
    gone = service.delete(item.key)
    assert item_to_mapping(gone)["oai_source"] == SOURCE  # the tombstone still says so


def test_an_item_not_imported_has_no_source(service: ArchiveService) -> None:
    item = service.create_original({"dc": {"title": ["A"]}, "oai_source": None})
    assert item_to_mapping(item)["oai_source"] is None
    assert item_from_mapping(item_to_mapping(item)).oai_source is None


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("oai:zenodo.org:1", '"oai_source" is {"repository"'),
        ({"identifier": "oai:x:1"}, '"oai_source" is {"repository"'),
        ({**SOURCE, "set": "x"}, '"oai_source" is {"repository"'),
        ({**SOURCE, "identifier": 12}, '"oai_source" is {"repository"'),
        ({**SOURCE, "repository": "ftp://x/oai"}, "not an http(s) base URL"),
        ({**SOURCE, "identifier": "oai x"}, "no spaces or controls"),
        ({**SOURCE, "identifier": ""}, "no spaces or controls"),
        ({**SOURCE, "identifier": "x" * 1025}, "no spaces or controls"),
        ({**SOURCE, "datestamp": "12 Oct 2023"}, "YYYY-MM-DD"),
    ],
)
def test_a_malformed_source_is_refused_saying_what_to_send(
    service: ArchiveService, source: object, says: str
) -> None:
    with pytest.raises(BadRequest, match=says.replace("(", r"\(").replace(")", r"\)")):
        service.create_original({"oai_source": source})


def test_only_a_new_original_takes_a_source(service: ArchiveService) -> None:
    item = service.create_original({"dc": {"title": ["A"]}})
    with pytest.raises(BadRequest, match="unknown field"):
        service.update(item.key, {"oai_source": SOURCE})
