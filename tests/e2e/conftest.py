"""Fixtures of the end-to-end tests: a fresh `ibi local` on free ports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalRun]:
    run = LocalRun(tmp_path / "data", free_port()).start()
    yield run
    run.stop()
