"""Content negotiation and FAIR Signposting through `ibi local`'s demo federation (issue 16):
the real resolver, two real Archives (the report's original in archive-a and its copy in
archive-b; a first edition in archive-a whose next edition archive-b holds), real HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from xml.etree import ElementTree

import bibtexparser
import pytest
from signposting import find_signposting_http, find_signposting_linkset
from signposting.linkheader import find_signposting_http_link

from functions.archive.signposting import MAX_ITEMS
from ibi.client import ArchiveClient
from ibi.core import citation
from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun
from tests.e2e.test_local_federation import fetch, printed_urls

pytestmark = pytest.mark.e2e
LICENSE = "https://creativecommons.org/licenses/by/4.0/"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRun]:
    run = LocalRun(tmp_path_factory.mktemp("negotiation") / "data", free_port(), demo=True)
    run.start()
    try:
        yield run
    finally:
        run.stop()


def get(url: str, accept: str) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.headers["Content-Type"], response.read().decode()


def test_the_printed_curl_example_returns_the_reports_bibtex(demo: LocalRun) -> None:
    examples = [line.split() for line in demo.banner if line.strip().startswith("curl -H")]
    bibtex = next(words for words in examples if "application/x-bibtex" in " ".join(words))
    url = bibtex[-1]
    status, kind, body = get(url, "application/x-bibtex")
    assert (status, kind) == (200, "application/x-bibtex; charset=utf-8")
    (entry,) = bibtexparser.parse_string(body).entries
    assert entry["title"] == "Internet Based Identifier (IBI): resolution system"
    assert entry["author"] == "Banon, G. J. F. and Banon, L. C."
    assert entry["year"] == "2014"
    assert fetch(url)[0] == 302  # curl's own Accept (none here): the redirect, as always


def test_the_last_edition_modifier_cites_the_edition_the_other_archive_holds(
    demo: LocalRun,
) -> None:
    last = next(url for status, url in printed_urls(demo) if url.endswith("!"))
    status, _, body = get(last, citation.CSL_JSON)
    assert status == 200
    (item,) = json.loads(body)
    assert item["title"] == "Draft standard, 2nd edition"


def test_a_harvester_finds_the_persistent_url_metadata_and_files_from_headers_alone(
    demo: LocalRun,
) -> None:
    report = printed_urls(demo)[0][1]
    label = report.split("/", 3)[3]
    status, location = fetch(report)
    assert status == 302 and location is not None
    signposts = find_signposting_http(location)  # the Archive's file, as a crawler reaches it
    assert (
        str(signposts.citeAs.target) == f"{demo.resolver}/{label}"
    )  # the local resolver, where it is registered
    described = {str(s.type): str(s.target) for s in signposts.describedBy}
    assert set(described) == {"text/html", "application/xml"}
    record = urllib.request.urlopen(described["application/xml"], timeout=30).read()
    titles = ElementTree.fromstring(record).findall(f"{{{citation.DC}}}title")
    assert [t.text for t in titles] == ["Internet Based Identifier (IBI): resolution system"]
    items = [str(s.target) for s in signposts.items]
    assert items == [location]
    for item in items:
        assert fetch(item)[0] == 200
    resolver = find_signposting_http(report)  # follows the 302: the Archive's headers again
    assert (
        str(resolver.citeAs.target) == f"{demo.resolver}/{label}"
    )  # the local resolver, where it is registered


def test_the_resolvers_302_signposts_cite_as_and_every_metadata_type(demo: LocalRun) -> None:
    report = printed_urls(demo)[0][1]
    request = urllib.request.Request(report, method="HEAD")
    with pytest.raises(urllib.error.HTTPError) as raised:  # a 302 not followed
        urllib.request.build_opener(_NoRedirect).open(request, timeout=30)
    assert raised.value.code == 302
    assert raised.value.headers["Vary"] == "Accept"
    signposts = find_signposting_http_link([raised.value.headers["Link"]], report)
    assert str(signposts.citeAs.target) == report
    assert {str(s.type) for s in signposts.describedBy} == set(citation.RENDERERS)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def test_an_item_with_many_files_signposts_its_linkset(demo: LocalRun) -> None:
    archive = ArchiveClient(demo.archives[0], sign=False)
    item = archive.create({"dc": {"title": "Many files", "rights": LICENSE}})
    label = item["ibi"]["ibip"]
    files = [(f"part-{n:02}.csv", f"{n}\n".encode(), "text/csv") for n in range(MAX_ITEMS + 1)]
    archive.upload_files(label, files)
    file_list = f"{demo.archives[0]}/list/{label}"
    signposts = find_signposting_http(file_list)
    assert not signposts.items
    (linkset,) = signposts.linksets
    found = find_signposting_linkset(str(linkset.target)).for_context(file_list)
    assert (
        str(found.citeAs.target) == f"{demo.resolver}/{label}"
    )  # the local resolver, where it is registered
    assert str(found.license.target) == LICENSE
    items = sorted(str(s.target) for s in found.items)
    assert items == [f"{demo.archives[0]}/col/{label}/{path}" for path, _, _ in files]
    assert fetch(items[-1])[0] == 200
