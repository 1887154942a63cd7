"""The resolver stack: registry, pepper, function, routes and their authorization."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk.assertions import Template

from functions.resolver.queue import MAX_RECEIVES, VISIBILITY_SECONDS
from infra.config import ConfigError, ResolverConfig, cdk_json_context
from infra.resolver import (
    ADMIN_GUARD_ROUTES,
    ADMIN_ROUTES,
    DRAIN_HANDLER,
    DRAIN_REGISTRY_ACTIONS,
    DRAIN_TIMEOUT,
    KEPT_ACTIONS,
    PUBLIC_ROUTES,
    QUEUE_ACTIONS,
    REGISTRY_ACTIONS,
    THROTTLE_ACTIONS,
    Resolver,
)
from infra.stacks import RESOLVER_STACK_ID, ResolverStack
from tests.infra.conftest import CERTIFICATE_ARN, stack_of
from tests.infra.support import SKIP_BUNDLING, Synthesized, arn_of, granted

pytestmark = pytest.mark.infra


@pytest.mark.parametrize(
    ("table", "key"), [("registry", "service"), ("throttle", "counter"), ("kept", "request")]
)
def test_the_tables_are_retained_with_pitr_and_ttl(
    resolver_synthesized: Synthesized[ResolverStack], table: str, key: str
) -> None:
    tables = resolver_synthesized.template.find_resources("AWS::DynamoDB::Table")
    assert len(tables) == 3  # the registry, the wrong keys counted, the authorities' answers
    construct = getattr(resolver_synthesized.stack.resolver, f"{table}_table")
    resource = tables[resolver_synthesized.logical_id(construct)]
    properties = resource["Properties"]
    assert resource["DeletionPolicy"] == "Retain"
    assert properties["KeySchema"] == [{"AttributeName": key, "KeyType": "HASH"}]
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    # Every throttle record expires (throttle.py), every kept answer too (kept.py); the
    # registry's TTL lets the throttle records an earlier version kept there expire.
    assert properties["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}


def test_the_function(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    functions = resolver_synthesized.resources("AWS::Lambda::Function")
    resolver = resolver_synthesized.logical_id(resolver_synthesized.stack.resolver.function)
    assert len(functions) == 2  # the resolver, and its acknowledgment drain
    properties = functions[resolver]["Properties"]
    assert properties["Runtime"] == "python3.13" and properties["Architectures"] == ["arm64"]
    assert properties["Handler"] == "functions.resolver.handler.lambda_handler"
    assert "TracingConfig" not in properties  # X-Ray is a choice, off by default (ibi:tracing)
    assert properties["MemorySize"] >= 512
    variables = properties["Environment"]["Variables"]
    assert variables["IBI_RESOLVER_SERVICE_IBI"] == "J8LNKB5R7W/3FUQHC5"
    assert variables["IBI_RESOLVER_NAME"] == "IBI resolver"
    assert variables["POWERTOOLS_SERVICE_NAME"] == "resolver"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "ibi"
    assert "IBI_ALLOW_NETWORKS" not in variables  # in AWS: public addresses only
    assert "IBI_PEPPER_FILE" not in variables
    pepper = resolver_synthesized.logical_id(resolver_synthesized.stack.resolver.pepper)
    assert variables["IBI_PEPPER_SECRET_ARN"] == {"Ref": pepper}
    table = resolver_synthesized.logical_id(resolver_synthesized.stack.resolver.registry_table)
    assert variables["IBI_RESOLVER_TABLE"] == {"Ref": table}
    throttle = resolver_synthesized.logical_id(resolver_synthesized.stack.resolver.throttle_table)
    assert variables["IBI_THROTTLE_TABLE"] == {"Ref": throttle}
    # One Archive's timeout < the resolution's deadline < the Lambda's < API Gateway's 30 s.
    archive_timeout = float(variables["IBI_ARCHIVE_TIMEOUT_SECONDS"])
    deadline = float(variables["IBI_RESOLUTION_DEADLINE_SECONDS"])
    assert archive_timeout < deadline < properties["Timeout"] <= deadline + 5
    assert properties["Timeout"] < 29


def test_least_privilege(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    stack = resolver_synthesized.stack
    grants = granted(
        resolver_synthesized.template, resolver_synthesized.logical_id(stack.resolver.role)
    )
    table = resolver_synthesized.logical_id(stack.resolver.registry_table)
    assert grants[arn_of(table)] == set(REGISTRY_ACTIONS)
    throttle = resolver_synthesized.logical_id(stack.resolver.throttle_table)
    # Never a Scan: the throttle table is only read by key.
    assert (
        grants[arn_of(throttle)]
        == set(THROTTLE_ACTIONS)
        == {"dynamodb:GetItem", "dynamodb:UpdateItem"}
    )
    kept = resolver_synthesized.logical_id(stack.resolver.kept_table)
    # Never a Scan: the kept answers are read and written by key (kept.py).
    assert grants[arn_of(kept)] == set(KEPT_ACTIONS) == {"dynamodb:GetItem", "dynamodb:PutItem"}
    secret = resolver_synthesized.logical_id(stack.resolver.pepper)
    secret_actions = grants[json.dumps({"Ref": secret}, sort_keys=True)]
    assert secret_actions == {"secretsmanager:GetSecretValue"}
    log_group = resolver_synthesized.logical_id(stack.resolver.log_group)
    assert grants[arn_of(log_group)] == {"logs:CreateLogStream", "logs:PutLogEvents"}
    queue = resolver_synthesized.logical_id(stack.resolver.acknowledgment_queue)
    assert grants[arn_of(queue)] == set(QUEUE_ACTIONS) == {"sqs:SendMessage"}
    # the three tables, the secret, the queue, the log group: nothing else (X-Ray is off)
    assert len(grants) == 6
    everything = set().union(*grants.values())
    assert not {a for a in everything if a.endswith(":*") or a == "*"}
    assert not {a for a in everything if a.startswith("s3:")}


def test_acknowledgments_go_through_a_queue_with_a_dead_letter_queue(
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    """Issue 13 item 1: queued in the request, drained by a Lambda of their own, retried, then
    dead-lettered (functions/resolver/queue.py and drain.py)."""
    resolver = resolver_synthesized.stack.resolver
    queues = resolver_synthesized.resources("AWS::SQS::Queue")
    queue = queues[resolver_synthesized.logical_id(resolver.acknowledgment_queue)]["Properties"]
    dead = resolver_synthesized.logical_id(resolver.dead_letters)
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dead, "Arn"]},
        "maxReceiveCount": MAX_RECEIVES,  # 3: the 10 minutes an urlkey lives
    }
    # Lambda's advice for an SQS event source: 6 times the function's timeout
    assert queue["VisibilityTimeout"] == VISIBILITY_SECONDS == 6 * DRAIN_TIMEOUT.to_seconds()
    assert queue["SqsManagedSseEnabled"] is True
    functions = resolver_synthesized.resources("AWS::Lambda::Function")
    drain = functions[resolver_synthesized.logical_id(resolver.drain)]["Properties"]
    assert drain["Handler"] == DRAIN_HANDLER == "functions.resolver.drain.lambda_handler"
    resolver_function = functions[resolver_synthesized.logical_id(resolver.function)]
    assert drain["Code"] == resolver_function["Properties"]["Code"]  # one asset
    # SQS requires the visibility timeout to be at least the consumer's timeout.
    assert drain["Timeout"] <= queue["VisibilityTimeout"]
    assert "IBI_ALLOW_NETWORKS" not in drain["Environment"]["Variables"]  # public addresses only
    variables = resolver_function["Properties"]["Environment"]["Variables"]
    queue_id = resolver_synthesized.logical_id(resolver.acknowledgment_queue)
    assert variables["IBI_ACK_QUEUE_URL"] == {"Ref": queue_id}
    [mapping] = resolver_synthesized.resources("AWS::Lambda::EventSourceMapping").values()
    properties = mapping["Properties"]
    assert properties["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert properties["BatchSize"] == 10
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_drain_has_least_privilege(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    resolver = resolver_synthesized.stack.resolver
    grants = granted(
        resolver_synthesized.template, resolver_synthesized.logical_id(resolver.drain_role)
    )
    table = resolver_synthesized.logical_id(resolver.registry_table)
    assert grants[arn_of(table)] == set(DRAIN_REGISTRY_ACTIONS)  # reads only, never a write
    queue = resolver_synthesized.logical_id(resolver.acknowledgment_queue)
    assert grants[arn_of(queue)] == {
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }
    log_group = resolver_synthesized.logical_id(resolver.drain_logs)
    assert grants[arn_of(log_group)] == {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert len(grants) == 3  # no pepper, no throttle table, no SendMessage, no X-Ray
    dead = resolver_synthesized.logical_id(resolver.dead_letters)
    for role in (resolver.role, resolver.drain_role):  # nobody reads the dead letters but you
        held = granted(resolver_synthesized.template, resolver_synthesized.logical_id(role))
        assert arn_of(dead) not in held


def test_routes_and_their_authorization(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    routes = resolver_synthesized.resources("AWS::ApiGatewayV2::Route")
    by_key = {
        r["Properties"]["RouteKey"]: r["Properties"]["AuthorizationType"] for r in routes.values()
    }
    expected = {f"{m.value} {p}": "NONE" for m, p in PUBLIC_ROUTES}
    expected |= {f"{m.value} {p}": "AWS_IAM" for m, p in (*ADMIN_ROUTES, *ADMIN_GUARD_ROUTES)}
    assert by_key == expected
    assert set(by_key) == {
        "GET /",
        "GET /{proxy+}",
        "HEAD /{proxy+}",
        "POST /admin/archives",
        "GET /admin/archives",
        "DELETE /admin/archives",
        "POST /admin/prefixes",
        "POST /admin/switch",
        "GET /admin/{proxy+}",
        "HEAD /admin/{proxy+}",
    }
    # Whatever the public catch-alls take, /admin/ is more specific for both their methods.
    public_methods = {m.value for m, p in PUBLIC_ROUTES if p == "/{proxy+}"}
    assert {m.value for m, _ in ADMIN_GUARD_ROUTES} == public_methods


def test_the_lambda_serves_what_the_api_routes(
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    from functions.resolver.handler import app

    served = {(route.method, route.path) for route in app._static_routes + app._dynamic_routes}
    admin = {f"{m} {p}" for m, p in served if p.startswith("/admin/")}
    assert admin == {
        "POST /admin/archives",
        "GET /admin/archives",
        "DELETE /admin/archives",
        "POST /admin/prefixes",
        "POST /admin/switch",
    }
    assert {m for m, p in served if not p.startswith("/admin/")} <= {"GET", "HEAD"}


def test_outputs(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    outputs = resolver_synthesized.template.find_outputs("*")
    assert {
        "ResolverUrl",
        "ResolverApiUrl",
        "AdminUrl",
        "RegistryTableName",
        "PepperSecretArn",
        "ResolverFunctionName",
        "AcknowledgmentDeadLettersArn",
    } == set(outputs)
    # Without a custom domain, persistent URLs are under the API's own address.
    assert outputs["ResolverUrl"]["Value"] == outputs["ResolverApiUrl"]["Value"]


def test_custom_domain_in_the_app(everything_app: tuple[App, Path]) -> None:
    """ibi:resolver.domain_name + certificate_arn: the domain, its mapping, its outputs."""
    resolver = stack_of(everything_app[0], RESOLVER_STACK_ID, ResolverStack)
    ((domain_id, domain),) = resolver.resources("AWS::ApiGatewayV2::DomainName").items()
    assert domain["Properties"]["DomainName"] == "urlib.example.org"
    (configuration,) = domain["Properties"]["DomainNameConfigurations"]
    assert configuration["CertificateArn"] == CERTIFICATE_ARN
    assert configuration["EndpointType"] == "REGIONAL"
    ((_, mapping),) = resolver.resources("AWS::ApiGatewayV2::ApiMapping").items()
    assert mapping["Properties"]["ApiId"] == {
        "Ref": resolver.logical_id(resolver.stack.resolver.api)
    }
    assert mapping["Properties"]["DomainName"] == {"Ref": domain_id}
    outputs = resolver.template.find_outputs("*")
    assert outputs["ResolverUrl"]["Value"] == "https://urlib.example.org/"
    assert outputs["DomainTarget"]["Value"] == {"Fn::GetAtt": [domain_id, "RegionalDomainName"]}
    assert outputs["DomainHostedZoneId"]["Value"] == {
        "Fn::GetAtt": [domain_id, "RegionalHostedZoneId"]
    }
    # Registration still goes to the API's own address, which the CLI signs for by itself.
    assert "execute-api" in json.dumps(outputs["ResolverApiUrl"]["Value"])


def test_the_certificate_must_be_in_the_stacks_region() -> None:
    config = ResolverConfig(domain_name="urlib.example.org", certificate_arn=CERTIFICATE_ARN)
    assert config.certificate_region == "eu-west-1"
    app = App(context={**cdk_json_context(), **SKIP_BUNDLING})
    with pytest.raises(
        ConfigError, match="the certificate is in eu-west-1, the stack in us-east-1"
    ):
        ResolverStack(app, "Elsewhere", config=config, env=Environment(region="us-east-1"))


def test_resolver_context() -> None:
    assert ResolverConfig.from_context(None) == ResolverConfig()
    assert ResolverConfig.from_context(cdk_json_context()["ibi:resolver"]) == ResolverConfig()
    raw = {
        "domain_name": "URLib.Example.org.",
        "certificate_arn": CERTIFICATE_ARN,
        "service_ibi": "j8lnkb5r7w/3fuqhc5",
        "name": "INPE resolver",
        "log_retention": "ONE_YEAR",
    }
    for form in (raw, json.dumps(raw)):
        config = ResolverConfig.from_context(form)
        assert config.domain_name == "urlib.example.org"
        assert config.service_ibi == "J8LNKB5R7W/3FUQHC5"
        assert config.name == "INPE resolver"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"domain_name": "urlib.example.org"}, "give domain_name and certificate_arn together"),
        ({"certificate_arn": CERTIFICATE_ARN}, "give domain_name and certificate_arn together"),
        (
            {"domain_name": "https://urlib.example.org", "certificate_arn": CERTIFICATE_ARN},
            "domain_name: 'https://urlib.example.org' is not a DNS name",
        ),
        ({"domain_name": "*.example.org", "certificate_arn": CERTIFICATE_ARN}, "not a DNS name"),
        (
            {"domain_name": "urlib.example.org", "certificate_arn": "arn:aws:iam::1:cert/x"},
            "certificate_arn: 'arn:aws:iam::1:cert/x' is not an ACM certificate ARN",
        ),
        ({"service_ibi": "not an ibi"}, "service_ibi"),
        ({"name": ""}, "name: '' is not a name"),
        ({"log_retention": "FOREVER"}, "log_retention: 'FOREVER' is not one of"),
        ({"domain": "urlib.example.org"}, "unknown fields ['domain']"),
        ("{not json", "not valid JSON"),
    ],
)
def test_resolver_context_errors(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^ibi:resolver") as error:
        ResolverConfig.from_context(raw)
    assert message in str(error.value)


def test_custom_domain_for_persistent_urls() -> None:
    app = App(context=SKIP_BUNDLING)
    stack = Stack(app, "Bare")
    resolver = Resolver(
        stack,
        "Resolver",
        domain_name="urlib.example.org",
        certificate_arn="arn:aws:acm:eu-west-1:123456789012:certificate/11111111-2222-3333-4444-555555555555",
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::ApiGatewayV2::DomainName", {"DomainName": "urlib.example.org"}
    )
    template.resource_count_is("AWS::ApiGatewayV2::ApiMapping", 1)
    domain = next(iter(template.find_resources("AWS::ApiGatewayV2::DomainName")))
    assert Stack.of(resolver).resolve(resolver.url) == {
        "Fn::Join": ["", ["https://", {"Ref": domain}, "/"]]
    }


def test_domain_and_certificate_go_together() -> None:
    stack = Stack(App(context=SKIP_BUNDLING), "Bare")
    with pytest.raises(ValueError, match="go together"):
        Resolver(stack, "Resolver", domain_name="urlib.example.org")


def test_construct_alone_in_a_bare_stack() -> None:
    app = App(context=SKIP_BUNDLING)
    stack = Stack(app, "Bare")
    Resolver(stack, "Resolver")
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Lambda::Function", 2)  # the resolver and its drain
    template.resource_count_is("AWS::SQS::Queue", 2)  # acknowledgments and their DLQ
    template.resource_count_is("AWS::SecretsManager::Secret", 1)
    template.resource_count_is(
        "AWS::ApiGatewayV2::Route",
        len(PUBLIC_ROUTES) + len(ADMIN_ROUTES) + len(ADMIN_GUARD_ROUTES),
    )
    template.resource_count_is("AWS::ApiGatewayV2::DomainName", 0)
    secret: Any = next(iter(template.find_resources("AWS::SecretsManager::Secret").values()))
    assert secret["DeletionPolicy"] == "Retain"


def test_a_dead_lettered_acknowledgment_alarms(
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    """New dead letters alarm, not the ones already there: the queue keeps them 14 days."""
    stack = resolver_synthesized.stack
    alarm = stack.operations.alarms["resolver-dead-letters"]
    alarms = resolver_synthesized.resources("AWS::CloudWatch::Alarm")
    properties = alarms[resolver_synthesized.logical_id(alarm)]["Properties"]
    dead = resolver_synthesized.logical_id(stack.resolver.dead_letters)
    metrics = {metric["Id"]: metric for metric in properties["Metrics"]}
    (expression,) = [m for m in metrics.values() if "Expression" in m]
    assert expression["Expression"] == "MAX([DIFF(FILL(visible, 0)), 0])"
    visible = metrics["visible"]["MetricStat"]["Metric"]
    assert visible["Namespace"] == "AWS/SQS"
    assert visible["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert visible["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [dead, "QueueName"]}}
    ]
    assert properties["Threshold"] == 1
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
