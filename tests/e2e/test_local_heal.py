"""`ibi local` heals: its S3 server (SeaweedFS) or an API's workers killed with kill -9 come back, data kept;
one that keeps dying ends the run with a message naming it and its log. Its files are private.
(The tables are SQLite in the workers themselves: killing every worker is the test of them.)"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.support import LocalRun, cli

pytestmark = pytest.mark.e2e

WAIT = 60.0  # seconds a healing may take at most here (a bound for the polls, not a measure)


def status(url: str, data: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:  # refused or timed out: not answering (yet)
        return 0, b""


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"not within {WAIT:g} s: {what}"
        time.sleep(0.2)


def mints(local: LocalRun) -> bool:
    return status(f"{local.endpoint}/mint", b"{}")[0] == 200


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def kill_store(local: LocalRun, name: str) -> int:
    """kill -9 the store whose data is ``<data>/<name>``; its pid."""
    pid = int((local.data_dir / f"{name}.pid").read_text())
    assert running(pid)
    os.kill(pid, signal.SIGKILL)
    return pid


def store_pid(local: LocalRun, name: str) -> int | None:
    try:
        pid = int((local.data_dir / f"{name}.pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if running(pid) else None


def deposit(local: LocalRun, tmp_path: Path) -> dict[str, str]:
    document = tmp_path / "report.txt"
    document.write_bytes(b"kept through every death\n")
    done = cli("deposit", str(document), "--endpoint", local.archives[0], "--json")
    assert done.returncode == 0, done.stderr
    ibip: str = json.loads(done.stdout)["ibi"]["ibip"]
    return {"ibip": ibip, "file": f"{local.archives[0]}/col/{ibip}/report.txt"}


def resolves(local: LocalRun, ibip: str) -> bool:
    return status(f"{local.resolver}/{ibip}")[0] == 302


def file_served(url: str) -> bool:
    opener = urllib.request.build_opener()  # redirects followed: however the Archive serves it
    try:
        with opener.open(url, timeout=10) as response:
            return bool(response.read() == b"kept through every death\n")
    except OSError:
        return False


def test_a_killed_s3_server_is_restarted_with_its_objects(local: LocalRun, tmp_path: Path) -> None:
    item = deposit(local, tmp_path)
    assert file_served(item["file"])
    killed = kill_store(local, "seaweedfs")

    eventually(lambda: file_served(item["file"]), "the file fetched after SeaweedFS was killed")
    assert store_pid(local, "seaweedfs") not in {None, killed}
    assert resolves(local, item["ibip"])


def api_workers(local: LocalRun) -> set[int]:
    """The APIs' worker processes: children of `ibi local` forked from it (its command line)."""
    assert local.process is not None
    parent = local.process.pid
    own = Path(f"/proc/{parent}/cmdline").read_bytes()
    found = set()
    for task in Path(f"/proc/{parent}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{child}/cmdline").read_bytes() == own and running(int(child)):
                    found.add(int(child))
    return found


def test_killed_api_workers_are_forked_again(local: LocalRun, tmp_path: Path) -> None:
    item = deposit(local, tmp_path)
    assert mints(local)
    before = cli("mints", "--endpoint", local.endpoint, "--json").stdout.splitlines()
    workers = api_workers(local)
    assert len(workers) == 16  # 4 APIs, 4 workers each (each with its own tables connection)
    for pid in workers:
        os.kill(pid, signal.SIGKILL)

    eventually(lambda: mints(local), "a mint after every worker was killed")
    after = cli("mints", "--endpoint", local.endpoint, "--json").stdout.splitlines()
    assert set(before) <= set(after) and len(after) > len(before)  # no record lost
    eventually(lambda: resolves(local, item["ibip"]), "a resolution after every worker was killed")
    assert file_served(item["file"])
    eventually(lambda: len(api_workers(local)) == 16, "16 workers again")
    assert not api_workers(local) & workers


def test_a_store_that_keeps_dying_ends_the_run_with_its_name_and_log(local: LocalRun) -> None:
    assert local.process is not None
    killed: set[int] = set()
    deadline = time.monotonic() + WAIT
    while local.process.poll() is None:  # 6 deaths within 60 s: the 6th is not forgiven
        assert time.monotonic() < deadline, f"ibi local still runs after {len(killed)} kills"
        pid = store_pid(local, "seaweedfs")
        if pid is not None and pid not in killed:
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        assert len(killed) <= 6, "ibi local went on restarting SeaweedFS"
        time.sleep(0.05)
    assert local.process.wait(timeout=30) == 1
    assert local.process.stdout is not None
    said = local.process.stdout.read()
    log = local.data_dir.resolve() / "seaweedfs.log"
    assert "ibi: local: SeaweedFS died 6 times within 60 s" in said, said
    assert f"See its log: {log}." in said and "not restarting it again" in said
    local.process = None  # it has ended: nothing for the fixture to stop


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_data_directory_holds_no_file_others_can_read(tmp_path: Path) -> None:
    """Whatever the umask `ibi local` starts with: a presigned file fetch leaves no signature
    in any log, and every file is 0600, every directory 0700."""
    from ibi_tools.local.stores import free_port

    previous = os.umask(0)
    try:
        local = LocalRun(tmp_path / "data", free_port()).start()
    finally:
        os.umask(previous)
    try:
        item = deposit(local, tmp_path)
        assert file_served(item["file"])
        data = local.data_dir
        for name in ("tables.sqlite3", "seaweedfs.log", "seaweedfs.pid", "subsystems.json"):
            assert mode(data / name) == 0o600, name
        for key in ("archive-a.key", "archive-b.key", "resolver-pepper"):
            assert mode(data / "keys" / key) == 0o600, key
        for path in data.rglob("*"):
            if path.is_socket() or (path.parent.name == "seaweedfs" and path.suffix == ".vif"):
                continue  # SeaweedFS's own modes (a socket; a volume's info, 0644), in its 0700
            assert mode(path) == (0o700 if path.is_dir() else 0o600), path
        assert mode(data) == 0o700 and mode(data / "seaweedfs") == 0o700
    finally:
        local.stop()
    text = (local.data_dir / "seaweedfs.log").read_text()
    assert "X-Amz-" not in text
