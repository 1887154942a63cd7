"""Pinned, vetted HTTP connections with a deadline: the one way this project's outbound
requests open a connection (the Archive's transfers and reads, the link checker, the
importer's downloads).

:func:`pinned` vets the URL's host under an :class:`AddressPolicy` (public addresses only, plus
the allowed networks) and connects to the very address it vetted (no second DNS lookup for the
connection to land elsewhere), verifying the certificate's name for https. With a deadline,
every read and write of the exchange ends by it (:class:`Deadline`), not only each read: a
server dripping its answer a byte at a time cannot hold a request past its time.
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
from typing import Any
from urllib.parse import SplitResult

from functions.shared.addresses import AddressPolicy


class Deadline:
    """A connected socket whose every read and write ends by ``deadline`` (``time.monotonic``):
    a server dripping its answer a byte at a time cannot hold a request past its time, as it
    can with a timeout per read (issue 35: 1 byte every 3 s held one link check 93 s)."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        self.deadline = deadline  # may be moved on (a download: a block at a time)

    def _arm(self) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request's time ran out")
        self._sock.settimeout(remaining)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._arm()
        return int(self._sock.recv_into(buffer, nbytes, flags))

    def recv(self, size: int, flags: int = 0) -> bytes:
        self._arm()
        return bytes(self._sock.recv(size, flags))

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._arm()
        self._sock.sendall(data, flags)

    def makefile(self, mode: str = "rb", buffering: int | None = None, **_: Any) -> Any:
        """A buffered reader over this object (``http.client`` reads the answer so), counted
        as the socket counts its files: closing the connection then leaves the answer's
        reader working (``http.client`` closes the connection before the body is read)."""
        self._sock._io_refs += 1
        raw = socket.SocketIO(self, "rb")  # type: ignore[arg-type]
        return io.BufferedReader(raw, buffering or io.DEFAULT_BUFFER_SIZE)

    def _decref_socketios(self) -> None:  # socket.SocketIO's close
        self._sock._decref_socketios()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to ``host`` (its ``Host`` header), connecting to the checked ``ip``; with a
    ``deadline``, every read and write of the request ends by it (:class:`Deadline`)."""

    def __init__(
        self, host: str, port: int, ip: str, timeout: float, deadline: float | None = None
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip
        self._deadline = deadline

    def connect(self) -> None:
        sock = socket.create_connection((self._ip, self.port), self.timeout)
        self.sock = Deadline(sock, self._deadline) if self._deadline is not None else sock


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to ``host`` (its name verified in the certificate), connecting to ``ip``; with a
    ``deadline`` as :class:`_PinnedHTTP`."""

    def __init__(
        self, host: str, port: int, ip: str, timeout: float, deadline: float | None = None
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip
        self._tls = ssl.create_default_context()
        self._deadline = deadline

    def connect(self) -> None:
        raw = socket.create_connection((self._ip, self.port), self.timeout)
        sock = self._tls.wrap_socket(raw, server_hostname=self.host)
        self.sock = Deadline(sock, self._deadline) if self._deadline is not None else sock


def pinned(
    policy: AddressPolicy, split: SplitResult, timeout: float, deadline: float | None = None
) -> tuple[http.client.HTTPConnection, str]:
    """A connection to ``split``'s host at the address ``policy`` vetted (and only there),
    and the request's target. Raises what :meth:`AddressPolicy.vet` raises. ``deadline``
    (``time.monotonic``): the whole exchange ends by then, not only each read."""
    secure = split.scheme == "https"
    port = split.port or (443 if secure else 80)
    host = split.hostname or ""
    ip = policy.vet(host, port)
    connection = (_PinnedHTTPS if secure else _PinnedHTTP)(host, port, ip, timeout, deadline)
    return connection, (split.path or "/") + (f"?{split.query}" if split.query else "")
