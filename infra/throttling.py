"""Stage and route throttles of an HTTP API (context ``ibi:throttle``, infra/config.py).

The ``$default`` stage's default route settings hold the public limits, so every route, one
added later included, is throttled; each IAM-authorized route gets the signed limits as a
route setting of its own. API Gateway answers a request over a limit with ``429`` and
``{"message":"Too Many Requests"}`` before the Lambda runs; an HTTP API sends no
``Retry-After`` and cannot be told to (it has no gateway responses), see docs/deploy.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import aws_apigatewayv2 as apigwv2

from infra.config import ThrottleConfig


def route_key(route: apigwv2.HttpRoute) -> str:
    """The route's key in the stage's ``RouteSettings``: ``METHOD /path``."""
    child = route.node.default_child
    assert isinstance(child, apigwv2.CfnRoute)
    return str(child.route_key)


def throttle(
    stage: apigwv2.HttpStage,
    config: ThrottleConfig,
    *,
    signed: Iterable[apigwv2.HttpRoute] = (),
    default_signed: bool = False,
) -> None:
    """Put ``config``'s limits on ``stage``: public by default (signed when every route of
    the API is IAM-authorized, ``default_signed``), signed on each of ``signed``."""
    cfn = stage.node.default_child
    assert isinstance(cfn, apigwv2.CfnStage)
    rate, burst = (
        (config.signed_rate, config.signed_burst)
        if default_signed
        else (config.public_rate, config.public_burst)
    )
    cfn.add_property_override("DefaultRouteSettings.ThrottlingRateLimit", rate)
    cfn.add_property_override("DefaultRouteSettings.ThrottlingBurstLimit", burst)
    settings = {
        route_key(route): {
            "ThrottlingRateLimit": config.signed_rate,
            "ThrottlingBurstLimit": config.signed_burst,
        }
        for route in signed
    }
    if settings and not default_signed:
        cfn.add_property_override("RouteSettings", settings)
        # A route setting names a route that must exist when the stage is deployed.
        for route in signed:
            stage.node.add_dependency(route)
