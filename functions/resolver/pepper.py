"""The HMAC pepper registration keys are hashed under: Secrets Manager in AWS, a file locally.

Data access, like ``registry.py``: this module reads the secret; the registration service only
receives the bytes. The local file is made on first use (0600), atomically, so that worker
processes starting together all read the same pepper.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Any, Protocol


class PepperSource(Protocol):
    """Where the pepper comes from."""

    def load(self) -> bytes: ...


class SecretPepper:
    """The pepper in AWS Secrets Manager (``SecretString``)."""

    def __init__(self, client: Any, secret_id: str) -> None:
        self._client = client
        self._secret_id = secret_id

    def load(self) -> bytes:
        value = self._client.get_secret_value(SecretId=self._secret_id)["SecretString"]
        return str(value).encode()


class FilePepper:
    """The pepper in a local file, made with 32 random bytes (hex) if missing."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> bytes:
        if not self.path.exists():
            self._make()
        return self.path.read_text().strip().encode()

    def _make(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        draft = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        draft.write_text(secrets.token_hex(32))
        draft.chmod(0o600)
        try:
            os.link(draft, self.path)  # fails if another process made it first: theirs wins
        except FileExistsError:
            pass
        finally:
            with contextlib.suppress(FileNotFoundError):
                draft.unlink()
