"""The harness's own ports: one taken between the look and the bind is chosen again."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun, PortTaken


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port held (listening) by someone else for the test's length."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()


def test_a_resolver_port_taken_meanwhile_is_chosen_again(tmp_path: Path, taken: int) -> None:
    run = LocalRun(tmp_path / "data", free_port())
    run.resolver_port = taken
    try:
        run.start()
        assert run.resolver_port != taken
        assert f"resolver   {run.resolver}" in "".join(run.banner)
    finally:
        run.stop()


def test_the_port_the_caller_gave_is_never_changed(tmp_path: Path, taken: int) -> None:
    run = LocalRun(tmp_path / "data", taken)
    with pytest.raises(PortTaken, match=f"port {taken} \\(minting\\) is already in use"):
        run.start()
    assert run.port == taken
