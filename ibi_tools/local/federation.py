"""``ibi local``: the services on loopback, with their data in one directory.

The minting service, two Archives (``archive-a``, ``archive-b``) and the resolver, each its
own API on its own port, over local mode's tables (``tables.sqlite3``: the stores' DynamoDB
calls answered in process, ``tables.py``) and SeaweedFS (S3, ``s3.py``) on loopback. The Archives
are registered with the resolver (keys kept in ``<data>/keys/``) and included at every start,
in process (the Archive called back as spec §4 says; never through the throttled public route).
Each Archive mints from its own identification subsystem, on its own port, and owns its
prefixes at the resolver; the data directory mints only as the ports it serves
(``subsystems.py``). Everything survives restarts.

The data directory, its stores and its lock: ``datadir.py``; the minting state's tables and
dates: ``mint_dates.py``. :meth:`LocalFederation.wait` watches the S3 server and the APIs'
workers and restarts a dead one (see ``supervisor.py``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ibi.core.subsystem import Subsystem
from ibi_tools.local.datadir import (
    DYNALITE_DIR,
    DYNALITE_KEPT,
    RUNNING_FILE,
    S3_DIR,
    S3_PORT_OFFSET,
    S3RVER_KEPT,
    TABLES_FILE,
    DataDirInUseError,
    LostWriteAheadLog,
    lock_data_dir,
    new_registration_key,
    open_s3,
    open_tables,
    prepare_data_dir,
    rotate_key,
    unwritten_frames,
)
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.mint_dates import (
    LOCAL_MINT_BLOCK_SECONDS,
    MINTING_TABLES,
    carry_on_after,
    last_date_in,
    mint_store,
)
from ibi_tools.local.stores import LocalServer, check_free_space, private_dir, write_private
from ibi_tools.local.subsystems import (
    Claims,
    SubsystemError,
    archive_of,
    archive_prefixes,
    archive_subsystem,
    read_subsystems,
    state_dir,
    subsystems_for,
)
from ibi_tools.local.supervisor import INTERVAL, Supervisor, Watched
from ibi_tools.local.tables import LocalTables

# Kept importable from here, where they were before datadir.py and mint_dates.py.
__all__ = [
    "DYNALITE_DIR",
    "DYNALITE_KEPT",
    "LOCAL_MINT_BLOCK_SECONDS",
    "MINTING_TABLES",
    "S3RVER_KEPT",
    "S3_DIR",
    "TABLES_FILE",
    "DataDirInUseError",
    "LocalFederation",
    "LostWriteAheadLog",
    "carry_on_after",
    "last_date_in",
    "mint_store",
    "open_s3",
    "open_tables",
    "prepare_data_dir",
    "quiet_powertools",
    "rotate_key",
    "unwritten_frames",
]

DEFAULT_MINTING_PORT = 8800
ARCHIVES = ("archive-a", "archive-b", "archive-c")  # the third with --archive-ports A,B,C


def quiet_powertools(log_level: str) -> None:
    """Local runs print readable lines: no metric blobs, no tracing, few logs."""
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", log_level)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def ibi_command() -> str:
    """How to run this ``ibi`` from here: ``ibi`` when the PATH finds this one (an activated
    venv), else its path (``.venv/bin/ibi`` after ``make``)."""
    here = Path(sys.executable).parent / "ibi"
    found = shutil.which("ibi")
    if found is not None and Path(found).resolve() == here.resolve():
        return "ibi"
    relative = os.path.relpath(here)
    return relative if not relative.startswith("..") else str(here)


@dataclass
class LocalFederation:
    data_dir: Path
    minting_port: int = DEFAULT_MINTING_PORT
    max_wait: str = "5"
    log_level: str = "WARNING"
    workers: int = 4
    gateways: list[LocalGateway] = field(default_factory=list)
    archive_ports: tuple[int, ...] = (8810, 8820)
    resolver_port: int = 8080
    s3_port: int | None = None  # None: the minting port + S3_PORT_OFFSET
    _tables: LocalTables | None = None
    _s3: Any = None
    switch_answers: dict[str, str] = field(default_factory=dict)
    demo: bool = True
    demo_urls: list[Any] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _supervisor: Supervisor | None = None
    _lock: Any = None
    _subsystems: list[dict[str, Any]] = field(default_factory=list)  # once the ports are bound
    _prefixes: dict[str, list[str]] = field(default_factory=dict)  # each Archive's own
    _settings: dict[str, Any] = field(default_factory=dict)  # each API's, before its workers
    owners: dict[str, str] = field(default_factory=dict)  # prefix → the Archive owning it
    _resolver_settings: Any = None
    check_links_every: int = 86400  # seconds between link checks of each Archive (0: never)

    def start(self) -> LocalFederation:
        quiet_powertools(self.log_level)
        prepare_data_dir(self.data_dir)
        check_free_space(self.data_dir)  # a full disk: one line naming it, not a store's error
        self._take_data_dir()
        self._tables = open_tables(self.data_dir)
        try:
            self._s3 = open_s3(self.data_dir, self.s3_port or self.minting_port + S3_PORT_OFFSET)
            minting = self._minting()
            self.gateways.append(minting)
            for name, port in zip(self.archive_names, self.archive_ports, strict=True):
                self.gateways.append(self._archive(name, port))
            self._mint_as(minting)  # every minting port bound: the subsystems, the settings
            self._make_keys()  # before any worker: none makes one while it serves
            resolver = self._resolver()  # every port taken before any worker starts
            self.gateways.append(resolver)
            for gateway in self.gateways[:-1]:
                gateway.start()
            if self.demo:  # before the resolver starts: its landing page shows the demo's IBIs
                from ibi_tools.local.demo import ensure_demo

                archive_a, archive_b = (f"http://127.0.0.1:{p}" for p in self.archive_ports[:2])
                subsystem_a = archive_subsystem(self.archive_names[0], self.archive_ports[0])
                self.demo_urls = ensure_demo(
                    self.data_dir, archive_a, archive_b, minting.url, subsystem_a["name"]
                )
            self._include_archives()  # its workers start with them in the registry
            resolver.start()
            if self.demo:  # the copy is checked through the resolver: made once it runs
                from ibi_tools.local.demo import ensure_demo_copy

                ensure_demo_copy(self.data_dir, archive_a, archive_b, self.demo_urls)
        except BaseException:
            self.stop()
            raise
        self._supervisor = Supervisor(self._watched(), stopping=self._stopping.is_set)
        if self._s3 is not None:
            self._s3.cancelled = self._stopping.is_set  # a restart's wait ends with a stop
        if self.check_links_every:
            threading.Thread(target=self._check_links, name="link-check", daemon=True).start()
        write_private(self.data_dir / RUNNING_FILE, json.dumps(self.endpoints()) + "\n")
        return self

    def _check_links(self) -> None:
        """Every ``check_links_every`` seconds, each Archive's external URLs checked, as the
        scheduled Lambda checks them in AWS (through the API: ``ibi archive check-links``);
        the first check one period after the start."""
        from ibi.client import ApiError, ArchiveClient

        while not self._stopped.wait(self.check_links_every):
            for name, url in self.endpoints()["archives"].items():
                try:
                    broken = sum(
                        run["broken"] for run in ArchiveClient(url, sign=False).check_links()
                    )
                except (ApiError, OSError) as error:
                    print(f"ibi local: {name}'s link check failed: {error}", file=sys.stderr)
                    continue
                if broken:
                    print(f"ibi local: {name}: {broken} broken link(s)", file=sys.stderr)

    def endpoints(self) -> dict[str, Any]:
        """Where this federation answers (``running.json`` while it runs: ``rotate_key``)."""
        archives = {
            name: f"http://127.0.0.1:{port}"
            for name, port in zip(self.archive_names, self.archive_ports, strict=True)
        }
        return {"resolver": self.resolver_url, "archives": archives}

    def _watched(self) -> list[Watched]:
        """The stores first, then the APIs (whose workers need the stores to start)."""
        stores = [(self._s3.name, self._s3)] if self._s3 is not None else []
        watched = [
            Watched(name, _ended(store), store.restart, log=store.log)
            for name, store in stores
            if store is not None
        ]
        for gateway in self.gateways:
            watched.append(
                Watched(
                    f"the {gateway.name} API's workers",
                    gateway.dead_workers,
                    gateway.restart_dead,
                    limit=5 * self.workers,
                )
            )
        return watched

    @property
    def archive_names(self) -> tuple[str, ...]:
        """archive-a, archive-b (and archive-c when three ports are given)."""
        return ARCHIVES[: len(self.archive_ports)]

    @property
    def resolver_url(self) -> str:
        return f"http://127.0.0.1:{self.resolver_port}"

    def _resolver(self) -> LocalGateway:
        from functions.resolver import wiring
        from functions.resolver.pepper import FilePepper
        from functions.resolver.settings import ResolverSettings

        assert self._tables is not None
        tables = self._tables
        wiring.ensure_tables(tables.client(), "ibi-resolver-archives")  # throttle, kept too
        settings = ResolverSettings.from_environment(
            {
                "IBI_RESOLVER_TABLE": "ibi-resolver-archives",
                "IBI_PEPPER_FILE": str(self.data_dir / "keys" / "resolver-pepper"),
                "IBI_ALLOW_NETWORKS": "127.0.0.0/8,::1/128",  # local mode: loopback Archives
                "IBI_RESOLVER_NAME": "ibi local resolver",
                # Acknowledgments wait here (a file each, surviving restarts) and every
                # worker drains them with the code the drain Lambda runs (drain.py).
                "IBI_ACK_QUEUE_DIR": str(self.data_dir / "acknowledgments"),
            }
        )
        private_dir(self.data_dir / "acknowledgments")
        FilePepper(str(settings.pepper_file)).load()  # made once, before the workers start
        self._resolver_settings = settings

        def handler() -> Any:  # in each worker process: its own client, its own runtime
            from functions.resolver.handler import lambda_handler

            # The landing page's examples: the demo's own items (a redirect each), seeded by
            # the time the resolver's workers start.
            examples = tuple(u.path.lstrip("/") for u in self.demo_urls if u.expect == 302)
            local = dataclasses.replace(settings, examples=examples[:4])
            wiring.install(wiring.build(local, dynamodb=tables.client()))
            return lambda_handler

        return LocalGateway("resolver", handler, self.resolver_port, workers=self.workers)

    def _make_keys(self) -> None:
        """Each Archive's urlkey secret, made now if missing (``keys/<archive>-urlkey``): a
        worker that made it at its first resolution, on a full disk, failed every resolution
        of the Archive's items, and left a file behind at each attempt."""
        from functions.shared.keys import FileKeys

        for name in self.archive_names:
            FileKeys(self.data_dir / "keys" / f"{name}-urlkey").load()

    def registration_key(self, archive: str) -> str:
        """The Archive's registration key, made on the first start (a file, 0600)."""
        path = self.data_dir / "keys" / f"{archive}.key"
        if not path.exists():
            private_dir(path.parent)
            write_private(path, new_registration_key() + "\n")
        path.chmod(0o600)  # one an older version made may be wider
        return path.read_text().strip()

    def _include_archives(self) -> None:
        """Register each Archive and include it (§4), in this process, before the resolver's
        workers start: local mode owns the resolver's tables, so its start never goes through
        the public switch route, whose throttle counts the wrong keys anyone on this machine
        sent from loopback (issue 23). The Archive is called back as for any inclusion."""
        from functions.resolver import wiring
        from ibi.client import ArchiveClient, switch_pairs
        from ibi.core.labels import parse_label
        from ibi.core.pairlist import format_pair_list

        assert self._tables is not None and self._resolver_settings is not None
        settings = self._resolver_settings
        registration = wiring.registration(
            settings, dynamodb=self._tables.client(), transport=wiring.archive_transport(settings)
        )
        services: dict[str, str] = {}
        for name, port in zip(self.archive_names, self.archive_ports, strict=True):
            archive = ArchiveClient(f"http://127.0.0.1:{port}", sign=False, retries=10)
            service = archive.service()
            ibi = service["archiveserviceibi"]
            services[parse_label(ibi.get("ibip") or ibi["rep"]).label] = name
            pairs = switch_pairs(
                address=service["archiveaddress"],
                service_ibi=ibi.get("ibip") or ibi["rep"],
                base_url=service["base_url"],
                registration_key=self.registration_key(name),
                on=True,
            )
            answer = format_pair_list(registration.admit(dict(pairs)).pairs)
            if "status.archive included" not in answer:
                raise RuntimeError(f"{name} was not included by the resolver: {answer}")
            self.switch_answers[name] = answer
            self._own_prefixes(registration, name, ibi.get("ibip") or ibi["rep"])
        self.owners = {
            p: services.get(a.service_ibi, a.service_ibi) for p, a in registration.owned().items()
        }

    def _own_prefixes(self, registration: Any, name: str, service_ibi: str) -> None:
        """Register with the Archive every prefix of its own subsystems it does not own yet
        (the owner check is on the prefix of the form resolved: its service IBI makes it the
        owner of one form's only; an older data directory's Archives, their service IBIs
        minted by one shared subsystem, own none of theirs)."""
        from functions.resolver.registry import PrefixTaken
        from ibi.core.labels import parse_label

        label = parse_label(service_ibi).label
        owned = registration.owned()
        missing = [
            prefix
            for prefix in self._prefixes[name]
            if prefix not in owned or owned[prefix].service_ibi != label
        ]
        if not missing:
            return
        try:
            registration.change_prefixes(label, add=missing)
        except PrefixTaken as taken:
            raise SubsystemError(
                f"{name} mints under {taken.prefix}, which the resolver's registry gives to "
                f"the Archive {taken.owner}: start {name} on another port (--archive-ports)"
            ) from None

    def healthy(self) -> bool:
        return all(gateway.alive() for gateway in self.gateways)

    def _minting(self) -> LocalGateway:
        """The minting API, its port bound (its settings: :meth:`_mint_as`)."""
        from functions.minting import wiring
        from functions.minting.store import ensure_tables

        assert self._tables is not None
        tables = self._tables
        ensure_tables(tables.client(), MINTING_TABLES)

        def handler() -> Any:  # in each worker process: its own client, its own service
            from functions.minting.handler import lambda_handler

            wiring.install(wiring.build(self._settings["minting"], dynamodb=tables.client()))
            return lambda_handler

        return LocalGateway("minting", handler, self.minting_port, workers=self.workers)

    def _mint_as(self, minting: LocalGateway) -> None:
        """Once the minting port and every Archive's are bound (a start that fails on a busy
        port records nothing): the subsystems read or written down — the minting service's
        own, then one per Archive, on its own port — and claimed for this directory
        (``subsystems.py``); then the minting service's and the Archives' settings."""
        from functions.minting.settings import Settings

        archives = dict(zip(self.archive_names, self.archive_ports, strict=True))
        self._subsystems = subsystems_for(self.data_dir, minting.port, archives)
        self._carry_on(self._subsystems)
        configured = read_subsystems(self.data_dir) or self._subsystems
        self._prefixes = {name: archive_prefixes(configured, name) for name in archives}
        self._settings["minting"] = Settings.from_environment(
            {
                "IBI_STATE_TABLE": MINTING_TABLES["state"],
                "IBI_RECORD_TABLE": MINTING_TABLES["record"],
                "IBI_IDEMPOTENCY_TABLE": MINTING_TABLES["idempotency"],
                "IBI_SUBSYSTEMS": json.dumps(self._subsystems),
                "IBI_DEFAULT_SUBSYSTEM": self._subsystems[0]["name"],
                "IBI_MAX_WAIT_SECONDS": self.max_wait,
                "IBI_MINT_BLOCK_SECONDS": LOCAL_MINT_BLOCK_SECONDS,
            }
        )
        for name, port in archives.items():
            self._settings[name] = self._archive_settings(name, port, minting.url)

    def _carry_on(self, configured: list[dict[str, Any]]) -> None:
        """Claim the subsystems' prefixes for this directory; where another data directory
        minted under one before, carry on after its last date (spec §1.3)."""
        assert self._tables is not None
        handed = Claims(state_dir()).claim(self.data_dir, configured, last_date_in)
        store = mint_store(self._tables.client())
        for item in configured:
            date = handed.get(item["name"])
            if date is not None:
                carry_on_after(store, item["name"], date, str(item["granularity"]))

    def _note_last_dates(self) -> None:
        """At the stop: each subsystem's last date, kept with its claim (``subsystems.py``)."""
        if not self._subsystems or self._tables is None:
            return
        from functions.minting.store import StoreError

        store = mint_store(self._tables.client())
        try:
            dates = {item["name"]: store.last_date(item["name"]) for item in self._subsystems}
            Claims(state_dir()).note_last_dates(self.data_dir, dates)
        except (StoreError, OSError, ValueError) as error:
            print(f"ibi local: the subsystems' last dates were not kept: {error}", file=sys.stderr)

    def _archive(self, name: str, port: int) -> LocalGateway:
        """An Archive's API, its port bound (its settings: :meth:`_mint_as`)."""
        from functions.archive import wiring
        from functions.archive.store import ensure_table

        assert self._tables is not None
        tables, s3 = self._tables, self._s3
        table, bucket = f"ibi-{name}-items", f"ibi-{name}-files"
        ensure_table(tables.client(), table)
        s3.ensure_bucket(bucket)

        def handler() -> Any:  # in each worker process, before it serves: the bootstrap
            from functions.archive.handler import lambda_handler

            runtime = wiring.build(self._settings[name], dynamodb=tables.client(), s3=s3.client())
            wiring.install(runtime).start(f"http://127.0.0.1:{port}")
            return lambda_handler

        return LocalGateway(name, handler, port, workers=self.workers)

    def _archive_settings(self, name: str, port: int, mint_endpoint: str) -> Any:
        """The Archive's settings: it mints from its own subsystem, and takes originals for
        the prefixes of its own subsystems only (each port it served)."""
        from functions.archive.settings import ArchiveSettings

        table, bucket = f"ibi-{name}-items", f"ibi-{name}-files"
        return ArchiveSettings.from_environment(
            {
                "IBI_ARCHIVE_TABLE": table,
                "IBI_ARCHIVE_BUCKET": bucket,
                "IBI_ARCHIVE_BASE_URL": f"http://127.0.0.1:{port}",
                # its pages' and signposting's persistent URLs: at the local resolver
                "IBI_RESOLVER_URL": self.resolver_url,
                "IBI_MINT_ENDPOINT": mint_endpoint,
                "IBI_MINT_SUBSYSTEM": archive_subsystem(name, port)["name"],
                # who it is in the mint record: every local caller is its loopback address
                "IBI_ARCHIVE_PRINCIPAL": "anonymous:127.0.0.1",
                # its own subsystems' prefixes: the IBIs it takes originals for
                "IBI_ARCHIVE_SUBSYSTEM_PREFIXES": ",".join(self._prefixes[name]),
                "IBI_ALLOW_NETWORKS": "127.0.0.0/8,::1/128",  # transfers to loopback Archives
                # the urlkeys' HMAC key, shared by the workers (Secrets Manager in AWS)
                "IBI_URLKEY_SECRET_FILE": str(self.data_dir / "keys" / f"{name}-urlkey"),
                # OAI-PMH's page size: the default unless set (a small one in the e2e tests)
                "IBI_OAI_PAGE_SIZE": os.environ.get("IBI_OAI_PAGE_SIZE", ""),
                # the only networks its link checker contacts, if set (the e2e tests: loopback)
                "IBI_LINK_CHECK_NETWORKS": os.environ.get("IBI_LINK_CHECK_NETWORKS", ""),
            }
        )

    def _take_data_dir(self) -> None:
        """The data directory, locked for as long as this federation runs (``datadir.py``)."""
        ports = (self.minting_port, *self.archive_ports, self.resolver_port)
        self._lock = lock_data_dir(self.data_dir, ports)

    def stop(self) -> None:
        for gateway in self.gateways:
            gateway.shutdown()
        self.gateways.clear()
        self._note_last_dates()
        if self._s3 is not None:
            self._s3.stop()
            self._s3 = None
        self._tables = None
        if self._lock is not None:
            (self.data_dir / RUNNING_FILE).unlink(missing_ok=True)
            self._lock.close()  # releases the flock
            self._lock = None
        self._stopped.set()

    def request_stop(self) -> None:
        """Ask :meth:`wait` to stop everything and return (safe in a signal handler)."""
        self._stopping.set()

    def wait(self) -> None:
        """Watch until :meth:`request_stop`: restart what dies (``supervisor.py``), then stop.

        Raises :class:`~ibi_tools.local.supervisor.GaveUp`, everything stopped, when a store
        or an API's workers keep dying. To be called in the thread that called :meth:`start`
        (the main one): a child is told to end when the thread that started it ends.
        """
        try:
            while not self._stopping.wait(INTERVAL) and not self._stopped.is_set():
                if self._supervisor is not None:
                    self._supervisor.check()
        finally:
            self.stop()

    def describe(self) -> str:
        lines = [f"ibi local — data in {self.data_dir.resolve()}"]
        for gateway in self.gateways:
            lines.append(f"  {gateway.name:<10} {gateway.url}")
        if self._s3 is not None:
            lines.append(f"  {'s3':<10} {self._s3.describe()}")
        if self.gateways:
            mint = self.gateways[0].url
            archive = f"http://127.0.0.1:{self.archive_ports[0]}"
            lines += ["", "Archives switched on at the resolver:"]
            lines += [
                f"  {name}: {' '.join(answer.split())}"
                for name, answer in self.switch_answers.items()
            ]
            lines += self._describe_subsystems()
            if self.demo_urls:
                lines += ["", "Persistent URLs to try (curl -i …; the status the spec says):"]
                for url in self.demo_urls:
                    lines.append(f"  {url.expect}  {self.resolver_url}{url.path}")
                    lines.append(f"       {url.what}")
                from ibi_tools.local.demo import citation_examples

                lines += citation_examples(self.resolver_url, self.demo_urls)
            ibi = ibi_command()
            lines += [
                "",
                f"Registration keys: {self.data_dir / 'keys'} (a new one: "
                f"{ibi} local --data-dir {self.data_dir} --rotate-key archive-a)",
                "",
                "Try:",
                f"  {ibi} deposit FILE --endpoint {archive} --resolver {self.resolver_url}",
                f"  {ibi} mint --endpoint {mint} --count 3",
                f"  {ibi} mints --endpoint {mint}",
                f"  open {self.resolver_url}/ (landing page) and {self.resolver_url}/status",
            ]
        return "\n".join(lines)

    def _describe_subsystems(self) -> list[str]:
        """Each subsystem minted from now, its prefixes and who owns them at the resolver."""
        lines = ["", "Identification subsystems (an IBI's prefix; its owner is asked first):"]
        for item in self._subsystems:
            subsystem = Subsystem.from_mapping(item)
            archive = archive_of(item)
            who = f"{archive}'s" if archive else "the minting service's (ibi mint)"
            owners = {self.owners.get(p) for p in (subsystem.rep_prefix, subsystem.ibip_prefix)}
            owner = " and ".join(sorted(o or "no Archive" for o in owners))
            lines.append(
                f"  {subsystem.rep_prefix:<26} {subsystem.ibip_prefix:<14} {who}, owned by {owner}"
            )
        return lines


def _ended(store: LocalServer) -> Callable[[], list[str]]:
    """A store's ``dead`` for :class:`Watched`: how it ended, if it has."""

    def dead() -> list[str]:
        status: str | None = store.exit_status()
        return [f"pid {store.pid} {status}"] if status else []

    return dead
