"""Operating ibi: a CloudWatch dashboard and alarms for the functions and APIs of a stack.

For each watched service: its Lambda's errors, throttles and p99 duration (``AWS/Lambda``), its
HTTP API's 5xx rate (and the resolver's 4xx rate: persistent URLs that fail) from the
``AWS/ApiGateway`` metrics ``5xx``, ``4xx`` and ``Count`` by ``ApiId``, and the metrics the
functions publish themselves (Powertools EMF, namespace ``ibi``, dimension ``service``):
``MintUnavailable``, ``MintTooEarly``, ``MintConflicts`` (functions/minting/handler.py),
``IntegrityProblems`` (functions/archive/handler.py), ``ArchiveFailures``, ``Resolution409``,
``Resolution504`` (functions/resolver/handler.py), ``TwoOriginals``
(functions/resolver/resolving.py).

Every alarm treats missing data as not breaching: a service nobody calls is not failing. With
an e-mail address (context ``ibi:operations.alarm_email``) the alarms, and their return to OK,
publish to an SNS topic of the stack that mails it.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

NAMESPACE = "ibi"  # POWERTOOLS_METRICS_NAMESPACE of every function
PERIOD = Duration.minutes(5)
# A Lambda's p99 duration alarms at this share of its timeout, unless the service says better.
LATENCY_SHARE_OF_TIMEOUT = 0.8


@dataclass(frozen=True, slots=True)
class Signal:
    """A metric a function publishes, and the count per 5 minutes that raises its alarm."""

    metric: str
    threshold: int
    meaning: str


@dataclass(frozen=True, slots=True)
class Rate:
    """An error rate of an HTTP API, in percent of its requests, and when it alarms."""

    metric: str  # 5xx | 4xx
    threshold: float  # percent
    min_requests: int  # per period; below this the rate counts as 0 (a few requests prove nothing)
    periods: int  # consecutive periods at or above the threshold
    meaning: str


# What each service's own metrics mean, and the counts per 5 minutes worth waking someone for.
SIGNALS: dict[str, tuple[Signal, ...]] = {
    "minting": (
        Signal("MintUnavailable", 5, "mints answered 503: contention, or a throttled store"),
        Signal("MintTooEarly", 20, "mints answered 429: a subsystem mints slower than asked"),
        Signal("MintConflicts", 50, "concurrent mints keep colliding: add subsystems"),
    ),
    "archive": (Signal("IntegrityProblems", 1, "a stored file no longer matches its SHA-256"),),
    "resolver": (
        Signal("Resolution504", 5, "resolutions where no Archive answered in time"),
        Signal("Resolution409", 1, "two Archives claim to hold one original"),
        Signal("TwoOriginals", 1, "a plain resolution heard two Archives claim one original"),
        Signal("ArchiveFailures", 50, "Archives slow, down, or answering garbage"),
        Signal("RegistrationGuessCap", 1, "over 100 wrong keys for one Archive in 15 min"),
    ),
}
# Shown on the dashboard, never alarmed on: the traffic itself.
TRAFFIC = {
    "minting": ("IBIsMinted", "MintReplayed"),
    "archive": ("ItemsCreated", "UrlRequestsHeld", "Acknowledgments"),
    "resolver": ("Resolution302", "Resolution404", "HintsHit"),
}
SERVER_ERRORS = Rate("5xx", 5, 10, 2, "answers 5xx to 5% or more of its requests")
CLIENT_ERRORS = Rate(
    "4xx", 50, 20, 3, "answers 4xx to half its requests for 15 minutes: broken links or a scan"
)


@dataclass(frozen=True, slots=True)
class Watched:
    """One service of the stack: its Powertools service name, its Lambda, its API.

    ``latency``: the p99 duration that raises an alarm (default: 80% of the Lambda's timeout).
    ``client_errors``: alarm on the 4xx rate too (the resolver, whose 4xx are persistent URLs
    that do not resolve).
    ``dead_letters``: a dead-letter queue whose first message alarms (the resolver's
    acknowledgments that failed 5 deliveries: access counts going wrong).
    """

    name: str  # minting | archive | resolver
    function: lambda_.Function
    api: apigwv2.HttpApi
    latency: Duration | None = None
    client_errors: bool = False
    dead_letters: sqs.IQueue | None = None

    @property
    def latency_threshold_ms(self) -> float:
        if self.latency is not None:
            return self.latency.to_milliseconds()
        timeout = self.function.timeout or Duration.seconds(3)  # Lambda's default
        return timeout.to_milliseconds() * LATENCY_SHARE_OF_TIMEOUT


def emf_metric(service: str, metric: str, statistic: str = "Sum") -> cloudwatch.Metric:
    """A metric a function publishes through Powertools (namespace ``ibi``, ``service``)."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=metric,
        dimensions_map={"service": service},
        statistic=statistic,
        period=PERIOD,
    )


def api_metric(api: apigwv2.HttpApi, metric: str) -> cloudwatch.Metric:
    """An HTTP API metric (``5xx``, ``4xx``, ``Count``) by ``ApiId``, summed per period."""
    return api.metric(metric, statistic="Sum", period=PERIOD)


def error_rate(api: apigwv2.HttpApi, rate: Rate) -> cloudwatch.MathExpression:
    """``rate.metric`` in percent of the requests; 0 below ``rate.min_requests`` requests."""
    errors = f"errors{rate.metric}"  # one id per rate: a graph shows both
    return cloudwatch.MathExpression(
        expression=f"IF(requests >= {rate.min_requests}, 100 * FILL({errors}, 0) / requests, 0)",
        using_metrics={
            errors: api_metric(api, rate.metric),
            "requests": api_metric(api, "Count"),
        },
        label=f"{rate.metric} (% of requests)",
        period=PERIOD,
    )


class Operations(Construct):
    """A dashboard of every watched service, its alarms, and where they are sent."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        watched: list[Watched],
        alarm_email: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self.topic: sns.Topic | None = None
        if alarm_email is not None:
            self.topic = sns.Topic(
                self,
                "AlarmTopic",
                display_name=f"ibi alarms ({stack.stack_name})",
                enforce_ssl=True,
            )
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"{stack.stack_name}-ibi"
        )
        for service in watched:
            self._watch(service)

    def _watch(self, service: Watched) -> None:
        name, function = service.name, service.function
        errors = function.metric_errors(period=PERIOD, statistic="Sum")
        throttles = function.metric_throttles(period=PERIOD, statistic="Sum")
        p99 = function.metric_duration(period=PERIOD, statistic="p99")
        server_errors = error_rate(service.api, SERVER_ERRORS)
        client_errors = error_rate(service.api, CLIENT_ERRORS)

        self._alarm(f"{name}-errors", errors, 1, f"the {name} Lambda fails (crash or timeout)")
        self._alarm(f"{name}-throttles", throttles, 1, f"the {name} Lambda is throttled")
        self._alarm(
            f"{name}-p99",
            p99,
            service.latency_threshold_ms,
            f"the {name} Lambda's p99 latency reaches {service.latency_threshold_ms:.0f} ms",
            periods=3,
            datapoints=2,
        )
        rates = [(SERVER_ERRORS, server_errors)]
        if service.client_errors:
            rates.append((CLIENT_ERRORS, client_errors))
        for rate, expression in rates:
            self._alarm(
                f"{name}-{rate.metric}-rate",
                expression,
                rate.threshold,
                f"the {name} API {rate.meaning}",
                periods=rate.periods,
                datapoints=rate.periods,
            )
        if service.dead_letters is not None:
            self._alarm(
                f"{name}-dead-letters",
                service.dead_letters.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic="Maximum"
                ),
                1,
                f"{name}: acknowledgments failed 5 deliveries (in the dead-letter queue)",
            )
        for signal in SIGNALS.get(name, ()):
            self._alarm(
                f"{name}-{signal.metric}",
                emf_metric(name, signal.metric),
                signal.threshold,
                f"{name}: {signal.meaning} ({signal.metric} >= {signal.threshold} in 5 minutes)",
            )

        own = [emf_metric(name, signal.metric) for signal in SIGNALS.get(name, ())]
        traffic = [emf_metric(name, metric) for metric in TRAFFIC.get(name, ())]
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title=f"{name}: Lambda errors, throttles", left=[errors, throttles]
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: API requests, 4xx, 5xx",
                left=[api_metric(service.api, metric) for metric in ("Count", "4xx", "5xx")],
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: API error rates (%)", left=[client_errors, server_errors]
            ),
            cloudwatch.GraphWidget(title=f"{name}: Lambda p99 duration (ms)", left=[p99]),
            cloudwatch.GraphWidget(title=f"{name}: alarmed metrics", left=own),
            cloudwatch.GraphWidget(title=f"{name}: traffic", left=traffic),
        ]
        if name == "resolver":
            widgets.append(
                cloudwatch.GraphWidget(
                    title="resolver: resolution p99 (ms)",
                    left=[emf_metric(name, "ResolutionMs", "p99")],
                )
            )
        self.dashboard.add_widgets(*widgets)

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        meaning: str,
        *,
        periods: int = 1,
        datapoints: int = 1,
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            f"Alarm-{name}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=datapoints,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"ibi: {meaning}",
        )
        if self.topic is not None:
            action = cloudwatch_actions.SnsAction(self.topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        self.alarms[name] = alarm
