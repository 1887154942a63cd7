"""HMAC keys a function keeps: in AWS Secrets Manager, locally in a file (data access).

The pattern of the resolver's pepper (``functions/resolver/pepper.py``), shared: the local file
is made on first use with 32 random bytes (hex), mode 0600, atomically (written aside, then
hard-linked into place), so that worker processes starting together all read the same key.

A source gives its keys newest first. Several keys allow a rotation without losing what was
signed just before it: the file holds one key per line (the first signs, every line verifies);
Secrets Manager gives ``AWSCURRENT`` then, when there is one, ``AWSPREVIOUS``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Any, Protocol


class KeySource(Protocol):
    """Where HMAC keys come from, newest first (never empty)."""

    def load(self) -> list[bytes]: ...


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
