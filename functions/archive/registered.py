"""Where a registered Archive is, as the resolver says: the other side of a transfer (issue 24).

An original moves only to an Archive registered and included at this Archive's resolver, and
that Archive is read only at the address the resolver has registered for it — never at one a
caller, an offer or the receiver itself gave. So an Archive that is not registered cannot
receive an original, and a server that answers for a registered Archive from another address
cannot stand in for it:

* ``GET <resolver>/archives/<service IBI>`` (public, read-only): the Archive's service IBI,
  ``address``, ``protocol`` and whether it is ``included``; 404 when it is not registered. Its
  base URL is ``<protocol>://<address>``, where the resolver sends it the protocol;
* ``GET <base URL>/transfers/held?ibi=<IBI>`` (public, on every Archive): what that Archive
  holds of an IBI for a transfer — state, ``pending`` (staged: an incoming transfer answered
  to no one), and each file's path, SHA-256 and size (:func:`transfer_view`); 404 when it
  holds nothing of it.

The sender demotes its original only after that read shows the item staged with its files,
and counts a transfer done only once it shows the receiver's ``Original`` with them
(``transfer.py``, ``offers.py``). Every request goes through the transfers' address rules
(``outbound.vetted_transport``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

from functions.archive.errors import Conflict, Unavailable
from functions.archive.model import Forms, Item, State
from functions.shared.addresses import AddressPolicy
from ibi.client import ApiError

LOOKUP_TIMEOUT = 3.0  # seconds per question to the resolver or to a registered Archive


class NotRegistered(Conflict):
    """The other Archive is not registered and included at this Archive's resolver (409)."""


@dataclass(frozen=True, slots=True)
class RegisteredArchive:
    """A registered Archive as the resolver knows it: its service IBI and where it is."""

    service: Forms
    base_url: str  # <protocol>://<address>: where the resolver reaches it
    included: bool

    @property
    def key(self) -> str:
        return self.service.key


class Registry(Protocol):
    """The resolver's registry, read-only, and the registered Archives' public transfer view."""

    def find(self, service_ibi: str) -> RegisteredArchive | None: ...

    def held(self, archive: RegisteredArchive, ibi: str) -> dict[str, Any] | None: ...


def included(registry: Registry | None, service_ibi: str) -> RegisteredArchive:
    """The registered, included Archive of ``service_ibi`` (else :class:`NotRegistered`)."""
    if registry is None:
        raise NotRegistered(
            "this Archive knows no resolver (IBI_RESOLVER_URL): an original moves only to an "
            "Archive registered at it, so this Archive moves none"
        )
    found = registry.find(service_ibi)
    if found is None or not found.included:
        state = "not registered" if found is None else "registered but not included"
        raise NotRegistered(
            f"the Archive {service_ibi} is {state} at this Archive's resolver: an original "
            "moves only to an Archive registered and included there"
        )
    return found


def origin(url: str) -> tuple[str, str, int]:
    """``url``'s scheme, host and port (the default one filled in), to compare two URLs."""
    split = urlsplit(url.strip())
    scheme = split.scheme.lower()
    try:
        port = split.port or (443 if scheme == "https" else 80)
    except ValueError:
        port = -1
    return scheme, (split.hostname or "").lower(), port


def transfer_view(item: Item) -> dict[str, Any]:
    """What ``GET /transfers/held`` answers of an item: enough for a sender to see that it is
    staged (or the original) with its files, nothing more."""
    return {
        "ibi": item.ibi.to_mapping(),
        "state": item.state.value,
        "pending": item.pending,
        "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in item.files],
    }


def shown(item: Item) -> bool:
    """Whether ``GET /transfers/held`` shows the item: staged, or held and not deleted."""
    return item.pending or item.state is not State.DELETED


class ResolverRegistry:
    """:class:`Registry` over HTTP: the resolver's public ``/archives/`` and each registered
    Archive's public ``/transfers/held``, under ``policy`` (the transfers' address rules)."""

    def __init__(self, resolver_url: str, policy: AddressPolicy) -> None:
        self._resolver = resolver_url.rstrip("/")
        self._policy = policy

    def _get(self, url: str, where: str) -> tuple[int, Any]:
        from functions.archive.outbound import vetted_transport

        send = vetted_transport(self._policy)
        answer = send(
            "GET", url, headers={"Accept": "application/json"}, timeout=LOOKUP_TIMEOUT, where=where
        )
        try:
            return answer.status, json.loads(answer.content or b"null")
        except ValueError:
            return answer.status, None

    def find(self, service_ibi: str) -> RegisteredArchive | None:
        url = f"{self._resolver}/archives/{quote(service_ibi, safe='/')}"
        try:
            status, body = self._get(url, "the resolver")
        except ApiError as error:
            raise Unavailable(f"the resolver cannot say where {service_ibi} is: {error}") from None
        if status == 404:
            return None
        try:
            if status != 200:
                raise ValueError(f"it answered {status}")
            scheme = str(body["protocol"]).lower()
            address = body["address"]
            if scheme not in {"http", "https"} or not isinstance(address, str) or not address:
                raise ValueError("no address, or a protocol neither HTTP nor HTTPS")
            return RegisteredArchive(
                service=Forms.from_mapping(body["archiveserviceibi"]),
                base_url=f"{scheme}://{address}",
                included=body["included"] is True,
            )
        except (ValueError, TypeError, KeyError) as error:
            raise Unavailable(f"the resolver's answer about {service_ibi}: {error}") from None

    def held(self, archive: RegisteredArchive, ibi: str) -> dict[str, Any] | None:
        """What ``archive`` answers at its registered address about ``ibi``; None: nothing.
        ``ApiError`` when it cannot be read (the caller decides what that means)."""
        url = f"{archive.base_url}/transfers/held?ibi={quote(ibi, safe='')}"
        status, body = self._get(url, f"the Archive {archive.key}")
        if status == 404:
            return None
        if status != 200 or not isinstance(body, dict):
            raise ApiError(status, f"the Archive {archive.key} answered {status} about {ibi}")
        return body
