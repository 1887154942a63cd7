"""The stacks, and the one place that wires them into an app with its checks.

One stack per service, each made of that service's construct: minting now; the Archive and
the resolver add a stack here and a line in ``build_app``.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, CfnOutput, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.config import MintingConfig, minting_config
from infra.minting import MintingService

MINTING_STACK_ID = "IbiMinting"


class MintingStack(Stack):
    """The minting service and the outputs a caller needs to reach it."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: MintingConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.minting = MintingService(
            self,
            "Minting",
            subsystems=config.subsystems,
            default_subsystem=config.default_subsystem,
            max_wait_seconds=config.max_wait_seconds,
            log_retention=config.log_retention,
        )
        outputs = {
            "ApiUrl": (self.minting.url, "Base URL of the minting API (IAM/SigV4 auth)"),
            "MintUrl": (self.minting.mint_url, "POST here to mint an IBI"),
            "StateTableName": (self.minting.state_table.table_name, "Subsystem state"),
            "RecordTableName": (self.minting.record_table.table_name, "The mint record"),
            "IdempotencyTableName": (
                self.minting.idempotency_table.table_name,
                "Idempotency records of POST /mint",
            ),
            "FunctionName": (self.minting.function.function_name, "The minting Lambda"),
        }
        for output_id, (value, description) in outputs.items():
            CfnOutput(self, output_id, value=value, description=description)


def build_app(app: App) -> App:
    """Add every service's stack to ``app``, and the cdk-nag AwsSolutions checks."""
    MintingStack(
        app,
        MINTING_STACK_ID,
        config=minting_config(app),
        description="IBI minting service: HTTP API (IAM auth), Lambda, DynamoDB tables",
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app
