"""HMAC keys a function keeps: in AWS Secrets Manager, locally in a file (data access).

A local file is made on first use with 32 random bytes (hex), created 0600 (never written
first and narrowed after), atomically (written aside, then hard-linked into place), so that
worker processes starting together all read the same key; the resolver's pepper file
(``functions/resolver/pepper.py``) is made the same way, by :func:`make_key_file`.

A source gives its keys newest first. Several keys allow a rotation without losing what was
signed just before it: the file holds one key per line (the first signs, every line verifies);
Secrets Manager gives ``AWSCURRENT`` then, when there is one, ``AWSPREVIOUS``.

:class:`CachedKeys` is how a function holds them (the Archive's urlkeys and transfer offers,
the edge's origin check): read once per execution environment, then again every
``max_age`` seconds in any case, so that every long-lived environment signs with the new key
within that time of a rotation; and, when asked ``again`` (a signature that verifies under no
key known), at most once every ``refresh`` seconds, so that an environment started before a
rotation verifies the new key at once and forged signatures cannot make it read more often.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

MAX_AGE_SECONDS = 900  # keys are read again this often in any case: a rotation reaches all
REFRESH_SECONDS = 60  # a signature that verifies nothing: read again, at most this often


class KeySource(Protocol):
    """Where HMAC keys come from, newest first (never empty)."""

    def load(self) -> list[bytes]: ...


class KeysUnavailable(Exception):
    """No key is known yet and the source cannot be read now."""


class CachedKeys:
    """A :class:`KeySource` as a function holds it (module doc): newest first, any verifies.

    A read that fails is logged as ``<name> not read`` on the caller's ``logger`` and keeps the
    keys known (it is tried again only after ``refresh``); with none known yet it raises
    :class:`KeysUnavailable`, the answer left to the caller.
    """

    def __init__(
        self,
        source: KeySource,
        *,
        name: str,
        logger: Logger,
        max_age: float = MAX_AGE_SECONDS,
        refresh: float = REFRESH_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._name = name
        self._logger = logger
        self._max_age = max_age
        self._refresh = refresh
        self._monotonic = monotonic
        self._keys: list[bytes] = []
        self._loaded_at = 0.0
        self._lock = threading.Lock()

    def load(self, *, again: bool = False) -> list[bytes]:
        """The keys, newest first; ``again``: read them once more if the last read is at least
        ``refresh`` seconds old (a signature verified under none of them)."""
        with self._lock:
            age = self._monotonic() - self._loaded_at
            if self._keys and age < self._max_age and not (again and age >= self._refresh):
                return self._keys
            self._loaded_at = self._monotonic()
            try:
                self._keys = self._source.load() or self._keys
            except Exception as error:  # the secret's store: any failure, the same answer
                self._logger.warning(f"{self._name} not read", extra={"problem": str(error)[:200]})
                if not self._keys:
                    raise KeysUnavailable(f"{self._name} cannot be read now") from None
            return self._keys


class SecretKeys:
    """The secret's ``SecretString``: its current version, then its previous one if any."""

    def __init__(self, client: Any, secret_id: str) -> None:
        self._client = client
        self._secret_id = secret_id

    def load(self) -> list[bytes]:
        current = self._client.get_secret_value(SecretId=self._secret_id)["SecretString"]
        keys = [str(current).encode()]
        with contextlib.suppress(self._client.exceptions.ResourceNotFoundException):
            previous = self._client.get_secret_value(
                SecretId=self._secret_id, VersionStage="AWSPREVIOUS"
            )["SecretString"]
            if str(previous).encode() not in keys:
                keys.append(str(previous).encode())
        return keys


class FileKeys:
    """Keys in a local file, one per line (the first is current); made if missing."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> list[bytes]:
        if not self.path.exists():
            make_key_file(self.path)
        keys = [line.strip().encode() for line in self.path.read_text().splitlines()]
        keys = [key for key in keys if key]
        if not keys:
            raise ValueError(f"{self.path} holds no key")
        return keys


class RandomKeys:
    """One random key for this process only (tests, a single in-process Archive)."""

    def __init__(self) -> None:
        self._key = secrets.token_hex(32).encode()

    def load(self) -> list[bytes]:
        return [self._key]


def make_key_file(path: Path) -> None:
    """Create ``path`` with a fresh key, 0600, unless another process made it first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:  # the draft goes whatever happens (a full disk fails the write): never left behind
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        os.link(draft, path)  # fails if another process made it first: theirs wins
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            draft.unlink()
