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
two writes, no read). A key issued with several URLs is unbound and the item is read.

The keys (``functions.shared.keys``) are read once per execution environment, newest first:
the newest signs, any verifies. A key that verifies nothing makes the keys be read again, at
most once every ``REFRESH_SECONDS``, so that an environment started before a rotation learns
the new key without a redeploy, and forged keys cannot make it read more often than that;
keys are read again every ``MAX_AGE_SECONDS`` in any case, so that every environment signs
with the new key within 15 minutes of a rotation.
Keys that cannot be read at all make the request ``Unavailable`` (503, retried: the
resolver's acknowledgment queue delivers it again); nothing is written.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from aws_lambda_powertools import Logger

from functions.archive.errors import Unavailable
from functions.shared.keys import KeySource

logger = Logger(service="archive", child=True)

URLKEY = re.compile(r"(\d{10})-(\d{20})(\d{39})")
NONCE_DIGITS, TAG_DIGITS = 20, 39
SKEW_SECONDS = 5  # the execution environments' clocks may differ by this much
REFRESH_SECONDS = 60  # a key that verifies nothing: read the keys again, at most this often
MAX_AGE_SECONDS = 900  # and in any case: so that every environment signs with the new key soon
CONTEXT = b"ibi-urlkey-v1"
BOUND_CONTEXT = b"ibi-urlkey-v1-bound"

Target = tuple[str, str]  # (the key of the item a URL leads to, the URL)


def _tag(key: bytes, scope: str, issued_at: int, nonce: str, target: Target | None = None) -> str:
    parts = [CONTEXT, scope.encode(), str(issued_at).encode(), nonce.encode()]
    if target is not None:  # bound: the key verifies only for this item and this URL
        parts = [BOUND_CONTEXT, *parts[1:], target[0].encode(), target[1].encode()]
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
        self._source = source
        self._monotonic = monotonic
        self._keys: list[bytes] = []
        self._loaded_at = 0.0
        self._lock = threading.Lock()

    def _load(self, *, again: bool = False) -> list[bytes]:
        """The keys, read the first time (``Unavailable`` if they cannot be); ``again``: read
        once more if the last read is a minute old (a failure then keeps the keys known)."""
        with self._lock:
            age = self._monotonic() - self._loaded_at
            if self._keys and age < MAX_AGE_SECONDS and not (again and age >= REFRESH_SECONDS):
                return self._keys
            self._loaded_at = self._monotonic()
            try:
                self._keys = self._source.load() or self._keys
            except Exception as error:  # the secret's store: any failure, the same answer
                logger.warning("urlkey keys not read", extra={"problem": str(error)[:200]})
                if not self._keys:
                    raise Unavailable("the urlkey secret cannot be read now") from None
            return self._keys

    def issue(self, now: Decimal | int, scope: str, bound: Target | None = None) -> str:
        """A fresh urlkey, issued at ``now`` by the Archive of service IBI ``scope``;
        ``bound``: the one item and URL it was issued for (its acknowledgment needs no read)."""
        issued_at = int(now)
        nonce = f"{secrets.randbits(64):0{NONCE_DIGITS}d}"
        return f"{issued_at:010d}-{nonce}{_tag(self._load()[0], scope, issued_at, nonce, bound)}"

    def check(self, urlkey: str, now: Decimal | int, scope: str, ttl_seconds: int) -> int | None:
        """The issue time of ``urlkey`` if this Archive issued it (unbound) and it is fresh."""
        checked = self.check_bound(urlkey, now, scope, ttl_seconds, ())
        return checked[0] if checked is not None else None

    def check_bound(
        self,
        urlkey: str,
        now: Decimal | int,
        scope: str,
        ttl_seconds: int,
        candidates: Iterable[Target],
    ) -> tuple[int, str | None] | None:
        """``(issue time, item key)`` if this Archive issued the fresh ``urlkey`` bound to one
        of ``candidates`` (item key, URL), ``(issue time, None)`` if it issued it unbound."""
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
                if self._verifies(keys, tag, scope, issued_at, nonce, target):
                    return issued_at, target[0] if target is not None else None
        return None

    @staticmethod
    def _verifies(keys: list[bytes], tag: str, *signed: Any) -> bool:
        """Whether one of ``keys`` signs ``signed`` (``_tag``'s arguments after the key)."""
        return any(hmac.compare_digest(_tag(k, *signed), tag) for k in keys)
