"""The canary: a scheduled function that resolves a known IBI end to end (``ibi:canary``).

Every few minutes it follows a persistent URL as a reader would (functions/canary/): the
resolver's redirect, then the Archive's file. Its metric ``CanaryResolved`` is watched by the
stack's operations (:meth:`infra.operations.Operations.watch_canary`): two failed runs, or two
runs that never reported, page. It needs no grant but its log group: it holds no credential
and calls only public addresses.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import CanaryConfig
from infra.service import acknowledge_function, own_function

HANDLER = "functions.canary.handler.lambda_handler"
REQUEST_TIMEOUT_SECONDS = 8  # one hop; a reader's browser waits about as long
TIMEOUT = Duration.seconds(30)  # a few hops at their timeout, well within one run's period


class Canary(Construct):
    """The canary's function, its log group and role, and its schedule."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: CanaryConfig,
        resolver_url: str,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        code: lambda_.Code | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.every = Duration.minutes(config.every_minutes)
        own = own_function(
            self,
            ids=("Logs", "Role"),
            service="canary",
            handler=HANDLER,
            description=f"Resolves {config.ibi} end to end every {config.every_minutes} min",
            role_description="The canary: its log group only (it calls public addresses)",
            memory_size=256,
            timeout=TIMEOUT,
            environment={
                "IBI_CANARY_RESOLVER_URL": resolver_url,
                "IBI_CANARY_IBI": config.ibi,
                "IBI_CANARY_TIMEOUT_SECONDS": str(REQUEST_TIMEOUT_SECONDS),
                "POWERTOOLS_SERVICE_NAME": "canary",
                "POWERTOOLS_METRICS_NAMESPACE": "ibi",
            },
            log_retention=log_retention,
            code=code,
            requirements_of="minting",
        )
        self.logs, self.role, self.function, tracing = (
            own.log_group,
            own.role,
            own.function,
            own.tracing,
        )
        self.logs.grant_write(self.role)
        self.schedule = events.Rule(
            self,
            "Schedule",
            description=f"Runs the canary every {config.every_minutes} minutes",
            schedule=events.Schedule.rate(self.every),
            # A run that failed is the news: retrying it would only hide it.
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        self.tracing = tracing
        self._acknowledge_findings()

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose: the runtime, and X-Ray's ``*`` if on."""
        acknowledge_function(self.role, self.function, tracing=self.tracing)
