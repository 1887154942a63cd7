"""Talking to Archives safely: only registered ones, only public addresses, bounded answers.

An Archive's address is resolved, every IP it resolves to must be public (global) unless it
falls in an explicit allow-list (loopback for local mode and tests), and the connection goes
to the very IP that was checked (no second lookup an attacker could rebind). No redirect is
followed, answers are capped in size, and each request has its own timeout.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass

from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, encode_query, parse_pair_list

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
DEFAULT_MAX_ANSWER = 256 * 1024


class UnsafeAddress(Exception):
    """An address the resolver will not contact."""


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


class AddressPolicy:
    """Which IPs may be contacted: public ones, plus an explicit allow-list."""

    def __init__(self, allow: Sequence[str] = ()) -> None:
        self.allow: tuple[Network, ...] = tuple(ipaddress.ip_network(n) for n in allow)

    def permitted(self, ip: str) -> bool:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
        if any(address in network for network in self.allow):
            return True
        return address.is_global and not address.is_multicast

    def vet(self, endpoint: Endpoint) -> str:
        """The IP to connect to, once every address of the host is found permitted."""
        try:
            infos = socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            raise UnsafeAddress(f"{endpoint.host} does not resolve: {error}") from None
        ips = sorted({str(info[4][0]) for info in infos})
        refused = [ip for ip in ips if not self.permitted(ip)]
        if not ips or refused:
            raise UnsafeAddress(
                f"{endpoint.host} resolves to a non-public address ({', '.join(refused)}); "
                "the resolver only contacts public addresses"
            )
        return ips[0]


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip

    def connect(self) -> None:
        self.sock = socket.create_connection((self._ip, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._ip = ip

    def connect(self) -> None:
        raw = socket.create_connection((self._ip, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)  # type: ignore[attr-defined]


class ArchiveTransport:
    """GET requests to Archive services; answers read as pair lists."""

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
        ip = self.policy.vet(endpoint)
        connection_class = (
            _PinnedHTTPSConnection if endpoint.scheme == "https" else _PinnedHTTPConnection
        )
        connection = connection_class(endpoint.host, endpoint.port, ip, timeout)
        target = f"/{service_ibi}?{encode_query(pairs)}"
        headers = {"User-Agent": self.user_agent, "Accept": "text/plain"}
        if correlation_id:
            headers["X-Correlation-Id"] = correlation_id
        deadline = time.monotonic() + timeout
        try:
            connection.request("GET", target, headers=headers)
            response = connection.getresponse()
            body = response.read(self.max_answer_bytes + 1)
            if time.monotonic() > deadline + 0.5:
                raise TimeoutError("answered too late")
        finally:
            connection.close()
        if response.status != 200:
            raise ValueError(f"answered HTTP {response.status}")  # redirects are not followed
        if len(body) > self.max_answer_bytes:
            raise ValueError(f"answered more than {self.max_answer_bytes} bytes")
        return parse_pair_list(body, max_length=self.max_answer_bytes)


@dataclass(frozen=True, slots=True)
class Outcome:
    key: str
    pairs: PairList | None
    problem: str | None
    seconds: float


def fan_out(
    calls: Mapping[str, Future[PairList] | None],
    *,
    deadline: float,
    started: float,
    enough: Callable[[PairList], bool] | None = None,
) -> list[Outcome]:
    """Collect answers in the order they arrive, until all are in or the deadline passes.

    ``enough`` ends the wait early, as soon as one answer settles the question (the others are
    reported as ``not needed``); without it every Archive is waited for.
    """
    pending = {future: key for key, future in calls.items() if future is not None}
    outcomes = [
        Outcome(key, None, "unusable address", 0.0) for key, f in calls.items() if f is None
    ]
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        done, _ = wait(pending, timeout=remaining, return_when=FIRST_COMPLETED)
        for future in done:
            key = pending.pop(future)
            elapsed = time.monotonic() - started
            error = future.exception()
            if error is None:
                outcomes.append(Outcome(key, future.result(), None, elapsed))
            else:
                outcomes.append(Outcome(key, None, _describe(error), elapsed))
        settled = enough is not None and any(
            o.pairs is not None and enough(o.pairs) for o in outcomes[-len(done) :]
        )
        if settled:
            for key in pending.values():
                outcomes.append(Outcome(key, None, "not needed", time.monotonic() - started))
            return outcomes
    for key in pending.values():
        outcomes.append(Outcome(key, None, "timeout", deadline - started))
    return outcomes


def _describe(error: BaseException) -> str:
    if isinstance(error, TimeoutError | socket.timeout):
        return "timeout"
    if isinstance(error, UnsafeAddress):
        return f"refused: {error}"
    if isinstance(error, InvalidInput):
        return f"malformed answer: {error.reason}"
    if isinstance(error, ConnectionError | OSError):
        return f"unreachable: {type(error).__name__}"
    return f"failed: {error}"[:200]
