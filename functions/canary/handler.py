"""The canary's Lambda: run on a schedule (infra/canary.py), publish whether it resolved.

Each run publishes ``CanaryResolved`` (1 or 0) and ``CanaryMs`` (namespace ``ibi``, service
``canary``) and logs the outcome; the alarm pages when it is 0 twice running or missing.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.canary.probe import probe
from functions.canary.transport import UrllibTransport

logger = Logger(service="canary")
metrics = Metrics(namespace="ibi", service="canary")


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    outcome = probe(
        UrllibTransport(),
        os.environ["IBI_CANARY_RESOLVER_URL"],
        os.environ["IBI_CANARY_IBI"],
        timeout=float(os.environ.get("IBI_CANARY_TIMEOUT_SECONDS", "10")),
    )
    metrics.add_metric(name="CanaryResolved", unit=MetricUnit.Count, value=int(outcome.resolved))
    metrics.add_metric(name="CanaryMs", unit=MetricUnit.Milliseconds, value=outcome.milliseconds)
    if outcome.resolved:
        logger.info("canary resolved", extra=asdict(outcome))
    else:
        logger.error("canary failed", extra=asdict(outcome))
    return asdict(outcome)
