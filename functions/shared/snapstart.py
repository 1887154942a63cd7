"""Lambda SnapStart entry points: each function's handler, with the after-restore hooks.

Used only when the stacks are synthesized with ``ibi:snapstart`` (infra/service.py): the
function's handler is then ``functions.shared.snapstart.<service>`` (``archive``,
``minting``, ``resolver``), which imports ``functions/<service>/handler.py`` during the init
that SnapStart snapshots, and registers one hook that runs in every restored execution
environment before its first request:

* ``random`` is seeded again from the OS: every environment restored from one snapshot would
  otherwise draw the same sequence (``secrets``, ``uuid4`` and ``os.urandom`` read the kernel
  and need nothing);
* the botocore session and the function's runtime (its clients, their connections, the
  credentials they captured, the keys and pepper read from Secrets Manager) are forgotten,
  so the first request builds them again with the restored environment's credentials.

``snapshot_restore_py`` is provided by the Lambda runtime (Python 3.12 and later); without it
(tests, local mode) nothing is registered and the handler is returned as it is.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from typing import Any

SERVICES = ("archive", "minting", "resolver")


def forget(service: str) -> None:
    """Drop what the ``service`` function built before the snapshot (see the module doc)."""
    random.seed()
    from ibi import aws

    aws._session.cache_clear()
    importlib.import_module(f"functions.{service}.wiring").uninstall()  # shared/runtime.py


def register(service: str) -> bool:
    """Register :func:`forget` to run after every restore; False where SnapStart is absent."""
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:
        return False
    register_after_restore(lambda: forget(service))
    return True


def __getattr__(name: str) -> Callable[[dict[str, Any], Any], Any]:
    """``functions.shared.snapstart.<service>``: that function's ``lambda_handler``."""
    if name not in SERVICES:
        raise AttributeError(name)
    handler: Callable[[dict[str, Any], Any], Any] = importlib.import_module(
        f"functions.{name}.handler"
    ).lambda_handler
    register(name)
    globals()[name] = handler  # looked up once
    return handler
