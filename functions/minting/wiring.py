"""Settings → DynamoDB client → store → service: everything a minting request needs.

``build`` is pure (the client is passed in); ``install`` puts a runtime in place (local mode
and tests); ``runtime`` returns the installed one, or builds it once per execution environment
from the environment. The DynamoDB client is made on the first request, never at import.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from functions.minting.service import MintingService
from functions.minting.settings import Settings
from functions.minting.store import DynamoMintStore
from functions.shared.edge import clock


@dataclass(frozen=True, slots=True)
class Runtime:
    """What the routes use, built once per execution environment."""

    service: MintingService
    settings: Settings


_installed: list[Runtime] = []


def count_conflict() -> None:
    """A lost conditional write, as the ``MintConflicts`` metric (Powertools shares the set)."""
    Metrics(namespace="ibi", service="minting").add_metric(
        name="MintConflicts", unit=MetricUnit.Count, value=1
    )


def build(
    settings: Settings, *, dynamodb: Any, on_conflict: Callable[[], None] = count_conflict
) -> Runtime:
    """The runtime over ``dynamodb`` (a botocore client); ``on_conflict`` counts lost writes."""
    store = DynamoMintStore(
        dynamodb,
        state_table=settings.state_table,
        record_table=settings.record_table,
        idempotency_table=settings.idempotency_table,
    )
    service = MintingService(
        store,
        settings.subsystems,
        default_subsystem=settings.default_subsystem,
        clock=clock,
        sleep=time.sleep,
        max_wait=settings.max_wait,
        block_seconds=settings.block_seconds,
        idempotency_ttl_seconds=settings.idempotency_ttl_seconds,
        on_conflict=on_conflict,
    )
    return Runtime(service=service, settings=settings)


def install(runtime: Runtime) -> Runtime:
    """Make ``runtime`` the one the routes use (local mode, tests)."""
    _installed[:] = [runtime]
    return runtime


def runtime() -> Runtime:
    """The installed runtime; else one built from the environment, once."""
    if not _installed:
        from ibi.aws import aws_client

        install(build(Settings.from_environment(), dynamodb=aws_client("dynamodb")))
    return _installed[0]


def uninstall() -> None:
    """Forget the installed runtime (tests)."""
    _installed.clear()
