"""The holdings view in headless Chromium: the real resolver handler, fake Archives written from
the spec (with the holdings extension), a phone-wide window, the page's CSP, and the links to
it from the 409 alert page and the landing page's inspector."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from ibi.client import ResolverClient, send_switch
from ibi_tools.local.tables import LocalTables
from tests.integration.archives import FakeArchive, serving
from tests.pages.conftest import start_resolver
from tests.pages.test_pages_browser import csp_errors, inspect

KEY = "1234567890-0987654321"
ITEM = "8JMKD3MGP8W/35MME4E"
CONFLICT = "3SJEG8DTKW/35MMLL8"  # a prefix neither Archive owns: two claims are a 409
GOOD = hashlib.sha256(b"good").hexdigest()
BAD = hashlib.sha256(b"bad").hexdigest()
LONG = "a-rather-long-directory-name/with/several/levels/and-a-file-name-that-goes-on.pdf"


def answer(label: str, state: str, sha256: str, path: str = LONG) -> str:
    return (
        f"archiveaddress x\r\nibi {{ibip {label}}}\r\nstate {state}\r\ncontenttype Data\r\n"
        f"timestamp 2024-05-01T12:00:00Z\r\nurl http://127.0.0.1:9/col/{label}/{path}\r\n"
        "urlkey 1427244889-5349022633744855\r\n"
        f"holdings.state {state}\r\nholdings.timestamp 2024-05-01T12:00:00Z\r\n"
        f"holdings.listable yes\r\nholdings.files {{{path} {sha256} 4}}\r\n"
        "holdings.filecount 1\r\nholdings.language pt-BR\r\n"
        "holdings.dc.title {Um%20relat%C3%B3rio%20%3Cscript%3Ealert(1)%3C/script%3E}\r\n"
    )


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A resolver with two fake Archives switched on: ITEM an original and a differing copy,
    CONFLICT claimed as original by both."""
    data: Path = tmp_path_factory.mktemp("holdings")
    a = FakeArchive(
        "8JMKD3MGP8W/3FSUP4L",
        {ITEM: answer(ITEM, "Original", GOOD), CONFLICT: answer(CONFLICT, "Original", GOOD)},
    )
    b = FakeArchive(
        "LK47B6W/362SFKH",
        {ITEM: answer(ITEM, "Copy", BAD), CONFLICT: answer(CONFLICT, "Original", GOOD)},
    )
    with serving(a, b):
        tables = LocalTables(data / "tables.sqlite3")
        gateway = start_resolver(data, tables, workers=2, archive_timeout="1", deadline="3")
        try:
            admin = ResolverClient(gateway.url, sign=False)
            for archive in (a, b):
                admin.register(archive.service_ibi, KEY)
                switched = send_switch(
                    gateway.url,
                    address=archive.address,
                    service_ibi=archive.service_ibi,
                    base_url=f"http://{archive.address}",
                    registration_key=KEY,
                    on=True,
                )
                assert "status.archive included" in switched
            yield gateway.url
        finally:
            gateway.shutdown()


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    """The browser, 390 px wide (a phone), then as it was."""
    before = browser.get_window_size()
    browser.set_window_size(390, 844)
    yield browser
    browser.set_window_size(before["width"], before["height"])


def no_sideways_scroll(browser: Any) -> bool:
    return bool(
        browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth;")
    )


def test_the_holdings_view_fits_a_phone_and_says_the_copy_differs(
    phone: Any, federation: str
) -> None:
    phone.get_log("browser")  # what earlier tests left
    phone.get(f"{federation}/holdings/{ITEM}")
    assert phone.execute_script("return window.innerWidth;") <= 390
    heading = phone.find_element(By.TAG_NAME, "h1").text
    assert ITEM in heading
    text = phone.find_element(By.TAG_NAME, "body").text
    assert "Original" in text and "Copy" in text and "differs" in text
    assert GOOD in text and BAD in text and LONG in text
    assert no_sideways_scroll(phone)
    assert csp_errors(phone) == []
    assert "<script>alert(1)</script>" not in phone.page_source


def test_the_409_alert_links_the_holdings_view(phone: Any, federation: str) -> None:
    phone.get(f"{federation}/{CONFLICT}?ibiurl.requireditemstatus=Original")
    assert "claim the original" in phone.find_element(By.TAG_NAME, "h1").text
    phone.find_element(By.ID, "holdings").click()
    WebDriverWait(phone, 10).until(lambda b: "/holdings/" in b.current_url)
    alert = phone.find_element(By.CSS_SELECTOR, "[role=alert]").text
    assert "2 Archives claim the original" in alert
    assert no_sideways_scroll(phone)


def test_the_inspector_links_the_holdings_view(browser: Any, federation: str) -> None:
    inspect(browser, federation, ITEM.lower())
    link = WebDriverWait(browser, 10).until(
        expected_conditions.element_to_be_clickable(
            (By.LINK_TEXT, "Who holds it: the holdings view")
        )
    )
    link.click()
    WebDriverWait(browser, 10).until(lambda b: b.current_url.endswith(f"/holdings/{ITEM}"))
    assert "Holdings of" in browser.find_element(By.TAG_NAME, "h1").text
    assert csp_errors(browser) == []
