"""An optional CloudFront distribution with a rate-based WAF rule in front of the resolver.

WAFv2 cannot attach to an HTTP API (only to REST APIs, CloudFront, ALBs, AppSync, Cognito), so
the per-client limit goes on a distribution whose origin is the API (context ``ibi:waf``). The
web ACL has CloudFront scope, which AWS only accepts in ``us-east-1``: the stack must be
pinned there (``ibi:region``). Nothing is cached: every request reaches the resolver, whose
answers depend on the query, the ``Accept`` headers and the time.

Limits of the design (docs/deploy.md, "Throttles"): the API's own address stays reachable
(an HTTP API cannot require a header only CloudFront sends), so the rule limits those who use
the distribution's address; and behind CloudFront the resolver sees CloudFront's addresses,
not the client's, so its own per-source counters of wrong registration keys count per edge.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Fn, Stack, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from infra.config import WafConfig

METRIC = "ibi-rate-limit"


class RateLimitedEdge(Construct):
    """A distribution in front of ``api`` with a web ACL blocking, with ``429`` and a
    ``Retry-After``, any address over ``config.rate_limit`` requests in 5 minutes."""

    def __init__(
        self, scope: Construct, construct_id: str, *, api: apigwv2.HttpApi, config: WafConfig
    ) -> None:
        super().__init__(scope, construct_id)
        visibility = wafv2.CfnWebACL.VisibilityConfigProperty(
            cloud_watch_metrics_enabled=True, metric_name=METRIC, sampled_requests_enabled=True
        )
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="CLOUDFRONT",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=visibility,
            custom_response_bodies={
                "TooManyRequests": wafv2.CfnWebACL.CustomResponseBodyProperty(
                    content='{"message":"Too Many Requests"}', content_type="APPLICATION_JSON"
                )
            },
            rules=[
                wafv2.CfnWebACL.RuleProperty(
                    name="RateLimitPerAddress",
                    priority=0,
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            limit=config.rate_limit,
                            aggregate_key_type="IP",
                            evaluation_window_sec=300,
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
            ],
        )
        region = Stack.of(self).region
        domain = Fn.join("", [api.api_id, ".execute-api.", region, ".amazonaws.com"])
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="IBI resolver: rate-limited public entry (ibi:waf)",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.HttpOrigin(
                    domain,
                    protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
                    origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
                ),
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
                origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
            ),
            web_acl_id=self.web_acl.attr_arn,
        )
        self._acknowledge_findings()

    @property
    def url(self) -> str:
        return f"https://{self.distribution.distribution_domain_name}/"

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        Validations.of(self.distribution).acknowledge(
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
                    "Every request the distribution forwards is in the resolver API's JSON "
                    "access log; a second log (a bucket with ACLs enabled) would add cost, not "
                    "evidence. WAF samples blocked requests (sampled_requests_enabled)."
                ),
            ),
            Acknowledgment(
                id="AwsSolutions-CFR4",
                reason=(
                    "The distribution serves its *.cloudfront.net name with CloudFront's "
                    "default certificate, whose viewer policy CloudFront fixes (TLSv1 and up) "
                    "and no setting changes. The content is public and read-only; the origin "
                    "leg is TLS 1.2 only (origin_ssl_protocols)."
                ),
            ),
        )
