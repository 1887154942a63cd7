"""Issue 13 item 11: the after-restore hooks of functions/shared/snapstart.py."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable, Iterator

import pytest

from functions.shared import snapstart


@pytest.fixture
def restore_hooks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Callable[[], None]]]:
    """A stand-in for the runtime's ``snapshot_restore_py``, collecting the hooks."""
    hooks: list[Callable[[], None]] = []
    module = types.ModuleType("snapshot_restore_py")
    module.register_after_restore = hooks.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", module)
    monkeypatch.delitem(snapstart.__dict__, "minting", raising=False)
    yield hooks
    snapstart.__dict__.pop("minting", None)


def test_the_entry_is_the_functions_handler_with_a_hook(
    restore_hooks: list[Callable[[], None]],
) -> None:
    from functions.minting.handler import lambda_handler

    assert snapstart.minting is lambda_handler
    assert len(restore_hooks) == 1
    assert snapstart.minting is lambda_handler and len(restore_hooks) == 1  # registered once
    with pytest.raises(AttributeError):
        _ = snapstart.nothing


def test_a_restore_forgets_clients_and_reseeds(restore_hooks: list[Callable[[], None]]) -> None:
    from functions.minting import wiring
    from ibi import aws

    _ = snapstart.minting
    (hook,) = restore_hooks
    session = aws._session()
    wiring.install(object())  # type: ignore[arg-type]  # built before the snapshot
    random.seed(1234)
    snapshot_draw = random.random()
    random.seed(1234)  # every restored environment starts from this same state
    hook()
    assert wiring.holder.peek() is None
    assert aws._session() is not session  # new credentials, new connections
    assert random.random() != snapshot_draw


def test_without_the_runtimes_module_nothing_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails
    assert snapstart.register("minting") is False
