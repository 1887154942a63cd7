"""Fake Archives on loopback, written from the spec: scripted, slow, dead, garbage, liars."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ibi.core.labels import parse_label
from ibi.core.pairlist import parse_query


@dataclass
class FakeArchive:
    """One Archive service: ``answers`` by IBI (pair-list text), with a behaviour."""

    service_ibi: str
    answers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    mode: str = "normal"  # normal | garbage | redirect | huge (to urlRequest) | wrong-confirmation
    requests: list[dict[str, str]] = field(default_factory=list)
    acknowledgments: list[dict[str, str]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def address(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.server_address[1]}"

    def answer(self, query: dict[str, str]) -> tuple[int, bytes]:
        subject = query.get("servicesubject")
        if subject == "inclusionConfirmationRequest":
            return (
                200,
                b"confirmation no\r\n"
                if self.mode == "wrong-confirmation"
                else b"confirmation yes\r\n",
            )
        if subject == "acknowledgment":
            self.acknowledgments.append(query)
            return 200, b"notice {acknowledgment received}\r\n"
        self.requests.append(query)
        if self.delay:
            time.sleep(self.delay)
        if self.mode == "garbage":  # (the modes apply to urlRequest only)
            return 200, b"{{{ this is not } a pair list\x00\r\n"
        if self.mode == "huge":
            return 200, b"x " + b"y" * (2 * 1024 * 1024)
        label = parse_label(query.get("parsedibiurl.ibi", "")).label
        return 200, self.answers.get(label, "").encode()


@contextmanager
def serving(*archives: FakeArchive) -> Iterator[tuple[FakeArchive, ...]]:
    servers = []
    for archive in archives:

        class Handler(BaseHTTPRequestHandler):
            fake = archive

            def do_GET(self) -> None:
                query = dict(parse_query(self.path.partition("?")[2]))
                asked = query.get("servicesubject") == "urlRequest"
                if self.fake.mode == "redirect" and asked:
                    self.send_response(302)
                    self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status, body = self.fake.answer(query)
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        archive.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        yield archives
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
