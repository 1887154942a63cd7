"""Requests this Archive sends where a caller tells it to: the receiver of a transfer.

``to`` comes from the deposit API, and the upload URLs from the receiver's own answers, so
every request goes through the rules of the resolver's fetches (``functions.shared.addresses``):
the host is resolved once, every address must be public unless the allow-list
(``IBI_ALLOW_NETWORKS``: loopback in local mode and tests) covers it, and the connection goes to
the very IP that was checked (TLS still verifies the host name). No redirect is followed and an
answer is read up to :data:`MAX_ANSWER_BYTES`.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from urllib.parse import urlsplit

from functions.shared.addresses import AddressPolicy, UnsafeAddress
from ibi.client import ApiError, Raw, Transport

MAX_ANSWER_BYTES = 1024 * 1024  # a receiver's JSON answers are a few kilobytes


class _PinnedHTTP(http.client.HTTPConnection):
    """HTTP to ``host`` (its ``Host`` header), connecting to the checked ``ip``."""

    def __init__(self, host: str, port: int, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip

    def connect(self) -> None:
        self.sock = socket.create_connection((self._ip, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to ``host`` (its name verified in the certificate), connecting to ``ip``."""

    def __init__(self, host: str, port: int, ip: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip
        self._tls = ssl.create_default_context()

    def connect(self) -> None:
        raw = socket.create_connection((self._ip, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


def vetted_transport(policy: AddressPolicy, *, max_bytes: int = MAX_ANSWER_BYTES) -> Transport:
    """An ``ibi.client`` transport that contacts only what ``policy`` permits."""

    def send(
        method: str,
        url: str,
        *,
        data: bytes = b"",
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
        where: str | None = None,
    ) -> Raw:
        split = urlsplit(url)
        host = split.hostname
        if split.scheme not in {"http", "https"} or not host:
            raise ApiError(0, f"{url[:200]!r} is not an http(s) URL")
        secure = split.scheme == "https"
        try:
            port = split.port or (443 if secure else 80)
            ip = policy.vet(host, port)
        except (UnsafeAddress, ValueError) as error:
            raise ApiError(0, f"will not contact {where or host}: {error}") from None
        connection = (_PinnedHTTPS if secure else _PinnedHTTP)(host, port, ip, timeout)
        target = (split.path or "/") + (f"?{split.query}" if split.query else "")
        try:
            connection.request(method, target, body=data or None, headers=headers or {})
            response = connection.getresponse()
            content = response.read(max_bytes + 1)
            if len(content) > max_bytes:
                raise ApiError(0, f"{where or host} answered more than {max_bytes} bytes")
            return Raw(response.status, dict(response.getheaders()), content)
        except (OSError, http.client.HTTPException) as error:
            raise ApiError(0, f"cannot reach {where or host}: {error}") from None
        finally:
            connection.close()

    return send
