"""``ibi local``'s own care: restarts bounded in a window, scrubbed logs, private files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ibi_tools.local.federation import prepare_data_dir
from ibi_tools.local.stores import (
    LocalStoreError,
    open_private,
    private_dir,
    scrub_log_line,
    write_private,
)
from ibi_tools.local.supervisor import GaveUp, Supervisor, Watched


class FakeStore:
    """A store process that dies when told to, and may fail to start again."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.alive = True
        self.starts = 0
        self.fail_starts = 0  # how many of the next restarts fail

    def dead(self) -> list[str]:
        return [] if self.alive else ["pid 4242 killed by signal 9"]

    def restart(self) -> None:
        self.starts += 1
        if self.fail_starts:
            self.fail_starts -= 1
            raise LocalStoreError("the store exited with status 1")
        self.alive = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def supervise(*stores: FakeStore, limit: int = 3) -> tuple[Supervisor, Clock, list[str]]:
    clock, said = Clock(), list[str]()
    watched = [
        Watched(s.name, s.dead, s.restart, log=Path(f"/data/{s.name}.log"), limit=limit, window=60)
        for s in stores
    ]
    return Supervisor(watched, clock=clock, say=said.append), clock, said


def test_a_dead_store_is_started_again_and_said_so() -> None:
    dynalite = FakeStore("dynalite")
    supervisor, _, said = supervise(dynalite)
    assert supervisor.check() == 0 and dynalite.starts == 0
    dynalite.alive = False
    assert supervisor.check() == 1
    assert dynalite.alive and dynalite.starts == 1
    assert said == ["ibi local: dynalite: pid 4242 killed by signal 9; restarting"]


def test_deaths_spread_beyond_the_window_are_forgiven() -> None:
    s3rver = FakeStore("s3rver")
    supervisor, clock, _ = supervise(s3rver, limit=3)
    for _ in range(10):  # ten deaths, one every 30 s: never more than 3 within 60 s
        s3rver.alive = False
        assert supervisor.check() == 1
        clock.now += 30
    assert s3rver.starts == 10


def test_a_store_that_keeps_dying_ends_the_run_naming_it_and_its_log() -> None:
    dynalite, s3rver = FakeStore("dynalite"), FakeStore("s3rver")
    supervisor, clock, _ = supervise(dynalite, s3rver, limit=3)
    for _ in range(3):
        s3rver.alive = False
        supervisor.check()
        clock.now += 5
    s3rver.alive = False
    with pytest.raises(GaveUp) as raised:
        supervisor.check()
    message = str(raised.value)
    assert message.startswith("s3rver died 4 times within 60 s (last: pid 4242 killed by signal 9)")
    assert message.endswith("See its log: /data/s3rver.log.") and "dynalite" not in message
    assert s3rver.starts == 3  # not started a fourth time


def test_a_restart_that_fails_is_tried_again_within_the_same_limit() -> None:
    dynalite, api = FakeStore("dynalite"), FakeStore("minting API workers")
    supervisor, _, said = supervise(dynalite, api, limit=3)
    dynalite.alive = api.alive = False
    dynalite.fail_starts = 1
    assert supervisor.check() == 0
    assert api.starts == 0  # the workers wait until their store answers again
    assert said[-1] == (
        "ibi local: dynalite did not start again (the store exited with status 1);"
        " see its log: /data/dynalite.log"
    )
    assert supervisor.check() == 2  # the store, then the workers
    assert dynalite.alive and api.alive
    dynalite.alive = False
    dynalite.fail_starts = 5
    supervisor.check()  # its third death
    with pytest.raises(GaveUp, match="dynalite died 4 times"):
        supervisor.check()  # the failed start left it dead: a fourth


def test_several_workers_dead_at_once_count_each() -> None:
    class Workers(FakeStore):
        dead_now = 0

        def dead(self) -> list[str]:
            return [f"worker {i} killed by signal 9" for i in range(self.dead_now)]

        def restart(self) -> None:
            super().restart()
            self.dead_now = 0

    workers = Workers("the minting API's workers")
    supervisor, _, _ = supervise(workers, limit=8)
    workers.dead_now = 4
    assert supervisor.check() == 4
    workers.dead_now = 4
    assert supervisor.check() == 4
    workers.dead_now = 1
    with pytest.raises(GaveUp, match="died 9 times"):
        supervisor.check()


@pytest.mark.parametrize(
    ("line", "logged"),
    [
        (
            b"\x1b[32minfo\x1b[39m: \x1b[1mGET\x1b[22m \x1b[90m/b/k%20x.txt?X-Amz-Algorithm=AWS4"
            b"&X-Amz-Credential=S3RVER%2F20260101&X-Amz-Signature=abc123\x1b[39m \x1b[32m200\x1b"
            b"[39m \x1b[90m4ms\x1b[39m\n",
            b"info: GET /b/k%20x.txt 200 4ms\n",
        ),
        (b"info: GET /b?list-type=2&prefix=k%2F 200 3ms\n", b"info: GET /b 200 3ms\n"),
        (
            b"error: bad X-Amz-Signature: 0f0f in header\n",
            b"error: bad X-Amz-Signature=[removed] in header\n",
        ),
        (b"S3rver listening on 127.0.0.1:9000\n", b"S3rver listening on 127.0.0.1:9000\n"),
    ],
)
def test_log_lines_lose_colours_queries_and_signatures(line: bytes, logged: bytes) -> None:
    assert scrub_log_line(line) == logged


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_private_files_and_directories_whatever_the_umask(tmp_path: Path) -> None:
    wide = tmp_path / "wide.log"
    wide.write_text("older lines\n")
    wide.chmod(0o666)
    with umask(0):
        folder = private_dir(tmp_path / "a" / "b")
        write_private(folder / "key", "secret\n")
        os.close(open_private(wide))
    assert mode(folder) == 0o700 and mode(folder / "key") == 0o600
    assert (folder / "key").read_text() == "secret\n"
    assert mode(wide) == 0o600 and wide.read_text() == "older lines\n"


def test_the_data_directory_is_made_private_unless_it_holds_other_things(tmp_path: Path) -> None:
    with umask(0):
        new = tmp_path / "new"
        prepare_data_dir(new)
        assert mode(new) == 0o700 and mode(new / "keys") == 0o700

        earlier = tmp_path / "earlier"  # a run's data, from before modes were tightened
        (earlier / "keys").mkdir(parents=True, mode=0o755)
        (earlier / "subsystems.json").write_text("[]\n")
        earlier.chmod(0o755)
        prepare_data_dir(earlier)
        assert mode(earlier) == 0o700 and mode(earlier / "keys") == 0o700

        project = tmp_path / "project"  # `--data-dir .` in a folder of other things
        project.mkdir(mode=0o755)
        (project / "README").write_text("mine\n")
        prepare_data_dir(project)
        assert mode(project) == 0o755 and mode(project / "keys") == 0o700


def test_nothing_is_started_again_once_ibi_local_is_being_stopped() -> None:
    """The stop's SIGTERM reaches the store too (one process group): its end is no death."""
    seaweed = FakeStore("SeaweedFS")
    stopping = [False]
    watched = [Watched(seaweed.name, seaweed.dead, seaweed.restart)]
    supervisor = Supervisor(watched, say=lambda _: None, stopping=lambda: stopping[0])
    stopping[0] = True
    seaweed.alive = False
    assert supervisor.check() == 0 and seaweed.starts == 0
