"""Local stand-ins for AWS data services, run as child processes on loopback.

:class:`LocalServer` runs one: SeaweedFS for S3 (``s3.py``), and dynalite (npm), which speaks
the DynamoDB API over LevelDB files, only to copy a data directory of a version before local
mode's tables (``federation.copy_from_dynalite``): everything else that runs as a server uses
those tables (``tables.py``).

Everything a store writes is private to the user running it, whatever the umask: its data
directory is 0700 and the files in it 0600 (the child runs with umask 077), and so are its
pid file and its log. The log is written through a filter that drops query strings (and so
the signatures of presigned URLs) and terminal colours from every line.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import boto3
from botocore.config import Config

LOOPBACK = "127.0.0.1"
LOCAL_REGION = "us-east-1"
LOCAL_KEY = "local"  # dynalite and moto's server check no signature; nothing here reaches AWS


PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


class LocalStoreError(RuntimeError):
    """A local store could not be found or started."""


# Below this much free space `ibi local` does not start: its stores would fail mid-write
# (SQLite answers "database or disk is full", SeaweedFS exits), each in its own words.
MIN_FREE_BYTES = 8 * 1024 * 1024


def full_disk(path: Path) -> str:
    """What to tell the user when the disk holding ``path`` is full."""
    return (
        f"the disk holding {Path(path).resolve()} is full: free some space there "
        "(or give --data-dir a directory on another disk), then start again"
    )


def check_free_space(path: Path, needed: int = MIN_FREE_BYTES) -> None:
    """Raise :class:`LocalStoreError` naming the disk when it has less than ``needed`` free."""
    if shutil.disk_usage(path).free < needed:
        raise LocalStoreError(full_disk(path))


def private_dir(path: Path) -> Path:
    """``path`` made if missing, and readable by its owner only (0700)."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    path.chmod(PRIVATE_DIR)
    return path


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A file descriptor on ``path`` (made if missing), the file 0600 whatever the umask."""
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)  # a file left by an older run may be wider
    except OSError:
        os.close(fd)
        raise
    return fd


def write_private(path: Path, text: str) -> None:
    """Replace ``path``'s content with ``text``; the file 0600 whatever the umask."""
    fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w") as file:
        file.write(text)


# What a log line must not keep: terminal colours, and any query string (a presigned URL's
# X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token...), and, should one appear outside
# a URL, any X-Amz-Signature/Credential/Security-Token value.
_COLOURS = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")
_QUERY = re.compile(rb"\?\S*")
_AMZ_SECRET = re.compile(rb"(?i)(x-amz-(?:signature|credential|security-token))[=:]\s*\S+")


def scrub_log_line(line: bytes) -> bytes:
    """One line of a store's output as it may be logged: no colours, no query, no signature."""
    line = _COLOURS.sub(b"", line)
    line = _QUERY.sub(b"", line)
    return _AMZ_SECRET.sub(rb"\1=[removed]", line)


def _copy_scrubbed(source: IO[bytes], fd: int) -> None:
    """In a thread: every line of a store's output to its log, scrubbed, until the store ends.

    A line that cannot be written (a full disk) is dropped, and reading goes on: a store
    blocked on a full pipe would stop answering.
    """
    try:
        with source:
            for line in source:
                with contextlib.suppress(OSError):
                    os.write(fd, scrub_log_line(line))
    except (OSError, ValueError):
        pass  # the pipe broke: the store is gone, and its exit is seen by whoever watches it
    finally:
        os.close(fd)


def _ephemeral_ports() -> tuple[int, int]:
    """The range the kernel takes outgoing connections' local ports from."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A loopback port nothing listens on, for a server to bind a moment later.

    Chosen below the ephemeral range: a port from it (what ``bind(0)`` gives) can be taken by
    any outgoing connection in the meantime, and then the server cannot bind it.
    """
    low, _ = _ephemeral_ports()
    first = 20000 if low > 21000 else 10000
    for _ in range(200):
        port = random.randrange(first, max(first + 1000, low))  # noqa: S311 (not a secret)
        with socket.socket() as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # a crowded machine: any port the kernel gives
        sock.bind((LOOPBACK, 0))
        found: int = sock.getsockname()[1]
        return found


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports nothing listens on (a server that
    takes a block of ports: ``s3.py``), below the ephemeral range as :func:`free_port`'s."""
    for _ in range(200):
        first = free_port()
        if first + count <= 65536 and all(_bindable(first + i) for i in range(1, count)):
            return first
    raise OSError(f"no {count} consecutive free ports on {LOOPBACK}")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def find_node_tool(name: str) -> Path:
    """``node_modules/.bin/<name>`` of this checkout (or of the working directory)."""
    override = os.environ.get(f"IBI_{name.upper()}")
    if override:
        return Path(override)
    starts = [Path.cwd(), Path(__file__).resolve()]
    for start in starts:
        for folder in (start, *start.parents):
            candidate = folder / "node_modules" / ".bin" / name
            if candidate.exists():
                return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise LocalStoreError(
        f"{name} is not installed: run `make setup` (npm ci) in the ibi checkout first"
    )


def wait_for_port(
    port: int,
    process: subprocess.Popen[bytes],
    timeout: float = 20.0,
    cancelled: Callable[[], bool] = lambda: False,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not cancelled():
        if process.poll() is not None:
            name = Path(str(process.args[0] if isinstance(process.args, list) else "")).name
            raise LocalStoreError(f"{name or 'the store'} exited with status {process.returncode}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise LocalStoreError(f"nothing answered on {LOOPBACK}:{port} within {timeout}s")


def die_with_parent() -> None:
    """In the child, before exec: on Linux, get SIGTERM when the parent dies (even kill -9)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie holds no port and no files


def stop_leftover(pidfile: Path, tool: str, path: Path) -> None:
    """A ``tool`` on ``path`` left running by an earlier run that was killed: stop it.

    Only when the pid still runs that very tool on that very directory, so that a reused pid
    or another run's server is left alone.
    """
    try:
        pid = int(pidfile.read_text().strip())
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if not any(tool.encode() in argument for argument in arguments):
        return
    if str(path).encode() not in arguments:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.05)


class LocalServer:
    """A tool serving on loopback with its data in ``path``: started, watched, stopped.

    It dies with its parent (even on ``kill -9``), records its pid beside its data, and a
    server left running on the same data by a killed run is stopped before a new one starts.
    With a ``log``, its output goes there through :func:`scrub_log_line`; without, nowhere.
    :meth:`restart` starts it again on the same port and data (a store that died).
    """

    tool = ""
    stop_seconds = 10.0  # after a SIGTERM, how long it may take before it is killed

    def __init__(self, path: Path, *, port: int | None = None, log: Path | None = None):
        self.path = Path(path).absolute()  # as the leftover check finds it in the command line
        self.port = port or free_port()
        self.log = Path(log).absolute() if log is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._copier: threading.Thread | None = None
        # whether ``ibi local`` is being stopped: a (re)start waiting for the server gives up
        self.cancelled: Callable[[], bool] = lambda: False

    def arguments(self) -> list[str]:
        raise NotImplementedError

    def executable(self) -> Path:
        """The program to run: ``node_modules/.bin/<tool>`` unless a server says otherwise."""
        return find_node_tool(self.tool)

    def environment(self) -> dict[str, str]:
        """Variables the tool runs with, added to this process's environment."""
        return {}

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def _pidfile(self) -> Path:
        return self.path.parent / f"{self.path.name}.pid"

    def start(self) -> Self:
        private_dir(self.path)
        stop_leftover(self._pidfile, self.tool, self.path)
        log_fd = open_private(self.log) if self.log is not None else None
        output = subprocess.PIPE if log_fd is not None else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(  # noqa: S603 - our own tool, fixed arguments
                [str(self.executable()), *self.arguments()],
                stdout=output,
                stderr=subprocess.STDOUT if log_fd is not None else subprocess.DEVNULL,
                env={**os.environ, **self.environment()},
                umask=0o077,  # its data: the user's only
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, no locks taken
            )
        except BaseException:
            if log_fd is not None:
                os.close(log_fd)
            raise
        if log_fd is not None:
            assert self._process.stdout is not None
            self._copier = threading.Thread(
                target=_copy_scrubbed,
                args=(self._process.stdout, log_fd),
                name=f"{self.tool}-log",
                daemon=True,
            )
            self._copier.start()
        write_private(self._pidfile, f"{self._process.pid}\n")
        wait_for_port(self.port, self._process, cancelled=self.cancelled)
        return self

    def exit_status(self) -> str | None:
        """None while it runs; once it has ended, how (``killed by signal 9``...)."""
        if self._process is None or self._process.poll() is None:
            return None
        code = self._process.returncode
        return f"killed by signal {-code}" if code < 0 else f"exited with status {code}"

    def restart(self) -> Self:
        """Start it again, on the same port and the same data (after it died)."""
        self.stop()
        return self.start()

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=self.stop_seconds)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
        if self._copier is not None:
            self._copier.join(timeout=5)  # the last lines into the log
            self._copier = None
        self._pidfile.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class Dynalite(LocalServer):
    """A dynalite server on loopback keeping its tables in ``path``: run only to copy a data
    directory from before local mode's tables (``federation.copy_from_dynalite``)."""

    tool = "dynalite"

    def arguments(self) -> list[str]:
        return [
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--path",
            str(self.path),
            "--createTableMs",
            "0",
        ]

    def client(self) -> Any:
        return boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=64),
            region_name=LOCAL_REGION,
            aws_access_key_id=LOCAL_KEY,
            aws_secret_access_key=LOCAL_KEY,
        )
