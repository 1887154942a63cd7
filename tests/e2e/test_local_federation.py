"""The README's run command, end to end: the demo federation and every URL it prints."""

from __future__ import annotations

import json
import re
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ibi.core.relations import MODIFIERS
from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun, cli

pytestmark = pytest.mark.e2e

PRINTED = re.compile(r"^\s+(\d{3})\s+(http://127\.0\.0\.1:\d+/\S+)$")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


def fetch(url: str, **headers: str) -> tuple[int, str | None]:
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=30) as response:
            return response.status, response.headers.get("Location")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location")


def printed_urls(run: LocalRun) -> list[tuple[int, str]]:
    found = [PRINTED.match(line.rstrip("\n")) for line in run.banner]
    return [(int(m.group(1)), m.group(2)) for m in found if m]


def accesses(archive: str, ibi: str) -> int:
    done = cli("archive", "item", ibi, "--endpoint", archive, "--json")
    count: int = json.loads(done.stdout)["accesses"]
    return count


def test_every_printed_url_answers_as_the_spec_says(tmp_path: Path) -> None:
    run = LocalRun(tmp_path / "data", free_port(), demo=True).start()
    try:
        urls = printed_urls(run)
        assert {status for status, _ in urls} == {302, 400, 404, 410}
        assert len(urls) >= 12
        for expected, url in urls:
            status, location = fetch(url, **{"Accept-Language": "pt-BR,en;q=0.5"})
            assert status == expected, url
            if status == 302:
                assert location and location.startswith("http://127.0.0.1:")
                assert fetch(location)[0] == 200, location  # the Archive serves what it named

        for expected, url in urls:  # and as curl asks: no Accept-Language at all
            assert fetch(url)[0] == expected, url

        # The acknowledgment reaches the Archive that gave the URL, and only it. A reader the
        # counts count (issue 35: a browser, not a script on the COUNTER-Robots list, and not
        # the client of the requests above, which within 30 s would be one double-click).
        report = urls[0][1].rsplit(":", 1)[1].split("/", 1)[1]
        before = accesses(run.archives[0], report)
        reader = {"User-Agent": BROWSER, "X-Forwarded-For": "198.51.100.23"}
        assert fetch(urls[0][1], **reader)[0] == 302
        for _ in range(50):
            if accesses(run.archives[0], report) == before + 1:
                break
        assert accesses(run.archives[0], report) == before + 1
        copy_before = accesses(run.archives[1], report)

        # A restart in the middle: same data, same URLs, same answers.
        run.stop(signal.SIGKILL)
        run.start()
        assert printed_urls(run) == urls
        for expected, url in urls:
            assert fetch(url, **{"Accept-Language": "pt-BR"})[0] == expected, url
        assert accesses(run.archives[1], report) == copy_before
    finally:
        run.stop()


def test_every_modifier_through_the_federation(tmp_path: Path) -> None:
    """The 14 modifiers of Table 6.2 against the demo report: each answers 302 or 404."""
    run = LocalRun(tmp_path / "data", free_port(), demo=True).start()
    try:
        report_url = printed_urls(run)[0][1]
        modifiers = MODIFIERS  # the 14 of Table 6.2
        for modifier in modifiers:
            status, location = fetch(report_url + modifier, **{"Accept-Language": "en"})
            assert status in {302, 404}, (modifier, status)
            if modifier in {":", "!", "!:", "+", "+!", "+:"}:
                assert status == 302, modifier
                assert location is not None
    finally:
        run.stop()
