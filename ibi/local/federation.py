"""``ibi local``: the services on loopback, with their data in one directory.

Today it runs the minting service; the Archives and the resolver join it as they land.
Everything the services store lives under the data directory and survives restarts.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ibi.core.subsystem import Subsystem, check_distinct
from ibi.local.gateway import LocalGateway
from ibi.local.stores import Dynalite

DEFAULT_MINTING_PORT = 8800
MINTING_TABLES = {
    "state": "ibi-mint-state",
    "record": "ibi-mint-record",
    "idempotency": "ibi-mint-idempotency",
}


def quiet_powertools(log_level: str) -> None:
    """Local runs print readable lines: no metric blobs, no tracing, few logs."""
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", log_level)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def local_subsystems(data_dir: Path, port: int) -> list[dict[str, Any]]:
    """The identification subsystems of this data directory, fixed at its first start.

    They are written down on the first start so that the prefixes never change under
    the data (a restart on another port keeps minting under the same prefixes).
    """
    path = data_dir / "subsystems.json"
    if path.exists():
        configured = json.loads(path.read_text())
    else:
        configured = [
            {
                "name": "local",
                "host": "mint.localhost",
                "ip": "127.0.0.1",
                "rep_port": port,
                "ibip_port": port,
                "granularity": "0.001",
            }
        ]
        path.write_text(json.dumps(configured, indent=2) + "\n")
    check_distinct(Subsystem.from_mapping(item) for item in configured)
    return list(configured)


@dataclass
class LocalFederation:
    data_dir: Path
    minting_port: int = DEFAULT_MINTING_PORT
    max_wait: str = "5"
    log_level: str = "WARNING"
    workers: int = 4
    gateways: list[LocalGateway] = field(default_factory=list)
    _dynalite: Dynalite | None = None
    _stopped: threading.Event = field(default_factory=threading.Event)

    def start(self) -> LocalFederation:
        quiet_powertools(self.log_level)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir / "dynalite.log").open("ab")
        self._dynalite = Dynalite(self.data_dir / "dynamodb", log=log).start()
        try:
            self.gateways.append(self._minting())
        except BaseException:
            self.stop()
            raise
        for gateway in self.gateways:
            gateway.start()
        return self

    def healthy(self) -> bool:
        return all(gateway.alive() for gateway in self.gateways)

    def _minting(self) -> LocalGateway:
        from functions.minting.handler import create_app, make_handler, service_from_settings
        from functions.minting.settings import Settings
        from functions.minting.store import ensure_tables

        assert self._dynalite is not None
        dynalite = self._dynalite
        ensure_tables(dynalite.client(), MINTING_TABLES)
        settings = Settings.from_environment(
            {
                "IBI_STATE_TABLE": MINTING_TABLES["state"],
                "IBI_RECORD_TABLE": MINTING_TABLES["record"],
                "IBI_IDEMPOTENCY_TABLE": MINTING_TABLES["idempotency"],
                "IBI_SUBSYSTEMS": json.dumps(local_subsystems(self.data_dir, self.minting_port)),
                "IBI_MAX_WAIT_SECONDS": self.max_wait,
            }
        )

        def handler() -> Any:  # in each worker process: its own client, its own service
            service = service_from_settings(settings, dynalite.client())
            return make_handler(create_app(lambda: service))

        return LocalGateway("minting", handler, self.minting_port, workers=self.workers)

    def stop(self) -> None:
        for gateway in self.gateways:
            gateway.shutdown()
        self.gateways.clear()
        if self._dynalite is not None:
            self._dynalite.stop()
            self._dynalite = None
        self._stopped.set()

    def wait(self) -> None:
        self._stopped.wait()

    def describe(self) -> str:
        lines = [f"ibi local — data in {self.data_dir.resolve()}"]
        for gateway in self.gateways:
            lines.append(f"  {gateway.name:<10} {gateway.url}")
        if self.gateways:
            mint = self.gateways[0].url
            lines += [
                "",
                "Try:",
                f"  ibi mint --endpoint {mint}",
                f"  ibi mint --endpoint {mint} --count 3 --json",
                f"  ibi mints --endpoint {mint}",
                f"  curl -s -X POST {mint}/mint -d '{{\"count\": 2}}'",
            ]
        return "\n".join(lines)
