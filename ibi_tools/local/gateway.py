"""An API Gateway (HTTP API, payload 2.0) stand-in on loopback.

Each HTTP request becomes the event API Gateway would send, goes through the very
``lambda_handler`` code that runs in AWS, and the handler's answer becomes the response.

Like Lambda, each handler serves one request at a time, in its own process: the gateway
binds the port and forks ``workers`` processes that take turns accepting on it. (Powertools'
event handler keeps the current event in a class attribute, so handlers must not share a
process between concurrent requests; Lambda never does that, and neither does this.)
Connections are HTTP/1.1 and kept alive, as API Gateway's are (``httptools`` parses them); an idle
connection never holds a worker (see :class:`_Worker`).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import multiprocessing
import os
import selectors
import signal
import socket
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from multiprocessing.process import BaseProcess
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httptools

from ibi_tools.local.stores import LOOPBACK, die_with_parent


class PortInUseError(OSError):
    """Another process listens on the port an API was to take (names the API and the port)."""

    def __init__(self, name: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} ({name}) is already in use")
        self.name, self.port = name, port


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_BODY = 10 * 1024 * 1024  # API Gateway's payload limit
MAX_HEAD = 64 * 1024  # the request line and headers: more is refused (431)
READ_SIZE = 64 * 1024
IDLE_SECONDS = 15.0  # a kept connection, or a request arriving, without a byte this long: closed
SEND_SECONDS = 30.0  # an answer the client does not take within this long: the connection closed
MAX_KEPT = 8  # connections a worker keeps open after answering (more: Connection: close)
SERVER = "ibi-local"
INTERNAL_ERROR = b'{"message":"Internal Server Error"}'
_STATUSES = frozenset(status.value for status in HTTPStatus)


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


def _serve(
    name: str, listening: socket.socket, factory: Callable[[], Handler], served: Any
) -> None:
    """A worker process: build the handler, then serve until told to stop."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    _Worker(name, listening, factory(), served).serve_forever()


@dataclass
class _Request:
    """One request as the parser delivered it, whole."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    keep_alive: bool


class _Client:
    """One connection this worker accepted, its HTTP/1.1 parser (``httptools``: llhttp, the
    parser of Node.js) and the requests it has read whole and not yet answered."""

    def __init__(self, sock: socket.socket, address: tuple[str, int]) -> None:
        self.sock = sock
        self.address = address
        self.parser = httptools.HttpRequestParser(self)
        self.last = time.monotonic()
        self.ready: list[_Request] = []
        self.refusal: tuple[int, bytes] | None = None  # answered, then closed
        self.head_bytes = 0  # bytes received since the last request ended
        self.in_head = True
        self._reset()

    def _reset(self) -> None:
        self.url = bytearray()
        self.headers: list[tuple[str, str]] = []
        self.body = bytearray()

    # httptools' callbacks
    def on_message_begin(self) -> None:
        self._reset()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        self.in_head = False
        length = _header(self.headers, "content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            self.refusal = (413, b"request body too large\n")
            raise _Refused
        if (_header(self.headers, "expect") or "").lower() == "100-continue":
            self.sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self.body += body
        if len(self.body) > MAX_BODY:
            self.refusal = (413, b"request body too large\n")
            raise _Refused

    def on_message_complete(self) -> None:
        self.ready.append(
            _Request(
                method=self.parser.get_method().decode("ascii"),
                target=self.url.decode("latin-1"),
                headers=self.headers,
                body=bytes(self.body),
                keep_alive=self.parser.should_keep_alive(),
            )
        )
        self.in_head, self.head_bytes = True, 0

    def feed(self, data: bytes) -> None:
        """Parse ``data``; a request the gateway refuses sets :attr:`refusal`."""
        if self.in_head:
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD:  # llhttp itself bounds no head
                self.refusal = (431, b"request header fields too large\n")
                return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # answered as any request; no protocol switch (API Gateway makes none)
        except httptools.HttpParserError:  # malformed, or a callback refused (_Refused)
            if self.refusal is None:
                self.refusal = (400, b"bad request\n")


class _Refused(Exception):
    """Raised in a parser callback to stop at a request the gateway refuses itself."""


class _Worker:
    """One request at a time, over as many kept-alive connections as it holds.

    The worker waits on the listening socket (shared with the other workers: whoever is free
    accepts) and on its own connections at once, and answers whichever request is complete
    first, whole, before reading the next. A connection that is idle, or sends its request
    slowly, holds nothing: the worker serves the others meanwhile, and closes it after
    :data:`IDLE_SECONDS` without a byte. A worker keeps at most :data:`MAX_KEPT` connections
    open after an answer (it says ``Connection: close`` beyond), so that the connections of
    busy clients spread over the workers instead of piling up on one.
    """

    def __init__(self, name: str, listening: socket.socket, handler: Handler, served: Any):
        self.name = name
        self.listening = listening
        self.handler = handler
        self.served = served
        self.clients: dict[int, _Client] = {}
        self.selector = selectors.DefaultSelector()

    def serve_forever(self) -> None:
        self.listening.setblocking(False)  # every worker accepts; one wins each connection
        self.selector.register(self.listening, selectors.EVENT_READ, None)
        while True:
            for key, _ in self.selector.select(timeout=1.0):
                if key.data is None:
                    self._accept()
                else:
                    self._read(key.data)
            self._close_idle()

    def _accept(self) -> None:
        try:
            sock, address = self.listening.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return  # another worker took it
        sock.settimeout(SEND_SECONDS)  # sends block (bounded); reads happen when readable
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = _Client(sock, address)
        self.clients[sock.fileno()] = client
        self.selector.register(sock, selectors.EVENT_READ, client)

    def _read(self, client: _Client) -> None:
        try:
            data = client.sock.recv(READ_SIZE)
        except OSError:
            data = b""
        if not data:  # the client closed its side (a request cut short is not answered)
            self._close(client)
            return
        client.last = time.monotonic()
        try:
            client.feed(data)
        except OSError:  # the 100 Continue could not be sent
            self._close(client)
            return
        while client.ready and client.sock.fileno() >= 0:
            request = client.ready.pop(0)
            self._answer(client, request)
            if not request.keep_alive:
                self._close(client)
        if client.refusal is not None and client.sock.fileno() >= 0:
            status, text = client.refusal
            self._reply(client, status, {"content-type": "text/plain"}, text, close=True)
            self._close(client)

    def _answer(self, client: _Client, request: _Request) -> None:
        event = build_event(
            method=request.method,
            target=request.target,
            headers=request.headers,
            body=request.body,
            source_ip=client.address[0],
            host=_header(request.headers, "host") or "127.0.0.1",
        )
        context = LocalContext(self.name, event["requestContext"]["requestId"])
        head = request.method == "HEAD"
        close = not request.keep_alive
        try:
            answer = self.handler(event, context)
            headers = {k.lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
            raw = answer.get("body") or ""
            payload = (
                base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode("utf-8")
            )
            status = int(answer.get("statusCode", 200))
            cookies = answer.get("cookies")
            self._reply(client, status, headers, payload, cookies, head=head, close=close)
        except Exception:  # the Lambda failed, or answered what HTTP cannot carry: a 500
            traceback.print_exc()
            json_type = {"content-type": "application/json"}
            self._reply(client, 500, json_type, INTERNAL_ERROR, head=head, close=close)

    def _reply(
        self,
        client: _Client,
        status: int,
        headers: dict[str, str],
        payload: bytes,
        cookies: list[str] | None = None,
        *,
        head: bool = False,
        close: bool = False,
    ) -> None:
        lines = [
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase if status in _STATUSES else ''}",
            f"date: {_date()}",
            f"server: {SERVER}",
        ]
        lines += [
            f"{name}: {value}"
            for name, value in headers.items()
            if name not in {"content-length", "connection", "transfer-encoding", "date"}
        ]
        lines += [f"set-cookie: {cookie}" for cookie in cookies or []]
        lines.append(f"content-length: {len(payload)}")
        if close or len(self.clients) > MAX_KEPT:
            lines.append("connection: close")
            client.ready.clear()
            client.refusal = None
        if any("\r" in line or "\n" in line for line in lines):
            raise ValueError("a header holds a line break")  # never split into two headers
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")  # else a 500
        with self.served.get_lock():
            self.served.value += 1
        try:
            client.sock.sendall(data if head else data + payload)  # one send per answer
        except OSError:
            self._close(client)
            return
        if close or len(self.clients) > MAX_KEPT:
            self._close(client)

    def _close(self, client: _Client) -> None:
        if client.sock.fileno() < 0:
            return
        self.clients.pop(client.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(client.sock)
        client.sock.close()

    def _close_idle(self) -> None:
        deadline = time.monotonic() - IDLE_SECONDS
        for client in [c for c in self.clients.values() if c.last < deadline]:
            self._close(client)


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


_dates: dict[int, str] = {}


def _date() -> str:
    """The Date header, made once a second."""
    now = int(time.time())
    text = _dates.get(now)
    if text is None:
        _dates.clear()
        text = _dates[now] = formatdate(now, usegmt=True)
    return text
