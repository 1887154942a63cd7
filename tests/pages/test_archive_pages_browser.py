"""An Archive's pages in headless Chromium (issue 15, Pages): the real Archive handler over local mode's
tables and SeaweedFS, joined to the real resolver handler, both on loopback. Each page has the resolver's
look under its own strict policy, fits a phone, and links to the item's other pages and to its
persistent URL, which the resolver turns back into the item; a damaged file gets a styled page.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from functions.archive.content import DAMAGED
from functions.archive.files import S3FileStore
from functions.archive.model import Forms
from functions.archive.settings import ArchiveSettings
from functions.shared import look
from ibi.client import ArchiveClient, ResolverClient, switch_archive
from ibi.core.labels import IBI
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.s3 import WEED_PORTS, LocalS3
from ibi_tools.local.stores import free_port, free_ports
from ibi_tools.local.tables import LocalTables
from tests.pages.conftest import start_resolver
from tests.pages.test_pages_browser import csp_errors

KEY = "1234567890-0987654321"  # the Archive's registration key at the resolver
REPORT = b"the report, first edition\n"
LONG = "a-rather-long-directory-name/with/several/levels/and-a-file-name-that-goes-on.txt"
BUCKET = "archive-files"


def archive_gateway(tables: LocalTables, s3: LocalS3, resolver: str) -> LocalGateway:
    """One Archive that knows the resolver it joins (its pages link persistent URLs there)."""
    from functions.archive import wiring
    from functions.archive.store import ensure_table

    ensure_table(tables.client(), "archive-items")
    s3.ensure_bucket(BUCKET)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings = ArchiveSettings.from_environment(
        {"IBI_ARCHIVE_TABLE": "archive-items", "IBI_ARCHIVE_BUCKET": BUCKET}
    )
    settings = dataclasses.replace(settings, base_url=base, join_resolver_url=resolver)
    last = multiprocessing.get_context("fork").Value("q", int(time.time()) - 3600)

    def mint(_: str | None, __: str | None) -> Forms:  # one counter for every worker
        with last.get_lock():
            last.value += 1
            date = last.value
        ibi = IBI.build(Decimal(date), host="ibi.example.org", ip="192.0.2.10")
        return Forms(rep=ibi.rep, ibip=ibi.ibip)

    def handler() -> Any:  # in the worker process, before it serves: the bootstrap
        from functions.archive.handler import lambda_handler

        runtime = wiring.build(settings, dynamodb=tables.client(), s3=s3.client(), mint=mint)
        wiring.install(runtime).start(base)
        return lambda_handler

    # Four workers: the browser holds idle connections (preconnects) to some while the
    # resolver asks another; with two, a loaded machine saw the resolver's urlRequest wait out
    # its 2 s timeout behind them.
    return LocalGateway("archive", handler, port, workers=4).start()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None


def resolves(resolver: str, label: str) -> None:
    """Wait until the resolver redirects ``label`` (it sees a new Archive within 5 s)."""
    opener = urllib.request.build_opener(_NoRedirect)
    deadline, status = time.monotonic() + 20, 0
    while time.monotonic() < deadline:
        try:
            status = opener.open(f"{resolver}/{label}", timeout=10).status
        except urllib.error.HTTPError as error:
            status = error.code
        if status == 302:
            return
        time.sleep(0.5)
    raise AssertionError(f"the resolver answers {status} for {label}, not 302")


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The resolver; an Archive switched on there holding ``report`` (metadata, two files) and
    ``damaged`` (a file whose stored bytes no longer match their SHA-256)."""
    data: Path = tmp_path_factory.mktemp("archive-pages")
    tables = LocalTables(data / "tables.sqlite3")
    with LocalS3(data / "s3", port=free_ports(len(WEED_PORTS))) as s3:
        # One worker: once it redirects an item, every later request sees the Archive too.
        resolver = start_resolver(data, tables, workers=1, archive_timeout="2", deadline="4")
        archive = archive_gateway(tables, s3, resolver.url)
        try:
            client = ArchiveClient(archive.url, sign=False, retries=10)
            service = client.service()["archiveserviceibi"]
            ResolverClient(resolver.url, sign=False).register(service["ibip"], KEY)
            switched = switch_archive(client, resolver.url, KEY, on=True)
            assert "status.archive included" in switched, switched
            labels = {}
            for name in ("report", "damaged"):
                dc = {"title": [f"A {name} with a title long enough to wrap on a phone"]}
                item = client.create({"dc": {**dc, "creator": ["Ana Souza"]}})
                label = item["ibi"]["ibip"]
                client.upload_files(
                    label,
                    [("report.txt", REPORT, "text/plain"), (LONG, b"more\n", "text/plain")],
                    default_file="report.txt",
                )
                labels[name] = label
            S3FileStore(s3.client(), BUCKET).put(
                labels["damaged"], "report.txt", b"the report, damaged\n", "text/plain"
            )
            resolves(resolver.url, labels["report"])
            yield {"archive": archive.url, "resolver": resolver.url, **labels}
        finally:
            archive.shutdown()
            resolver.shutdown()


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    """The browser, 390 px wide (a phone), its console emptied; then as it was."""
    before = browser.get_window_size()
    browser.set_window_size(390, 844)
    browser.get_log("browser")  # what earlier tests left
    yield browser
    browser.set_window_size(before["width"], before["height"])


def has_the_shared_look(browser: Any) -> bool:
    """The page's stylesheet is the shared one, and the browser applied it (not blocked)."""
    return bool(
        browser.execute_script(
            "var style = document.querySelector('style');"
            "return style !== null && style.textContent === arguments[0]"
            " && getComputedStyle(document.body).maxWidth === '736px'"
            " && getComputedStyle(document.body).fontFamily.indexOf('system-ui') >= 0;",
            look.STYLE,
        )
    )


def fits_a_phone(browser: Any) -> bool:
    return bool(
        browser.execute_script(
            "return window.innerWidth <= 390 && document.documentElement.scrollWidth <= 390;"
        )
    )


def follow(browser: Any, link_id: str, lands: str) -> None:
    """Click the page's link ``link_id`` and wait until the browser is at ``lands``."""
    browser.find_element(By.ID, link_id).click()
    try:
        WebDriverWait(browser, 15).until(lambda b: b.current_url.startswith(lands))
    except TimeoutException:
        page = browser.find_element(By.TAG_NAME, "body").text
        raise AssertionError(f"{link_id} led to {browser.current_url}: {page}") from None


def status_of(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"]
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"]


def test_each_archive_page_has_the_shared_look_and_fits_a_phone(
    phone: Any, federation: dict[str, str]
) -> None:
    archive, report = federation["archive"], federation["report"]
    for url, heading in (
        (f"{archive}/list/{report}", f"Files of {report}"),
        (f"{archive}/metadata/{report}", "A report with a title"),
        (f"{archive}/list/8JMKD3MGP8W/35MME4E", "404 Not Found"),
        (f"{archive}/col/{report}/no/such/file.txt", "404 Not Found"),
    ):
        phone.get(url)
        assert heading in phone.find_element(By.TAG_NAME, "h1").text, url
        assert has_the_shared_look(phone), url
        assert fits_a_phone(phone), url
    phone.get(f"{archive}/list/{report}")
    assert LONG in phone.find_element(By.ID, "files").text and fits_a_phone(phone)
    assert csp_errors(phone) == []


def test_the_pages_of_an_item_link_to_each_other_and_to_its_persistent_url(
    phone: Any, federation: dict[str, str]
) -> None:
    archive, resolver, report = federation["archive"], federation["resolver"], federation["report"]
    phone.get(f"{archive}/list/{report}")
    follow(phone, "metadata-link", f"{archive}/metadata/{report}")
    assert "Ana Souza" in phone.find_element(By.ID, "metadata").text
    follow(phone, "files-link", f"{archive}/list/{report}")
    follow(phone, "item-link", f"{archive}/col/{report}")
    assert phone.find_element(By.TAG_NAME, "body").text.strip() == REPORT.decode().strip()
    phone.back()
    follow(phone, "metadata-link", f"{archive}/metadata/{report}")
    follow(phone, "oai-dc-link", f"{archive}/metadata/{report}?format=oai_dc")
    phone.back()
    # The persistent URL at the resolver, which leads back to the item in this Archive.
    persistent = phone.find_element(By.ID, "persistent-link").get_attribute("href")
    assert persistent == f"{resolver}/{report}"
    follow(phone, "persistent-link", f"{archive}/col/{report}")
    assert phone.find_element(By.TAG_NAME, "body").text.strip() == REPORT.decode().strip()
    assert csp_errors(phone) == []


def test_the_integrity_failure_is_a_styled_page_with_its_status(
    phone: Any, federation: dict[str, str]
) -> None:
    archive, resolver, damaged = (
        federation["archive"],
        federation["resolver"],
        federation["damaged"],
    )
    status, content_type = status_of(f"{archive}/col/{damaged}")
    assert status == 500 and content_type.startswith("text/html")
    phone.get(f"{archive}/col/{damaged}")
    assert "integrity check" in phone.find_element(By.TAG_NAME, "h1").text
    alert = phone.find_element(By.CSS_SELECTOR, "[role=alert]")
    assert alert.text == DAMAGED
    assert alert.value_of_css_property("color") == "rgba(198, 40, 40, 1)"  # .error, applied
    assert has_the_shared_look(phone) and fits_a_phone(phone)
    assert "the report, damaged" not in phone.page_source  # the bytes are never served
    follow(phone, "files-link", f"{archive}/list/{damaged}")
    phone.back()
    # The persistent URL: no good copy anywhere, so the resolver's own page says so.
    follow(phone, "persistent-link", f"{resolver}/{damaged}")
    assert has_the_shared_look(phone)
    assert csp_errors(phone) == []
