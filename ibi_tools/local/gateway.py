"""An API Gateway (HTTP API, payload 2.0) stand-in on loopback.

Each HTTP request becomes the event API Gateway would send, goes through the very
``lambda_handler`` code that runs in AWS, and the handler's answer becomes the response.

Like Lambda, each handler serves one request at a time, in its own process: the gateway
binds the port and forks ``workers`` processes that take turns accepting on it. (Powertools'
event handler keeps the current event in a class attribute, so handlers must not share a
process between concurrent requests; Lambda never does that, and neither does this.)
Connections are HTTP/1.1 and kept alive, as API Gateway's are (``h11`` frames them); an idle
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

import h11

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


class _Client:
    """One connection this worker accepted: its HTTP/1.1 state and the request being read."""

    __slots__ = ("address", "body", "http", "last", "request", "sock")

    def __init__(self, sock: socket.socket, address: tuple[str, int]) -> None:
        self.sock = sock
        self.address = address
        self.http = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self.last = time.monotonic()
        self.request: h11.Request | None = None
        self.body = bytearray()


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
            self._close(client)
            return
        client.last = time.monotonic()
        try:
            client.http.receive_data(data)  # b"": the client closed its side
        except h11.RemoteProtocolError:
            self._close(client)
            return
        self._advance(client)

    def _advance(self, client: _Client) -> None:
        """Act on every event the bytes received so far make (pipelined requests too)."""
        while client.sock.fileno() >= 0:
            try:
                event = client.http.next_event()
            except h11.RemoteProtocolError as error:
                status = error.error_status_hint
                self._refuse(client, status, f"{HTTPStatus(status).phrase}\n".encode())
                return
            if event is h11.NEED_DATA:
                if client.http.they_are_waiting_for_100_continue:
                    self._send(client, h11.InformationalResponse(status_code=100, headers=[]))
                return
            if isinstance(event, h11.Request):
                client.request, client.body = event, bytearray()
                length = _header(event.headers, b"content-length")
                if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
                    self._refuse(client, 413, b"request body too large\n")
                    return
            elif isinstance(event, h11.Data):
                client.body += event.data
                if len(client.body) > MAX_BODY:
                    self._refuse(client, 413, b"request body too large\n")
                    return
            elif isinstance(event, h11.EndOfMessage):
                self._answer(client)
                if not self._next_cycle(client):
                    return
            else:  # ConnectionClosed, or PAUSED after a request the worker refused
                self._close(client)
                return

    def _answer(self, client: _Client) -> None:
        request = client.request
        assert request is not None
        headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in request.headers]
        event = build_event(
            method=request.method.decode("ascii"),
            target=request.target.decode("latin-1"),
            headers=headers,
            body=bytes(client.body),
            source_ip=client.address[0],
            host=(_header(request.headers, b"host") or b"127.0.0.1").decode("latin-1"),
        )
        context = LocalContext(self.name, event["requestContext"]["requestId"])
        try:
            answer = self.handler(event, context)
        except Exception:  # the Lambda would have failed: API Gateway answers 500
            traceback.print_exc()
            self._reply(client, 500, {"content-type": "application/json"}, INTERNAL_ERROR)
            return
        headers_out = {k.lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
        raw = answer.get("body") or ""
        payload = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode("utf-8")
        status = int(answer.get("statusCode", 200))
        self._reply(client, status, headers_out, payload, answer.get("cookies"))

    def _reply(
        self,
        client: _Client,
        status: int,
        headers: dict[str, str],
        payload: bytes,
        cookies: list[str] | None = None,
        *,
        close: bool = False,
    ) -> None:
        with self.served.get_lock():
            self.served.value += 1
        fields = [("date", _date()), ("server", SERVER)]
        fields += [
            (name, value)
            for name, value in headers.items()
            if name not in {"content-length", "connection", "transfer-encoding", "date"}
        ]
        fields += [("set-cookie", cookie) for cookie in cookies or []]
        fields.append(("content-length", str(len(payload))))
        if close or len(self.clients) > MAX_KEPT:
            fields.append(("connection", "close"))
        reason = HTTPStatus(status).phrase if status in _STATUSES else ""
        response = h11.Response(status_code=status, headers=fields, reason=reason)
        head = client.request is not None and client.request.method == b"HEAD"
        try:
            data = client.http.send(response) or b""
            if payload and not head:
                data += client.http.send(h11.Data(data=payload)) or b""
            data += client.http.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:  # a header the function set that HTTP cannot carry
            traceback.print_exc()
            self._close(client)
            return
        self._write(client, data)  # the status line, the headers and the body: one send

    def _refuse(self, client: _Client, status: int, text: bytes) -> None:
        """Answer a request this gateway refuses itself, and close the connection."""
        if client.http.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self._reply(client, status, {"content-type": "text/plain"}, text, close=True)
        self._close(client)

    def _next_cycle(self, client: _Client) -> bool:
        """Ready for the connection's next request (False: it was closed)."""
        if client.http.our_state is h11.DONE and client.http.their_state is h11.DONE:
            client.http.start_next_cycle()
            client.request, client.body = None, bytearray()
            return True
        self._close(client)
        return False

    def _send(self, client: _Client, event: Any) -> None:
        self._write(client, client.http.send(event) or b"")

    def _write(self, client: _Client, data: bytes) -> None:
        try:
            client.sock.sendall(data)
        except OSError:
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


def _header(headers: Any, name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return bytes(value)
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
