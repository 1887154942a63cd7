"""Talking to Archives safely and cheaply: only registered ones, only public addresses, bounded
answers, kept-alive connections, every Archive of a round asked at once.

An Archive's address is resolved, every IP it resolves to must be public (global) unless it
falls in an explicit allow-list (loopback for local mode and tests), and the connection goes
to the very IP that was checked (no second lookup an attacker could rebind): the rule is
``functions/shared/addresses.py``'s, shared with the Archive's transfers. No redirect is
followed, answers are capped in size, and each request has its own timeout.

All requests run on one asyncio event loop, on a thread of its own (started on first use, and
again in a forked child): a round of N Archives is N coroutines, not N threads, and a
connection that answered is kept for the next request to the same Archive (HTTP/1.1
keep-alive; for HTTPS, no second TLS handshake). Answers are parsed by ``httptools`` (llhttp,
the parser of Node.js; issue 14: about 1.5 µs of CPU per answer, where h11 took about 65).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import ipaddress
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from functions.shared.addresses import AddressPolicy, UnsafeAddress
from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, encode_query, parse_pair_list

__all__ = ["AddressPolicy", "ArchiveTransport", "Endpoint", "Lead", "Request", "UnsafeAddress"]

DEFAULT_MAX_ANSWER = 256 * 1024
IDLE_SECONDS = 20.0  # a kept connection older than this is closed, not reused
MAX_IDLE_PER_ARCHIVE = 4
# Lambda allows 1,024 open files: at most this many requests in flight (the others of a round
# wait their turn), and at most this many connections kept.
MAX_IN_FLIGHT = 256
MAX_IDLE = 256
VETTED_SECONDS = 60.0  # how long a host name's checked IP is reused
READ_SIZE = 64 * 1024
MAX_HEAD = 16 * 1024  # an answer's status line and headers (h11's bound, kept)
T = TypeVar("T")
# Event loops a forked child inherited from its parent. Kept referenced, never closed: closing
# one would unregister its file descriptors from the epoll instance the parent still uses.
_INHERITED: list[object] = []


class AnswerTooLarge(ValueError):
    """More bytes than the resolver reads from one Archive."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    scheme: str  # http | https
    host: str
    port: int

    @classmethod
    def parse(cls, address: str, protocol: str) -> Endpoint:
        """``host[:port]`` (IPv6 in brackets) and ``HTTP``/``HTTPS`` (§7.5)."""
        scheme = protocol.strip().lower()
        if scheme not in {"http", "https"}:
            raise InvalidInput("archiveprotocol", f"{protocol!r} is neither HTTP nor HTTPS")
        text = address.strip()
        if not text or any(c in text for c in "/?#@ \\") or len(text) > 260:
            raise InvalidInput("archiveaddress", f"{address!r} is not host[:port]")
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
            if rest and not rest.startswith(":"):
                raise InvalidInput("archiveaddress", f"{address!r} is not [ipv6]:port")
        else:
            host, _, port_text = text.partition(":")
        default = 443 if scheme == "https" else 80
        if port_text and (not port_text.isdigit() or not 1 <= int(port_text) <= 65535):
            raise InvalidInput("archiveaddress", f"{address!r}: the port is not 1-65535")
        if not host:
            raise InvalidInput("archiveaddress", f"{address!r} has no host")
        return cls(scheme, host.lower(), int(port_text) if port_text else default)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Request:
    """One request to one Archive service: ``GET /<service IBI>?pairs``."""

    endpoint: Endpoint
    service_ibi: str
    pairs: Sequence[tuple[str, str]]
    correlation_id: str | None = None


class Result(enum.Enum):
    """How one Archive's part of a round ended."""

    ANSWERED = "answered"
    NOT_NEEDED = "not needed"  # another Archive settled the round first
    NOT_ASKED = "not asked"  # the round's lead answered within its head start (:class:`Lead`)
    FAILED = "failed"  # timeout, unreachable, refused, malformed, unusable address


@dataclass(frozen=True, slots=True)
class Outcome:
    """One Archive's part of a round: the result, its pairs if it answered, why not if not."""

    key: str
    result: Result
    pairs: PairList | None
    problem: str | None  # in words, for logs and /status: None when it answered
    seconds: float

    @classmethod
    def answered(cls, key: str, pairs: PairList, seconds: float) -> Outcome:
        return cls(key, Result.ANSWERED, pairs, None, seconds)

    @classmethod
    def failed(cls, key: str, problem: str, seconds: float) -> Outcome:
        return cls(key, Result.FAILED, None, problem, seconds)

    @classmethod
    def not_needed(cls, key: str, seconds: float) -> Outcome:
        return cls(key, Result.NOT_NEEDED, None, Result.NOT_NEEDED.value, seconds)

    @classmethod
    def not_asked(cls, key: str) -> Outcome:
        return cls(key, Result.NOT_ASKED, None, Result.NOT_ASKED.value, 0.0)

    @property
    def text(self) -> str:
        """The outcome in words: ``answered``, or the problem."""
        return self.problem or self.result.value


Requests = Mapping[str, "Request | None"]  # a round: each Archive's request, keyed (None: unusable)
Enough = Callable[[PairList], bool]  # an answer that settles the round
Late = Callable[[str, PairList], None]  # hears an answer that came after its round ended


@dataclass(frozen=True, slots=True)
class Lead:
    """A round led by one Archive, a hedged request: ``key`` is asked first, alone; the others
    only if it has not answered within ``head_start`` seconds (else they are reported
    :attr:`Result.NOT_ASKED`, and the caller decides what next). Once they are asked, an
    answer of ``key`` that passes ``settles`` ends the round at once, whatever the round's
    own checks say of it; its other answers are judged as anyone's."""

    key: str
    head_start: float
    settles: Enough


class Transport(Protocol):
    """What the resolver needs of the network: vet an address, ask one Archive, ask a round."""

    def vet(self, endpoint: Endpoint) -> str: ...

    def send(self, request: Request, *, timeout: float) -> PairList: ...

    def ask_all(
        self,
        requests: Requests,
        *,
        timeout: float,
        deadline: float,
        enough: Enough | None = None,
        grace: float = 0.0,
        at_once: Enough | None = None,
        late: Late | None = None,
        lead: Lead | None = None,
    ) -> list[Outcome]: ...


@dataclass(frozen=True, slots=True)
class _Settle:
    """When a round may end: ``grace`` s after the first ``enough`` answer; at once after one
    that also passes ``at_once`` (nothing better can come)."""

    enough: Enough | None
    grace: float
    at_once: Enough | None
    late: Late | None = None
    lead: Lead | None = None

    def wait(self, key: str, pairs: PairList) -> float | None:
        """How much longer the round waits after ``key``'s ``pairs`` (None: it does not
        settle it)."""
        if self.lead is not None and key == self.lead.key and self.lead.settles(pairs):
            return 0.0
        if self.enough is None or not self.enough(pairs):
            return None
        return 0.0 if self.at_once is not None and self.at_once(pairs) else self.grace


class _Stale(ConnectionError):
    """A kept connection the Archive had closed before this request: try a fresh one."""


class _Answer:
    """The parser's callbacks for one answer: its body, bounded, and whether it ended."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.body = bytearray()
        self.headers_done = False
        self.framed = False  # a Content-Length or chunks: the answer does not end at close
        self.done = False
        self.status = 0
        self.keep_alive = False
        self.parser = _httptools().HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, data: bytes) -> None:
        self.body += data
        if len(self.body) > self.limit:
            raise AnswerTooLarge(f"answered more than {self.limit} bytes")

    def on_message_complete(self) -> None:
        # read here: once the callback returns, the parser is ready for the next message
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        self.done = True

    def next(self) -> _Answer:
        """Ready for the next answer on the same parser (after an interim one)."""
        self.body.clear()
        self.headers_done = self.framed = self.done = False
        return self


class _Connection:
    """One HTTP/1.1 connection to one Archive, used by one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()
        self.keep = False  # the last answer let the connection be used again

    def usable(self) -> bool:
        return (
            not self.reader.at_eof()
            and not self.writer.is_closing()
            and time.monotonic() - self.idle_since < IDLE_SECONDS
        )

    async def exchange(self, request: bytes, limit: int) -> tuple[int, bytes]:
        """Send ``request``; the status and the body, read no further than ``limit`` bytes."""
        self.keep = False
        try:
            self.writer.write(request)
            await self.writer.drain()
        except (ConnectionError, OSError) as error:
            raise _Stale(str(error)) from error
        answer = _Answer(limit)
        httptools = _httptools()
        heard, head = False, 0
        while not answer.done:
            try:
                data = await self.reader.read(READ_SIZE)
            except (ConnectionError, OSError) as error:
                if not heard:
                    raise _Stale(str(error)) from error
                raise
            if not data:
                if not heard:
                    raise _Stale("closed before answering")
                if answer.headers_done and not answer.framed:
                    break  # an answer without a length ends where the connection does
                raise ConnectionResetError("closed in the middle of the answer")
            heard = True
            try:
                answer.parser.feed_data(data)
            except httptools.HttpParserCallbackError as error:
                if isinstance(error.__context__, AnswerTooLarge):
                    raise error.__context__ from None
                raise MalformedAnswer("not HTTP/1.1") from error
            except httptools.HttpParserError as error:
                raise MalformedAnswer("not HTTP/1.1") from error
            if not answer.headers_done:
                head += len(data)
                if head > MAX_HEAD:  # the parser bounds no head: an endless one ends here
                    raise MalformedAnswer("not HTTP/1.1")
            if answer.done and 100 <= answer.status < 200:
                answer, head = answer.next(), 0  # an interim answer: the real one follows
        self.keep = answer.done and answer.keep_alive
        status = answer.status if answer.done else answer.parser.get_status_code()
        return status, bytes(answer.body)

    def reusable(self) -> bool:
        if self.keep:
            self.idle_since = time.monotonic()
            return True
        return False

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class MalformedAnswer(ValueError):
    """The Archive's answer is not HTTP/1.1."""


class _IoThread:
    """The event loop of this process, on a daemon thread, with the connections it keeps."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.idle: dict[tuple[str, str, int, str], list[_Connection]] = {}
        self.idle_count = 0
        self.in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
        self.background: set[asyncio.Task[Any]] = set()
        threading.Thread(target=self.loop.run_forever, name="ibi-archive-io", daemon=True).start()


class ArchiveTransport:
    """GET requests to Archive services, alone or a whole round at once; answers as pair lists."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER,
        user_agent: str = "ibi-resolver",
    ) -> None:
        self.policy = policy
        self.max_answer_bytes = max_answer_bytes
        self.user_agent = user_agent
        self._io: _IoThread | None = None
        self._io_lock = threading.Lock()
        self._vetted: dict[tuple[str, int], tuple[float, str]] = {}
        self._tls: ssl.SSLContext | None = None
        self.connections_opened = 0  # for the benchmarks and tests

    # -- from any thread ---------------------------------------------------------------------

    def vet(self, endpoint: Endpoint) -> str:
        """The IP to connect to, or :class:`UnsafeAddress` (the address policy's verdict)."""
        return self.policy.vet(endpoint.host, endpoint.port)

    def get(
        self,
        endpoint: Endpoint,
        service_ibi: str,
        pairs: Sequence[tuple[str, str]],
        *,
        timeout: float,
        correlation_id: str | None = None,
    ) -> PairList:
        """``GET <base>/<service IBI>?pairs``; the pair list, or an exception saying why not."""
        return self.send(Request(endpoint, service_ibi, pairs, correlation_id), timeout=timeout)

    def send(self, request: Request, *, timeout: float) -> PairList:
        """One request, alone: its pair list, or an exception saying why not."""
        return self._run(self._ask(request, timeout), timeout + 1.0)

    def ask_all(
        self,
        requests: Requests,
        *,
        timeout: float,
        deadline: float,
        enough: Enough | None = None,
        grace: float = 0.0,
        at_once: Enough | None = None,
        late: Late | None = None,
        lead: Lead | None = None,
    ) -> list[Outcome]:
        """Ask every Archive at once (with ``lead``, that one first: :class:`Lead`); outcomes
        in the order the answers arrive.

        ``None`` stands for an Archive whose address is unusable. The round ends when all have
        answered, when ``deadline`` (a ``time.monotonic()`` value) passes, or, with
        ``enough``, ``grace`` seconds after the first answer that settles the question (at
        once when 0, or when that answer also passes ``at_once``): the others are then
        reported as :attr:`Result.NOT_NEEDED` (they may still answer, and keep their
        connection for next time). ``late(key, pairs)`` hears each of those that does answer,
        on the transport's thread, after the round has returned.
        """
        remaining = max(0.0, deadline - time.monotonic())
        settle = _Settle(enough, grace, at_once, late, lead)
        return self._run(self._ask_all(requests, timeout, deadline, settle), remaining + 1.0)

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop())
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def _loop(self) -> asyncio.AbstractEventLoop:
        with self._io_lock:
            if self._io is None or self._io.pid != os.getpid():
                if self._io is not None:
                    _INHERITED.append(self._io)  # a forked child: the parent's, left untouched
                self._io = _IoThread()  # its own loop and connections
            return self._io.loop

    # -- on the event loop -------------------------------------------------------------------

    async def _ask_all(
        self,
        requests: Mapping[str, Request | None],
        timeout: float,
        deadline: float,
        settle: _Settle,
    ) -> list[Outcome]:
        started = time.monotonic()
        outcomes = [
            Outcome.failed(key, "unusable address", 0.0) for key, r in requests.items() if r is None
        ]
        lead = settle.lead if settle.lead is not None and requests.get(settle.lead.key) else None
        first = {lead.key: requests[lead.key]} if lead is not None else requests
        pending = {
            asyncio.ensure_future(self._ask(request, timeout)): key
            for key, request in first.items()
            if request is not None
        }
        if lead is not None:  # the lead alone, for its head start
            head_start = min(lead.head_start, deadline - started)
            done = (await asyncio.wait(pending, timeout=head_start))[0] if head_start > 0 else ()
            if done:
                (task,) = done
                error = task.exception()
                outcomes.append(
                    Outcome.answered(lead.key, task.result(), time.monotonic() - started)
                    if error is None
                    else Outcome.failed(lead.key, describe(error), time.monotonic() - started)
                )
                others = [k for k, r in requests.items() if k != lead.key and r is not None]
                return outcomes + [Outcome.not_asked(key) for key in others]
            for key, request in requests.items():
                if key != lead.key and request is not None:
                    pending[asyncio.ensure_future(self._ask(request, timeout))] = key
        settled, until = False, deadline
        lead_key = lead.key if lead is not None else None
        while pending:
            remaining = until - time.monotonic()
            if remaining <= 0:
                break
            done, _ = await asyncio.wait(
                pending, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                key = pending.pop(task)
                elapsed = time.monotonic() - started
                error = task.exception()
                if error is None:
                    pairs = task.result()
                    outcomes.append(Outcome.answered(key, pairs, elapsed))
                    wait = settle.wait(key, pairs)
                    if wait is not None and (not settled or (wait == 0.0 and key == lead_key)):
                        settled, until = True, min(until, time.monotonic() + wait)
                else:
                    outcomes.append(Outcome.failed(key, describe(error), elapsed))
        if settled:
            for key in pending.values():
                outcomes.append(Outcome.not_needed(key, time.monotonic() - started))
            self._let_finish(pending, settle.late)
            return outcomes
        for key in pending.values():
            outcomes.append(Outcome.failed(key, "timeout", deadline - started))
        self._let_finish(pending)
        return outcomes

    def _let_finish(
        self, tasks: Mapping[asyncio.Task[PairList], str], late: Late | None = None
    ) -> None:
        """Requests nobody waits for any more: they end by themselves (each has a timeout);
        ``late`` hears the answers that still come."""
        assert self._io is not None
        background = self._io.background
        for task, key in tasks.items():
            background.add(task)
            task.add_done_callback(_forget(background))
            if late is not None:
                task.add_done_callback(_hear(late, key))

    async def _ask(self, request: Request, timeout: float) -> PairList:
        assert self._io is not None
        async with self._io.in_flight, asyncio.timeout(timeout):
            endpoint = request.endpoint
            ip = await self._vet(endpoint)
            headers = [
                ("Host", endpoint.host_header),
                ("User-Agent", self.user_agent),
                ("Accept", "text/plain"),
            ]
            if request.correlation_id:
                headers.append(("X-Correlation-Id", request.correlation_id))
            message = _request_bytes(
                f"/{request.service_ibi}?{encode_query(request.pairs)}", headers
            )
            for attempt in range(2):
                connection, kept = await self._connection(endpoint, ip)
                try:
                    status, body = await connection.exchange(message, self.max_answer_bytes)
                except _Stale:
                    connection.close()
                    if kept and attempt == 0:
                        continue  # the Archive had closed a kept connection: once more, fresh
                    raise ConnectionResetError("closed before answering") from None
                except BaseException:
                    connection.close()
                    raise
                self._keep(endpoint, ip, connection)
                break
        if status != 200:
            raise ValueError(f"answered HTTP {status}")  # redirects are not followed
        return parse_pair_list(body, max_length=self.max_answer_bytes)

    async def _vet(self, endpoint: Endpoint) -> str:
        key = (endpoint.host, endpoint.port)
        now = time.monotonic()
        cached = self._vetted.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            ipaddress.ip_address(endpoint.host)
        except ValueError:  # a name: look it up off the loop
            ip = await asyncio.get_running_loop().run_in_executor(
                None, self.policy.vet, endpoint.host, endpoint.port
            )
            self._vetted[key] = (now + VETTED_SECONDS, ip)
            return ip
        return self.policy.vet(endpoint.host, endpoint.port)

    async def _connection(self, endpoint: Endpoint, ip: str) -> tuple[_Connection, bool]:
        assert self._io is not None
        kept = self._io.idle.get((endpoint.scheme, endpoint.host, endpoint.port, ip), [])
        while kept:
            connection = kept.pop()
            self._io.idle_count -= 1
            if connection.usable():
                return connection, True
            connection.close()
        tls: ssl.SSLContext | None = None
        if endpoint.scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        reader, writer = await asyncio.open_connection(
            ip,
            endpoint.port,
            ssl=tls,
            server_hostname=endpoint.host if tls is not None else None,
            limit=READ_SIZE,
        )
        self.connections_opened += 1
        return _Connection(reader, writer), False

    def _keep(self, endpoint: Endpoint, ip: str, connection: _Connection) -> None:
        assert self._io is not None
        if not connection.reusable():
            connection.close()
            return
        kept = self._io.idle.setdefault((endpoint.scheme, endpoint.host, endpoint.port, ip), [])
        if len(kept) >= MAX_IDLE_PER_ARCHIVE or self._io.idle_count >= MAX_IDLE:
            connection.close()
        else:
            kept.append(connection)
            self._io.idle_count += 1


def _hear(late: Late, key: str) -> Callable[[asyncio.Task[PairList]], None]:
    def done(task: asyncio.Task[PairList]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        try:
            late(key, task.result())
        except Exception:  # a listener's failure must never reach the event loop
            return

    return done


def _forget(background: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    def done(task: asyncio.Task[Any]) -> None:
        background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an answer nobody waited for is not an error

    return done


def _httptools() -> Any:
    """httptools, imported at the first answer parsed rather than at start-up (about 4 ms; the
    landing page, /status and the administration routes never need it). Its wheel is compiled
    for the Lambda's arm64, so the start-up benchmark, which imports the package as built on
    this x86 machine, could not load it at the handler's import."""
    import httptools

    return httptools


def _request_bytes(target: str, headers: list[tuple[str, str]]) -> bytes:
    """A GET request's bytes. The target and the values come from the registry and the pair
    list's encoding; a line break in one would split the request: refused."""
    lines = [f"GET {target} HTTP/1.1", *(f"{name}: {value}" for name, value in headers)]
    if any(c in line for line in lines for c in "\r\n\0") or " " in target:
        raise ValueError("a request line or header holds a line break or a space")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def describe(error: BaseException) -> str:
    """What went wrong with one Archive, in a few words (for logs and the alerts)."""
    if isinstance(error, TimeoutError | socket.timeout):
        return "timeout"
    if isinstance(error, UnsafeAddress):
        return f"refused: {error}"
    if isinstance(error, InvalidInput):
        return f"malformed answer: {error.reason}"
    if isinstance(error, MalformedAnswer):
        return "malformed answer: not HTTP/1.1"
    if isinstance(error, ConnectionError | OSError):
        return f"unreachable: {type(error).__name__}"
    return f"failed: {error}"[:200]
