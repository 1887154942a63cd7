"""Requests this Archive sends where a caller tells it to: the other side of a transfer, and
the link checker's requests to its items' external URLs (:class:`LinkFetcher`).

For the deposit-API transfer, ``to`` comes from the deposit API, and the upload URLs from the
receiver's own answers; for a transfer between institutions (``offers.py``), the sender's base
URL comes from the offer the receiver's owner accepts (:class:`PublicArchive`). So
every request goes through the rules of the resolver's fetches (``functions.shared.addresses``):
the host is resolved once, every address must be public unless the allow-list
(``IBI_ALLOW_NETWORKS``: loopback in local mode and tests) covers it, and the connection goes to
the very IP that was checked (TLS still verifies the host name). No redirect is followed, an
answer is read up to :data:`MAX_ANSWER_BYTES`, and one deadline holds for the whole exchange
(the timeout for the head and for each MiB), never a timeout per read.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from typing import Any
from urllib.parse import SplitResult, quote, urljoin, urlsplit

from functions.archive.links import FetchFailed, Problem, Reply
from functions.archive.model import Forms
from functions.shared.addresses import AddressPolicy, Unresolvable, UnsafeAddress
from functions.shared.pinned import Deadline
from functions.shared.pinned import pinned as _pinned
from ibi.client import ApiError, Raw, Transport

MAX_ANSWER_BYTES = 1024 * 1024  # a receiver's JSON answers are a few kilobytes
MIB = 1024 * 1024


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


def _read_paced(
    connection: http.client.HTTPConnection,
    response: http.client.HTTPResponse,
    max_bytes: int,
    timeout: float,
) -> bytes:
    """The body, up to ``max_bytes`` + 1 bytes, a MiB at a time, each MiB within ``timeout``
    (the connection's :class:`~functions.shared.pinned.Deadline` moved on per block)."""
    blocks: list[bytes] = []
    size = 0
    while size <= max_bytes:
        if isinstance(connection.sock, Deadline):
            connection.sock.deadline = time.monotonic() + timeout
        block = response.read(min(MIB, max_bytes + 1 - size))
        if not block:
            break
        blocks.append(block)
        size += len(block)
    return b"".join(blocks)


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
        # One deadline for the whole exchange (issue 35: a timeout per read let a server dripping
        # a byte at a time hold a request for ever): ``timeout`` for the head and for each MiB
        # sent, then moved on by ``timeout`` for each MiB read.
        deadline = time.monotonic() + timeout * (1 + len(data) / MIB)
        try:
            connection, target = _pinned(policy, split, timeout, deadline)
        except (UnsafeAddress, ValueError) as error:
            raise RefusedAddress(f"will not contact {where or host}: {error}") from None
        try:
            connection.request(method, target, body=data or None, headers=headers or {})
            response = connection.getresponse()
            content = _read_paced(connection, response, max_bytes, timeout)
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
