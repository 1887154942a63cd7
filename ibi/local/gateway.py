"""An API Gateway (HTTP API, payload 2.0) stand-in on loopback.

Each HTTP request becomes the event API Gateway would send, goes through the very
``lambda_handler`` code that runs in AWS, and the handler's answer becomes the response.
"""

from __future__ import annotations

import base64
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_BODY = 10 * 1024 * 1024  # API Gateway's payload limit


@dataclass
class LocalContext:
    """The parts of a Lambda context that the handlers and Powertools read."""

    function_name: str
    aws_request_id: str
    memory_limit_in_mb: int = 256
    function_version: str = "$LATEST"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:local:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def build_event(
    *,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    source_ip: str,
    host: str,
) -> dict[str, Any]:
    """The HTTP API payload-2.0 event for one request."""
    split = urlsplit(target)
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        merged[key] = f"{merged[key]},{value}" if key in merged else value
    query: dict[str, str] = {}
    for name, value in parse_qsl(split.query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    request_id = str(uuid.uuid4())
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": split.path or "/",
        "rawQueryString": split.query,
        "headers": merged,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": host,
            "domainPrefix": host.split(".", maxsplit=1)[0],
            "http": {
                "method": method,
                "path": split.path or "/",
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": merged.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime()),
            "timeEpoch": int(time.time() * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    return event


class HandlerPool:
    """Handlers are not shared between threads (the event resolver keeps the current event)."""

    def __init__(self, factory: Callable[[], Handler]) -> None:
        self._factory = factory
        self._idle: queue.SimpleQueue[Handler] = queue.SimpleQueue()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        try:
            handler = self._idle.get_nowait()
        except queue.Empty:
            handler = self._factory()
        try:
            return handler(event, context)
        finally:
            self._idle.put(handler)


class LocalGateway(ThreadingHTTPServer):
    """One API on ``127.0.0.1:port``, served by ``handler_factory``'s handlers."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, name: str, handler_factory: Callable[[], Handler], port: int) -> None:
        self.name = name
        self.pool = HandlerPool(handler_factory)
        super().__init__(("127.0.0.1", port), _RequestHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name=self.name, daemon=True)
        thread.start()
        return thread


class _RequestHandler(BaseHTTPRequestHandler):
    server: LocalGateway
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the handlers log what matters, in their own structured way."""

    def _serve(self) -> None:
        length_text = self.headers.get("content-length", "0")
        length = int(length_text) if length_text.isdigit() else -1
        if length < 0 or length > MAX_BODY:
            self._reply(413, {"content-type": "text/plain"}, b"request body too large\n")
            return
        body = self.rfile.read(length) if length else b""
        event = build_event(
            method=self.command,
            target=self.path,
            headers=list(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
            host=self.headers.get("host", "127.0.0.1"),
        )
        context = LocalContext(self.server.name, event["requestContext"]["requestId"])
        try:
            answer = self.server.pool(event, context)
        except Exception:  # the Lambda would have failed: API Gateway answers 500
            self._reply(
                500, {"content-type": "application/json"}, b'{"message":"Internal Server Error"}'
            )
            raise
        headers = {k.lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
        raw = answer.get("body") or ""
        payload = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode("utf-8")
        self._reply(int(answer.get("statusCode", 200)), headers, payload, answer.get("cookies"))

    def _reply(
        self,
        status: int,
        headers: dict[str, str],
        payload: bytes,
        cookies: list[str] | None = None,
    ) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name not in {"content-length", "connection", "transfer-encoding"}:
                self.send_header(name, value)
        for cookie in cookies or []:
            self.send_header("set-cookie", cookie)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve
