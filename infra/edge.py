"""The edge (context ``ibi:waf``): CloudFront and a rate-based web ACL in front of the public
routes of a resolver, and of an Archive, deployed in any region.

WAFv2 cannot attach to an HTTP API (only to REST APIs, CloudFront, ALBs, AppSync, Cognito), so
the per-client limit goes on CloudFront distributions whose origins are the APIs. A web ACL of
CloudFront scope, and a distribution's certificate, exist only in ``us-east-1``: they are an
edge stack of their own there (:class:`EdgeStack`, ``IbiEdge``), while the resolver and the
Archive stay in the institution's region. The edge reads each API's id from its stack's
outputs (a weak cross-region reference: ``Fn::GetStackOutput``, no export to lock either
stack), so the regional stacks deploy first, then the edge.

Around the edge, nothing: each fronted API's public routes take an authorizer
(:class:`OriginVerify`, in the regional stack) that refuses a request without the secret
header CloudFront adds. The secret is generated in the regional stack under a fixed name and
replicated to ``us-east-1``, where the edge's distribution reads it (a ``secretsmanager``
dynamic reference): no value is in any template. A viewer function hands the reader's host to
the origin (``x-forwarded-host``), and the authorizer hands it to the function, so that links
name the address readers use. Nothing is cached: every request reaches the origin, whose
answers depend on the query, the ``Accept`` headers and the time.

The web ACL logs every request, allowed or blocked, with the client's address, to a log group
of the edge stack (``aws-waf-logs-…``): behind CloudFront the APIs' access logs see only
CloudFront's addresses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import (
    Acknowledgment,
    ArnFormat,
    CfnOutput,
    Duration,
    Fn,
    RemovalPolicy,
    SecretValue,
    Stack,
    Validations,
)
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_wafv2 as wafv2
from aws_cdk.aws_apigatewayv2_authorizers import HttpLambdaAuthorizer, HttpLambdaResponseType
from constructs import Construct

from functions.origin.verify import HOST_HEADER, SECRET_HEADER
from infra.config import WAF_REGION, WafConfig
from infra.service import acknowledge_function, own_function

METRIC = "ibi-rate-limit"
# CloudFront's hosted zone, the same for every distribution: a Route 53 alias names it.
CLOUDFRONT_HOSTED_ZONE_ID = "Z2FDTNDATAQYW2"
# How long API Gateway keeps the authorizer's answer for one (secret, host) pair.
AUTHORIZER_CACHE = Duration.minutes(5)
ORIGIN_HANDLER = "functions.origin.handler.lambda_handler"
# The viewer function: the reader's host, before CloudFront puts the origin's in its place.
FORWARD_HOST = (
    "function handler(event) {\n"
    "  var request = event.request;\n"
    f"  request.headers['{HOST_HEADER}'] = {{value: request.headers.host.value}};\n"
    "  return request;\n"
    "}\n"
)


def origin_secret_name(stack: Stack) -> str:
    """The secret's name: fixed, so that the edge stack finds it without a reference."""
    return f"ibi/{stack.stack_name}/origin-verify"


class OriginVerify(Construct):
    """In a regional stack: the secret CloudFront sends, and the authorizer that checks it.

    ``authorizer`` goes on each public route of the fronted API; a route without it (the
    signed ones) is reached at the API's own address as before.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        code: lambda_.Code | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.secret_name = origin_secret_name(stack)
        replicas = (
            [] if stack.region == WAF_REGION else [secretsmanager.ReplicaRegion(region=WAF_REGION)]
        )
        self.secret = secretsmanager.Secret(
            self,
            "Secret",
            secret_name=self.secret_name,
            description="The header value CloudFront sends to the API: requests without it "
            "went around the edge",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=48, exclude_punctuation=True
            ),
            replica_regions=replicas,
            # Nothing depends on its value but the edge, which reads it again on its deploy.
            removal_policy=RemovalPolicy.DESTROY,
        )
        own = own_function(
            self,
            ids=("Logs", "Role"),
            service="origin",
            handler=ORIGIN_HANDLER,
            description="Refuses public requests that did not come through the edge",
            role_description="The origin check: its log group and the origin-verify secret",
            memory_size=256,
            timeout=Duration.seconds(5),
            environment={
                "IBI_ORIGIN_SECRET_ARN": self.secret.secret_arn,
                "POWERTOOLS_SERVICE_NAME": "origin",
            },
            log_retention=log_retention,
            code=code,
            requirements_of="minting",
        )
        self.logs, self.role, self.function = own.log_group, own.role, own.function
        tracing = own.tracing
        # handler.py reads AWSCURRENT and AWSPREVIOUS (SecretKeys.load): not grant_read, which
        # adds DescribeSecret.
        iam.Grant.add_to_principal(
            grantee=self.role,
            actions=["secretsmanager:GetSecretValue"],
            resource_arns=[self.secret.secret_arn],
        )
        self.logs.grant_write(self.role)
        self.authorizer = HttpLambdaAuthorizer(
            "OriginVerify",
            self.function,
            response_types=[HttpLambdaResponseType.SIMPLE],
            identity_source=[
                f"$request.header.{SECRET_HEADER}",
                f"$request.header.{HOST_HEADER}",
            ],
            results_cache_ttl=AUTHORIZER_CACHE,
        )
        self.tracing = tracing
        self._acknowledge_findings()

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        acknowledge_function(self.role, self.function, tracing=self.tracing)
        Validations.of(self.secret).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SMG4",
                reason=(
                    "The origin-verify value is not a credential of anyone: it only tells the "
                    "API that a request came through CloudFront. CloudFront reads it when the "
                    "edge stack deploys, so an automatic rotation would lock the edge out "
                    "until its next deploy; docs/deploy.md rotates it by hand with that deploy."
                ),
            )
        )


@dataclass(frozen=True)
class Front:
    """One API the edge fronts: its public routes, from a regional stack.

    ``name`` (``resolver``, ``archive``) names the distribution and its outputs; ``methods``
    are the ones its public routes take; ``domain_name`` and ``certificate_arn`` (us-east-1)
    give the distribution the address readers use.
    """

    name: str
    api: apigwv2.HttpApi
    secret_name: str
    methods: cloudfront.AllowedMethods
    rate_limit: int
    domain_name: str | None = None
    certificate_arn: str | None = None


class EdgeStack(Stack):
    """The web ACL, its log, and one distribution per fronted API, in us-east-1."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fronts: Sequence[Front],
        config: WafConfig,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.fronts = list(fronts)
        self.web_acl = self._web_acl(config)
        self.waf_logs = self._log(config)
        self.forward_host = cloudfront.Function(
            self,
            "ForwardHost",
            comment="Hands the reader's host to the origin as x-forwarded-host",
            code=cloudfront.FunctionCode.from_inline(FORWARD_HOST),
            runtime=cloudfront.FunctionRuntime.JS_2_0,
        )
        self.distributions: dict[str, cloudfront.Distribution] = {}
        for front in self.fronts:
            self.distributions[front.name] = self._distribution(front)

    def url(self, name: str) -> str:
        """Where readers reach the fronted API ``name``: its domain, or the distribution's."""
        front = next(front for front in self.fronts if front.name == name)
        if front.domain_name is not None:
            return f"https://{front.domain_name}/"
        return f"https://{self.distributions[name].distribution_domain_name}/"

    def _web_acl(self, config: WafConfig) -> wafv2.CfnWebACL:
        """One rate rule per fronted API, each counting one address's requests to that API."""
        rules = []
        for priority, front in enumerate(self.fronts):
            visibility = wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True,
                metric_name=f"{METRIC}-{front.name}",
                sampled_requests_enabled=True,
            )
            rules.append(
                wafv2.CfnWebACL.RuleProperty(
                    name=f"RateLimitPerAddress-{front.name}",
                    priority=priority,
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            limit=front.rate_limit,
                            aggregate_key_type="IP",
                            evaluation_window_sec=300,
                            scope_down_statement=self._only(front),
                        )
                    ),
                    action=wafv2.CfnWebACL.RuleActionProperty(
                        block=wafv2.CfnWebACL.BlockActionProperty(
                            custom_response=wafv2.CfnWebACL.CustomResponseProperty(
                                response_code=429,
                                custom_response_body_key="TooManyRequests",
                                response_headers=[
                                    wafv2.CfnWebACL.CustomHTTPHeaderProperty(
                                        name="Retry-After", value=str(config.retry_after_seconds)
                                    )
                                ],
                            )
                        )
                    ),
                    visibility_config=visibility,
                )
            )
        return wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="CLOUDFRONT",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True, metric_name=METRIC, sampled_requests_enabled=True
            ),
            custom_response_bodies={
                "TooManyRequests": wafv2.CfnWebACL.CustomResponseBodyProperty(
                    content='{"message":"Too Many Requests"}', content_type="APPLICATION_JSON"
                )
            },
            rules=rules,
        )

    def _only(self, front: Front) -> wafv2.CfnWebACL.StatementProperty | None:
        """With two fronts, a rule counts the requests to its own: by the Archive's host."""
        if len(self.fronts) == 1:
            return None
        archive = next(f for f in self.fronts if f.name == "archive")
        assert archive.domain_name is not None  # WafConfig: the Archive's front has a domain
        to_archive = wafv2.CfnWebACL.StatementProperty(
            byte_match_statement=wafv2.CfnWebACL.ByteMatchStatementProperty(
                field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(single_header={"Name": "host"}),
                positional_constraint="EXACTLY",
                search_string=archive.domain_name,
                text_transformations=[
                    wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="LOWERCASE")
                ],
            )
        )
        if front is archive:
            return to_archive
        return wafv2.CfnWebACL.StatementProperty(
            not_statement=wafv2.CfnWebACL.NotStatementProperty(statement=to_archive)
        )

    def _log(self, config: WafConfig) -> logs.LogGroup:
        """Every request the web ACL sees, to a log group WAF may write (``aws-waf-logs-``)."""
        name = f"aws-waf-logs-{self.stack_name}"
        log_group = logs.LogGroup(
            self,
            "WafLogs",
            log_group_name=name,
            retention=config.log_retention,
            removal_policy=RemovalPolicy.RETAIN,
        )
        logging = wafv2.CfnLoggingConfiguration(
            self,
            "WafLogging",
            resource_arn=self.web_acl.attr_arn,
            # WAF takes the log group's ARN without the ":*" that LogGroup.log_group_arn ends in.
            log_destination_configs=[
                self.format_arn(
                    service="logs",
                    resource="log-group",
                    resource_name=name,
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        )
        logging.node.add_dependency(log_group)
        return log_group

    def _distribution(self, front: Front) -> cloudfront.Distribution:
        region = Stack.of(front.api).region
        domain = Fn.join("", [front.api.api_id, ".execute-api.", region, ".amazonaws.com"])
        secret = SecretValue.secrets_manager(front.secret_name)
        certificate = (
            acm.Certificate.from_certificate_arn(
                self, f"{front.name.title()}Certificate", front.certificate_arn
            )
            if front.certificate_arn is not None
            else None
        )
        distribution = cloudfront.Distribution(
            self,
            f"{front.name.title()}Distribution",
            comment=f"IBI {front.name}: public entry behind the rate-limited web ACL (ibi:waf)",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.HttpOrigin(
                    domain,
                    protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
                    origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
                    custom_headers={SECRET_HEADER: secret.unsafe_unwrap()},
                ),
                allowed_methods=front.methods,
                cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
                origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=self.forward_host,
                        event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                    )
                ],
            ),
            domain_names=[front.domain_name] if front.domain_name else None,
            certificate=certificate,
            # TLS 1.2 for viewers; without a certificate of its own CloudFront fixes it (CFR4)
            minimum_protocol_version=(
                cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021 if certificate else None
            ),
            web_acl_id=self.web_acl.attr_arn,
        )
        self._outputs(front, distribution)
        self._acknowledge_findings(front, distribution)
        return distribution

    def _outputs(self, front: Front, distribution: cloudfront.Distribution) -> None:
        prefix = front.name.title()
        url = (
            f"https://{front.domain_name}/"
            if front.domain_name
            else f"https://{distribution.distribution_domain_name}/"
        )
        CfnOutput(
            self,
            f"{prefix}EdgeUrl",
            value=url,
            description=f"Where readers reach the {front.name}: publish this address",
        )
        CfnOutput(
            self,
            f"{prefix}DistributionDomain",
            value=distribution.distribution_domain_name,
            description=(
                f"Point {front.domain_name} here (a CNAME, or a Route 53 alias in zone "
                f"{CLOUDFRONT_HOSTED_ZONE_ID})"
                if front.domain_name
                else f"The {front.name}'s distribution"
            ),
        )

    def _acknowledge_findings(self, front: Front, distribution: cloudfront.Distribution) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        findings = [
            Acknowledgment(
                id="AwsSolutions-CFR1",
                reason=(
                    "Persistent URLs are for readers anywhere: an identifier system restricted "
                    "by country would break its own links. The rate rule limits abuse instead."
                ),
            ),
            Acknowledgment(
                id="AwsSolutions-CFR3",
                reason=(
                    "The web ACL logs every request the distribution receives, allowed or "
                    "blocked, with the client's address, URI, headers and the rule that "
                    "matched (aws-waf-logs-<stack>). A CloudFront standard log would add the "
                    "bytes sent and the edge's timing only, and needs a bucket with ACLs."
                ),
            ),
        ]
        if front.domain_name is None:
            findings.append(
                Acknowledgment(
                    id="AwsSolutions-CFR4",
                    reason=(
                        "Without a custom domain the distribution serves its *.cloudfront.net "
                        "name with CloudFront's default certificate, whose viewer policy "
                        "CloudFront fixes (TLSv1 and up) and no setting changes; give "
                        "ibi:resolver.domain_name for TLS 1.2 only. The origin leg is TLS 1.2."
                    ),
                )
            )
        Validations.of(distribution).acknowledge(*findings)
