"""Issue 28 point 2 end to end: items whose `url` points outside the Archive, checked by
`ibi archive check-links` against loopback servers (200, 404, a redirect loop) in `ibi local`."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.e2e.support import LocalRun, cli

pytestmark = pytest.mark.e2e


class Answering(BaseHTTPRequestHandler):
    """``/paper`` 200, ``/gone`` 404, ``/loop`` redirects to itself."""

    def _answer(self) -> None:
        status, location = {"/paper": (200, None), "/loop": (302, "/loop")}.get(
            self.path, (404, None)
        )
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hosts() -> Iterator[list[str]]:
    """Three loopback hosts (127.0.0.1-3), each paced on its own by the checker."""
    servers = [ThreadingHTTPServer((f"127.0.0.{n}", 0), Answering) for n in (1, 2, 3)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [
        f"http://127.0.0.{n}:{s.server_address[1]}" for n, s in zip((1, 2, 3), servers, strict=True)
    ]
    for server in servers:
        server.shutdown()
        server.server_close()


def deposit(archive: str, url: str) -> str:
    made = cli("deposit", "--url", url, "--endpoint", archive, "--json")
    assert made.returncode == 0, made.stderr
    forms: dict[str, str] = json.loads(made.stdout)["ibi"]
    return forms.get("ibip") or forms["rep"]


def test_check_links_names_each_broken_ibi_and_the_item_and_holdings_show_it(
    local: LocalRun, hosts: list[str]
) -> None:
    archive = local.archives[0]
    fine = deposit(archive, f"{hosts[0]}/paper")
    gone = deposit(archive, f"{hosts[1]}/gone")
    looping = deposit(archive, f"{hosts[2]}/loop")

    checked = cli("archive", "check-links", "--endpoint", archive)
    assert checked.returncode == 1, checked.stderr
    lines = checked.stdout.splitlines()
    assert any(line.startswith(f"BROKEN {gone} {hosts[1]}/gone: HTTP 404") for line in lines)
    assert any(
        line.startswith(f"BROKEN {looping} ") and "more than 5 redirects" in line for line in lines
    )
    assert not any(line.startswith(f"BROKEN {fine} ") for line in lines)

    item = json.loads(cli("archive", "item", gone, "--endpoint", archive, "--json").stdout)
    assert item["link_check"]["status"] == "broken"
    assert item["link_check"]["broken_since"] == item["link_check"]["checked"]
    good = json.loads(cli("archive", "item", fine, "--endpoint", archive, "--json").stdout)
    assert good["link_check"]["status"] == "ok"
    assert good["link_check"]["last_success"] == good["link_check"]["checked"]

    with urllib.request.urlopen(f"{archive}/api/links?status=broken", timeout=30) as answer:
        listed = {entry["ibi"].get("ibip") for entry in json.loads(answer.read())["broken"]}
    assert listed == {gone, looping}

    request = urllib.request.Request(
        f"{local.resolver}/holdings/{gone}", headers={"Accept": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        view = json.loads(answer.read())
    (holder,) = [h for h in view["archives"] if h["state"] == "Original"]
    assert holder["link"]["status"] == "broken" and holder["link"]["reason"] == "HTTP 404"
    assert any("broken URL" in problem for problem in view["verdict"]["problems"])

    only_fine = cli("archive", "check-links", fine, "--endpoint", archive)
    assert only_fine.returncode == 0, only_fine.stdout + only_fine.stderr
    assert "1 link(s) checked, none broken" in only_fine.stdout


def test_check_links_of_an_item_without_an_outside_url_says_what_to_name(
    local: LocalRun, tmp_path: Any
) -> None:
    data = tmp_path / "paper.txt"
    data.write_text("a paper\n")
    made = cli("deposit", str(data), "--endpoint", local.archives[0], "--json")
    assert made.returncode == 0, made.stderr
    label = json.loads(made.stdout)["ibi"]["ibip"]
    refused = cli("archive", "check-links", label, "--endpoint", local.archives[0])
    assert refused.returncode != 0
    assert "no url outside this Archive" in refused.stderr
