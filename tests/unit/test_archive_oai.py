"""OAI-PMH 2.0 over an Archive in memory: every verb, every error code, from/until, sets,
tombstones and resumption tokens; every answer valid against OAI-PMH.xsd and oai_dc.xsd."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from decimal import Decimal
from urllib.parse import urlencode

import pytest
from lxml import etree

from functions.archive.errors import BadRequest
from functions.archive.model import Forms, Item, State
from functions.archive.oai import PREFIX, Repository, archive_repository
from functions.archive.service import ArchiveService
from tests.fakes import FakeClock
from tests.fakes_archive import MemoryItemStore, MemoryMinter
from tests.schemas import validated

BASE = "https://archive.example.org"
START = Decimal(1795473000)  # 2026-11-23T22:30:00Z
DAY = 86400
NS = {"o": "http://www.openarchives.org/OAI/2.0/", "dc": "http://purl.org/dc/elements/1.1/"}


class Archive:
    """An Archive's items and its OAI-PMH repository (two records a page)."""

    def __init__(self, page_size: int = 2) -> None:
        self.store = MemoryItemStore()
        self.clock = FakeClock(START)
        self.service = ArchiveService(self.store, clock=self.clock, mint=MemoryMinter())
        self.service_item = self.service.bootstrap(BASE)
        self.repository: Repository = archive_repository(
            self.store,
            address="archive.example.org",
            service_ibi=self.service_item.key,
            base_url=BASE,
            admin_email="ibi-admin@example.org",
            clock=self.clock,
            page_size=page_size,
        )

    def deposit(self, title: str, *, at: Decimal | None = None, **fields: object) -> Item:
        if at is not None:
            self.clock.now = at
        return self.service.create_original({"dc": {"title": [title]}, **fields})

    def ask(self, **arguments: str) -> etree._Element:
        """The answer to a GET with ``arguments``, once it is valid OAI-PMH."""
        return validated(self.repository.answer(urlencode(arguments)))

    def ask_raw(self, query: str) -> etree._Element:
        return validated(self.repository.answer(query))


def error_codes(answer: etree._Element) -> list[str]:
    return [e.get("code") for e in answer.findall("o:error", NS)]


def request_attributes(answer: etree._Element) -> dict[str, str]:
    return dict(answer.find("o:request", NS).attrib)


def identifiers(answer: etree._Element) -> list[str]:
    return [e.text for e in answer.iterfind(".//o:header/o:identifier", NS)]


def token(answer: etree._Element) -> etree._Element | None:
    return answer.find(".//o:resumptionToken", NS)


def harvest(
    archive: Archive, verb: str, **arguments: str
) -> tuple[list[str], list[etree._Element]]:
    """Every identifier of a list, following its resumption tokens; and each answer."""
    answers = [archive.ask(verb=verb, **arguments)]
    while (resume := token(answers[-1])) is not None and resume.text:
        answers.append(archive.ask(verb=verb, resumptionToken=resume.text))
    return [i for answer in answers for i in identifiers(answer)], answers


@pytest.fixture
def archive() -> Archive:
    return Archive()


# -- Identify, ListMetadataFormats, ListSets ---------------------------------------------------


def test_identify_names_the_endpoint_the_granularity_and_persistent_deletions(
    archive: Archive,
) -> None:
    answer = archive.ask(verb="Identify")
    identify = answer.find("o:Identify", NS)
    fields = {etree.QName(e).localname: e.text for e in identify}
    assert fields["baseURL"] == f"{BASE}/oai"
    assert fields["protocolVersion"] == "2.0"
    assert fields["adminEmail"] == "ibi-admin@example.org"
    assert fields["deletedRecord"] == "persistent"
    assert fields["granularity"] == "YYYY-MM-DDThh:mm:ssZ"
    assert fields["earliestDatestamp"] == "2026-11-23T00:00:00Z"  # the service IBI's day
    assert archive.service_item.key in fields["repositoryName"]
    assert request_attributes(answer) == {"verb": "Identify"}
    assert answer.find("o:request", NS).text == f"{BASE}/oai"


def test_local_modes_dotless_admin_address_is_written_so_the_schema_takes_it() -> None:
    archive = Archive()
    repository = archive_repository(
        archive.store,
        address="127.0.0.1:8810",
        service_ibi=archive.service_item.key,
        base_url="http://127.0.0.1:8810",
        admin_email="admin@localhost",
        clock=archive.clock,
    )
    answer = validated(repository.answer("verb=Identify"))
    assert answer.findtext(".//o:adminEmail", namespaces=NS) == "admin@localhost.localdomain"


def test_earliest_datestamp_is_no_later_than_any_record(archive: Archive) -> None:
    archive.deposit("first")
    earliest = archive.ask(verb="Identify").findtext(".//o:earliestDatestamp", namespaces=NS)
    stamps = archive.ask(verb="ListIdentifiers", metadataPrefix="oai_dc").iterfind(
        ".//o:datestamp", NS
    )
    assert all(earliest <= stamp.text for stamp in stamps)


def test_list_metadata_formats_is_oai_dc_for_the_repository_and_for_an_item(
    archive: Archive,
) -> None:
    item = archive.deposit("a report")
    for answer in (
        archive.ask(verb="ListMetadataFormats"),
        archive.ask(verb="ListMetadataFormats", identifier=PREFIX + item.key),
    ):
        formats = answer.findall(".//o:metadataFormat", NS)
        assert [f.findtext("o:metadataPrefix", namespaces=NS) for f in formats] == ["oai_dc"]
        assert formats[0].findtext("o:metadataNamespace", namespaces=NS) == (
            "http://www.openarchives.org/OAI/2.0/oai_dc/"
        )


def test_list_metadata_formats_of_an_unknown_identifier_is_id_does_not_exist(
    archive: Archive,
) -> None:
    answer = archive.ask(verb="ListMetadataFormats", identifier=PREFIX + "8JMKD3MGP8W/35MME4E")
    assert error_codes(answer) == ["idDoesNotExist"]
    assert request_attributes(answer)["identifier"] == PREFIX + "8JMKD3MGP8W/35MME4E"


def test_list_sets_are_the_content_types(archive: Archive) -> None:
    answer = archive.ask(verb="ListSets")
    specs = [s.text for s in answer.iterfind(".//o:setSpec", NS)]
    assert specs == ["Data", "Metadata"]
    assert token(answer) is None


def test_list_sets_takes_no_resumption_token(archive: Archive) -> None:
    answer = archive.ask(verb="ListSets", resumptionToken="anything")
    assert error_codes(answer) == ["badResumptionToken"]


# -- GetRecord --------------------------------------------------------------------------------


def test_get_record_answers_the_oai_dc_record_by_either_form_of_the_ibi(archive: Archive) -> None:
    item = archive.deposit("Sensoriamento remoto", language="pt")
    assert item.ibi.rep and item.ibi.ibip
    for asked in (PREFIX + item.key, PREFIX + item.ibi.rep, item.ibi.ibip, item.ibi.rep):
        answer = archive.ask(verb="GetRecord", identifier=asked, metadataPrefix="oai_dc")
        record = answer.find("o:GetRecord/o:record", NS)
        assert record.findtext("o:header/o:identifier", namespaces=NS) == PREFIX + item.key
        assert record.findtext("o:header/o:setSpec", namespaces=NS) == "Data"
        assert record.findtext("o:header/o:datestamp", namespaces=NS) == "2026-11-23T22:30:00Z"
        dc = record.find("o:metadata/{http://www.openarchives.org/OAI/2.0/oai_dc/}dc", NS)
        assert dc.findtext("dc:title", namespaces=NS) == "Sensoriamento remoto"
        persistent = f"http://urlib.net/{item.key}"  # (no resolver joined: urlib.net's)
        identifiers = [e.text for e in dc.iterfind("dc:identifier", NS)]
        assert identifiers == [persistent, *item.ibi.labels]


def test_get_record_of_a_deleted_item_is_a_tombstone(archive: Archive) -> None:
    item = archive.deposit("withdrawn")
    archive.clock.now = START + 60
    archive.service.delete(item.key)
    answer = archive.ask(verb="GetRecord", identifier=PREFIX + item.key, metadataPrefix="oai_dc")
    record = answer.find("o:GetRecord/o:record", NS)
    assert record.find("o:header", NS).get("status") == "deleted"
    assert record.findtext("o:header/o:datestamp", namespaces=NS) == "2026-11-23T22:31:00Z"
    assert record.find("o:metadata", NS) is None


@pytest.mark.parametrize(
    "identifier",
    [
        PREFIX + "8JMKD3MGP8W/35MME4E",  # an IBI held nowhere here
        "oai:elsewhere.org:8JMKD3MGP8W/35MME4E",  # another scheme
        PREFIX + "not-an-ibi",
    ],
)
def test_get_record_of_what_is_not_held_is_id_does_not_exist(
    archive: Archive, identifier: str
) -> None:
    answer = archive.ask(verb="GetRecord", identifier=identifier, metadataPrefix="oai_dc")
    assert error_codes(answer) == ["idDoesNotExist"]
    assert request_attributes(answer) == {
        "verb": "GetRecord",
        "identifier": identifier,
        "metadataPrefix": "oai_dc",
    }


def test_neither_the_service_item_nor_an_incoming_transfer_is_a_record(archive: Archive) -> None:
    incoming = replace(archive.deposit("arriving"), ibi=Forms(ibip="8JMKD3MGP8W/35MME4E"))
    archive.store.create(replace(incoming, pending=True))
    for item in (archive.service_item, incoming):
        answer = archive.ask(
            verb="GetRecord", identifier=PREFIX + item.key, metadataPrefix="oai_dc"
        )
        assert error_codes(answer) == ["idDoesNotExist"]
    listed, _ = harvest(archive, "ListIdentifiers", metadataPrefix="oai_dc")
    assert PREFIX + archive.service_item.key not in listed
    assert PREFIX + incoming.key not in listed


def test_get_record_in_another_format_cannot_be_disseminated(archive: Archive) -> None:
    item = archive.deposit("a report")
    answer = archive.ask(verb="GetRecord", identifier=PREFIX + item.key, metadataPrefix="marc21")
    assert error_codes(answer) == ["cannotDisseminateFormat"]


# -- lists and resumption tokens ---------------------------------------------------------------


@pytest.mark.parametrize("verb", ["ListIdentifiers", "ListRecords"])
def test_a_list_longer_than_a_page_comes_whole_through_its_tokens(
    archive: Archive, verb: str
) -> None:
    items = [archive.deposit(f"report {n}", at=START + n) for n in range(7)]
    archive.service.delete(items[3].key)
    listed, answers = harvest(archive, verb, metadataPrefix="oai_dc")
    assert sorted(listed) == sorted(PREFIX + item.key for item in items)
    assert len(answers) == 4  # 2 + 2 + 2 + 1
    tokens = [token(answer) for answer in answers]
    assert [t.get("cursor") for t in tokens] == ["0", "2", "4", "6"]
    assert [bool(t.text) for t in tokens] == [True, True, True, False]  # the last one empty
    deleted = [
        h for a in answers for h in a.iterfind(".//o:header", NS) if h.get("status") == "deleted"
    ]
    assert [h.findtext("o:identifier", namespaces=NS) for h in deleted] == [PREFIX + items[3].key]
    if verb == "ListRecords":
        assert sum(1 for a in answers for _ in a.iterfind(".//o:metadata", NS)) == 6


def test_a_list_that_fits_one_page_has_no_token(archive: Archive) -> None:
    archive.deposit("only one")
    answer = archive.ask(verb="ListRecords", metadataPrefix="oai_dc")
    assert len(identifiers(answer)) == 1 and token(answer) is None


def test_a_resumed_request_echoes_only_its_token(archive: Archive) -> None:
    for n in range(3):
        archive.deposit(f"report {n}")
    first = archive.ask(verb="ListIdentifiers", metadataPrefix="oai_dc", set="Data")
    text = token(first).text
    answer = archive.ask(verb="ListIdentifiers", resumptionToken=text)
    assert request_attributes(answer) == {"verb": "ListIdentifiers", "resumptionToken": text}
    assert len(identifiers(answer)) == 1


def test_the_token_carries_the_arguments_and_where_the_list_resumes(archive: Archive) -> None:
    for n in range(5):
        archive.deposit(f"report {n}", at=START + n * DAY)
    until = "2026-11-26"  # the first four
    listed, answers = harvest(archive, "ListRecords", metadataPrefix="oai_dc", until=until)
    assert len(listed) == 4 and len(answers) == 2
    data = json.loads(base64.urlsafe_b64decode(token(answers[0]).text + "=="))
    assert data["until"] == until and data["cursor"] == 2
    stamp, key = data["after"]["Data"]  # the last record sent, in its set's index
    assert PREFIX + key == identifiers(answers[0])[-1]
    assert stamp == int(START + DAY) and data["done"] == ["Metadata"]


@pytest.mark.parametrize(
    "bad",
    [
        "garbage!",
        base64.urlsafe_b64encode(b"not json").decode().rstrip("="),
        base64.urlsafe_b64encode(b'{"verb": "ListRecords"}').decode().rstrip("="),
        base64.urlsafe_b64encode(
            b'{"verb":"ListRecords","metadata_prefix":"oai_dc","after":"x","cursor":2,"bogus":1}'
        ).decode(),
        base64.urlsafe_b64encode(
            b'{"verb":"ListRecords","metadata_prefix":"oai_dc","after":"x","cursor":2,'
            b'"until":"yesterday"}'
        ).decode(),
    ],
)
def test_a_token_the_archive_did_not_make_is_bad(archive: Archive, bad: str) -> None:
    archive.deposit("a report")
    answer = archive.ask(verb="ListRecords", resumptionToken=bad)
    assert error_codes(answer) == ["badResumptionToken"]


def test_a_token_of_one_verb_is_bad_for_another(archive: Archive) -> None:
    for n in range(3):
        archive.deposit(f"report {n}")
    text = token(archive.ask(verb="ListRecords", metadataPrefix="oai_dc")).text
    answer = archive.ask(verb="ListIdentifiers", resumptionToken=text)
    assert error_codes(answer) == ["badResumptionToken"]


def test_a_page_is_full_even_when_most_of_the_table_is_filtered_out() -> None:
    archive = Archive(page_size=3)
    for n in range(10):
        archive.deposit(f"report {n}", at=START + n * DAY)
    archive.deposit("a catalogue", at=START + 11 * DAY, content_type="Metadata")
    answer = archive.ask(verb="ListIdentifiers", metadataPrefix="oai_dc", set="Metadata")
    assert len(identifiers(answer)) == 1 and token(answer) is None
    listed, _ = harvest(archive, "ListIdentifiers", metadataPrefix="oai_dc", set="Data")
    assert len(listed) == 10


# -- from, until, sets -------------------------------------------------------------------------


@pytest.fixture
def dated(archive: Archive) -> list[Item]:
    """Three items a day apart: 2026-11-23T22:30:00Z, 24th, 25th (same time)."""
    return [archive.deposit(f"day {n}", at=START + n * DAY) for n in range(3)]


@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ({"from": "2026-11-24"}, [1, 2]),
        ({"until": "2026-11-24"}, [0, 1]),  # a day until takes the whole day
        ({"from": "2026-11-24", "until": "2026-11-24"}, [1]),
        ({"from": "2026-11-24T22:30:00Z"}, [1, 2]),  # from is inclusive, to the second
        ({"from": "2026-11-24T22:30:01Z"}, [2]),
        ({"until": "2026-11-24T22:30:00Z"}, [0, 1]),  # until too
        ({"until": "2026-11-24T22:29:59Z"}, [0]),
    ],
)
def test_from_and_until_select_by_datestamp(
    archive: Archive, dated: list[Item], bounds: dict[str, str], expected: list[int]
) -> None:
    listed, _ = harvest(archive, "ListIdentifiers", metadataPrefix="oai_dc", **bounds)
    assert sorted(listed) == sorted(PREFIX + dated[n].key for n in expected)


def test_a_change_moves_an_item_into_a_later_harvest(archive: Archive, dated: list[Item]) -> None:
    archive.clock.now = START + 5 * DAY
    archive.service.delete(dated[0].key)
    listed, _ = harvest(
        archive, "ListIdentifiers", metadataPrefix="oai_dc", **{"from": "2026-11-28"}
    )
    assert listed == [PREFIX + dated[0].key]


def test_nothing_in_the_range_is_no_records_match(archive: Archive, dated: list[Item]) -> None:
    answer = archive.ask(verb="ListRecords", metadataPrefix="oai_dc", **{"from": "2030-01-01"})
    assert error_codes(answer) == ["noRecordsMatch"]
    assert request_attributes(answer)["from"] == "2030-01-01"


def test_an_empty_archive_has_no_records(archive: Archive) -> None:
    answer = archive.ask(verb="ListIdentifiers", metadataPrefix="oai_dc")
    assert error_codes(answer) == ["noRecordsMatch"]


def test_sets_select_by_content_type(archive: Archive) -> None:
    data = archive.deposit("a dataset")
    catalogue = archive.deposit("a catalogue", content_type="Metadata")
    for spec, item in (("Data", data), ("Metadata", catalogue)):
        answer = archive.ask(verb="ListRecords", metadataPrefix="oai_dc", set=spec)
        assert identifiers(answer) == [PREFIX + item.key]
        assert answer.findtext(".//o:header/o:setSpec", namespaces=NS) == spec
    answer = archive.ask(verb="ListRecords", metadataPrefix="oai_dc", set="Software")
    assert error_codes(answer) == ["noRecordsMatch"]


# -- bad verbs and bad arguments ---------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    ["", "verb=Dance", "verb=Identify&verb=Identify", "verb=identify", "metadataPrefix=oai_dc"],
)
def test_a_missing_unknown_or_repeated_verb_is_bad_verb(archive: Archive, query: str) -> None:
    answer = archive.ask_raw(query)
    assert error_codes(answer) == ["badVerb"]
    assert request_attributes(answer) == {}  # the base URL only (§3.6)


@pytest.mark.parametrize(
    "query",
    [
        "verb=Identify&metadataPrefix=oai_dc",  # an argument the verb does not take
        "verb=ListRecords",  # metadataPrefix missing
        "verb=GetRecord&metadataPrefix=oai_dc",  # identifier missing
        "verb=ListRecords&metadataPrefix=oai_dc&metadataPrefix=oai_dc",  # repeated
        "verb=ListRecords&metadataPrefix=oai_dc&resumptionToken=x",  # a token is exclusive
        "verb=ListRecords&metadataPrefix=",  # empty
        "verb=ListRecords&metadataPrefix=oai%20dc",  # not a metadataPrefix
        "verb=ListRecords&metadataPrefix=oai_dc&set=a%20b",  # not a setSpec
        "verb=ListRecords&metadataPrefix=oai_dc&from=yesterday",
        "verb=ListRecords&metadataPrefix=oai_dc&from=2026-02-30",
        "verb=ListRecords&metadataPrefix=oai_dc&from=2026-11-23T22:30:00.5Z",  # finer than ours
        "verb=ListRecords&metadataPrefix=oai_dc&from=2026-11-23T22:30:00",  # no Z
        "verb=ListRecords&metadataPrefix=oai_dc&from=2026-11-23&until=2026-11-24T00:00:00Z",
        "verb=ListRecords&metadataPrefix=oai_dc&from=2026-11-25&until=2026-11-24",
        "verb=GetRecord&metadataPrefix=oai_dc&identifier=a%20b",
        "verb=Identify&junk",
    ],
)
def test_bad_arguments_are_bad_argument(archive: Archive, query: str) -> None:
    archive.deposit("a report")
    answer = archive.ask_raw(query)
    assert error_codes(answer) == ["badArgument"]
    assert request_attributes(answer) == {}


def test_a_post_form_body_is_read_as_a_query_is(archive: Archive) -> None:
    item = archive.deposit("a report")
    body = urlencode(
        {"verb": "GetRecord", "identifier": PREFIX + item.key, "metadataPrefix": "oai_dc"}
    )
    answer = validated(archive.repository.answer(body))
    assert identifiers(answer) == [PREFIX + item.key]


# -- what deposits let into a record -----------------------------------------------------------


@pytest.mark.parametrize("character", ["\x00", "\x0b", "\x1b", "\x7f", "\ufffe"])
def test_a_deposit_with_a_control_character_in_its_metadata_is_refused(
    archive: Archive, character: str
) -> None:
    with pytest.raises(BadRequest, match=f"U\\+{ord(character):04X}"):
        archive.deposit(f"a{character}b")


def test_tab_and_line_breaks_are_kept_and_the_record_stays_valid(archive: Archive) -> None:
    item = archive.deposit("line one\nline two\r\n\tindented")
    answer = archive.ask(verb="GetRecord", identifier=PREFIX + item.key, metadataPrefix="oai_dc")
    assert answer.findtext(".//dc:title", namespaces=NS) == "line one\nline two\n\tindented"


def test_a_record_stored_before_the_refusal_still_parses(archive: Archive) -> None:
    old = Item(
        ibi=Forms(ibip="8JMKD3MGP8W/35MME4E"),
        state=State.ORIGINAL,
        timestamp=START,
        dc={"title": ("bell\x07 and \x00nul",)},
    )
    archive.store.create(old)
    answer = archive.ask(verb="GetRecord", identifier=PREFIX + old.key, metadataPrefix="oai_dc")
    assert answer.findtext(".//dc:title", namespaces=NS) == "bell\ufffd and \ufffdnul"


# -- the page size -----------------------------------------------------------------------------


def test_the_page_size_is_a_setting_within_bounds() -> None:
    from functions.archive.settings import ArchiveSettings, ConfigurationError

    assert ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "t"}).oai_page_size == 100
    given = {"IBI_ARCHIVE_TABLE": "t", "IBI_OAI_PAGE_SIZE": "5"}
    assert ArchiveSettings.from_environment(given).oai_page_size == 5
    for wrong in ("0", "1001", "many"):
        with pytest.raises(ConfigurationError, match="IBI_OAI_PAGE_SIZE must be a whole number"):
            ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "t", "IBI_OAI_PAGE_SIZE": wrong})
