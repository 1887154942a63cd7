"""The minting service: its tables, its Lambda and the HTTP API in front of it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from aws_cdk.aws_apigatewayv2_authorizers import HttpIamAuthorizer
from constructs import Construct

from ibi.core.subsystem import Subsystem
from infra.config import subsystems_json
from infra.service import LambdaService, acknowledge_open_routes

# Each action the minting Lambda performs on each table, and nothing else (least privilege).
STATE_TABLE_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem")  # store.py: read, advance
RECORD_TABLE_ACTIONS = ("dynamodb:PutItem", "dynamodb:Query")  # store.py: record, list
IDEMPOTENCY_TABLE_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)

HANDLER = "functions.minting.handler.lambda_handler"
# The Lambda may hold a request up to IBI_MAX_WAIT_SECONDS before issuing the label.
TIMEOUT_MARGIN_SECONDS = 10
MEMORY_MB = 256
# Where a minting state claims each prefix it mints under (see MintingService._claim_prefixes).
CLAIM_PARAMETER_PATH = "/ibi/minting-prefix/"
# Every route is IAM-authorized (the API's default authorizer).
ROUTES = (
    (apigwv2.HttpMethod.POST, "/mint"),
    (apigwv2.HttpMethod.GET, "/mints"),
    (apigwv2.HttpMethod.GET, "/mints/verify"),
    (apigwv2.HttpMethod.GET, "/subsystems"),
)
# Public: the API's OpenAPI document (docs/openapi.yaml).
PUBLIC_ROUTES = ((apigwv2.HttpMethod.GET, "/openapi.json"),)


class MintingService(LambdaService):
    """Mints IBIs: one Lambda behind an IAM-authorized HTTP API, with its three tables.

    * the state table: one item per identification subsystem (its last date for suffix);
    * the record table: every label minted, by subsystem and date;
    * the idempotency table: a retried ``POST /mint`` gets the first answer, not new labels.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        subsystems: Sequence[Subsystem],
        default_subsystem: str,
        max_wait_seconds: int,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        log_level: str = "INFO",
        code: lambda_.Code | None = None,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.state_table = self._add_table(
            "StateTable", partition_key="subsystem", actions=STATE_TABLE_ACTIONS
        )
        self.record_table = self._add_table(
            "RecordTable",
            partition_key="subsystem",
            sort_key=dynamodb.Attribute(name="first_date", type=dynamodb.AttributeType.NUMBER),
            actions=RECORD_TABLE_ACTIONS,
        )
        self.idempotency_table = self._add_table(
            "IdempotencyTable",
            partition_key="key",
            time_to_live_attribute="expires_at",
            actions=IDEMPOTENCY_TABLE_ACTIONS,
        )
        self._add_function(
            service="minting",
            handler=HANDLER,
            description="Mints IBIs (POST /mint) and lists the mint record",
            role_description="The minting Lambda: its own log group, its tables, X-Ray",
            memory_size=MEMORY_MB,
            timeout=Duration.seconds(max_wait_seconds + TIMEOUT_MARGIN_SECONDS),
            environment={
                "IBI_STATE_TABLE": self.state_table.table_name,
                "IBI_RECORD_TABLE": self.record_table.table_name,
                "IBI_IDEMPOTENCY_TABLE": self.idempotency_table.table_name,
                "IBI_SUBSYSTEMS": subsystems_json(subsystems),
                "IBI_DEFAULT_SUBSYSTEM": default_subsystem,
                "IBI_MAX_WAIT_SECONDS": str(max_wait_seconds),
            },
            log_retention=log_retention,
            log_level=log_level,
            code=code,
            reserved_concurrency=reserved_concurrency,
        )
        integration = self._add_api(
            name="minting",
            description="IBI minting service",
            integration_id="MintingIntegration",
            log_retention=log_retention,
            # Every route, present and future, needs a SigV4-signed request.
            default_authorizer=HttpIamAuthorizer(),
        )
        self.routes = self._add_routes(ROUTES, integration)
        self.public_routes = self._add_routes(
            PUBLIC_ROUTES, integration, apigwv2.HttpNoneAuthorizer()
        )
        self.claims = self._claim_prefixes(subsystems)
        self._acknowledge_findings()

    def _claim_prefixes(self, subsystems: Sequence[Subsystem]) -> list[ssm.StringParameter]:
        """One SSM parameter per prefix this minting state mints under, named after the prefix
        alone (:func:`claim_parameter_name`): the guard against two minting states for one
        subsystem that works across deploys (issue 13, item 8).

        Two stacks deployed separately (``IbiMinting`` and ``IbiArchive``, or two stages) with a
        subsystem of the same prefix would issue the same labels. The second deploy to reach the
        account and region creates a parameter that already exists, and CloudFormation fails it
        ("already exists") before its minting function exists. Deleting the stack deletes its
        claims: a state made later starts from the present, after every label the old one
        issued. Another account or region cannot be seen from here (docs/deploy.md).
        """
        stack_name = Stack.of(self).stack_name
        claims = []
        for subsystem in subsystems:
            for kind, prefix in (("Rep", subsystem.rep_prefix), ("Ibip", subsystem.ibip_prefix)):
                claim = ssm.StringParameter(
                    self,
                    f"Claim{kind}-{subsystem.name}",
                    parameter_name=claim_parameter_name(prefix),
                    description=f"IBI prefix {prefix} is minted by one minting state only",
                    string_value=json.dumps(
                        {"prefix": prefix, "subsystem": subsystem.name, "stack": stack_name}
                    ),
                    tier=ssm.ParameterTier.STANDARD,
                )
                claim.apply_removal_policy(RemovalPolicy.DESTROY)
                claims.append(claim)
        return claims

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        super()._acknowledge_findings()
        acknowledge_open_routes(
            self.public_routes,
            (
                "GET /openapi.json answers the minting API's OpenAPI document, the "
                "same for every caller and public in the repository: it reads no "
                "table and writes nothing, and it lets a client or a tester such as "
                "Schemathesis learn the API before it signs a request. Every route "
                "that mints or lists stays IAM-authorized; the stage throttles it."
            ),
        )

    @property
    def mint_url(self) -> str:
        return f"{self.url}mint"

    def grant_invoke(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` call every route (``execute-api:Invoke``), e.g. an Archive."""
        self._grant_routes(self.routes, grantee)


def claim_parameter_name(prefix: str) -> str:
    """The SSM parameter that claims ``prefix`` in an account and region: the prefix's SHA-256,
    since a prefix holds characters (``:``) that a parameter name may not."""
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:40]
    return f"{CLAIM_PARAMETER_PATH}{digest}"
