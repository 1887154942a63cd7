"""The resolver stack: registry, pepper, function, routes and their authorization."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.resolver import ADMIN_ROUTES, PUBLIC_ROUTES, REGISTRY_ACTIONS, Resolver
from infra.stacks import ResolverStack
from tests.infra.support import SKIP_BUNDLING, Synthesized, arn_of, granted

pytestmark = pytest.mark.infra


def test_registry_table_is_retained_with_pitr_and_ttl(
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    table = resolver_synthesized.template.find_resources("AWS::DynamoDB::Table")
    ((_, resource),) = table.items()
    properties = resource["Properties"]
    assert resource["DeletionPolicy"] == "Retain"
    assert properties["KeySchema"] == [{"AttributeName": "service", "KeyType": "HASH"}]
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}


def test_the_function(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    functions = resolver_synthesized.resources("AWS::Lambda::Function")
    ((_, function),) = functions.items()
    properties = function["Properties"]
    assert properties["Runtime"] == "python3.13" and properties["Architectures"] == ["arm64"]
    assert properties["Handler"] == "functions.resolver.handler.lambda_handler"
    assert properties["TracingConfig"] == {"Mode": "Active"}
    assert properties["Timeout"] < 30
    variables = properties["Environment"]["Variables"]
    assert variables["IBI_RESOLVER_SERVICE_IBI"] == "J8LNKB5R7W/3FUQHC5"
    assert "IBI_ALLOW_NETWORKS" not in variables  # in AWS: public addresses only
    assert "IBI_PEPPER_SECRET_ARN" in variables and "IBI_PEPPER_FILE" not in variables
    assert int(variables["IBI_RESOLUTION_DEADLINE_SECONDS"]) < properties["Timeout"]


def test_least_privilege(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    stack = resolver_synthesized.stack
    grants = granted(
        resolver_synthesized.template, resolver_synthesized.logical_id(stack.resolver.role)
    )
    table = resolver_synthesized.logical_id(stack.resolver.registry_table)
    assert grants[arn_of(table)] == set(REGISTRY_ACTIONS)
    secret = resolver_synthesized.logical_id(stack.resolver.pepper)
    secret_actions = grants[json.dumps({"Ref": secret}, sort_keys=True)]
    assert secret_actions == {"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}
    everything = set().union(*grants.values())
    assert not {a for a in everything if a.endswith(":*") or a == "*"}
    assert not {a for a in everything if a.startswith("s3:")}


def test_routes_and_their_authorization(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    routes = resolver_synthesized.resources("AWS::ApiGatewayV2::Route")
    by_key = {
        r["Properties"]["RouteKey"]: r["Properties"]["AuthorizationType"] for r in routes.values()
    }
    expected = {f"{m.value} {p}": "NONE" for m, p in PUBLIC_ROUTES}
    expected |= {f"{m.value} {p}": "AWS_IAM" for m, p in ADMIN_ROUTES}
    assert by_key == expected


def test_the_lambda_serves_what_the_api_routes(
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    from functions.resolver.handler import create_app

    app = create_app(lambda: None)  # type: ignore[arg-type,return-value]
    served = {(route.method, route.path) for route in app._static_routes + app._dynamic_routes}
    admin = {f"{m} {p}" for m, p in served if p.startswith("/admin/")}
    assert admin == {"POST /admin/archives", "GET /admin/archives"}
    assert {m for m, p in served if not p.startswith("/admin/")} <= {"GET", "HEAD"}


def test_outputs(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    outputs = resolver_synthesized.template.find_outputs("*")
    assert {"ResolverUrl", "AdminUrl", "RegistryTableName", "PepperSecretArn"} <= set(outputs)


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


def test_construct_alone_in_a_bare_stack() -> None:
    app = App(context=SKIP_BUNDLING)
    stack = Stack(app, "Bare")
    Resolver(stack, "Resolver")
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Lambda::Function", 1)
    template.resource_count_is("AWS::SecretsManager::Secret", 1)
    template.resource_count_is("AWS::ApiGatewayV2::Route", len(PUBLIC_ROUTES) + len(ADMIN_ROUTES))
    secret: Any = next(iter(template.find_resources("AWS::SecretsManager::Secret").values()))
    assert secret["DeletionPolicy"] == "Retain"
