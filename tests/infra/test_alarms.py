"""Issue 26 item 5: alarms that page for the right things, and the canary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from infra.operations import QUEUE_AGE_SECONDS, Severity
from infra.stacks import ARCHIVE_STACK_ID, RESOLVER_STACK_ID, ArchiveStack, ResolverStack
from tests.infra.conftest import CANARY_IBI, stack_of
from tests.infra.support import Synthesized, granted

pytestmark = pytest.mark.infra

# What pages: readers failing now. Everything else is a ticket.
PAGES = {
    "minting-5xx-rate",
    "archive-5xx-rate",
    "resolver-5xx-rate",
    "resolver-p99",  # every resolution waits for the slow Archives
    "canary",
}


@pytest.fixture(scope="module")
def resolver(edge_app: tuple[App, Path]) -> Synthesized[ResolverStack]:
    return stack_of(edge_app[0], RESOLVER_STACK_ID, ResolverStack)


@pytest.fixture(scope="module")
def archive(edge_app: tuple[App, Path]) -> Synthesized[ArchiveStack]:
    return stack_of(edge_app[0], ARCHIVE_STACK_ID, ArchiveStack)


def _alarm(synthesized: Synthesized[Any], name: str) -> dict[str, Any]:
    alarm = synthesized.stack.operations.alarms[name]
    properties: dict[str, Any] = synthesized.resources("AWS::CloudWatch::Alarm")[
        synthesized.logical_id(alarm)
    ]["Properties"]
    return properties


def test_page_and_ticket_go_to_two_topics(
    resolver: Synthesized[ResolverStack], archive: Synthesized[ArchiveStack]
) -> None:
    for stack in (resolver, archive):
        operations = stack.stack.operations
        page = {"Ref": stack.logical_id(operations.topics[Severity.PAGE])}
        ticket = {"Ref": stack.logical_id(operations.topics[Severity.TICKET])}
        endpoints = {
            json.dumps(s["Properties"]["TopicArn"]): s["Properties"]["Endpoint"]
            for s in stack.resources("AWS::SNS::Subscription").values()
        }
        assert endpoints == {
            json.dumps(page): "on-call@example.org",
            json.dumps(ticket): "team@example.org",
        }
        for name in operations.alarms:
            properties = _alarm(stack, name)
            expected = page if name in PAGES else ticket
            assert properties["AlarmActions"] == [expected], name
            assert properties["AlarmDescription"].startswith(
                "ibi page: " if name in PAGES else "ibi ticket: "
            )
    pages = {
        name
        for stack in (resolver, archive)
        for name, severity in stack.stack.operations.severities.items()
        if severity is Severity.PAGE
    }
    assert pages == PAGES


def test_the_acknowledgment_queue_alarms_on_its_oldest_message(
    resolver: Synthesized[ResolverStack],
) -> None:
    age = _alarm(resolver, "resolver-queue-age")
    queue = resolver.logical_id(resolver.stack.resolver.acknowledgment_queue)
    assert age["Namespace"] == "AWS/SQS"
    assert age["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert age["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}
    ]
    assert age["Statistic"] == "Maximum"
    assert age["Threshold"] == QUEUE_AGE_SECONDS == 600  # an urlkey's life


def test_each_api_counts_the_429s_of_its_access_log(
    resolver: Synthesized[ResolverStack], archive: Synthesized[ArchiveStack]
) -> None:
    for stack, service, construct in (
        (resolver, "resolver", resolver.stack.resolver),
        (archive, "archive", archive.stack.archive),
        (archive, "minting", archive.stack.minting),
    ):
        log_group = {"Ref": stack.logical_id(construct.access_logs)}
        (metric_filter,) = [
            f["Properties"]
            for f in stack.resources("AWS::Logs::MetricFilter").values()
            if f["Properties"]["LogGroupName"] == log_group
        ]
        assert metric_filter["FilterPattern"] == '{ $.status = "429" }'
        (transformation,) = metric_filter["MetricTransformations"]
        assert transformation["MetricName"] == "Throttled429"
        assert transformation["MetricNamespace"] == "ibi"
        assert transformation["Dimensions"] == [{"Key": "ApiId", "Value": "$.apiId"}]
        alarm = _alarm(stack, f"{service}-throttled-requests")
        assert alarm["MetricName"] == "Throttled429" and alarm["Namespace"] == "ibi"
        assert alarm["Dimensions"] == [
            {"Name": "ApiId", "Value": {"Ref": stack.logical_id(construct.api)}}
        ]
        # the access log carries the API's id the filter reads
        stage = next(
            s["Properties"]
            for s in stack.resources("AWS::ApiGatewayV2::Stage").values()
            if s["Properties"]["ApiId"] == {"Ref": stack.logical_id(construct.api)}
        )
        assert json.loads(stage["AccessLogSettings"]["Format"])["apiId"] == "$context.apiId"


def test_archive_failures_alarm_for_the_worst_archive(
    resolver: Synthesized[ResolverStack],
) -> None:
    alarm = _alarm(resolver, "resolver-ArchiveFailures")
    (query,) = alarm["Metrics"]
    assert query["Expression"] == (
        "SELECT SUM(ArchiveFailures) FROM SCHEMA(ibi, Archive, service) "
        "WHERE service = 'resolver' GROUP BY Archive ORDER BY SUM() DESC LIMIT 1"
    )
    assert query["Period"] == 300 and alarm["Threshold"] == 50


def test_the_canary_resolves_on_a_schedule_and_pages_when_it_fails_or_stops(
    resolver: Synthesized[ResolverStack],
) -> None:
    canary = resolver.stack.canary
    assert canary is not None
    function = resolver.resources("AWS::Lambda::Function")[resolver.logical_id(canary.function)]
    variables = function["Properties"]["Environment"]["Variables"]
    assert function["Properties"]["Handler"] == "functions.canary.handler.lambda_handler"
    assert variables["IBI_CANARY_RESOLVER_URL"] == "https://urlib.example.org/"  # as readers
    assert variables["IBI_CANARY_IBI"] == CANARY_IBI
    rule = resolver.resources("AWS::Events::Rule")[resolver.logical_id(canary.schedule)]
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    (target,) = rule["Properties"]["Targets"]
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 0}
    alarm = _alarm(resolver, "canary")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("ibi", "CanaryResolved")
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "canary"}]
    assert alarm["Statistic"] == "Minimum" and alarm["Period"] == 300
    assert alarm["ComparisonOperator"] == "LessThanThreshold" and alarm["Threshold"] == 1
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (2, 2)
    assert alarm["TreatMissingData"] == "breaching"  # silence is an outage too
    # it holds no credential: its log group (and X-Ray, on here) and nothing else
    grants = granted(resolver.template, resolver.logical_id(canary.role))
    assert set().union(*grants.values()) == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }


def test_reserved_concurrency_is_each_functions_own(
    resolver: Synthesized[ResolverStack], archive: Synthesized[ArchiveStack]
) -> None:
    """Issue 26 item 3: ibi:concurrency reserves (and caps) each API function."""
    for stack, function, reserved in (
        (archive, archive.stack.minting.function, 5),
        (archive, archive.stack.archive.function, 20),
        (resolver, resolver.stack.resolver.function, 50),
    ):
        properties = stack.resources("AWS::Lambda::Function")[stack.logical_id(function)]
        assert properties["Properties"]["ReservedConcurrentExecutions"] == reserved


def test_without_ibi_concurrency_nothing_is_reserved(
    archive_synthesized: Synthesized[ArchiveStack],
) -> None:
    """A new account (concurrency limit 10) can reserve nothing: off unless asked."""
    for function in archive_synthesized.resources("AWS::Lambda::Function").values():
        assert "ReservedConcurrentExecutions" not in function["Properties"]


def test_tracing_is_a_choice(
    resolver: Synthesized[ResolverStack], resolver_synthesized: Synthesized[ResolverStack]
) -> None:
    """Issue 26 item 7: X-Ray off by default (no segment, no grant); ``ibi:tracing`` on."""
    for function in resolver_synthesized.resources("AWS::Lambda::Function").values():
        assert "TracingConfig" not in function["Properties"]
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["POWERTOOLS_TRACE_DISABLED"] == "true"
    text = json.dumps(resolver_synthesized.template.to_json())
    assert "xray:" not in text
    for function in resolver.resources("AWS::Lambda::Function").values():
        assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}
        assert "POWERTOOLS_TRACE_DISABLED" not in function["Properties"]["Environment"]["Variables"]
