"""The resolver's wiring: settings → clients → registry, throttle, transport → services → runtime.

``build`` is pure (clients passed in); the runtime is held as every function holds its own
(functions/shared/runtime.py): ``runtime`` returns the installed one, or builds it once from
the environment with AWS clients made then, never at import; ``install`` puts one in place
(local mode and tests; None: build again), ``uninstall`` forgets it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from functions.resolver.acknowledgments import Acknowledgments, Delivery
from functions.resolver.directory import ArchiveDirectory
from functions.resolver.fanout import FanOut
from functions.resolver.kept import TableKept
from functions.resolver.kept import default_table as kept_default_table
from functions.resolver.kept import ensure_table as ensure_kept
from functions.resolver.network import AddressPolicy, ArchiveTransport
from functions.resolver.pepper import FilePepper, PepperSource, SecretPepper
from functions.resolver.queue import AckQueue, LocalQueue, SqsQueue
from functions.resolver.registry import DynamoRegistry
from functions.resolver.registry import ensure_table as ensure_registry
from functions.resolver.resolving import ResolvingService
from functions.resolver.service import RegistrationService
from functions.resolver.settings import ResolverSettings
from functions.resolver.throttle import DynamoThrottle, default_table
from functions.resolver.throttle import ensure_table as ensure_throttle
from functions.shared.edge import clock
from functions.shared.errors import ConfigurationError
from functions.shared.runtime import Holder

if TYPE_CHECKING:  # drain.py imports the Powertools batch utility (~130 ms): local mode only
    from functions.resolver.drain import LocalDrainer


@dataclass
class Runtime:
    settings: ResolverSettings
    registry: DynamoRegistry
    transport: ArchiveTransport
    directory: ArchiveDirectory  # the registered Archives: a snapshot, refreshed on change
    registration: RegistrationService
    fanout: FanOut
    acknowledgments: Acknowledgments
    resolving: ResolvingService
    queue: AckQueue  # where acknowledgments wait for the drain (queue.py)
    drainer: LocalDrainer | None  # local mode and tests only; in AWS the drain is a Lambda


def ensure_tables(
    dynamodb: Any, table: str, throttle_table: str | None = None, kept_table: str | None = None
) -> None:
    """Create the resolver's three tables if missing: the registry ``table``, its throttle
    table and its kept answers' table (by default ``<table>-throttle`` and ``<table>-kept``,
    as the settings name them). Local mode and tests only: in AWS, infra/resolver.py makes
    them."""
    ensure_registry(dynamodb, table)
    ensure_throttle(dynamodb, throttle_table or default_table(table))
    ensure_kept(dynamodb, kept_table or kept_default_table(table))


def pepper_source(settings: ResolverSettings, secretsmanager: Any = None) -> PepperSource:
    """Secrets Manager when the settings name a secret (AWS), else the local file."""
    if settings.pepper_secret_arn:
        if secretsmanager is None:
            raise ConfigurationError("IBI_PEPPER_SECRET_ARN is set: pass a secretsmanager client")
        return SecretPepper(secretsmanager, settings.pepper_secret_arn)
    return FilePepper(str(settings.pepper_file))


def acknowledgment_queue(
    settings: ResolverSettings, delivery: Delivery, sqs: Any = None
) -> tuple[AckQueue, LocalDrainer | None]:
    """SQS when the settings name a queue (AWS: no thread, the drain Lambda delivers), else a
    directory drained in this process by the same code (``ibi local``, tests)."""
    if settings.ack_queue_url:
        from ibi.aws import aws_client

        return SqsQueue(lambda: sqs or aws_client("sqs"), settings.ack_queue_url), None
    from functions.resolver.drain import LocalDrainer

    directory = settings.ack_queue_dir or tempfile.mkdtemp(prefix="ibi-acknowledgments-")
    queue = LocalQueue(Path(directory))
    drainer = LocalDrainer(queue, delivery)
    if queue.waiting():  # left by an earlier run: deliver them now
        drainer.start()
    return queue, drainer


def archive_transport(settings: ResolverSettings) -> ArchiveTransport:
    return ArchiveTransport(
        AddressPolicy(settings.allow_networks), max_answer_bytes=settings.max_answer_bytes
    )


def registration(
    settings: ResolverSettings,
    *,
    dynamodb: Any,
    transport: ArchiveTransport,
    secretsmanager: Any = None,
    on_change: Callable[[], None] = lambda: None,
) -> RegistrationService:
    """The registration service alone (``build``'s; local mode's start includes its own
    Archives with one, in process)."""
    return RegistrationService(
        registry=DynamoRegistry(dynamodb, settings.table),
        throttle=DynamoThrottle(dynamodb, settings.throttle_table),
        transport=transport,
        pepper=pepper_source(settings, secretsmanager).load(),
        clock=clock,
        confirmation_timeout=settings.archive_timeout,
        failure_limit=settings.failure_limit,
        failure_window=settings.failure_window,
        guess_cap=settings.guess_cap,
        on_change=on_change,
    )


def build(
    settings: ResolverSettings, *, dynamodb: Any, secretsmanager: Any = None, sqs: Any = None
) -> Runtime:
    registry = DynamoRegistry(dynamodb, settings.table)
    archives = archive_transport(settings)
    directory = ArchiveDirectory(registry)
    service = registration(
        settings,
        dynamodb=dynamodb,
        transport=archives,
        secretsmanager=secretsmanager,
        on_change=directory.forget,
    )
    fanout = FanOut(
        archives,
        directory,
        timeout=settings.archive_timeout,
        deadline=settings.deadline,
        grace=settings.original_grace,
    )
    delivery = Delivery(archives, directory, timeout=settings.archive_timeout)
    queue, drainer = acknowledgment_queue(settings, delivery, sqs)
    acknowledgments = Acknowledgments(queue, directory)
    return Runtime(
        settings=settings,
        registry=registry,
        transport=archives,
        directory=directory,
        registration=service,
        fanout=fanout,
        acknowledgments=acknowledgments,
        resolving=ResolvingService(
            fanout, acknowledgments, TableKept(dynamodb, settings.kept_table)
        ),
        queue=queue,
        drainer=drainer,
    )


def from_environment() -> Runtime:
    """The runtime of an execution environment in AWS, its clients made now."""
    from ibi.aws import aws_client

    settings = ResolverSettings.from_environment()
    secrets = aws_client("secretsmanager") if settings.pepper_secret_arn else None
    return build(settings, dynamodb=aws_client("dynamodb"), secretsmanager=secrets)


holder: Holder[Runtime] = Holder(from_environment)
runtime = holder.get  # the installed runtime; else one built from the environment, once
install = holder.install  # serve with a runtime (None: build one on the next request)
uninstall = holder.reset  # forget it (tests, SnapStart's restore)
