"""Issue 35: the importer's OAI-PMH requests go through its one outbound path
(ibi_tools/harvest/outbound.py over functions/shared/pinned.py), as its downloads do.

The "public" side is 127.0.0.2 (the only network ``IBI_ALLOW_NETWORKS`` allows here), the
"internal" one 127.0.0.1 (never to be contacted); hostile servers are raw sockets that send
what the test scripts (tests/oai_fixtures.py).
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ibi_tools.harvest import HarvestError, Importer, ImportOptions, ImportState
from ibi_tools.harvest.importer import MAX_ANSWER_BYTES
from tests.oai_fixtures import RecordedRepository, Scripted, scripted, serve
from tests.unit.test_harvest import ARCHIVE, MemoryArchive


@pytest.fixture(autouse=True)
def only_127_0_0_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IBI_ALLOW_NETWORKS", "127.0.0.2/32")


def run(base: str, tmp_path: Path, *, timeout: float = 5.0) -> tuple[MemoryArchive, Importer]:
    state = ImportState.load(
        tmp_path / "state.json", archive=ARCHIVE, repository=base, set_spec=None, from_date=None
    )
    archive = MemoryArchive()
    importer = Importer(
        archive, ImportOptions(base, timeout=timeout), state, progress=io.StringIO()
    )
    importer.run()
    return archive, importer


def answer(body: bytes, *, head: str = "") -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {len(body)}\r\n{head}"
        "Connection: close\r\n\r\n"
    ).encode() + body


def redirect(location: str) -> bytes:
    return (
        f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


def test_a_repository_at_an_allowed_address_is_imported(tmp_path: Path) -> None:
    with serve(RecordedRepository("zenodo"), host="127.0.0.2") as base:
        _, importer = run(base, tmp_path)
    assert len(importer.summary.created) == 8 and importer.summary.pages == 3


def test_a_base_url_that_redirects_inside_is_refused_at_its_hop(tmp_path: Path) -> None:
    with (
        serve(RecordedRepository("zenodo"), host="127.0.0.1") as inside,
        scripted("127.0.0.2", redirect(f"{inside}?verb=ListRecords")) as outside,
        pytest.raises(
            HarvestError, match=re.escape("not fetched: the redirect to http://127.0.0.1")
        ) as refused,
    ):
        run(f"{outside.url}/oai", tmp_path)
    assert "non-public address" in str(refused.value)
    assert len(outside.requests) == 1


def test_a_base_url_inside_is_never_contacted(tmp_path: Path) -> None:
    with (
        scripted("127.0.0.1", answer(b"<OAI-PMH/>")) as inside,
        pytest.raises(
            HarvestError, match=re.escape("not fetched: 127.0.0.1 resolves to a non-public")
        ) as refused,
    ):
        run(f"{inside.url}/oai", tmp_path)
    assert "IBI_ALLOW_NETWORKS" in str(refused.value)  # what would allow it
    assert inside.requests == []


def test_a_redirect_to_ftp_is_not_followed(tmp_path: Path) -> None:
    with scripted("127.0.0.2", b"220 hello\r\n") as ftp:
        host, port = ftp.listening.getsockname()[:2]
        with (
            scripted("127.0.0.2", redirect(f"ftp://{host}:{port}/oai")) as outside,
            pytest.raises(HarvestError, match=r"a redirect to ftp://\S+ is not an http\(s\) URL"),
        ):
            run(f"{outside.url}/oai", tmp_path)
    assert ftp.requests == []  # (the listener received USER anonymous)


def test_an_answer_dripped_a_byte_at_a_time_ends_at_the_requests_deadline(
    tmp_path: Path,
) -> None:
    dripped = answer(b"<OAI-PMH xmlns='http://www.openarchives.org/OAI/2.0/'/>")
    started = time.monotonic()
    with (
        scripted("127.0.0.2", dripped, pause=0.2) as server,  # a read never waits 1 s
        pytest.raises(HarvestError, match="no answer within 1 s"),
    ):
        run(f"{server.url}/oai", tmp_path, timeout=1.0)
    assert time.monotonic() - started < 3.0  # not the 27 s the drip takes (58 s in the issue)


def endless() -> Iterator[bytes]:
    """An answer with no Content-Length that goes on (up to 100 MiB: today's code read it)."""
    yield (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nConnection: close\r\n\r\n"
        b"<OAI-PMH xmlns='http://www.openarchives.org/OAI/2.0/'><!-- "
    )
    block = b"x" * (1 << 20)
    for _ in range(100):
        yield block


def test_an_answer_without_end_is_read_up_to_its_limit_and_refused_naming_it(
    tmp_path: Path,
) -> None:
    with (
        scripted("127.0.0.2", endless) as server,
        pytest.raises(
            HarvestError,
            match=f"over the most an OAI-PMH answer is read \\({MAX_ANSWER_BYTES} bytes\\)",
        ),
    ):
        run(f"{server.url}/oai", tmp_path)
    assert MAX_ANSWER_BYTES == 64 << 20
    assert_stopped_sending(server, below=MAX_ANSWER_BYTES + (16 << 20))


def assert_stopped_sending(server: Scripted, *, below: int) -> None:
    """The server's sending ends (its peer closed) before ``below`` bytes."""
    for _ in range(50):
        sent = server.sent
        time.sleep(0.05)
        if server.sent == sent:
            break
    assert server.sent < below, server.sent


def test_the_head_of_a_dripped_answer_cannot_hold_a_request_past_its_deadline(
    tmp_path: Path,
) -> None:
    head = "".join(f"X-Pad-{n}: {'x' * 20}\r\n" for n in range(40))
    dripped = answer(b"<OAI-PMH/>", head=head)
    started = time.monotonic()
    with (
        scripted("127.0.0.2", dripped, pause=0.05) as server,
        pytest.raises(HarvestError, match="no answer within 1 s"),
    ):
        run(f"{server.url}/oai", tmp_path, timeout=1.0)
    assert time.monotonic() - started < 3.0
