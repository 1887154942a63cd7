"""`ibi local` run as a user runs it, in a child process, on free ports; the `ibi` command."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from ibi_tools.local.stores import free_port, free_ports

IBI = [sys.executable, "-m", "ibi_tools.cli"]


class PortTaken(AssertionError):
    """``ibi local`` exited at once: a port chosen free was taken before it bound it."""

    def __init__(self, port: int, banner: str) -> None:
        super().__init__(banner)
        self.port = port


class LocalRun:
    def __init__(self, data_dir: Path, port: int, *, demo: bool = False) -> None:
        self.demo = demo
        self.banner: list[str] = []
        self.data_dir = data_dir
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"
        self.archive_ports: tuple[int, ...] = (free_port(), free_port())
        self.archives = [f"http://127.0.0.1:{p}" for p in self.archive_ports]
        self.resolver_port = free_port()
        self.resolver = f"http://127.0.0.1:{self.resolver_port}"
        self.s3_port = free_ports(10)  # the S3 server's block (ibi_tools/local/s3.py)
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> LocalRun:
        """Start it. On a new data directory, a port this harness chose free but found taken
        when ``ibi local`` bound it (another test's connection took it meanwhile) is chosen
        again, twice at most; the port the caller gave is never changed."""
        fresh = not self.data_dir.exists()
        for _ in range(3):
            try:
                return self._start()
            except PortTaken as taken:
                if not fresh or taken.port == self.port:
                    raise
                self._choose_again(taken.port)
        raise AssertionError("ibi local found a port taken three times")

    def _choose_again(self, port: int) -> None:
        if port in self.archive_ports:
            self.archive_ports = tuple(free_port() if p == port else p for p in self.archive_ports)
            self.archives = [f"http://127.0.0.1:{p}" for p in self.archive_ports]
        elif port == self.resolver_port:
            self.resolver_port = free_port()
            self.resolver = f"http://127.0.0.1:{self.resolver_port}"
        else:  # one of the S3 server's block
            self.s3_port = free_ports(10)

    def _start(self) -> LocalRun:
        self.process = subprocess.Popen(
            [
                *IBI,
                "local",
                "--data-dir",
                str(self.data_dir),
                "--port",
                str(self.port),
                "--archive-ports",
                ",".join(map(str, self.archive_ports)),
                "--resolver-port",
                str(self.resolver_port),
                "--s3-port",
                str(self.s3_port),
                *([] if self.demo else ["--no-demo"]),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            # The Archives' link checker contacts loopback only: tests send nothing further.
            env={**os.environ, "IBI_LINK_CHECK_NETWORKS": "127.0.0.0/8,::1/128"},
        )
        process = self.process
        assert process.stdout is not None
        banner: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                process.wait()
                self.process = None
                taken = re.search(r"port (\d+) \([^)]*\) is already in use", "".join(banner))
                if taken:
                    raise PortTaken(int(taken.group(1)), "ibi local exited:\n" + "".join(banner))
                raise AssertionError("ibi local exited:\n" + "".join(banner))
            banner.append(line)
            if line.startswith("Try:"):
                while not line.startswith("  open "):  # the last of the lines to try
                    line = process.stdout.readline()
                    banner.append(line)
                self.banner = banner
                return self
        raise AssertionError("ibi local did not start:\n" + "".join(banner))

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is None:
            return
        os.killpg(self.process.pid, sig)  # the whole group: ibi local and its S3 server
        self.process.wait(timeout=20)
        self.process = None


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*IBI, *args], capture_output=True, text=True, timeout=120, check=False)
