"""End to end: `ibi local` as a user runs it, and `ibi mint` as a CI pipeline runs it."""

from __future__ import annotations

import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import pytest

from ibi.client import MintingClient
from ibi.core.labels import parse_label
from ibi_tools.local.stores import free_port
from tests.e2e.support import LocalRun, cli

pytestmark = pytest.mark.e2e


def test_ibi_mint_prints_ibis_from_ibi_local(local: LocalRun) -> None:
    done = cli("mint", "--endpoint", local.endpoint, "--count", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    for line in lines:
        rep, ibip = line.split()
        assert parse_label(rep).date == parse_label(ibip).date
        assert parse_label(rep).port == local.port and parse_label(ibip).ip == "127.0.0.1"
    as_json = json.loads(cli("mint", "--endpoint", local.endpoint, "--json").stdout)
    assert Decimal(as_json["ibis"][0]["date"]) > parse_label(lines[-1].split()[1]).date


def test_idempotency_key_from_the_cli(local: LocalRun) -> None:
    first = cli("mint", "--endpoint", local.endpoint, "--idempotency-key", "run-7-dist.tar.gz")
    again = cli("mint", "--endpoint", local.endpoint, "--idempotency-key", "run-7-dist.tar.gz")
    assert first.returncode == again.returncode == 0
    assert first.stdout == again.stdout
    listed = cli("mints", "--endpoint", local.endpoint, "--json")
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    keyed = [r for r in rows if r["idempotency_key"] == "run-7-dist.tar.gz"]
    assert len(keyed) == 1  # minted once, whatever the retries
    assert f"{keyed[0]['rep']} {keyed[0]['ibip']}\n" == first.stdout


def test_bad_requests_get_clear_4xx(local: LocalRun) -> None:
    client = MintingClient(local.endpoint, retries=0)
    assert client.request("POST", "/mint", {"count": 0}).status == 400
    assert client.request("POST", "/mint", {"subsystem": "nope"}).status == 404
    assert client.request("GET", "/mint").status == 405
    assert client.request("POST", "/mint", "not an object").status == 400
    failed = cli("mint", "--endpoint", local.endpoint, "--subsystem", "nope")
    assert failed.returncode == 1 and "nope" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1


def test_concurrent_cli_mints_then_restart(local: LocalRun) -> None:
    """Many concurrent `ibi mint`, a kill -9, a restart, more mints: no IBI twice, all recorded."""

    def mint_batch(index: int) -> list[str]:
        # Each request asks for its own count: an answer meant for another request shows.
        count = 3 + index % 5
        done = cli("mint", "--endpoint", local.endpoint, "--count", str(count), "--form", "ibip")
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.split()) == count
        return done.stdout.split()

    with ThreadPoolExecutor(max_workers=8) as pool:
        before = [ibi for batch in pool.map(mint_batch, range(16)) for ibi in batch]
    assert len(before) == len(set(before)) == sum(3 + i % 5 for i in range(16))
    last_before = max(parse_label(ibi).date for ibi in before)

    local.stop(signal.SIGKILL)  # no clean shutdown: the data must already be on disk
    local.start()

    with ThreadPoolExecutor(max_workers=8) as pool:
        after = [ibi for batch in pool.map(mint_batch, range(8)) for ibi in batch]
    assert min(parse_label(ibi).date for ibi in after) > last_before
    everything = before + after
    assert len(set(everything)) == len(everything) == len(before) + sum(3 + i % 5 for i in range(8))

    listed = cli("mints", "--endpoint", local.endpoint, "--json")
    assert listed.returncode == 0, listed.stderr
    # The record holds every IBI handed out (also the Archives' own service IBIs).
    recorded = [json.loads(line)["ibip"] for line in listed.stdout.splitlines()]
    assert set(everything) <= set(recorded) and len(recorded) == len(set(recorded))
    dates = [parse_label(ibi).date for ibi in recorded]
    assert dates == sorted(dates)  # the record lists in date order
    assert_verified(local)


def assert_verified(local: LocalRun) -> dict[str, object]:
    """`ibi mints --verify` finds the record whole: no gap, overlap or date issued twice."""
    done = cli("mints", "--endpoint", local.endpoint, "--verify")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "ok: no gap, no overlap, no date issued twice"
    as_json = cli("mints", "--endpoint", local.endpoint, "--verify", "--json")
    found: dict[str, object] = json.loads(as_json.stdout)
    assert found["ok"] is True and found["problems"] == []
    return found


def test_kill_9_mid_load_leaves_the_record_whole(local: LocalRun) -> None:
    """kill -9 while 8 clients mint (blocks of dates on, as `ibi local` runs): whatever was in
    flight, after a restart and more mints the record accounts for every date (issue 30)."""
    stop = threading.Event()
    answered: list[str] = []

    def keep_minting(index: int) -> None:
        client = MintingClient(local.endpoint, retries=0, timeout=5)
        while not stop.is_set():
            try:
                answer = client.mint(count=1 + index % 4)
            except Exception:  # the server was killed under it
                return
            answered.extend(ibi["ibip"] for ibi in answer["ibis"])

    threads = [threading.Thread(target=keep_minting, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while len(answered) < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    local.stop(signal.SIGKILL)  # mid-load: requests between their state write and record
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert len(answered) >= 200
    local.start()
    after = cli("mint", "--endpoint", local.endpoint, "--count", "5", "--form", "ibip")
    assert after.returncode == 0, after.stderr
    found = assert_verified(local)
    listed = cli("mints", "--endpoint", local.endpoint, "--jsonl")
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    recorded = [ibi["ibip"] for record in records for ibi in record["ibis"]]
    assert set(answered) | set(after.stdout.split()) <= set(recorded)
    assert len(recorded) == len(set(recorded)) == found["ibis"]


def test_a_restart_keeps_the_prefixes_and_one_on_another_port_is_refused(
    tmp_path: Path,
) -> None:
    """A data directory mints only as the port it serves (issue 24): on another port another
    federation could mint the same IBIs, so that start is one line saying which port to use."""
    data = tmp_path / "data"
    first = LocalRun(data, free_port()).start()
    try:
        one = cli("mint", "--endpoint", first.endpoint, "--form", "ibip").stdout.strip()
    finally:
        first.stop()
    other = free_port()
    with pytest.raises(AssertionError) as refused:
        LocalRun(data, other).start()
    said = str(refused.value)
    assert f"mints as port {first.port}" in said and f"not {other}" in said
    assert f"--port {first.port}" in said and "Traceback" not in said
    second = LocalRun(data, first.port).start()
    try:
        two = cli("mint", "--endpoint", second.endpoint, "--form", "ibip").stdout.strip()
    finally:
        second.stop()
    assert one.split("/")[0] == two.split("/")[0]
    assert parse_label(two).date > parse_label(one).date
