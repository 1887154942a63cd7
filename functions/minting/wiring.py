"""Settings → DynamoDB client → store → service: everything a minting request needs.

``build`` is pure (the client is passed in); the runtime is held as every function holds its
own (functions/shared/runtime.py): ``runtime`` returns the installed one, or builds it once per
execution environment from the environment; ``install`` puts one in place (local mode and
tests), ``uninstall`` forgets it. The DynamoDB client is made on the first request, never at
import.
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
from functions.shared.runtime import Holder


@dataclass(frozen=True, slots=True)
class Runtime:
    """What the routes use, built once per execution environment."""

    service: MintingService
    settings: Settings


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


def from_environment() -> Runtime:
    """The runtime of an execution environment in AWS, its client made now."""
    from ibi.aws import aws_client

    return build(Settings.from_environment(), dynamodb=aws_client("dynamodb"))


holder: Holder[Runtime] = Holder(from_environment)
runtime = holder.get  # the installed runtime; else one built from the environment, once
install = holder.install  # make a runtime the one the routes use (local mode, tests)
uninstall = holder.reset  # forget it (tests, SnapStart's restore)
