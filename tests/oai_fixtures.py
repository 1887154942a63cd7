"""A repository answering OAI-PMH from recorded pages (``tests/fixtures/oai/<source>/``).

:class:`RecordedRepository` decides every answer: ``ListRecords-1.xml`` for a list's first
request, the page after the one whose ``resumptionToken`` is asked, ``badResumptionToken.xml``
(or a made one) for any other token. Answers can be queued ahead (a 503 with ``Retry-After``),
the recorded URLs of a host rewritten to loopback, and files served. Unit tests call it as the
importer's ``get`` port (no socket); end-to-end tests serve it with :func:`serve` on 127.0.0.1
(or another loopback address). :class:`Scripted` is a hostile server: a raw socket that sends
what the test scripts (dripped, or without end) and records what it was sent.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from ibi.client import Raw

FIXTURES = Path(__file__).parent / "fixtures" / "oai"
SOURCES = ("zenodo", "dspace", "eprints")
# Zenodo answers its OAI-PMH errors with 422 (the recorded status); the others with 200.
ERROR_STATUS = {"zenodo": 422}
TOKEN = re.compile(rb"<resumptionToken[^>]*>([^<]*)</resumptionToken>")
BAD_TOKEN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
    b"<responseDate>2026-01-01T00:00:00Z</responseDate><request>http://localhost/oai</request>"
    b'<error code="badResumptionToken">unknown token</error></OAI-PMH>'
)


def pages_of(source: str) -> list[bytes]:
    files = sorted(
        (FIXTURES / source).glob("ListRecords-*.xml"), key=lambda p: int(p.stem.split("-")[1])
    )
    return [path.read_bytes() for path in files]


def token_of(page: bytes) -> str | None:
    """The page's resumption token as the repository wrote it (entities unescaped)."""
    match = TOKEN.search(page)
    text = match.group(1).decode().strip() if match else ""
    return text.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">") or None


@dataclass
class RecordedRepository:
    source: str
    pages: list[bytes] = field(default_factory=list)
    # host -> base URL its recorded URLs are rewritten to (e.g. "eprints.ucm.es" -> loopback)
    rewrite: dict[str, str] = field(default_factory=dict)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # path -> (type, bytes)
    queued: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    requests: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.pages:
            self.pages = pages_of(self.source)

    def page(self, index: int) -> bytes:
        body = self.pages[index]
        for host, base in self.rewrite.items():
            body = re.sub(rb"https?://" + re.escape(host.encode()), base.encode(), body)
        return body

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if path in self.files:
            kind, data = self.files[path]
            return 200, {"Content-Type": kind}, data
        self.requests.append(query)
        if self.queued:
            return self.queued.pop(0)
        xml = {"Content-Type": "text/xml; charset=utf-8"}
        token = query.get("resumptionToken")
        if token is None:
            return 200, xml, self.page(0)
        for index, page in enumerate(self.pages[:-1]):
            if token_of(page) == token:
                return 200, xml, self.page(index + 1)
        recorded = FIXTURES / self.source / "badResumptionToken.xml"
        body = recorded.read_bytes() if recorded.exists() else BAD_TOKEN
        return ERROR_STATUS.get(self.source, 200), xml, body

    def get(self, url: str, timeout: float) -> Raw:
        """The importer's ``get`` port: the answer, with no socket."""
        split = urlsplit(url)
        status, headers, body = self.answer(split.path, dict(parse_qsl(split.query)))
        return Raw(status, headers, body)


@contextmanager
def serve(repository: RecordedRepository, host: str = "127.0.0.1") -> Iterator[str]:
    """``repository`` on a free port of ``host``; yields its base URL (``…/oai``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            split = urlsplit(self.path)
            status, headers, body = repository.answer(split.path, dict(parse_qsl(split.query)))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/oai"
    finally:
        server.shutdown()
        server.server_close()


class Scripted:
    """Answers every connection with ``answer`` (its blocks, when a callable gives them; a byte
    every ``pause`` s when given) and records the requests it received and the bytes it sent."""

    def __init__(
        self, host: str, answer: bytes | Callable[[], Iterable[bytes]], pause: float = 0.0
    ) -> None:
        self.listening = socket.create_server((host, 0))
        self.answer = answer
        self.pause = pause
        self.requests: list[bytes] = []
        self.sent = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.listening.getsockname()[:2]
        return f"http://{host}:{port}"

    def _blocks(self) -> Iterable[bytes]:
        if callable(self.answer):
            return self.answer()
        if self.pause:
            return (bytes([byte]) for byte in self.answer)
        return [self.answer]

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listening.accept()
            except OSError:
                return
            with connection:
                self.requests.append(connection.recv(65536))
                try:
                    for block in self._blocks():
                        connection.sendall(block)
                        self.sent += len(block)
                        if self.pause:
                            threading.Event().wait(self.pause)
                except OSError:
                    continue


@contextmanager
def scripted(
    host: str, answer: bytes | Callable[[], Iterable[bytes]], pause: float = 0.0
) -> Iterator[Scripted]:
    server = Scripted(host, answer, pause)
    try:
        yield server
    finally:
        server.listening.close()
