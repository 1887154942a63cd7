"""Script payloads in every path and parameter of the resolver and an Archive (issue 11.3, 11.4).

A real ``ibi local`` (minting, two Archives, the resolver) holds an item whose metadata and
files are hostile. Headless Chromium then opens every public page of both services with script
payloads in each path segment and query parameter. A payload must show as text: no alert, no
``window.hacked``, and no element it could have made (an ``on…`` attribute, a script of its
own, an ``<img src=x>``) in the document. Pages and deposited files are also checked for the
headers that keep them from scripting the Archive's origin.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from selenium.common.exceptions import NoAlertPresentException, TimeoutException

from ibi.client import ArchiveClient
from tests.e2e.support import LocalRun

PAYLOADS = [
    '<img src=x onerror="window.hacked=1;alert(1)">',
    '"><script>window.hacked=1;alert(1)</script>',
    "'><svg onload=window.hacked=1>",
    "javascript:window.hacked=1//",
]
HTML_FILE = b"<!doctype html><script>window.hacked=1;alert(1)</script><p>evil</p>"
SVG_FILE = b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.hacked=1;alert(1)"/>'

# Everything a payload could have added to the document.
INJECTED = """
var found = [];
document.querySelectorAll('*').forEach(function (element) {
  Array.from(element.attributes).forEach(function (attribute) {
    if (attribute.name.toLowerCase().startsWith('on')) { found.push(element.tagName + ' ' + attribute.name); }
    if (/^\\s*javascript:/i.test(attribute.value)) { found.push(element.tagName + ' javascript:'); }
  });
});
document.querySelectorAll('script').forEach(function (script) {
  // a JSON-LD data block never runs: the payload may stand in it as a JSON string, but the
  // block must stay one whole JSON document (a break-out would leave it unparsable)
  if (script.type === 'application/ld+json') {
    try { JSON.parse(script.textContent); } catch (e) { found.push('broken ld+json'); }
  } else if (script.textContent.indexOf('hacked') >= 0) { found.push('script'); }
});
document.querySelectorAll('img[src="x"], svg').forEach(function (e) { found.push(e.tagName); });
if (window.hacked !== undefined) { found.push('window.hacked'); }
return found;
"""


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    from ibi_tools.local.stores import free_port

    data: Path = tmp_path_factory.mktemp("xss")
    run = LocalRun(data / "data", free_port()).start()
    try:
        archive = ArchiveClient(run.archives[0], sign=False)
        hostile = " ".join(PAYLOADS)
        item = archive.create(
            {"dc": {"title": PAYLOADS[1], "creator": PAYLOADS[0], "description": hostile}}
        )
        label = item["ibi"].get("ibip") or item["ibi"]["rep"]
        archive.upload_files(
            label,
            [
                ("readme.txt", b"<script>window.hacked=1</script>", "text/plain"),
                ("evil.html", HTML_FILE, "text/html"),
                ("evil.svg", SVG_FILE, "image/svg+xml"),
                ("evil.xhtml", HTML_FILE, "application/xhtml+xml; charset=utf-8"),
            ],
            default_file="readme.txt",
        )
        service = archive.service()
        yield {
            "archive": run.archives[0],
            "resolver": run.resolver,
            "ibi": label,
            "service": service["archiveserviceibi"].get("ibip")
            or service["archiveserviceibi"]["rep"],
        }
    finally:
        run.stop()


def hostile_urls(federation: dict[str, str]) -> list[str]:
    archive, resolver, ibi, service = (
        federation["archive"],
        federation["resolver"],
        federation["ibi"],
        federation["service"],
    )
    urls: list[str] = [
        f"{archive}/list/{ibi}",
        f"{archive}/metadata/{ibi}",
        f"{resolver}/{ibi}:(oai_dc)",
        f"{resolver}/status",
    ]
    for payload in PAYLOADS:
        p = quote(payload, safe="")
        urls += [
            # the Archive: every path and parameter of its public routes
            f"{archive}/col/{p}",
            f"{archive}/col/{ibi}/{p}",
            f"{archive}/list/{p}",
            f"{archive}/metadata/{p}",
            f"{archive}/metadata/{ibi}?format={p}",
            f"{archive}/{p}",
            f"{archive}/{service}?servicesubject={p}",
            f"{archive}/{service}?{p}={p}",
            f"{archive}/api/{p}",
            # the resolver: the IBI, modifiers, path, query, and its own pages
            f"{resolver}/{p}",
            f"{resolver}/{ibi}{p}",
            f"{resolver}/{ibi}!{p}",
            f"{resolver}/{ibi}:({p})",
            f"{resolver}/{ibi}+({p})",
            f"{resolver}/{ibi}/{p}",
            f"{resolver}/{ibi}?{p}={p}",
            f"{resolver}/{ibi}?requireditemstatus={p}",
            f"{resolver}/8JMKD3MGP8W/35MMLL8?urlkey={p}",
            f"{resolver}/status?{p}={p}",
            f"{resolver}/?ibi={p}",
            f"{resolver}/admin/{p}",
        ]
    return urls


def test_no_payload_runs_or_becomes_markup_on_any_page(
    browser: Any, federation: dict[str, str]
) -> None:
    problems: dict[str, list[str]] = {}
    for url in hostile_urls(federation):
        try:
            browser.get(url)
        except TimeoutException:
            problems[url] = ["page did not load"]
            continue
        time.sleep(0.05)
        try:
            alert = browser.switch_to.alert
            alert.dismiss()
            problems[url] = ["an alert ran"]
            continue
        except NoAlertPresentException:
            pass
        found = browser.execute_script(INJECTED)
        if found:
            problems[url] = found
    assert problems == {}


def headers_of(url: str) -> tuple[int, Any]:
    request = urllib.request.Request(url)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers


def test_archive_pages_carry_a_strict_csp(federation: dict[str, str]) -> None:
    archive, ibi = federation["archive"], federation["ibi"]
    for url, expected in (
        (f"{archive}/list/{ibi}", 200),
        (f"{archive}/metadata/{ibi}", 200),
        (f"{archive}/col/{quote(PAYLOADS[0], safe='')}", 400),
        (f"{archive}/no-such-page", 404),
    ):
        status, headers = headers_of(url)
        assert status == expected, url
        assert headers["Content-Type"].startswith("text/html"), url
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy, url
        assert "unsafe-inline" not in policy, url
        assert headers["X-Content-Type-Options"] == "nosniff", url


@pytest.mark.parametrize("path", ["evil.html", "evil.svg", "evil.xhtml"])
def test_active_deposited_files_are_attachments_in_a_sandbox(
    federation: dict[str, str], path: str
) -> None:
    status, headers = headers_of(f"{federation['archive']}/col/{federation['ibi']}/{path}")
    assert status == 200
    assert headers["Content-Disposition"].startswith("attachment;")
    assert path in headers["Content-Disposition"]
    assert headers["Content-Security-Policy"].startswith("sandbox;")
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_a_passive_file_is_inline_but_sandboxed_and_never_sniffed(
    browser: Any, federation: dict[str, str]
) -> None:
    url = f"{federation['archive']}/col/{federation['ibi']}/readme.txt"
    status, headers = headers_of(url)
    assert status == 200 and "Content-Disposition" not in headers
    assert headers["Content-Security-Policy"].startswith("sandbox;")
    assert headers["X-Content-Type-Options"] == "nosniff"
    browser.get(url)
    assert "<script>" in browser.find_element("tag name", "body").text  # shown as text
    assert browser.execute_script("return window.hacked === undefined") is True


def test_opening_active_files_runs_nothing(browser: Any, federation: dict[str, str]) -> None:
    archive, ibi = federation["archive"], federation["ibi"]
    browser.get(f"{archive}/list/{ibi}")
    for path in ("evil.html", "evil.svg", "evil.xhtml"):
        browser.get(f"{archive}/col/{ibi}/{path}")
        time.sleep(0.1)
        try:
            browser.switch_to.alert.dismiss()
            raise AssertionError(f"{path}: a script of the file ran")
        except NoAlertPresentException:
            pass
        assert browser.execute_script("return window.hacked === undefined") is True, path
