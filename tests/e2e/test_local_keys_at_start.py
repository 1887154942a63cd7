"""Issue 25: `ibi local` makes each Archive's urlkey secret at its start, before any worker
serves (a worker that made it at its first resolution, on a full disk, failed every one)."""

from __future__ import annotations

import pytest

from tests.e2e.support import LocalRun

pytestmark = pytest.mark.e2e


def test_each_archives_urlkey_secret_is_there_before_anything_is_asked(local: LocalRun) -> None:
    keys = local.data_dir / "keys"
    for archive in ("archive-a", "archive-b"):
        secret = keys / f"{archive}-urlkey"
        assert secret.stat().st_mode & 0o777 == 0o600
        assert len(secret.read_text().strip()) == 64
    assert not [path.name for path in keys.iterdir() if path.name.startswith(".")]
