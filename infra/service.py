"""What every ibi service is built on: its tables, log group, role, Lambda and HTTP API.

:class:`LambdaService` is the construct the minting service, the Archive and the resolver
extend. The resources it makes keep the ids they always had under the service's own construct
(``Minting/StateTable``, ``Archive/FunctionRole``, ``Resolver/Api``…), so their logical ids,
and a live deployment's tables, are the same as when each service wrote them itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsii
from aws_cdk import (
    Acknowledgment,
    CfnElement,
    Duration,
    RemovalPolicy,
    Stack,
    Token,
    Validations,
)
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from infra.bundling import ARCHITECTURE, RUNTIME, function_code
from infra.config import snapstart_enabled, tracing_enabled

SNAPSTART_ENTRY = "functions.shared.snapstart"

# HTTP API access log: one JSON object per request, with the IAM caller who made it.
ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "apiId": "$context.apiId",
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

Route = tuple[apigwv2.HttpMethod, str]
Grant = tuple[Sequence[str], Sequence[str]]  # IAM actions, and the resource ARNs they act on


def string_key(name: str) -> dynamodb.Attribute:
    """A table key attribute of type string (every partition key here is one)."""
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


def tracing_environment(tracing: bool) -> dict[str, str]:
    """Powertools' tracer follows the function's tracing (``ibi:tracing``): off, it sends
    nothing, and the function needs no X-Ray grant."""
    return {} if tracing else {"POWERTOOLS_TRACE_DISABLED": "true"}


def powertools_environment(service: str, log_level: str) -> dict[str, str]:
    """What Powertools reads in a function of ``functions/<service>/``: the service its logs and
    metrics name, the metrics' namespace, and the log level."""
    return {
        "POWERTOOLS_SERVICE_NAME": service,
        "POWERTOOLS_METRICS_NAMESPACE": "ibi",
        "LOG_LEVEL": log_level,
    }


@dataclass(frozen=True, slots=True)
class OwnFunction:
    """A Lambda with a log group and a role of its own (the role granted nothing yet)."""

    log_group: logs.LogGroup
    role: iam.Role
    function: lambda_.Function
    tracing: bool  # ``ibi:tracing``: X-Ray on


def own_function(
    scope: Construct,
    *,
    ids: tuple[str, str],
    service: str,
    handler: str,
    description: str,
    role_description: str,
    memory_size: int,
    timeout: Duration,
    environment: Mapping[str, str],
    log_retention: logs.RetentionDays,
    code: lambda_.Code | None,
    requirements_of: str | None = None,
    function_id: str = "Function",
    **options: Any,
) -> OwnFunction:
    """The Lambda of ``functions/<service>/`` (its asset bundled by infra/bundling.py unless
    ``code`` is given), construct ``function_id`` of ``scope``, with its log group and role
    (construct ids ``ids``), traced as ``ibi:tracing`` says; ``options`` go to the Function.

    Every function here is made so: the services' (LambdaService), the Archive's link check,
    the resolver's drain, the canary, the origin check. The caller grants the role what the
    function needs, its log group included.
    """
    log_group = logs.LogGroup(
        scope, ids[0], retention=log_retention, removal_policy=RemovalPolicy.RETAIN
    )
    role = iam.Role(
        scope,
        ids[1],
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=role_description,
    )
    tracing = tracing_enabled(scope)
    function = lambda_.Function(
        scope,
        function_id,
        description=description,
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        handler=handler,
        code=code or function_code(service, requirements_of=requirements_of),
        role=role,
        log_group=log_group,
        tracing=lambda_.Tracing.ACTIVE if tracing else lambda_.Tracing.DISABLED,
        memory_size=memory_size,
        timeout=timeout,
        environment={**environment, **tracing_environment(tracing)},
        **options,
    )
    return OwnFunction(log_group, role, function, tracing)


def acknowledge_function(role: iam.IRole, function: lambda_.IFunction, *, tracing: bool) -> None:
    """The cdk-nag findings every ibi Lambda accepts, with the reasons they are safe: the
    runtime, and with X-Ray tracing on (``ibi:tracing``) its grant on ``*``."""
    if tracing:
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason=(
                    "Active tracing needs xray:PutTraceSegments and xray:PutTelemetryRecords, "
                    "which support no resource-level permissions: AWS documents Resource '*' "
                    "for them. Every other statement names its table, bucket, secret or log "
                    "group."
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


def acknowledge_open_routes(routes: Iterable[apigwv2.HttpRoute], reason: str) -> None:
    """cdk-nag's AwsSolutions-APIG4 (a route no authorizer guards) accepted on each of
    ``routes``, public by design, with the reason it is safe."""
    for route in routes:
        Validations.of(route).acknowledge(Acknowledgment(id="AwsSolutions-APIG4", reason=reason))


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


def nag_arn_prefix(construct: Construct, service: str, *, literal_partition: bool = True) -> str:
    """``arn:partition:service:region:account`` as cdk-nag writes it in a finding's id: each
    part a pseudo parameter (``<AWS::Region>``) in an environment-agnostic stack, or the value
    of the environment the stack is pinned to (``ibi:region``, ``ibi:account``). Some grants
    keep ``<AWS::Partition>`` even then (``literal_partition=False``)."""
    stack = Stack.of(construct)
    parts = []
    for value, pseudo in (
        (stack.partition, "<AWS::Partition>"),
        (stack.region, "<AWS::Region>"),
        (stack.account, "<AWS::AccountId>"),
    ):
        parts.append(pseudo if Token.is_unresolved(value) else value)
    partition, region, account = parts
    if not literal_partition:
        partition = "<AWS::Partition>"
    return f"arn:{partition}:{service}:{region}:{account}"


def logical_id(construct: Construct) -> str:
    """The template's name for an L2 construct's resource, as cdk-nag writes it."""
    stack = Stack.of(construct)
    child = construct.node.default_child
    assert isinstance(child, CfnElement)
    resolved: str = stack.resolve(stack.get_logical_id(child))
    return resolved


class LambdaService(Construct):
    """A service's DynamoDB tables, its Lambda with its own log group and role, and its API.

    A subclass makes its tables (:meth:`_add_table`), then its function (:meth:`_add_function`,
    which grants each table the actions named with it and the log group's writes), then its
    API (:meth:`_add_api`) and routes (:meth:`_add_routes`), and ends with
    :meth:`_acknowledge_findings`.
    """

    log_group: logs.LogGroup
    role: iam.Role
    function: lambda_.Function
    api: apigwv2.HttpApi
    stage: apigwv2.HttpStage
    access_logs: logs.LogGroup

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self._table_actions: list[tuple[dynamodb.Table, Sequence[str]]] = []

    def _add_table(
        self,
        construct_id: str,
        *,
        partition_key: str,
        actions: Sequence[str],
        sort_key: dynamodb.Attribute | None = None,
        time_to_live_attribute: str | None = None,
    ) -> dynamodb.Table:
        """An on-demand, encrypted table with point-in-time recovery, which the function may
        use with ``actions`` (and nothing else)."""
        table = dynamodb.Table(
            self,
            construct_id,
            partition_key=string_key(partition_key),
            sort_key=sort_key,
            time_to_live_attribute=time_to_live_attribute,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # The tables are the service's record: deleting the stack must not delete them,
            # and neither may a DeleteTable call or a replacement (deletion protection).
            removal_policy=RemovalPolicy.RETAIN,
            deletion_protection=True,
        )
        self._table_actions.append((table, actions))
        return table

    def _add_function(
        self,
        *,
        service: str,
        handler: str,
        description: str,
        role_description: str,
        memory_size: int,
        timeout: Duration,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        log_level: str,
        code: lambda_.Code | None,
        requirements_of: str | None = None,
        grants: Sequence[Grant] = (),
        reserved_concurrency: int | None = None,
    ) -> lambda_.Function:
        """The Lambda of ``functions/<service>/`` (its asset bundled by infra/bundling.py
        unless ``code`` is given), with a log group and a role of its own.

        The role may use each table with the actions named with it, then each of ``grants``
        (actions on resource ARNs), then write to the log group: nothing else.
        ``reserved_concurrency`` (``ibi:concurrency``) is the function's share of the account's
        concurrency, its floor and its ceiling.
        """
        snapstart = snapstart_enabled(self)
        own = own_function(
            self,
            ids=("FunctionLogs", "FunctionRole"),
            service=service,
            # With SnapStart the handler is its entry in functions/shared/snapstart.py: the
            # same lambda_handler, with the after-restore hooks registered.
            handler=f"{SNAPSTART_ENTRY}.{service}" if snapstart else handler,
            description=description,
            role_description=role_description,
            memory_size=memory_size,
            timeout=timeout,
            environment={**environment, **powertools_environment(service, log_level)},
            log_retention=log_retention,
            code=code,
            requirements_of=requirements_of,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snapstart else None,
            reserved_concurrent_executions=reserved_concurrency,
        )
        self.log_group, self.role, self.function = own.log_group, own.role, own.function
        self.tracing = own.tracing
        for table, actions in self._table_actions:
            # On the table alone: Table.grant would add its indexes (<table>/index/*) too.
            iam.Grant.add_to_principal(
                grantee=self.role, actions=list(actions), resource_arns=[table.table_arn]
            )
        for actions, resource_arns in grants:
            iam.Grant.add_to_principal(
                grantee=self.role, actions=list(actions), resource_arns=list(resource_arns)
            )
        self.log_group.grant_write(self.role)
        # SnapStart applies to published versions only: the API then calls an alias of the
        # version this deploy publishes, never $LATEST.
        self.entry: lambda_.IFunction = self.function
        if snapstart:
            self.entry = lambda_.Alias(
                self, "Live", alias_name="live", version=self.function.current_version
            )
        return self.function

    def _add_api(
        self,
        *,
        name: str,
        description: str,
        integration_id: str,
        log_retention: logs.RetentionDays,
        default_authorizer: apigwv2.IHttpRouteAuthorizer | None = None,
    ) -> HttpLambdaIntegration:
        """The HTTP API (``<stack>-<name>``) with its logged ``$default`` stage, and the
        integration of the function its routes share."""
        self.api = apigwv2.HttpApi(
            self,
            "Api",
            api_name=f"{Stack.of(self).stack_name}-{name}",
            description=description,
            default_authorizer=default_authorizer,
            create_default_stage=False,
        )
        self.stage, self.access_logs = logged_stage(self, self.api, log_retention)
        return HttpLambdaIntegration(integration_id, self.entry)

    def _add_routes(
        self,
        routes: Iterable[Route],
        integration: HttpLambdaIntegration,
        authorizer: apigwv2.IHttpRouteAuthorizer | None = None,
    ) -> list[apigwv2.HttpRoute]:
        """One API route per (method, path), each with ``authorizer`` (or the API's default)."""
        added: list[apigwv2.HttpRoute] = []
        for method, path in routes:
            added += self.api.add_routes(
                path=path, methods=[method], integration=integration, authorizer=authorizer
            )
        return added

    @property
    def api_url(self) -> str:
        """The API's own ``execute-api`` address, ending in ``/``."""
        url = self.stage.url
        assert url is not None  # the $default stage always has one
        return url

    @property
    def url(self) -> str:
        """The service's base URL, ending in ``/``: its API's address."""
        return self.api_url

    @staticmethod
    def _grant_routes(routes: Iterable[apigwv2.HttpRoute], grantee: iam.IGrantable) -> None:
        """Let ``grantee`` call each of ``routes`` (``execute-api:Invoke``)."""
        for route in routes:
            route.grant_invoke(grantee)

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        acknowledge_function(self.role, self.function, tracing=self.tracing)


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
