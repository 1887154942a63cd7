"""An API Gateway (HTTP API, payload 2.0) stand-in on loopback.

Each HTTP request becomes the event API Gateway would send, goes through the very
``lambda_handler`` code that runs in AWS, and the handler's answer becomes the response.

Like Lambda, each handler serves one request at a time, in its own process: the gateway
binds the port and forks ``workers`` processes that take turns accepting on it. (Powertools'
event handler keeps the current event in a class attribute, so handlers must not share a
process between concurrent requests; Lambda never does that, and neither does this.)
"""

from __future__ import annotations

import base64
import contextlib
import errno
import multiprocessing
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from multiprocessing.process import BaseProcess
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ibi_tools.local.stores import LOOPBACK, die_with_parent


class PortInUseError(OSError):
    """Another process listens on the port an API was to take (names the API and the port)."""

    def __init__(self, name: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} ({name}) is already in use")
        self.name, self.port = name, port


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
    merged["x-forwarded-proto"] = "http"  # as API Gateway says https: the scheme served here
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


class LocalGateway:
    """One API on ``127.0.0.1:port``, served by ``workers`` processes, one request each at a time.

    ``handler_factory`` runs in each worker after the fork, so that every worker builds its
    own clients (boto3 connection pools must not cross a fork).
    """

    def __init__(
        self, name: str, handler_factory: Callable[[], Handler], port: int, *, workers: int = 4
    ) -> None:
        self.name = name
        self._factory = handler_factory
        self._workers = workers
        self._processes: list[BaseProcess] = []
        # Requests answered by all workers, as API Gateway's Count metric counts them.
        self._served = multiprocessing.get_context("fork").Value("Q", 0)
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((LOOPBACK, port))
        except OSError as error:
            self.socket.close()
            if error.errno == errno.EADDRINUSE:
                raise PortInUseError(name, port) from None
            raise
        self.socket.listen(256)
        self.port: int = self.socket.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def requests_served(self) -> int:
        """How many requests this API has answered (every worker, every status)."""
        with self._served.get_lock():
            return int(self._served.value)

    def start(self) -> LocalGateway:
        for index in range(self._workers):
            self._processes.append(self._fork(index))
        return self

    def _fork(self, index: int) -> BaseProcess:
        process = multiprocessing.get_context("fork").Process(
            target=_serve,
            args=(f"{self.name}-{index}", self.socket, self._factory, self._served),
            name=f"{self.name}-{index}",
            daemon=True,
        )
        process.start()
        return process

    def alive(self) -> bool:
        return all(process.is_alive() for process in self._processes)

    @property
    def worker_pids(self) -> list[int]:
        return [process.pid for process in self._processes if process.pid is not None]

    def dead_workers(self) -> list[str]:
        """How each worker that has ended ended (an empty list: all serve)."""
        ended = []
        for process in self._processes:
            code = process.exitcode
            if code is not None:
                how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
                ended.append(f"{process.name} (pid {process.pid}) {how}")
        return ended

    def restart_dead(self) -> None:
        """Fork a new worker for each one that ended: the port never stops being served.

        (The listening socket is the parent's: while no worker accepts, connections wait in
        its backlog, unanswered, so a gateway whose workers all died would hang its clients.)
        """
        for index, process in enumerate(self._processes):
            if process.exitcode is not None:
                process.join()
                self._processes[index] = self._fork(index)

    def shutdown(self) -> None:
        for process in self._processes:
            if process.is_alive() and process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
        for process in self._processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        self._processes.clear()
        self.socket.close()


class _WorkerServer(HTTPServer):
    """A single-threaded HTTP server on a socket its parent bound."""

    def __init__(self, name: str, listening: socket.socket, handler: Handler, served: Any) -> None:
        super().__init__((LOOPBACK, 0), _RequestHandler, bind_and_activate=False)
        self.socket.close()
        self.socket = listening
        self.name = name
        self.handler = handler
        self.served = served


def _serve(
    name: str, listening: socket.socket, factory: Callable[[], Handler], served: Any
) -> None:
    """A worker process: build the handler, then serve until told to stop."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server = _WorkerServer(name, listening, factory(), served)
    server.serve_forever()


class _RequestHandler(BaseHTTPRequestHandler):
    server: _WorkerServer
    protocol_version = "HTTP/1.0"  # one request per connection: a worker is never held idle

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
            answer = self.server.handler(event, context)
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
        with self.server.served.get_lock():
            self.server.served.value += 1
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
    do_TRACE = do_QUERY = _serve  # answered by the function, as API Gateway passes them on
