"""The HMAC pepper registration keys are hashed under: Secrets Manager in AWS, a file locally.

Data access, like ``registry.py``: this module reads the secret; the registration service only
receives the bytes. The local file is made on first use as every local key file is
(``functions.shared.keys.make_key_file``: created 0600, atomically), so that worker processes
starting together all read the same pepper. The pepper is read once per execution environment,
never again: a new pepper means registering every Archive again (docs/deploy.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from functions.shared.keys import FileKeys


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
    """The pepper in a local file (its first line), made with 32 random bytes (hex) if missing."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> bytes:
        return FileKeys(self.path).load()[0]
