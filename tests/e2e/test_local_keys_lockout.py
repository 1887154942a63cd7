"""Issue 39, never locked out, on a real ``ibi local``: after a stranger on the machine sent
wrong registration keys for archive-a (loopback is one source: the public route then refuses
it whatever the key), ``ibi archive off``/``on``, ``ibi local --rotate-key`` and the next start
all still work, and a rotation leaves one key working, the one in the key file. Then an Archive
is deregistered (``ibi resolver deregister``) and is listed no more."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ibi.client import ApiError, ArchiveClient, send_switch
from ibi_tools.local.stores import free_port
from tests.e2e.support import IBI, LocalRun, cli

pytestmark = pytest.mark.e2e

WRONG = "999999999999-000000000000"


def _service(url: str) -> dict[str, str]:
    service = ArchiveClient(url, sign=False).service()
    ibi = service["archiveserviceibi"]
    return {
        "address": service["archiveaddress"],
        "service_ibi": ibi.get("ibip") or ibi["rep"],
        "base_url": service["base_url"],
    }


def _public_switch(local: LocalRun, key: str) -> int:
    """The public route (spec §4), from loopback: its status."""
    try:
        send_switch(local.resolver, registration_key=key, on=True, **_service(local.archives[0]))
    except ApiError as error:
        return error.status
    return 200


def _switch(local: LocalRun, verb: str, key_file: Path) -> subprocess.CompletedProcess[str]:
    return cli(
        "archive", verb, "--resolver", local.resolver, "--key-file", str(key_file),
        "--endpoint", local.archives[0],
    )  # fmt: skip


def test_a_strangers_wrong_keys_lock_out_no_switch_rotation_or_start(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    key_file = data_dir / "keys" / "archive-a.key"
    local = LocalRun(data_dir, free_port()).start()
    try:
        for _ in range(6):  # the stranger
            assert _public_switch(local, WRONG) in {403, 429}
        old = key_file.read_text().strip()
        assert _public_switch(local, old) == 429  # the public route keeps its guard
        for verb, word in (("off", "excluded"), ("on", "included")):
            switched = _switch(local, verb, key_file)
            assert switched.returncode == 0 and f"status.archive {word}" in switched.stdout, (
                switched.stdout + switched.stderr
            )
        rotated = subprocess.run(
            [*IBI, "local", "--data-dir", str(data_dir), "--rotate-key", "archive-a"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert rotated.returncode == 0, rotated.stderr
        assert key_file.read_text().strip() != old
        assert _switch(local, "on", key_file).returncode == 0  # the file's key works
        stale = tmp_path / "old.key"
        stale.write_text(old + "\n")
        refused = _switch(local, "on", stale)  # and the old one no longer does
        assert refused.returncode != 0 and "403" in refused.stderr, refused.stderr
    finally:
        local.stop()
    again = LocalRun(data_dir, local.port).start()  # its rows still in their window
    try:
        assert "status.archive included" in "".join(again.banner)
        assert _switch(again, "off", key_file).returncode == 0
    finally:
        again.stop()


def test_an_archive_deregistered_is_listed_no_more(local: LocalRun) -> None:
    archive_b = _service(local.archives[1])["service_ibi"]
    gone = cli("resolver", "deregister", archive_b, "--endpoint", local.resolver)
    assert gone.returncode == 0 and gone.stdout.startswith(f"deregistered {archive_b}"), gone.stderr
    listed = cli("resolver", "archives", "--endpoint", local.resolver)
    assert listed.returncode == 0 and archive_b not in listed.stdout, listed.stdout
    again = cli("resolver", "deregister", archive_b, "--endpoint", local.resolver)
    assert again.returncode != 0 and "no Archive" in again.stderr
