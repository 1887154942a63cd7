"""Urlkeys an Archive checks without having stored them (issue 13; spec Table 5.1, §6).

A urlkey is ``<issue time>-<nonce><tag>``: the issue time in whole seconds (10 digits), then
59 digits, a random 64-bit nonce (20 digits, zero-padded) and the first 128 bits of
HMAC-SHA256 (39 digits, zero-padded) over the Archive's service IBI, the issue time and the
nonce, under a key only the Archive holds. Two numbers of 10 digits or more joined by ``-``:
Table 5.1's ``key = number ["-" number]``, like ``1427244889-5349022633744855``.

Issuing one is pure computation: a resolution writes nothing. An acknowledgment's urlkey is
checked in memory (the tag, then the window: issued at most ``SKEW_SECONDS`` ahead of this
clock and less than the TTL ago), and only a genuine, fresh key reaches the table, where it is
spent once with a conditional write (``store.spend_urlkey``).

A key issued with one URL (every plain resolution) is *bound*: its tag also covers the key of
the item the URL leads to and the URL (``BOUND_CONTEXT``), so a tag that verifies for an item
the acknowledgment names and the URL it gives proves this Archive offered that URL for that
item when it issued the key: the acknowledgment is counted without reading the item (issue 14:
two writes, no read). A key issued with several URLs is unbound and the item is read. Every key
also covers the client the urlRequest declared (``clientinformation.ipaddress``): it verifies
only for an acknowledgment that declares the same client (issue 35: usage counted per client).

The keys are held by ``functions.shared.keys.CachedKeys``, newest first: the newest signs,
any verifies. A key that verifies nothing makes the keys be read again, at most once a minute,
so that an environment started before a rotation learns the new key without a redeploy, and
forged keys cannot make it read more often than that; keys are read again every 15 minutes in
any case, so that every environment signs with the new key within 15 minutes of a rotation.
Keys that cannot be read at all make the request ``Unavailable`` (503, retried: the
resolver's acknowledgment queue delivers it again); nothing is written.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from aws_lambda_powertools import Logger

from functions.archive.errors import Unavailable
from functions.shared.keys import CachedKeys, KeySource, KeysUnavailable

logger = Logger(service="archive", child=True)

URLKEY = re.compile(r"(\d{10})-(\d{20})(\d{39})")
NONCE_DIGITS, TAG_DIGITS = 20, 39
SKEW_SECONDS = 5  # the execution environments' clocks may differ by this much
CONTEXT = b"ibi-urlkey-v1"
BOUND_CONTEXT = b"ibi-urlkey-v1-bound"
CLIENT_CONTEXT = b"client="

Target = tuple[str, str]  # (the key of the item a URL leads to, the URL)


def _tag(
    key: bytes,
    scope: str,
    issued_at: int,
    nonce: str,
    target: Target | None = None,
    *,
    client: str = "",
) -> str:
    parts = [CONTEXT, scope.encode(), str(issued_at).encode(), nonce.encode()]
    if target is not None:  # bound: the key verifies only for this item and this URL
        parts = [BOUND_CONTEXT, *parts[1:], target[0].encode(), target[1].encode()]
    if client:  # and only for the client the urlRequest declared
        parts.append(CLIENT_CONTEXT + client.encode())
    message = b"\x00".join(parts)
    digest = hmac.new(key, message, hashlib.sha256).digest()[:16]
    return f"{int.from_bytes(digest, 'big'):0{TAG_DIGITS}d}"


class UrlKeys:
    """Issues and checks this Archive's urlkeys under its keys (newest first)."""

    def __init__(
        self,
        source: KeySource,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._keys = CachedKeys(source, name="urlkey keys", logger=logger, monotonic=monotonic)

    def _load(self, *, again: bool = False) -> list[bytes]:
        """The keys (``Unavailable`` if none can be read); ``again``: a key verified nothing."""
        try:
            return self._keys.load(again=again)
        except KeysUnavailable:
            raise Unavailable("the urlkey secret cannot be read now") from None

    def issue(
        self, now: Decimal | int, scope: str, bound: Target | None = None, *, client: str = ""
    ) -> str:
        """A fresh urlkey, issued at ``now`` by the Archive of service IBI ``scope``;
        ``bound``: the one item and URL it was issued for (its acknowledgment needs no read);
        ``client``: the client the urlRequest declared (its acknowledgment must declare it)."""
        issued_at = int(now)
        nonce = f"{secrets.randbits(64):0{NONCE_DIGITS}d}"
        tag = _tag(self._load()[0], scope, issued_at, nonce, bound, client=client)
        return f"{issued_at:010d}-{nonce}{tag}"

    def check(
        self, urlkey: str, now: Decimal | int, scope: str, ttl_seconds: int, *, client: str = ""
    ) -> int | None:
        """The issue time of ``urlkey`` if this Archive issued it (unbound) and it is fresh."""
        checked = self.check_bound(urlkey, now, scope, ttl_seconds, (), client=client)
        return checked[0] if checked is not None else None

    def check_bound(
        self,
        urlkey: str,
        now: Decimal | int,
        scope: str,
        ttl_seconds: int,
        candidates: Iterable[Target],
        *,
        client: str = "",
    ) -> tuple[int, str | None] | None:
        """``(issue time, item key)`` if this Archive issued the fresh ``urlkey`` bound to one
        of ``candidates`` (item key, URL), ``(issue time, None)`` if it issued it unbound; for
        ``client`` only, when it was issued for one."""
        found = URLKEY.fullmatch(urlkey)
        if found is None:
            return None
        issued_at, nonce, tag = int(found[1]), found[2], found[3]
        if not issued_at - SKEW_SECONDS <= int(now) < issued_at + ttl_seconds:
            return None
        targets: list[Target | None] = [*candidates, None]
        for again in (False, True):  # a key that verifies nothing: read the keys again
            keys = self._load(again=again)
            for target in targets:
                if self._verifies(keys, tag, scope, issued_at, nonce, target, client=client):
                    return issued_at, target[0] if target is not None else None
        return None

    @staticmethod
    def _verifies(keys: list[bytes], tag: str, *signed: Any, client: str) -> bool:
        """Whether one of ``keys`` signs ``signed`` (``_tag``'s arguments after the key)."""
        return any(hmac.compare_digest(_tag(k, *signed, client=client), tag) for k in keys)
