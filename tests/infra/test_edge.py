"""Issue 26 item 1: the edge (``ibi:waf``) in us-east-1, fronting stacks in any region."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from functions.origin.verify import HOST_HEADER, SECRET_HEADER
from infra.config import ConfigError, WafConfig, cdk_json_context
from infra.edge import EdgeStack
from infra.stacks import (
    ARCHIVE_STACK_ID,
    EDGE_STACK_ID,
    RESOLVER_STACK_ID,
    ArchiveStack,
    ResolverStack,
    build_app,
)
from tests.infra.conftest import CERTIFICATE_ARN, EDGE, EDGE_CERTIFICATE_ARN, stack_of
from tests.infra.support import SKIP_BUNDLING, Synthesized

pytestmark = pytest.mark.infra


@pytest.fixture(scope="module")
def edge(edge_app: tuple[App, Path]) -> Synthesized[EdgeStack]:
    return stack_of(edge_app[0], EDGE_STACK_ID, EdgeStack)


@pytest.fixture(scope="module")
def resolver(edge_app: tuple[App, Path]) -> Synthesized[ResolverStack]:
    return stack_of(edge_app[0], RESOLVER_STACK_ID, ResolverStack)


@pytest.fixture(scope="module")
def archive(edge_app: tuple[App, Path]) -> Synthesized[ArchiveStack]:
    return stack_of(edge_app[0], ARCHIVE_STACK_ID, ArchiveStack)


def _synth(**context: Any) -> App:
    app = build_app(App(context={**cdk_json_context(), **SKIP_BUNDLING, **context}))
    app.synth()
    return app


def _distribution(edge: Synthesized[EdgeStack], name: str) -> dict[str, Any]:
    distribution = edge.stack.distributions[name]
    config: dict[str, Any] = edge.resources("AWS::CloudFront::Distribution")[
        edge.logical_id(distribution)
    ]["Properties"]["DistributionConfig"]
    return config


def test_the_edge_is_in_us_east_1_and_the_services_in_their_region(
    edge: Synthesized[EdgeStack],
    resolver: Synthesized[ResolverStack],
    archive: Synthesized[ArchiveStack],
) -> None:
    assert edge.stack.region == "us-east-1"
    assert resolver.stack.region == archive.stack.region == "sa-east-1"
    assert {s.node.id for s in edge.stack.dependencies} == {RESOLVER_STACK_ID, ARCHIVE_STACK_ID}
    # WAF and CloudFront are the edge's alone
    for regional in (resolver, archive):
        assert not regional.resources("AWS::WAFv2::WebACL")
        assert not regional.resources("AWS::CloudFront::Distribution")


def test_the_rate_rules_answer_429_with_retry_after(edge: Synthesized[EdgeStack]) -> None:
    acl = edge.only("AWS::WAFv2::WebACL")
    assert acl["Scope"] == "CLOUDFRONT" and acl["DefaultAction"] == {"Allow": {}}
    rules = {rule["Name"]: rule for rule in acl["Rules"]}
    assert set(rules) == {"RateLimitPerAddress-resolver", "RateLimitPerAddress-archive"}
    to_archive = {
        "ByteMatchStatement": {
            "FieldToMatch": {"SingleHeader": {"Name": "host"}},
            "PositionalConstraint": "EXACTLY",
            "SearchString": "archive.example.org",
            "TextTransformations": [{"Priority": 0, "Type": "LOWERCASE"}],
        }
    }
    resolver_rule = rules["RateLimitPerAddress-resolver"]["Statement"]["RateBasedStatement"]
    assert resolver_rule["Limit"] == 500 and resolver_rule["AggregateKeyType"] == "IP"
    assert resolver_rule["ScopeDownStatement"] == {"NotStatement": {"Statement": to_archive}}
    archive_rule = rules["RateLimitPerAddress-archive"]["Statement"]["RateBasedStatement"]
    assert archive_rule["Limit"] == 30000 and archive_rule["ScopeDownStatement"] == to_archive
    for rule in rules.values():
        response = rule["Action"]["Block"]["CustomResponse"]
        assert response["ResponseCode"] == 429
        assert response["ResponseHeaders"] == [{"Name": "Retry-After", "Value": "120"}]
        assert response["CustomResponseBodyKey"] in acl["CustomResponseBodies"]


def test_each_distribution_serves_its_domain_with_a_us_east_1_certificate(
    edge: Synthesized[EdgeStack],
) -> None:
    acl_id = edge.stack.get_logical_id(edge.stack.web_acl)
    for name, domain, methods in (
        ("resolver", "urlib.example.org", ["GET", "HEAD"]),  # never /admin/ (signed) through it
        ("archive", "archive.example.org", ["GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST"]),
    ):
        config = _distribution(edge, name)
        assert config["Aliases"] == [domain]
        assert config["ViewerCertificate"]["AcmCertificateArn"] == EDGE_CERTIFICATE_ARN
        assert config["ViewerCertificate"]["MinimumProtocolVersion"] == "TLSv1.2_2021"
        assert config["WebACLId"] == {"Fn::GetAtt": [acl_id, "Arn"]}
        assert config["DefaultCacheBehavior"]["AllowedMethods"][: len(methods)] == methods
    outputs = edge.template.to_json()["Outputs"]
    assert outputs["ResolverEdgeUrl"]["Value"] == "https://urlib.example.org/"
    assert outputs["ArchiveEdgeUrl"]["Value"] == "https://archive.example.org/"
    assert "Z2FDTNDATAQYW2" in outputs["ResolverDistributionDomain"]["Description"]


def test_the_origin_is_the_regional_api_read_from_its_stack(
    edge: Synthesized[EdgeStack], resolver: Synthesized[ResolverStack]
) -> None:
    (origin,) = _distribution(edge, "resolver")["Origins"]
    assert origin["CustomOriginConfig"]["OriginProtocolPolicy"] == "https-only"
    api_id, suffix = origin["DomainName"]["Fn::Join"][1]
    assert suffix == ".execute-api.sa-east-1.amazonaws.com"
    reference = api_id["Fn::GetStackOutput"]
    assert reference["StackName"] == RESOLVER_STACK_ID and reference["Region"] == "sa-east-1"
    # the output it reads is the resolver API's id: no export, so neither stack is locked
    output = resolver.template.to_json()["Outputs"][reference["OutputName"]]
    assert output["Value"] == {"Ref": resolver.logical_id(resolver.stack.resolver.api)}
    assert "Export" not in output


def test_the_origin_header_is_the_regional_secret_replicated_to_us_east_1(
    edge: Synthesized[EdgeStack], resolver: Synthesized[ResolverStack]
) -> None:
    (origin,) = _distribution(edge, "resolver")["Origins"]
    (header,) = origin["OriginCustomHeaders"]
    assert header["HeaderName"] == SECRET_HEADER
    name = "ibi/IbiResolver/origin-verify"
    assert header["HeaderValue"] == f"{{{{resolve:secretsmanager:{name}:SecretString:::}}}}"
    secret = resolver.resources("AWS::SecretsManager::Secret")[
        resolver.logical_id(resolver.stack.origin.secret)  # type: ignore[union-attr]
    ]["Properties"]
    assert secret["Name"] == name
    assert secret["ReplicaRegions"] == [{"Region": "us-east-1"}]
    assert "SecretString" not in secret  # generated: no value in any template
    assert secret["GenerateSecretString"]["PasswordLength"] >= 32


def test_the_viewer_function_hands_the_readers_host_to_the_origin(
    edge: Synthesized[EdgeStack],
) -> None:
    function = edge.only("AWS::CloudFront::Function")
    assert function["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    assert f"request.headers['{HOST_HEADER}']" in function["FunctionCode"]
    assert "request.headers.host.value" in function["FunctionCode"]
    for name in ("resolver", "archive"):
        behavior = _distribution(edge, name)["DefaultCacheBehavior"]
        (association,) = behavior["FunctionAssociations"]
        assert association["EventType"] == "viewer-request"


def test_the_web_acl_logs_every_request(edge: Synthesized[EdgeStack]) -> None:
    log_group = edge.only("AWS::Logs::LogGroup")
    assert log_group["LogGroupName"] == "aws-waf-logs-IbiEdge"
    logging = edge.only("AWS::WAFv2::LoggingConfiguration")
    assert logging["ResourceArn"] == {
        "Fn::GetAtt": [edge.stack.get_logical_id(edge.stack.web_acl), "Arn"]
    }
    assert logging["LogDestinationConfigs"] == [
        "arn:aws:logs:us-east-1:123456789012:log-group:aws-waf-logs-IbiEdge"  # no ":*"
    ]
    assert "LoggingFilter" not in logging  # allowed requests too: the access log of the edge


def _routes(synthesized: Synthesized[Any]) -> dict[str, dict[str, Any]]:
    return {
        route["Properties"]["RouteKey"]: route["Properties"]
        for route in synthesized.resources("AWS::ApiGatewayV2::Route").values()
    }


def test_the_public_routes_answer_the_edge_only(
    resolver: Synthesized[ResolverStack], archive: Synthesized[ArchiveStack]
) -> None:
    for synthesized, public in (
        (resolver, {"GET /", "GET /{proxy+}", "HEAD /{proxy+}"}),
        (
            archive,
            {"GET /{proxy+}", "HEAD /{proxy+}", "POST /transfers/confirm", "GET /oai", "POST /oai"},
        ),
    ):
        ((authorizer_id, authorizer),) = synthesized.resources(
            "AWS::ApiGatewayV2::Authorizer"
        ).items()
        routes = _routes(synthesized)
        for key in public:
            assert routes[key]["AuthorizationType"] == "CUSTOM", key
            assert routes[key]["AuthorizerId"] == {"Ref": authorizer_id}
        signed = {key for key, route in routes.items() if route["AuthorizationType"] == "AWS_IAM"}
        assert signed and all(
            key.split()[1].startswith(("/admin/", "/api/", "/mint", "/subsystems"))
            for key in signed
        )
        properties = authorizer["Properties"]
        assert properties["IdentitySource"] == [
            f"$request.header.{SECRET_HEADER}",
            f"$request.header.{HOST_HEADER}",
        ]
        assert properties["EnableSimpleResponses"] is True
        assert properties["AuthorizerResultTtlInSeconds"] == 300
    # Archives switch on at the resolver API's own address, each counted by its own address
    protocol = _routes(resolver)["GET /J8LNKB5R7W/3FUQHC5"]
    assert protocol["AuthorizationType"] == "NONE"


def test_the_origin_check_may_read_its_secret_and_nothing_else(
    resolver: Synthesized[ResolverStack],
) -> None:
    from tests.infra.support import granted

    origin = resolver.stack.origin
    assert origin is not None
    grants = granted(resolver.template, resolver.logical_id(origin.role))
    secret = json.dumps({"Ref": resolver.logical_id(origin.secret)}, sort_keys=True)
    assert grants[secret] == {"secretsmanager:GetSecretValue"}
    others = {resource: acts for resource, acts in grants.items() if resource != secret}
    assert set().union(*others.values()) <= {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }


def test_the_domains_are_the_distributions_and_the_links_name_them(
    resolver: Synthesized[ResolverStack], archive: Synthesized[ArchiveStack]
) -> None:
    assert not resolver.resources("AWS::ApiGatewayV2::DomainName")  # on CloudFront instead
    outputs = resolver.template.to_json()["Outputs"]
    assert outputs["ResolverUrl"]["Value"] == "https://urlib.example.org/"
    assert "DomainTarget" not in outputs
    (function,) = [
        f
        for f in archive.resources("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "functions.archive.handler.lambda_handler"
    ]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["IBI_ARCHIVE_BASE_URL"] == "https://archive.example.org"
    assert archive.template.to_json()["Outputs"]["ArchiveUrl"]["Value"] == (
        "https://archive.example.org/"
    )


def test_in_us_east_1_the_secret_needs_no_replica() -> None:
    app = _synth(**{**EDGE, "ibi:region": "us-east-1"})
    stack = app.node.find_child(RESOLVER_STACK_ID)
    assert isinstance(stack, ResolverStack) and stack.origin is not None
    secret = Template.from_stack(stack).find_resources("AWS::SecretsManager::Secret")
    names = [s["Properties"] for s in secret.values() if "Name" in s["Properties"]]
    assert names == [
        {
            "Name": "ibi/IbiResolver/origin-verify",
            "Description": names[0]["Description"],
            "GenerateSecretString": names[0]["GenerateSecretString"],
        }
    ]


def test_the_resolver_alone_behind_the_edge_without_a_domain() -> None:
    app = _synth(
        **{"ibi:stacks": ["resolver"], "ibi:region": "eu-west-1", "ibi:waf": True},
    )
    edge = app.node.find_child(EDGE_STACK_ID)
    assert isinstance(edge, EdgeStack) and list(edge.distributions) == ["resolver"]
    template = Template.from_stack(edge)
    (acl,) = template.find_resources("AWS::WAFv2::WebACL").values()
    (rule,) = acl["Properties"]["Rules"]
    assert "ScopeDownStatement" not in rule["Statement"]["RateBasedStatement"]
    assert rule["Statement"]["RateBasedStatement"]["Limit"] == WafConfig().rate_limit
    outputs = template.to_json()["Outputs"]
    assert outputs["ResolverEdgeUrl"]["Value"] == {
        "Fn::Join": [
            "",
            [
                "https://",
                {
                    "Fn::GetAtt": [
                        edge.get_logical_id(edge.distributions["resolver"].node.default_child),
                        "DomainName",
                    ]
                },
                "/",
            ],  # type: ignore[arg-type]
        ]
    }
    resolver = app.node.find_child(RESOLVER_STACK_ID)
    assert isinstance(resolver, Stack)
    assert "ResolverUrl" not in Template.from_stack(resolver).to_json()["Outputs"]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"ibi:waf": True}, "ibi:waf needs ibi:region: the edge stack in us-east-1"),
        (
            {
                "ibi:waf": True,
                "ibi:region": "eu-west-1",
                "ibi:resolver": {
                    "domain_name": "urlib.example.org",
                    "certificate_arn": CERTIFICATE_ARN,
                },
            },
            "ibi:resolver.certificate_arn: with ibi:waf the domain is CloudFront's, whose "
            "certificate must be in us-east-1 (this one is in eu-west-1)",
        ),
        (
            {
                "ibi:region": "eu-west-1",
                "ibi:waf": {
                    "archive_domain_name": "archive.example.org",
                    "archive_certificate_arn": CERTIFICATE_ARN,
                },
            },
            "ibi:waf.archive_certificate_arn: the certificate is in eu-west-1; CloudFront takes "
            "one in us-east-1 only",
        ),
        (
            {"ibi:region": "eu-west-1", "ibi:waf": {"archive_domain_name": "archive.example.org"}},
            "give archive_domain_name and archive_certificate_arn together",
        ),
        (
            {
                **EDGE,
                "ibi:archive": {"base_url": "https://elsewhere.example.org"},
            },
            "ibi:archive.base_url is https://elsewhere.example.org, but the edge fronts",
        ),
        (
            {"ibi:stacks": ["minting"], "ibi:region": "eu-west-1", "ibi:waf": True},
            "ibi:waf: nothing to front",
        ),
        (
            {
                "ibi:region": "eu-west-1",
                "ibi:waf": True,
                "ibi:canary": {"ibi": "8JMKD3MGP8W/35MME4E"},
            },
            "ibi:canary.resolver_url: behind the edge without ibi:resolver.domain_name",
        ),
    ],
)
def test_what_the_edge_refuses(context: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        _synth(**context)
    assert message in str(error.value)
