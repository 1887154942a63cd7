"""Requests this Archive sends where a caller tells it to: the other side of a transfer, and
the link checker's requests to its items' external URLs (:class:`LinkFetcher`).

For the deposit-API transfer, ``to`` comes from the deposit API, and the upload URLs from the
receiver's own answers; for a transfer between institutions (``offers.py``), the sender's base
URL comes from the offer the receiver's owner accepts (:class:`PublicArchive`). So
every request goes through the rules of the resolver's fetches (``functions.shared.addresses``):
the host is resolved once, every address must be public unless the allow-list
(``IBI_ALLOW_NETWORKS``: loopback in local mode and tests) covers it, and the connection goes to
the very IP that was checked (TLS still verifies the host name). No redirect is followed and an
answer is read up to :data:`MAX_ANSWER_BYTES`.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import ssl
import time
from typing import Any
from urllib.parse import SplitResult, quote, urljoin, urlsplit

from functions.archive.links import FetchFailed, Problem, Reply
from functions.archive.model import Forms
from functions.shared.addresses import AddressPolicy, Unresolvable, UnsafeAddress
from ibi.client import ApiError, Raw, Transport

MAX_ANSWER_BYTES = 1024 * 1024  # a receiver's JSON answers are a few kilobytes


class _Deadline:
    """A connected socket whose every read and write ends by ``deadline`` (``time.monotonic``):
    a server dripping its answer a byte at a time cannot hold a request past its time, as it
    can with a timeout per read (issue 35: 1 byte every 3 s held one link check 93 s)."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def _arm(self) -> None:
        remaining = self._deadline - time.monotonic()
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
    ``deadline``, every read and write of the request ends by it (:class:`_Deadline`)."""

    def __init__(
        self, host: str, port: int, ip: str, timeout: float, deadline: float | None = None
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self._ip = ip
        self._deadline = deadline

    def connect(self) -> None:
        sock = socket.create_connection((self._ip, self.port), self.timeout)
        self.sock = _Deadline(sock, self._deadline) if self._deadline is not None else sock


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
        self.sock = _Deadline(sock, self._deadline) if self._deadline is not None else sock


class RefusedAddress(ApiError):
    """An address the address rules refuse: never contacted (the caller's to correct)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)


def _split(url: str) -> SplitResult:
    """``url``'s parts; ``ApiError`` for text no URL parser reads (``http://[::1``)."""
    try:
        return urlsplit(url)
    except ValueError as error:
        raise ApiError(0, f"{url[:200]!r} is not a URL ({error})") from None


def _pinned(
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
        split = _split(url)
        host = split.hostname
        if split.scheme not in {"http", "https"} or not host:
            raise RefusedAddress(f"{url[:200]!r} is not an http(s) URL")
        try:
            connection, target = _pinned(policy, split, timeout)
        except (UnsafeAddress, ValueError) as error:
            raise RefusedAddress(f"will not contact {where or host}: {error}") from None
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


REDIRECTS = {301, 302, 303, 307, 308}
PUBLIC_TIMEOUT = 10.0  # seconds per public read or confirmation of a sending Archive


class PublicArchive:
    """A sending Archive as any reader reaches it (``offers.Sender``): its files at
    ``/col/<ibi>/<path>`` (one redirect followed, to a presigned download of a large file,
    itself vetted) and its public ``POST /transfers/confirm``. No credentials are sent."""

    def __init__(self, base_url: str, policy: AddressPolicy) -> None:
        split = _split(base_url)
        if split.scheme not in {"http", "https"} or not split.netloc:
            raise ApiError(0, f"{base_url[:200]!r} is not an http(s) base URL")
        self.base_url = base_url.rstrip("/")
        self._policy = policy

    def file(self, ibi: Forms, path: str, *, max_bytes: int) -> bytes:
        label = ibi.ibip or ibi.key
        url = f"{self.base_url}/col/{quote(label, safe='/')}/{quote(path, safe='/')}"
        send = vetted_transport(self._policy, max_bytes=max(max_bytes, 1))
        answer = send("GET", url, timeout=PUBLIC_TIMEOUT, where="the sending Archive")
        location = answer.headers.get("Location") or answer.headers.get("location")
        if answer.status in REDIRECTS and location:
            answer = send("GET", urljoin(url, location), timeout=PUBLIC_TIMEOUT, where="a file")
        if answer.status != 200:
            raise ApiError(answer.status, f"the sending Archive answered {answer.status}: {path}")
        return answer.content

    def confirm(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        send = vetted_transport(self._policy)
        answer = send(
            "POST",
            f"{self.base_url}/transfers/confirm",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            timeout=PUBLIC_TIMEOUT,
            where="the sending Archive",
        )
        try:
            parsed = json.loads(answer.content or b"{}")
        except ValueError:
            parsed = {}
        return answer.status, parsed if isinstance(parsed, dict) else {}


HOLDINGS_TIMEOUT = 6.0  # seconds: the resolver's fan-out ends within its own deadline
# A holdings view with each holder's file list (128 KiB of pairs each, more as JSON).
MAX_HOLDINGS_BYTES = 4 * 1024 * 1024


class ResolverHoldings:
    """What the resolver says of an IBI's holders (its public ``GET /holdings/<ibi>``, JSON):
    whether it leads readers to a good copy in an Archive other than this one (asked only for
    the first reader of a file found damaged here; any failure reads as "no good copy"), and
    the whole view, from which a copy's original files are read (``copies.py``)."""

    def __init__(self, resolver_url: str, base_url: str, policy: AddressPolicy) -> None:
        self._resolver = resolver_url.rstrip("/")
        self._here = base_url.rstrip("/") + "/"
        self._policy = policy

    def view(self, label: str, *, timeout: float = HOLDINGS_TIMEOUT) -> dict[str, Any]:
        """The resolver's holdings view of ``label``; ``ApiError`` when there is none to read
        (no answer, not a 200, not a JSON object with ``archives``)."""
        send = vetted_transport(self._policy, max_bytes=MAX_HOLDINGS_BYTES)
        url = f"{self._resolver}/holdings/{quote(label, safe='/')}"
        accept = {"Accept": "application/json"}
        answer = send("GET", url, headers=accept, timeout=timeout, where="the resolver")
        if answer.status != 200:
            raise ApiError(answer.status, f"the resolver answered {answer.status} to {url}")
        try:
            view = json.loads(answer.content)
        except ValueError:
            view = None
        if not isinstance(view, dict) or not isinstance(view.get("archives"), list):
            raise ApiError(answer.status, f"the resolver answered no holdings view at {url}")
        return view

    def elsewhere(self, label: str) -> bool:
        """Whether an Archive other than this one offers ``label`` (a holder with a ``url``:
        one with damaged files offers none)."""
        try:
            holders = self.view(label)["archives"]
        except ApiError:
            return False
        return any(
            isinstance(holder, dict)
            and isinstance(holder.get("url"), str)
            and not holder["url"].startswith(self._here)
            for holder in holders
        )


class LinkFetcher:
    """The link checker's requests (``links.Fetch``): one request to an item's external URL or
    a hop of its redirects, no redirect followed, under the address rules above (a private
    address is refused, never contacted), with ibi's link checker's User-Agent. A GET's body
    is read up to ``max_read`` bytes, then the connection is closed."""

    def __init__(self, policy: AddressPolicy, *, user_agent: str, max_read: int) -> None:
        self._policy = policy
        self._user_agent = user_agent
        self._max_read = max_read

    def __call__(self, method: str, url: str, *, timeout: float) -> Reply:
        try:
            split = urlsplit(url)
            host, _ = split.hostname or "", split.port
        except ValueError:
            raise FetchFailed(Problem.NOT_A_URL, f"{url[:200]!r} is not a URL") from None
        try:
            deadline = time.monotonic() + timeout  # for the whole request, not each read
            connection, target = _pinned(self._policy, split, timeout, deadline)
        except Unresolvable as error:
            raise FetchFailed(Problem.DNS, str(error)) from None
        except (UnsafeAddress, ValueError) as error:
            raise FetchFailed(Problem.REFUSED_ADDRESS, f"not contacted: {error}") from None
        headers = {"User-Agent": self._user_agent, "Accept": "*/*"}
        try:
            connection.request(method, target, headers=headers)
            response = connection.getresponse()
            if method == "GET":
                response.read(self._max_read)  # a few KB at most: the status is what counts
            return Reply(response.status, response.getheader("Location"))
        except TimeoutError:
            reason = f"no answer from {host} within {timeout:.0f} s"
            raise FetchFailed(Problem.TIMEOUT, reason) from None
        except ssl.SSLError as error:
            raise FetchFailed(Problem.UNREACHABLE, f"TLS with {host} failed: {error}") from None
        except (OSError, http.client.HTTPException) as error:
            reason = f"cannot reach {host}: {error or type(error).__name__}"
            raise FetchFailed(Problem.UNREACHABLE, reason) from None
        finally:
            connection.close()
