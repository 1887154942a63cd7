"""Issue 35, "downloads that reach inside": `ibi archive import --fetch` downloads through the
vetted, pinned connection (ibi_tools/harvest/files.py over functions/shared/pinned.py).

Servers on loopback addresses: the "public" side on 127.0.0.2 (the only network the policy
allows), the "internal" one on 127.0.0.1 (never to be contacted), each a raw socket that
answers what the test scripts and records what it was sent (tests/oai_fixtures.py).
"""

from __future__ import annotations

from pathlib import Path

from functions.shared.addresses import AddressPolicy
from ibi_tools.harvest.files import Fetched, download
from tests.oai_fixtures import scripted as serving

PUBLIC = AddressPolicy(["127.0.0.2/32"], public=False)  # "the Internet" of these tests


def ok(body: bytes, kind: str = "application/pdf") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"Connection: close\r\n\r\n" + body


def redirect(location: str) -> bytes:
    return (
        f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


def test_a_file_at_an_allowed_address_is_downloaded(tmp_path: Path) -> None:
    with serving("127.0.0.2", ok(b"%PDF-1.4 the thesis")) as server:
        got = download(f"{server.url}/files/thesis.pdf", tmp_path, 1 << 20, 5.0, policy=PUBLIC)
    assert isinstance(got, Fetched), got
    assert got.path.read_bytes() == b"%PDF-1.4 the thesis" and got.name == "thesis.pdf"


def test_an_internal_address_is_never_contacted(tmp_path: Path) -> None:
    with serving("127.0.0.1", ok(b'{"secret": "creds"}', "application/json")) as inside:
        got = download(f"{inside.url}/creds.json", tmp_path, 1 << 20, 5.0, policy=PUBLIC)
    assert isinstance(got, str) and "not fetched" in got, got
    assert inside.requests == []


def test_a_redirect_inside_is_refused_at_its_hop(tmp_path: Path) -> None:
    secret = ok(b'{"secret": "creds"}', "application/json")
    with (
        serving("127.0.0.1", secret) as inside,
        serving("127.0.0.2", redirect(f"{inside.url}/creds.json")) as outside,
    ):
        got = download(f"{outside.url}/paper.pdf", tmp_path, 1 << 20, 5.0, policy=PUBLIC)
    assert isinstance(got, str) and "not fetched" in got, got
    assert len(outside.requests) == 1 and inside.requests == []
    assert list(tmp_path.iterdir()) == []


def test_an_ftp_redirect_is_not_followed(tmp_path: Path) -> None:
    with serving("127.0.0.2", b"220 hello\r\n") as ftp:
        host, port = ftp.listening.getsockname()[:2]
        with serving("127.0.0.2", redirect(f"ftp://{host}:{port}/file")) as outside:
            got = download(f"{outside.url}/paper.pdf", tmp_path, 1 << 20, 5.0, policy=PUBLIC)
    assert isinstance(got, str) and "not an http(s) URL" in got, got
    assert ftp.requests == []  # (the listener received USER anonymous)


def test_a_dripped_download_ends_at_its_deadline(tmp_path: Path) -> None:
    body = b"x" * 30
    with serving("127.0.0.2", ok(body), pause=0.05) as server:
        got = download(f"{server.url}/slow.bin", tmp_path, 1 << 20, 0.5, policy=PUBLIC)
    assert isinstance(got, str) and "no answer within 0.5 s" in got, got


def test_remote_text_reaches_the_terminal_with_its_controls_escaped(tmp_path: Path) -> None:
    answer = b"HTTP/1.1 404 \x1b[2J\x1b[31mgone\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    with serving("127.0.0.2", answer) as server:
        got = download(f"{server.url}/x.pdf", tmp_path, 1 << 20, 5.0, policy=PUBLIC)
    assert isinstance(got, str) and "\x1b" not in got and "\\x1b[2J" in got, got
