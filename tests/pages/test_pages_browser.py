"""The resolver's pages in headless Chromium, served by the real handler, under their CSP."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from ibi.client import ResolverClient


def wait_for_text(browser: Any, element_id: str, text: str) -> str:
    WebDriverWait(browser, 10).until(
        expected_conditions.text_to_be_present_in_element((By.ID, element_id), text)
    )
    content: str = browser.find_element(By.ID, element_id).text
    return content


def csp_errors(browser: Any) -> list[str]:
    return [
        entry["message"]
        for entry in browser.get_log("browser")
        if "Content Security Policy" in entry["message"] or "Refused to" in entry["message"]
    ]


def inspect(browser: Any, resolver: str, label: str) -> None:
    browser.get(resolver + "/")
    field = browser.find_element(By.ID, "inspect-ibi")
    field.clear()
    field.send_keys(label)
    browser.find_element(By.CSS_SELECTOR, "#inspect button").click()


def test_inspector_decodes_an_ibip(browser: Any, resolver: str) -> None:
    inspect(browser, resolver, "8jmkd3mgp8w/35mme4e")
    text = wait_for_text(browser, "inspect-result", "150.163.34.243")
    assert "800" in text and "2009-07-21T13:23:00Z" in text and "8JMKD3MGP8W/35MME4E" in text
    assert csp_errors(browser) == []  # the script ran under the page's own CSP


def test_inspector_decodes_a_rep_label(browser: Any, resolver: str) -> None:
    inspect(browser, resolver, "sid.inpe.br/mtc-m18/2010/10.20.15.21.55.047")
    text = wait_for_text(browser, "inspect-result", "mtc-m18.sid.inpe.br")
    assert "2010-10-20T15:21:55.047Z" in text


def test_inspector_says_what_is_wrong(browser: Any, resolver: str) -> None:
    inspect(browser, resolver, "8JMKD3MGP8W/35MMIE4E")
    text = wait_for_text(browser, "inspect-result", "suffix")
    assert "not an IBIp suffix" in text


def test_resolve_box_goes_to_the_persistent_url(browser: Any, resolver: str) -> None:
    browser.get(resolver + "/")
    browser.find_element(By.ID, "resolve-ibi").send_keys("8JMKD3MGP8W/35MMLL8!:(oai_dc)")
    browser.find_element(By.CSS_SELECTOR, "#resolve button").click()
    WebDriverWait(browser, 10).until(lambda b: "35MMLL8" in b.current_url)
    assert browser.current_url == resolver + "/8JMKD3MGP8W/35MMLL8!:(oai_dc)"
    # No Archive is registered: the resolver's alert page says so.
    assert "No Archive answered" in browser.find_element(By.TAG_NAME, "h1").text


def test_status_page_lists_archives_without_secrets(browser: Any, resolver: str) -> None:
    ResolverClient(resolver, sign=False).register("LK47B6W/362SFKH", "1234567890-1234567890")
    deadline = time.monotonic() + 15  # each worker's snapshot sees a change within 5 s
    browser.get(resolver + "/status")
    while "LK47B6W/362SFKH" not in browser.page_source and time.monotonic() < deadline:
        time.sleep(0.5)
        browser.get(resolver + "/status")
    text = browser.find_element(By.TAG_NAME, "table").text
    assert "LK47B6W/362SFKH" in text and "excluded" in text
    assert "1234567890" not in browser.page_source


def test_a_script_in_a_malformed_url_is_shown_not_run(browser: Any, resolver: str) -> None:
    browser.get(resolver + "/<script>window.hacked=1;alert(1)</script>")
    time.sleep(0.3)
    try:
        browser.switch_to.alert.dismiss()
        raise AssertionError("the script ran")
    except NoAlertPresentException:
        pass
    assert browser.execute_script("return window.hacked === undefined") is True
    assert "Malformed persistent URL" in browser.find_element(By.TAG_NAME, "h1").text
    assert "<script>" in browser.find_element(By.TAG_NAME, "body").text


def test_pages_carry_a_strict_csp(resolver: str) -> None:
    with urllib.request.urlopen(resolver + "/", timeout=10) as response:
        policy = response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'none'" in policy and "unsafe-inline" not in policy
