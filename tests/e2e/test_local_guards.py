"""Issue 15: local mode that can't be broken by accident.

A second ``ibi local`` on a data directory in use refuses in one line naming the running one
(before, it started stores on the same files and the first answered 503); a port already taken
is one line naming the port and the option that changes it (before, a traceback).
"""

from __future__ import annotations

import socket
import subprocess
import urllib.request
from pathlib import Path

from ibi_tools.local.stores import LOOPBACK, free_port, free_ports
from tests.e2e.support import IBI, LocalRun


def _local(data_dir: Path, *ports: int) -> subprocess.CompletedProcess[str]:
    minting, archive_a, archive_b, resolver = ports
    return subprocess.run(
        [
            *IBI,
            "local",
            "--no-demo",
            "--data-dir",
            str(data_dir),
            "--port",
            str(minting),
            "--archive-ports",
            f"{archive_a},{archive_b}",
            "--resolver-port",
            str(resolver),
            # a block found free, not --port's +100 (a port of which another test may hold)
            "--s3-port",
            str(free_ports(10)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_second_ibi_local_on_the_same_data_directory_refuses(local: LocalRun) -> None:
    second = _local(local.data_dir, free_port(), free_port(), free_port(), free_port())
    assert second.returncode != 0
    (line,) = _lines(second.stderr)
    assert "is in use by ibi local (pid" in line and str(local.port) in line
    assert "Traceback" not in second.stderr + second.stdout
    # the first one still answers: its stores were not touched
    with urllib.request.urlopen(f"{local.resolver}/status", timeout=10) as answer:
        assert answer.status == 200


def test_the_lock_is_released_when_ibi_local_stops(tmp_path: Path) -> None:
    first = LocalRun(tmp_path / "data", free_port()).start()
    first.stop()
    again = LocalRun(tmp_path / "data", first.port).start()  # it mints as that port only
    again.stop()


def test_a_port_in_use_is_one_line_naming_the_port_and_its_option(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind((LOOPBACK, 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        for ports, option in (
            ((port, free_port(), free_port(), free_port()), "--port"),
            ((free_port(), free_port(), free_port(), port), "--resolver-port"),
            ((free_port(), port, free_port(), free_port()), "--archive-ports"),
        ):
            run = _local(tmp_path / f"data-{option}", *ports)
            assert run.returncode != 0
            (line,) = _lines(run.stderr)
            assert f"port {port}" in line and "already in use" in line, line
            assert line.endswith(f"choose another with {option}"), line
            assert "Traceback" not in run.stderr + run.stdout
    finally:
        taken.close()
