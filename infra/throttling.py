"""Stage and route throttles of an HTTP API (context ``ibi:throttle``, infra/config.py).

Every route gets a route setting of its own, so each has its own token bucket: persistent
URLs, OAI-PMH harvesting and the deposit API never share one. The ``$default`` stage's default
route settings cover a route added later. API Gateway answers a request over a limit with
``429`` and ``{"message":"Too Many Requests"}`` before the Lambda runs; an HTTP API sends no
``Retry-After`` and cannot be told to (it has no gateway responses), see docs/deploy.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import aws_apigatewayv2 as apigwv2

from infra.config import Limit


def route_key(route: apigwv2.HttpRoute) -> str:
    """The route's key in the stage's ``RouteSettings``: ``METHOD /path``."""
    child = route.node.default_child
    assert isinstance(child, apigwv2.CfnRoute)
    return str(child.route_key)


def throttle(
    stage: apigwv2.HttpStage,
    *,
    default: Limit,
    routes: Iterable[tuple[Iterable[apigwv2.HttpRoute], Limit]],
) -> None:
    """``default`` on ``stage`` (any route not named), and each group's limit on its routes."""
    cfn = stage.node.default_child
    assert isinstance(cfn, apigwv2.CfnStage)
    rate, burst = default
    # The L1 property itself (not an override), so that checks reading it (cdk-nag's
    # Serverless-APIGWDefaultThrottling) see it.
    cfn.default_route_settings = apigwv2.CfnStage.RouteSettingsProperty(
        throttling_rate_limit=rate, throttling_burst_limit=burst
    )
    settings = {}
    for group, (rate, burst) in routes:
        for route in group:
            settings[route_key(route)] = {
                "ThrottlingRateLimit": rate,
                "ThrottlingBurstLimit": burst,
            }
            # A route setting names a route that must exist when the stage is deployed.
            stage.node.add_dependency(route)
    if settings:
        cfn.add_property_override("RouteSettings", settings)
