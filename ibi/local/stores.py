"""Local stand-ins for AWS data services, run as child processes on loopback.

dynalite (npm) speaks the DynamoDB API over LevelDB files, so local data survives restarts
(and ``kill -9``), and its conditional writes are atomic.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import boto3
from botocore.config import Config

LOOPBACK = "127.0.0.1"
LOCAL_REGION = "us-east-1"
LOCAL_KEY = "local"  # dynalite accepts any credentials; nothing here reaches AWS


class LocalStoreError(RuntimeError):
    """A local store could not be found or started."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


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


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalStoreError(f"the store exited with status {process.returncode}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise LocalStoreError(f"nothing answered on {LOOPBACK}:{port} within {timeout}s")


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, get SIGTERM when the parent dies (even kill -9)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stop_leftover(pidfile: Path) -> None:
    """A store left running by an earlier run that was killed holds its files: stop it."""
    try:
        pid = int(pidfile.read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"dynalite" not in command:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)


class Dynalite:
    """A dynalite server on loopback keeping its tables in ``path``."""

    def __init__(self, path: Path, *, port: int | None = None, log: IO[bytes] | None = None):
        self.path = path
        self.port = port or free_port()
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def _pidfile(self) -> Path:
        return self.path.parent / f"{self.path.name}.pid"

    def start(self) -> Dynalite:
        self.path.mkdir(parents=True, exist_ok=True)
        _stop_leftover(self._pidfile)
        command = [
            str(find_node_tool("dynalite")),
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--path",
            str(self.path),
            "--createTableMs",
            "0",
        ]
        self._process = subprocess.Popen(  # noqa: S603 - our own tool, fixed arguments
            command,
            stdout=self._log or subprocess.DEVNULL,
            stderr=self._log or subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, no locks taken
        )
        self._pidfile.write_text(f"{self._process.pid}\n")
        wait_for_port(self.port, self._process)
        return self

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
        self._pidfile.unlink(missing_ok=True)

    def client(self) -> Any:
        return boto3.client(
            "dynamodb",
            endpoint_url=self.endpoint,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=64),
            region_name=LOCAL_REGION,
            aws_access_key_id=LOCAL_KEY,
            aws_secret_access_key=LOCAL_KEY,
        )

    def __enter__(self) -> Dynalite:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
