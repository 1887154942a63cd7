"""Operating ibi: a CloudWatch dashboard and alarms for the functions and APIs of a stack.

The functions publish their own metrics in the ``ibi`` namespace (Powertools EMF, dimension
``service``): ``IBIsMinted``, ``MintTooEarly``, ``MintUnavailable``, ``MintConflicts``,
``ResolutionMs``, ``Resolution404/409/410/504``, ``ArchiveFailures``, ``IntegrityProblems``…
Alarms have no action here: subscribe a topic of your own (docs/deploy.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

NAMESPACE = "ibi"
PERIOD = Duration.minutes(5)


@dataclass(frozen=True, slots=True)
class Watched:
    """One service of the stack: its Lambda, its API, its Powertools service name."""

    name: str  # minting | archive | resolver
    function: lambda_.IFunction
    api: apigwv2.HttpApi


def _emf(service: str, metric: str, statistic: str = "Sum") -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=metric,
        dimensions_map={"service": service},
        statistic=statistic,
        period=PERIOD,
    )


def _api(api: apigwv2.HttpApi, metric: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace="AWS/ApiGateway",
        metric_name=metric,
        dimensions_map={"ApiId": api.api_id},
        statistic="Sum",
        period=PERIOD,
    )


# Service-specific signals: (metric, threshold per 5 minutes, what it means).
SIGNALS = {
    "minting": [
        ("MintUnavailable", 5, "mints answered 503 (contention or a throttled store)"),
        ("MintTooEarly", 20, "mints answered 429 (a subsystem's granularity is too coarse)"),
    ],
    "archive": [("IntegrityProblems", 0, "a stored file no longer matches its SHA-256")],
    "resolver": [
        ("Resolution504", 5, "no Archive answered in time"),
        ("Resolution409", 0, "two Archives claim one original"),
        ("ArchiveFailures", 50, "Archives slow, down or answering garbage"),
    ],
}


class Operations(Construct):
    """A dashboard of every watched service, and its alarms."""

    def __init__(self, scope: Construct, construct_id: str, *, watched: list[Watched]) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.alarms: list[cloudwatch.Alarm] = []
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"{stack.stack_name}-ibi"
        )
        for service in watched:
            errors = service.function.metric_errors(period=PERIOD)
            throttles = service.function.metric_throttles(period=PERIOD)
            p99 = service.function.metric_duration(period=PERIOD, statistic="p99")
            server_errors = _api(service.api, "5xx")
            client_errors = _api(service.api, "4xx")
            self._alarm(f"{service.name}-errors", errors, 1, f"the {service.name} Lambda fails")
            self._alarm(
                f"{service.name}-throttles", throttles, 1, f"the {service.name} Lambda is throttled"
            )
            self._alarm(
                f"{service.name}-5xx", server_errors, 5, f"the {service.name} API answers 5xx"
            )
            timeout_ms = (
                service.function.timeout.to_milliseconds()
                if isinstance(service.function, lambda_.Function) and service.function.timeout
                else 30_000
            )
            self._alarm(
                f"{service.name}-p99",
                p99,
                timeout_ms * 0.8,
                f"the {service.name} Lambda's p99 latency nears its timeout",
            )
            for metric, threshold, meaning in SIGNALS.get(service.name, []):
                self._alarm(
                    f"{service.name}-{metric}",
                    _emf(service.name, metric),
                    threshold + 1 if threshold else 1,
                    meaning,
                )
            widgets: list[cloudwatch.IWidget] = [
                cloudwatch.GraphWidget(
                    title=f"{service.name}: Lambda errors, throttles", left=[errors, throttles]
                ),
                cloudwatch.GraphWidget(
                    title=f"{service.name}: API 4xx, 5xx", left=[client_errors, server_errors]
                ),
                cloudwatch.GraphWidget(title=f"{service.name}: p99 duration (ms)", left=[p99]),
            ]
            signals = [_emf(service.name, metric) for metric, _, _ in SIGNALS.get(service.name, [])]
            if service.name == "minting":
                signals.append(_emf("minting", "IBIsMinted"))
            if service.name == "resolver":
                signals.append(_emf("resolver", "ResolutionMs", "p99"))
            if signals:
                widgets.append(
                    cloudwatch.GraphWidget(title=f"{service.name}: its own metrics", left=signals)
                )
            self.dashboard.add_widgets(*widgets)

    def _alarm(self, name: str, metric: cloudwatch.IMetric, threshold: float, meaning: str) -> None:
        self.alarms.append(
            cloudwatch.Alarm(
                self,
                f"Alarm-{name}",
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"ibi: {meaning}",
            )
        )
