"""Two `ibi local` federations on one machine never share a subsystem (issue 24, item 3), and
`ibi local` starts however many wrong registration keys were sent from loopback (issue 23)."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ibi.client import ApiError, ArchiveClient, MintingClient, switch_archive
from ibi.core.labels import parse_label
from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun

pytestmark = pytest.mark.e2e

WRONG = "999999999999-999999999999"


def mint_many(endpoint: str, rounds: int = 4, count: int = 250) -> list[str]:
    """``rounds`` requests of ``count`` IBIs, all at once: every ``ibip`` they hand out."""
    client = MintingClient(endpoint, retries=10)

    def batch(_: int) -> list[str]:
        return [ibi["ibip"] for ibi in client.mint(count=count)["ibis"]]

    with ThreadPoolExecutor(max_workers=rounds) as pool:
        return [ibi for minted in pool.map(batch, range(rounds)) for ibi in minted]


def test_two_federations_minting_at_once_share_no_ibi(tmp_path: Path) -> None:
    """The second one's first start failed on the first one's busy minting port and still
    wrote its subsystem with that port; started on another port, it minted as the first one:
    999 identical IBIs of 1,000 minted at once by the two."""
    first = LocalRun(tmp_path / "first", free_port()).start()
    second_dir = tmp_path / "second"
    try:
        with pytest.raises(AssertionError) as refused:
            LocalRun(second_dir, first.port).start()
        assert f"port {first.port} (minting) is already in use" in str(refused.value)
        assert not (second_dir / "subsystems.json").exists()  # nothing recorded unbound
        second = LocalRun(second_dir, free_port()).start()
        try:
            with ThreadPoolExecutor(max_workers=2) as pool:
                ones, twos = pool.map(mint_many, [first.endpoint, second.endpoint])
        finally:
            second.stop()
    finally:
        first.stop()
    assert len(set(ones)) == len(ones) == 1000 and len(set(twos)) == len(twos) == 1000
    assert set(ones).isdisjoint(twos)
    assert {parse_label(ibi).port for ibi in ones} == {first.port}
    assert {parse_label(ibi).port for ibi in twos} == {second.port}


def test_a_data_directory_taking_a_port_over_mints_after_the_one_before(
    tmp_path: Path,
) -> None:
    """The same port, one data directory after another (the second started on the port the
    first used yesterday): one subsystem, one temporal distributor, no IBI twice."""
    port = free_port()
    first = LocalRun(tmp_path / "first", port).start()
    try:
        ones = mint_many(first.endpoint, rounds=2, count=500)
    finally:
        first.stop(signal.SIGKILL)  # not even a clean stop: its tables are read
    second = LocalRun(tmp_path / "second", port).start()
    try:
        twos = mint_many(second.endpoint, rounds=2, count=500)
    finally:
        second.stop()
    assert set(ones).isdisjoint(twos)
    assert min(parse_label(ibi).date for ibi in twos) > max(parse_label(i).date for i in ones)


def test_ibi_local_starts_however_many_wrong_keys_loopback_sent(tmp_path: Path) -> None:
    """Five wrong keys from any process on the machine blocked 127.0.0.1 for archive-a, and
    the next `ibi local` start died on a bare `429 Too Many Requests: status.archive
    refused` for 15 minutes."""
    local = LocalRun(tmp_path / "data", free_port()).start()
    archive = ArchiveClient(local.archives[0], sign=False)
    try:
        forms = archive.service()["archiveserviceibi"]
        service_ibi = parse_label(forms.get("ibip") or forms["rep"]).label
        for _ in range(5):
            with pytest.raises(ApiError) as wrong:
                switch_archive(archive, local.resolver, WRONG, on=True)
            assert wrong.value.status == 403
        key = (local.data_dir / "keys" / "archive-a.key").read_text().strip()
        with pytest.raises(ApiError) as blocked:
            switch_archive(archive, local.resolver, key, on=True)  # the right key: blocked too
    finally:
        local.stop()
    said = str(blocked.value)
    assert said.startswith("429 Too Many Requests: status.archive refused; ")
    assert service_ibi in said  # which Archive
    assert "too many wrong registration keys from 127.0.0.1" in said and "retry after" in said

    again = LocalRun(tmp_path / "data", local.port).start()
    try:
        banner = "".join(again.banner)
        assert "archive-a: status.archive included status.confirmation successful" in banner
        assert "archive-b: status.archive included status.confirmation successful" in banner
    finally:
        again.stop()
