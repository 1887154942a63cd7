"""The resolver's transport to Archives, against scripted HTTP servers on loopback.

Each server answers every request with the bytes its script gives, on connections it keeps
open or closes as told, and counts the connections it accepted: what the transport reuses,
refuses, retries and reports is read from there.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from functions.resolver.network import (
    AddressPolicy,
    ArchiveTransport,
    Endpoint,
    Request,
    UnsafeAddress,
)
from ibi.core.pairlist import PairList

LOOPBACK_ONLY = AddressPolicy(["127.0.0.0/8"])
SERVICE = "J8LNKB5R7W/3FUQHC5"
PAIRS = [("servicesubject", "urlRequest"), ("parsedibiurl.ibi", "8JMKD3MGP8W/35MMLL8")]


def ok(body: bytes = b"state Original\r\n", *, close: bool = False) -> bytes:
    connection = b"Connection: close\r\n" if close else b""
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), connection, body)


class Scripted:
    """A server on 127.0.0.1: ``script(n)`` is the n-th answer (n from 0), or ``None`` to hang up
    without answering; ``keep`` says whether a connection stays open after an answer."""

    def __init__(self, script: Callable[[int], bytes | None], *, keep: bool = True) -> None:
        self.script = script
        self.keep = keep
        self.connections = 0
        self.requests: list[bytes] = []
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint("http", "127.0.0.1", self.port)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.socket.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client, contextlib.suppress(OSError):  # the transport may hang up (a reset)
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = client.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                self.requests.append(head)
                answer = self.script(len(self.requests) - 1)
                if answer is None:
                    return
                client.sendall(answer)
                if not self.keep:
                    return

    def close(self) -> None:
        self.socket.close()


@contextmanager
def scripted(script: Callable[[int], bytes | None], *, keep: bool = True) -> Iterator[Scripted]:
    server = Scripted(script, keep=keep)
    try:
        yield server
    finally:
        server.close()


def get(transport: ArchiveTransport, server: Scripted, timeout: float = 2.0) -> PairList:
    return transport.get(server.endpoint, SERVICE, PAIRS, timeout=timeout)


def test_a_connection_that_answered_is_kept_for_the_next_request() -> None:
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: ok()) as server:
        for _ in range(5):
            assert get(transport, server).word("state") == "Original"
    assert server.connections == 1 and transport.connections_opened == 1
    head = server.requests[0].decode()
    assert head.startswith(f"GET /{SERVICE}?servicesubject=urlRequest&parsedibiurl.ibi=")
    assert f"Host: 127.0.0.1:{server.port}" in head and "User-Agent: ibi-resolver" in head


def test_an_archive_that_closes_its_connections_is_asked_on_fresh_ones() -> None:
    """HTTP/1.0-style servers (no keep-alive) and Connection: close both work."""
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: ok(close=True), keep=False) as server:
        for _ in range(3):
            assert get(transport, server).word("state") == "Original"
    assert server.connections == 3


def test_an_answer_without_a_length_ends_with_the_connection() -> None:
    """HTTP/1.0 framing: no Content-Length, no chunks; the body is what comes before the close."""
    unframed = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nstate Original\r\n"
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: unframed, keep=False) as server:
        for _ in range(2):
            assert get(transport, server).word("state") == "Original"
    assert server.connections == 2  # never kept


def test_an_interim_answer_is_skipped_for_the_real_one() -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + ok()
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: interim) as server:
        assert get(transport, server).word("state") == "Original"
        assert get(transport, server).word("state") == "Original"
    assert server.connections == 1


def test_a_kept_connection_closed_by_the_archive_is_retried_once_on_a_fresh_one() -> None:
    """The Archive hangs up on a kept connection without a word (its idle timeout)."""
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: None if n == 1 else ok()) as server:
        assert get(transport, server).word("state") == "Original"
        assert get(transport, server).word("state") == "Original"  # request 1 hung up: retried
    assert server.connections == 2 and len(server.requests) == 3


def test_a_fresh_connection_that_is_hung_up_on_is_a_failure_not_a_retry() -> None:
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: None) as server, pytest.raises(ConnectionResetError):
        get(transport, server)
    assert len(server.requests) == 1


def test_a_chunked_answer_is_read_whole() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"6\r\nstate \r\n"
        b"a\r\nOriginal\r\n\r\n"
        b"0\r\n\r\n"
    )
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: chunked) as server:
        assert get(transport, server).word("state") == "Original"
        assert get(transport, server).word("state") == "Original"
    assert server.connections == 1


def test_an_answer_larger_than_the_cap_is_refused_without_reading_it_all() -> None:
    huge = b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n" + b"x " + b"y" * 300_000
    transport = ArchiveTransport(LOOPBACK_ONLY, max_answer_bytes=1024)
    with scripted(lambda n: huge) as server, pytest.raises(ValueError, match="more than 1024"):
        get(transport, server)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (b"this is not HTTP\r\n\r\n", "malformed answer: not HTTP/1.1"),
        (
            b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\nContent-Length: 0\r\n\r\n",
            "failed: answered HTTP 302",
        ),
        (ok(b"{{{ not } a pair list\x00\r\n"), "malformed answer"),
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"h" * 100_000 + b"\r\n\r\n", "malformed answer"),
    ],
    ids=["not-http", "redirect", "not-a-pair-list", "endless-header"],
)
def test_hostile_answers_are_named_problems(answer: bytes, problem: str) -> None:
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: answer) as server:
        (outcome,) = transport.ask_all(
            {"a": Request(server.endpoint, SERVICE, PAIRS)},
            timeout=2.0,
            deadline=time.monotonic() + 3,
        )
    assert outcome.pairs is None and outcome.problem is not None
    assert outcome.problem.startswith(problem), outcome.problem


def test_private_addresses_and_names_are_refused_unless_allowed() -> None:
    public_only = ArchiveTransport(AddressPolicy())
    with scripted(lambda n: ok()) as server:
        for host in ("127.0.0.1", "localhost"):
            endpoint = Endpoint("http", host, server.port)
            with pytest.raises(UnsafeAddress, match="non-public"):
                public_only.get(endpoint, SERVICE, PAIRS, timeout=2.0)
        assert server.connections == 0
        named = Endpoint("http", "localhost", server.port)
        if "127.0.0.1" in {i[4][0] for i in socket.getaddrinfo("localhost", server.port)}:
            allowed = ArchiveTransport(AddressPolicy(["127.0.0.0/8", "::1/128"]))
            assert allowed.get(named, SERVICE, PAIRS, timeout=2.0).word("state") == "Original"


def test_a_round_ends_when_one_answer_is_enough_and_reports_the_rest() -> None:
    slow = lambda n: (time.sleep(1.0), ok(b"state Copy\r\n"))[1]  # noqa: E731
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: ok()) as fast, scripted(slow) as late, scripted(lambda n: None) as rude:
        requests: dict[str, Request | None] = {
            "fast": Request(fast.endpoint, SERVICE, PAIRS),
            "late": Request(late.endpoint, SERVICE, PAIRS),
            "rude": Request(rude.endpoint, SERVICE, PAIRS),
            "broken": None,
        }
        started = time.monotonic()
        outcomes = transport.ask_all(
            requests,
            timeout=2.0,
            deadline=started + 3,
            enough=lambda pairs: pairs.word("state") == "Original",
        )
        took = time.monotonic() - started
        problems = {o.key: o.problem for o in outcomes}
        assert problems["fast"] is None and problems["late"] == "not needed"
        assert problems["broken"] == "unusable address"
        assert problems["rude"] in {"not needed", "unreachable: ConnectionResetError"}
        assert took < 0.9  # not held up by the late Archive (its answer takes 1 s)
        # Without "enough", every Archive is waited for, up to the deadline.
        outcomes = transport.ask_all(requests, timeout=0.3, deadline=time.monotonic() + 2)
        problems = {o.key: o.problem for o in outcomes}
        assert problems == {
            "fast": None,
            "late": "timeout",
            "rude": "unreachable: ConnectionResetError",
            "broken": "unusable address",
        }


def test_a_dead_archive_is_unreachable() -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    transport = ArchiveTransport(LOOPBACK_ONLY)
    (outcome,) = transport.ask_all(
        {"dead": Request(Endpoint("http", "127.0.0.1", port), SERVICE, PAIRS)},
        timeout=1.0,
        deadline=time.monotonic() + 2,
    )
    assert outcome.problem == "unreachable: ConnectionRefusedError"


def _ask_in_child(transport: ArchiveTransport, port: int, result: multiprocessing.Queue) -> None:
    endpoint = Endpoint("http", "127.0.0.1", port)
    result.put(transport.get(endpoint, SERVICE, PAIRS, timeout=2.0).word("state"))


def test_a_forked_process_gets_its_own_loop_and_connections() -> None:
    """The local gateway forks workers after the runtime may have been used."""
    transport = ArchiveTransport(LOOPBACK_ONLY)
    with scripted(lambda n: ok()) as server:
        assert get(transport, server).word("state") == "Original"
        context = multiprocessing.get_context("fork")
        result = context.Queue()
        child = context.Process(target=_ask_in_child, args=(transport, server.port, result))
        child.start()
        child.join(10)
        assert child.exitcode == 0 and result.get(timeout=1) == "Original"
        assert get(transport, server).word("state") == "Original"
    assert server.connections == 2  # the parent's, kept; the child's own


def test_requests_in_flight_and_kept_connections_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Lambda allows 1,024 open files: a round of many Archives takes turns."""
    from functions.resolver import network

    monkeypatch.setattr(network, "MAX_IN_FLIGHT", 2)
    monkeypatch.setattr(network, "MAX_IDLE", 3)
    lock = threading.Lock()
    active, peak = [0], [0]

    def answer(n: int) -> bytes:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return ok()

    transport = ArchiveTransport(LOOPBACK_ONLY)
    servers = [Scripted(answer) for _ in range(6)]
    try:
        requests: dict[str, Request | None] = {
            str(i): Request(s.endpoint, SERVICE, PAIRS) for i, s in enumerate(servers)
        }
        outcomes = transport.ask_all(requests, timeout=2.0, deadline=time.monotonic() + 3)
        assert [o.problem for o in outcomes] == [None] * 6
        assert peak[0] == 2
        transport.ask_all(requests, timeout=2.0, deadline=time.monotonic() + 3)
        assert transport.connections_opened == 6 + 3  # 3 were kept, 3 opened again
    finally:
        for server in servers:
            server.close()
