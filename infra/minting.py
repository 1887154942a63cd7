"""The minting service: its tables, its Lambda and the HTTP API in front of it."""

from __future__ import annotations

import json
from collections.abc import Sequence

import jsii
from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.aws_apigatewayv2_authorizers import HttpIamAuthorizer
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from ibi.core.subsystem import Subsystem
from infra.bundling import ARCHITECTURE, RUNTIME, function_code
from infra.config import subsystems_json

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

# HTTP API access log: one JSON object per request, with the IAM caller who made it.
ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "requestTime": "$context.requestTime",
        "routeKey": "$context.routeKey",
        "status": "$context.status",
        "protocol": "$context.protocol",
        "responseLength": "$context.responseLength",
        "sourceIp": "$context.identity.sourceIp",
        "caller": "$context.identity.caller",
        "userArn": "$context.identity.userArn",
        "responseLatency": "$context.responseLatency",
        "integrationLatency": "$context.integrationLatency",
        "integrationStatus": "$context.integrationStatus",
        "integrationError": "$context.integrationErrorMessage",
        "authorizerError": "$context.authorizer.error",
    },
    separators=(",", ":"),
)


def acknowledge_function(role: iam.IRole, function: lambda_.IFunction) -> None:
    """The two cdk-nag findings every ibi Lambda accepts, with the reasons they are safe."""
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason=(
                "Active tracing needs xray:PutTraceSegments and xray:PutTelemetryRecords, "
                "which support no resource-level permissions: AWS documents Resource '*' "
                "for them. Every other statement names its table, bucket, secret or log group."
            ),
        )
    )
    Validations.of(function).acknowledge(
        Acknowledgment(
            id="AwsSolutions-L1",
            reason=(
                "Python 3.13 is the runtime this project targets on purpose: the wheels in "
                "infra/bundling.py are built for cp313 and the code is tested on it. A newer "
                "runtime is adopted by changing both together, not by drift."
            ),
        )
    )


def logged_stage(
    scope: Construct, api: apigwv2.HttpApi, retention: logs.RetentionDays
) -> tuple[apigwv2.HttpStage, logs.LogGroup]:
    """The ``$default`` stage of ``api``, writing a JSON access log to a log group of its own."""
    access_logs = logs.LogGroup(
        scope, "ApiAccessLogs", retention=retention, removal_policy=RemovalPolicy.RETAIN
    )
    stage = apigwv2.HttpStage(
        scope,
        "DefaultStage",
        http_api=api,
        auto_deploy=True,
        access_log_settings=AccessLogSettings(
            destination=apigwv2.LogGroupLogDestination(access_logs),
            format=apigateway.AccessLogFormat.custom(ACCESS_LOG_FORMAT),
        ),
    )
    return stage, access_logs


class MintingService(Construct):
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
    ) -> None:
        super().__init__(scope, construct_id)

        self.state_table = self._table(
            "StateTable",
            partition_key=dynamodb.Attribute(name="subsystem", type=dynamodb.AttributeType.STRING),
        )
        self.record_table = self._table(
            "RecordTable",
            partition_key=dynamodb.Attribute(name="subsystem", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="first_date", type=dynamodb.AttributeType.NUMBER),
        )
        self.idempotency_table = self._table(
            "IdempotencyTable",
            partition_key=dynamodb.Attribute(name="key", type=dynamodb.AttributeType.STRING),
            time_to_live_attribute="expires_at",
        )

        self.log_group = logs.LogGroup(
            self, "FunctionLogs", retention=log_retention, removal_policy=RemovalPolicy.RETAIN
        )
        self.role = iam.Role(
            self,
            "FunctionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="The minting Lambda: its own log group, its tables, X-Ray",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description="Mints IBIs (POST /mint) and lists the mint record",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            code=code or function_code("minting"),
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            memory_size=256,
            timeout=Duration.seconds(max_wait_seconds + TIMEOUT_MARGIN_SECONDS),
            environment={
                "IBI_STATE_TABLE": self.state_table.table_name,
                "IBI_RECORD_TABLE": self.record_table.table_name,
                "IBI_IDEMPOTENCY_TABLE": self.idempotency_table.table_name,
                "IBI_SUBSYSTEMS": subsystems_json(subsystems),
                "IBI_DEFAULT_SUBSYSTEM": default_subsystem,
                "IBI_MAX_WAIT_SECONDS": str(max_wait_seconds),
                "POWERTOOLS_SERVICE_NAME": "minting",
                "POWERTOOLS_METRICS_NAMESPACE": "ibi",
                "LOG_LEVEL": log_level,
            },
        )
        self._grant_function_access()

        self.api = apigwv2.HttpApi(
            self,
            "Api",
            api_name=f"{Stack.of(self).stack_name}-minting",
            description="IBI minting service",
            # Every route, present and future, needs a SigV4-signed request.
            default_authorizer=HttpIamAuthorizer(),
            create_default_stage=False,
        )
        self.stage, self.access_logs = logged_stage(self, self.api, log_retention)
        integration = HttpLambdaIntegration("MintingIntegration", self.function)
        self.routes = [
            *self.api.add_routes(
                path="/mint", methods=[apigwv2.HttpMethod.POST], integration=integration
            ),
            *self.api.add_routes(
                path="/mints", methods=[apigwv2.HttpMethod.GET], integration=integration
            ),
            *self.api.add_routes(
                path="/subsystems", methods=[apigwv2.HttpMethod.GET], integration=integration
            ),
        ]
        self._acknowledge_findings()

    @property
    def url(self) -> str:
        """The API's base URL, ending in ``/``."""
        url = self.stage.url
        assert url is not None  # the $default stage always has one
        return url

    @property
    def mint_url(self) -> str:
        return f"{self.url}mint"

    def grant_invoke(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` call every route (``execute-api:Invoke``), e.g. an Archive."""
        for route in self.routes:
            route.grant_invoke(grantee)

    def _table(
        self,
        construct_id: str,
        *,
        partition_key: dynamodb.Attribute,
        sort_key: dynamodb.Attribute | None = None,
        time_to_live_attribute: str | None = None,
    ) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            construct_id,
            partition_key=partition_key,
            sort_key=sort_key,
            time_to_live_attribute=time_to_live_attribute,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # The tables are the minting record: deleting the stack must not delete them.
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _grant_function_access(self) -> None:
        self.state_table.grant(self.function, *STATE_TABLE_ACTIONS)
        self.record_table.grant(self.function, *RECORD_TABLE_ACTIONS)
        self.idempotency_table.grant(self.function, *IDEMPOTENCY_TABLE_ACTIONS)
        self.log_group.grant_write(self.role)

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        acknowledge_function(self.role, self.function)


@jsii.implements(apigwv2.IAccessLogSettings)
class AccessLogSettings:
    """Where and how an HTTP API stage writes its access log (a jsii interface, not a struct)."""

    def __init__(
        self, *, destination: apigwv2.IAccessLogDestination, format: apigateway.AccessLogFormat
    ) -> None:
        self._destination = destination
        self._format = format

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigateway.AccessLogFormat:
        return self._format
