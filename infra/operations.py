"""Operating ibi: a CloudWatch dashboard and alarms for the functions and APIs of a stack.

For each watched service: its Lambda's errors, throttles and p99 duration (``AWS/Lambda``), its
HTTP API's 5xx rate (and the resolver's 4xx rate: persistent URLs that fail) from the
``AWS/ApiGateway`` metrics ``5xx``, ``4xx`` and ``Count`` by ``ApiId``, the requests its API
answered 429 (a metric filter on the access log: the API's own metrics fold them into 4xx),
and the metrics the functions publish themselves (Powertools EMF, namespace ``ibi``, dimension
``service``): ``MintUnavailable``, ``MintTooEarly`` (functions/minting/handler.py),
``MintConflicts`` (functions/minting/wiring.py), ``IntegrityProblems``
(functions/archive/handler.py), ``Resolution409``, ``Resolution504``, ``TwoOriginals``
(functions/resolver/resolving.py), ``RegistrationGuessCap`` (functions/resolver/handler.py),
``ArchiveFailures`` by ``Archive`` too (functions/resolver/fanout.py). The resolver's
acknowledgment queue is watched for new dead letters and for the age of its oldest message; the
canary (``ibi:canary``) for failures and for silence; the Archive's scheduled link check for
``BrokenLinks`` (functions/archive/linkcheck.py: a ticket).

Each alarm either **pages** (readers are failing now: the canary, a 5xx rate, the resolver's
p99 at its deadline) or opens a **ticket** (someone should look within a working day); each
kind has an SNS topic (``ibi:operations.page_email``, ``.ticket_email``). Every alarm treats
missing data as not breaching (a service nobody calls is not failing), but the canary's: a
canary that stops reporting is an outage of the canary or of everything.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import OperationsConfig

NAMESPACE = "ibi"  # POWERTOOLS_METRICS_NAMESPACE of every function
PERIOD = Duration.minutes(5)
# A Lambda's p99 duration alarms at this share of its timeout, unless the service says better.
LATENCY_SHARE_OF_TIMEOUT = 0.8


class Severity(enum.Enum):
    """Who an alarm goes to: the on-call address now, or the team's queue."""

    PAGE = "page"
    TICKET = "ticket"


@dataclass(frozen=True, slots=True)
class Signal:
    """A metric a function publishes, the count per 5 minutes that raises its alarm, and
    whether that pages or opens a ticket."""

    metric: str
    threshold: int
    meaning: str
    severity: Severity = Severity.TICKET


@dataclass(frozen=True, slots=True)
class Rate:
    """An error rate of an HTTP API, in percent of its requests, and when it alarms."""

    metric: str  # 5xx | 4xx
    threshold: float  # percent
    min_requests: int  # per period; below this the rate counts as 0 (a few requests prove nothing)
    periods: int  # consecutive periods at or above the threshold
    meaning: str
    severity: Severity


# What each service's own metrics mean, and the counts per 5 minutes worth a ticket. None pages:
# what readers feel of them shows in the 5xx rate and the canary, which page.
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
        Signal("RegistrationGuessCap", 1, "over 100 wrong keys for one Archive in 15 min"),
    ),
}
# ArchiveFailures is alarmed per Archive (its ``Archive`` dimension): one Archive down is a
# ticket for that Archive's administrator, whatever the others do.
ARCHIVE_FAILURES = Signal("ArchiveFailures", 50, "one Archive slow, down, or answering garbage")
# Shown on the dashboard, never alarmed on: the traffic itself.
TRAFFIC = {
    "minting": ("IBIsMinted", "MintReplayed"),
    "archive": ("ItemsCreated", "UrlRequestsHeld", "Acknowledgments"),
    "resolver": ("Resolution302", "Resolution404", "HintsHit"),
}
SERVER_ERRORS = Rate(
    "5xx", 5, 10, 2, "answers 5xx to 5% or more of its requests", severity=Severity.PAGE
)
CLIENT_ERRORS = Rate(
    "4xx",
    50,
    20,
    3,
    "answers 4xx to half its requests for 15 minutes: broken links or a scan",
    severity=Severity.TICKET,
)
# A Lambda's own errors and throttles: a ticket when they persist, never a page for one.
ERRORS_THRESHOLD = 5  # per 5 minutes
THROTTLES_THRESHOLD = 10  # per 5 minutes
THROTTLED_REQUESTS = "Throttled429"  # the access log's 429s, per API (a metric filter)
THROTTLED_THRESHOLD = 50  # per 5 minutes
# An acknowledgment older than its urlkey's 10 minutes counts nothing when it arrives.
QUEUE_AGE_SECONDS = 600
CANARY_METRIC = "CanaryResolved"  # 1 per run that got the file, 0 per run that did not
# Per scheduled link check (functions/archive/linkcheck.py): the broken external URLs it found.
BROKEN_LINKS = Signal("BrokenLinks", 1, "the scheduled link check found external URLs broken")
LONGEST_PERIOD = Duration.days(1)  # an alarm's period, at most


@dataclass(frozen=True, slots=True)
class Watched:
    """One service of the stack: its Powertools service name, its Lambda, its API.

    ``latency``: the p99 duration that raises an alarm (default: 80% of the Lambda's timeout).
    ``latency_pages``: whether that p99 pages (the resolver: readers wait for it).
    ``client_errors``: alarm on the 4xx rate too (the resolver, whose 4xx are persistent URLs
    that do not resolve).
    ``queue`` and ``dead_letters``: the acknowledgment queue and its dead-letter queue.
    ``access_logs``: the API's access log, whose 429s are counted.
    """

    name: str  # minting | archive | resolver
    function: lambda_.Function
    api: apigwv2.HttpApi
    latency: Duration | None = None
    latency_pages: bool = False
    client_errors: bool = False
    queue: sqs.IQueue | None = None
    dead_letters: sqs.IQueue | None = None
    access_logs: logs.ILogGroup | None = None

    @property
    def latency_threshold_ms(self) -> float:
        if self.latency is not None:
            return self.latency.to_milliseconds()
        timeout = self.function.timeout or Duration.seconds(3)  # Lambda's default
        return timeout.to_milliseconds() * LATENCY_SHARE_OF_TIMEOUT


def emf_metric(
    service: str, metric: str, statistic: str = "Sum", period: Duration = PERIOD
) -> cloudwatch.Metric:
    """A metric a function publishes through Powertools (namespace ``ibi``, ``service``)."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=metric,
        dimensions_map={"service": service},
        statistic=statistic,
        period=period,
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


def archive_failures(top: int) -> cloudwatch.MathExpression:
    """The failures of the ``top`` Archives that failed most in the period (Metrics Insights
    over the ``Archive`` dimension; the query is made of constants only)."""
    query = (
        f"SELECT SUM({ARCHIVE_FAILURES.metric}) FROM SCHEMA({NAMESPACE}, Archive, service) "  # noqa: S608
        f"WHERE service = 'resolver' GROUP BY Archive ORDER BY SUM() DESC LIMIT {top}"
    )
    return cloudwatch.MathExpression(expression=query, label="", period=PERIOD)


class Operations(Construct):
    """A dashboard of every watched service, its alarms, and the topics they go to."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        watched: list[Watched],
        config: OperationsConfig | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        config = config or OperationsConfig()
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self.severities: dict[str, Severity] = {}
        self.topics: dict[Severity, sns.Topic] = {}
        for severity, address in (
            (Severity.PAGE, config.page_address),
            (Severity.TICKET, config.ticket_address),
        ):
            if address is None:
                continue
            topic = sns.Topic(
                self,
                f"{severity.value.title()}Topic",
                display_name=f"ibi {severity.value} ({stack.stack_name})",
                enforce_ssl=True,
            )
            topic.add_subscription(subscriptions.EmailSubscription(address))
            self.topics[severity] = topic
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

        self._alarm(
            f"{name}-errors",
            errors,
            ERRORS_THRESHOLD,
            f"the {name} Lambda fails (crash or timeout) {ERRORS_THRESHOLD}+ times in 5 minutes",
        )
        self._alarm(
            f"{name}-throttles",
            throttles,
            THROTTLES_THRESHOLD,
            f"the {name} Lambda is throttled {THROTTLES_THRESHOLD}+ times in 5 minutes "
            "(its reserved concurrency, ibi:concurrency, or the account's)",
        )
        self._alarm(
            f"{name}-p99",
            p99,
            service.latency_threshold_ms,
            f"the {name} Lambda's p99 latency reaches {service.latency_threshold_ms:.0f} ms",
            periods=3,
            datapoints=2,
            severity=Severity.PAGE if service.latency_pages else Severity.TICKET,
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
                severity=rate.severity,
            )
        widgets: list[cloudwatch.IWidget] = []
        if service.access_logs is not None:
            throttled = self._throttled(service.name, service.api, service.access_logs)
            widgets.append(
                cloudwatch.GraphWidget(title=f"{name}: requests answered 429", left=[throttled])
            )
        if service.queue is not None:
            widgets += self._watch_queue(name, service.queue, service.dead_letters)
        for signal in SIGNALS.get(name, ()):
            self._alarm(
                f"{name}-{signal.metric}",
                emf_metric(name, signal.metric),
                signal.threshold,
                f"{name}: {signal.meaning} ({signal.metric} >= {signal.threshold} in 5 minutes)",
                severity=signal.severity,
            )
        if name == "resolver":
            self._alarm(
                f"{name}-{ARCHIVE_FAILURES.metric}",
                archive_failures(1),
                ARCHIVE_FAILURES.threshold,
                f"{name}: {ARCHIVE_FAILURES.meaning} ({ARCHIVE_FAILURES.metric} >= "
                f"{ARCHIVE_FAILURES.threshold} in 5 minutes for one Archive; the dashboard "
                "names it)",
            )

        self.dashboard.add_widgets(
            *self._graphs(service, [errors, throttles], p99, [client_errors, server_errors]),
            *widgets,
        )

    def _graphs(
        self,
        service: Watched,
        failures: list[cloudwatch.IMetric],
        p99: cloudwatch.IMetric,
        rates: list[cloudwatch.IMetric],
    ) -> list[cloudwatch.IWidget]:
        """The service's graphs: its Lambda, its API, its own metrics and its traffic."""
        name = service.name
        own = [emf_metric(name, signal.metric) for signal in SIGNALS.get(name, ())]
        traffic = [emf_metric(name, metric) for metric in TRAFFIC.get(name, ())]
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(title=f"{name}: Lambda errors, throttles", left=failures),
            cloudwatch.GraphWidget(
                title=f"{name}: API requests, 4xx, 5xx",
                left=[api_metric(service.api, metric) for metric in ("Count", "4xx", "5xx")],
            ),
            cloudwatch.GraphWidget(title=f"{name}: API error rates (%)", left=rates),
            cloudwatch.GraphWidget(title=f"{name}: Lambda p99 duration (ms)", left=[p99]),
            cloudwatch.GraphWidget(title=f"{name}: alarmed metrics", left=own),
            cloudwatch.GraphWidget(title=f"{name}: traffic", left=traffic),
        ]
        if name == "resolver":
            widgets += [
                cloudwatch.GraphWidget(
                    title="resolver: resolution p99 (ms)",
                    left=[emf_metric(name, "ResolutionMs", "p99")],
                ),
                cloudwatch.GraphWidget(
                    title="resolver: ArchiveFailures by Archive (top 10)",
                    left=[archive_failures(10)],
                ),
            ]
        return widgets

    def _throttled(
        self, name: str, api: apigwv2.HttpApi, access_logs: logs.ILogGroup
    ) -> cloudwatch.Metric:
        """Count the access log's 429s (the API's throttle, before any Lambda) and alarm."""
        logs.MetricFilter(
            self,
            f"Throttled-{name}",
            log_group=access_logs,
            filter_pattern=logs.FilterPattern.string_value("$.status", "=", "429"),
            metric_namespace=NAMESPACE,
            metric_name=THROTTLED_REQUESTS,
            # By API (the access log's apiId, infra/service.py): one metric per API and stage.
            dimensions={"ApiId": "$.apiId"},
            metric_value="1",
        )
        metric = cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=THROTTLED_REQUESTS,
            dimensions_map={"ApiId": api.api_id},
            statistic="Sum",
            period=PERIOD,
        )
        self._alarm(
            f"{name}-throttled-requests",
            metric,
            THROTTLED_THRESHOLD,
            f"the {name} API answered 429 {THROTTLED_THRESHOLD}+ times in 5 minutes: its "
            "throttle (ibi:throttle) is below its traffic, or a client is flooding it",
        )
        return metric

    def _watch_queue(
        self, name: str, queue: sqs.IQueue, dead_letters: sqs.IQueue | None
    ) -> list[cloudwatch.IWidget]:
        """The acknowledgment queue: how old its oldest message is, and new dead letters."""
        age = queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum")
        self._alarm(
            f"{name}-queue-age",
            age,
            QUEUE_AGE_SECONDS,
            f"{name}: an acknowledgment has waited {QUEUE_AGE_SECONDS // 60}+ minutes (the drain "
            "is failing or throttled); older than its urlkey, it counts nothing",
        )
        metrics: list[cloudwatch.IMetric] = [age]
        if dead_letters is not None:
            visible = dead_letters.metric_approximate_number_of_messages_visible(
                period=PERIOD, statistic="Maximum"
            )
            # New dead letters, not the ones already there: the queue keeps them 14 days, and
            # an alarm red for 14 days pages for nothing.
            arrived = cloudwatch.MathExpression(
                expression="MAX([DIFF(FILL(visible, 0)), 0])",
                using_metrics={"visible": visible},
                label="dead letters arrived",
                period=PERIOD,
            )
            self._alarm(
                f"{name}-dead-letters",
                arrived,
                1,
                f"{name}: acknowledgments failed every delivery (new in the dead-letter queue)",
            )
            metrics += [visible]
        return [cloudwatch.GraphWidget(title=f"{name}: acknowledgment queue", left=metrics)]

    def watch_canary(self, function: lambda_.IFunction, every: Duration) -> None:
        """Page when the canary fails twice running, or stops reporting for two runs."""
        resolved = cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=CANARY_METRIC,
            dimensions_map={"service": "canary"},
            statistic="Minimum",
            period=every,
        )
        self._alarm(
            "canary",
            resolved,
            1,
            "the canary could not resolve its IBI to its file twice running, or did not run: "
            "readers are failing, or nothing reports at all",
            periods=2,
            datapoints=2,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
            severity=Severity.PAGE,
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="canary: resolved (1) or not (0); duration (ms)",
                left=[resolved],
                right=[
                    cloudwatch.Metric(
                        namespace=NAMESPACE,
                        metric_name="CanaryMs",
                        dimensions_map={"service": "canary"},
                        statistic="Maximum",
                        period=every,
                    ),
                    function.metric_errors(period=every, statistic="Sum"),
                ],
            )
        )

    def watch_links(self, every: Duration) -> None:
        """A ticket when the Archive's scheduled link check finds a broken external URL. One
        datapoint a run: the alarm keeps its state between runs (missing data ignored), so it
        says what the last run found; ``ibi archive check-links`` names the items."""
        period = every if every.to_seconds() <= LONGEST_PERIOD.to_seconds() else LONGEST_PERIOD
        broken = emf_metric("archive", BROKEN_LINKS.metric, "Maximum", period)
        self._alarm(
            f"archive-{BROKEN_LINKS.metric}",
            broken,
            BROKEN_LINKS.threshold,
            f"archive: {BROKEN_LINKS.meaning} ({BROKEN_LINKS.metric} >= "
            f"{BROKEN_LINKS.threshold} in a run; ibi archive check-links names them)",
            missing=cloudwatch.TreatMissingData.IGNORE,
            severity=BROKEN_LINKS.severity,
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(title="archive: broken external URLs per run", left=[broken])
        )

    def _alarm(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        meaning: str,
        *,
        periods: int = 1,
        datapoints: int = 1,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
        severity: Severity = Severity.TICKET,
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            f"Alarm-{name}",
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=datapoints,
            comparison_operator=comparison,
            treat_missing_data=missing,
            alarm_description=f"ibi {severity.value}: {meaning}",
        )
        topic = self.topics.get(severity)
        if topic is not None:
            action = cloudwatch_actions.SnsAction(topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        self.alarms[name] = alarm
        self.severities[name] = severity
