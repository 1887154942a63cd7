"""The dashboards and alarms of each stack, and where the alarms go."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App

from infra.config import ConfigError, OperationsConfig
from infra.operations import SIGNALS, Severity
from infra.stacks import ARCHIVE_STACK_ID, RESOLVER_STACK_ID, ArchiveStack, ResolverStack
from tests.infra.conftest import stack_of
from tests.infra.support import Synthesized
from tests.unit.test_docs_truth import emitted_metrics

pytestmark = pytest.mark.infra

# The metrics the handlers publish (functions/*/handler.py, metrics.add_metric), by service.
PUBLISHED = {
    "minting": {"IBIsMinted", "MintReplayed", "MintTooEarly", "MintUnavailable", "MintConflicts"},
    "archive": {"IntegrityProblems", "ItemsCreated", "UrlRequestsHeld", "Acknowledgments"},
    "resolver": {
        "ArchiveFailures",
        "Resolution409",
        "Resolution504",
        "Resolution302",
        "RegistrationGuessCap",
        "TwoOriginals",
    },
}


def _alarm(synthesized: Synthesized[Any], name: str) -> dict[str, Any]:
    alarm = synthesized.stack.operations.alarms[name]
    properties: dict[str, Any] = synthesized.resources("AWS::CloudWatch::Alarm")[
        synthesized.logical_id(alarm)
    ]["Properties"]
    return properties


def _watched(synthesized: Synthesized[Any]) -> list[str]:
    return sorted({name.split("-", 1)[0] for name in synthesized.stack.operations.alarms})


@pytest.fixture(scope="module", params=["archive", "resolver", "minting"])
def stack(
    request: pytest.FixtureRequest,
    archive_synthesized: Synthesized[ArchiveStack],
    resolver_synthesized: Synthesized[ResolverStack],
    synthesized: Synthesized[Any],
) -> Synthesized[Any]:
    return {
        "archive": archive_synthesized,
        "resolver": resolver_synthesized,
        "minting": synthesized,
    }[request.param]


def test_every_stack_has_a_dashboard_and_alarms(stack: Synthesized[Any]) -> None:
    assert len(stack.resources("AWS::CloudWatch::Dashboard")) == 1
    alarms = stack.resources("AWS::CloudWatch::Alarm").values()
    assert alarms
    for alarm in alarms:
        properties = alarm["Properties"]
        # a link check's count holds between its runs (one datapoint a day); else a quiet
        # service is not failing
        links = properties.get("MetricName") == "BrokenLinks"
        expected = "ignore" if links else "notBreaching"
        assert properties.get("TreatMissingData") == expected
        assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert properties["AlarmDescription"].startswith(("ibi page: ", "ibi ticket: "))
        assert "AlarmActions" not in properties  # no topic without an address


def test_each_function_is_watched(stack: Synthesized[Any]) -> None:
    for service in _watched(stack):
        errors = _alarm(stack, f"{service}-errors")
        assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
        # a crash or two is a ticket's worth when it persists, never a page (issue 26 item 5)
        assert errors["Statistic"] == "Sum" and errors["Threshold"] == 5
        throttles = _alarm(stack, f"{service}-throttles")
        assert throttles["MetricName"] == "Throttles" and throttles["Threshold"] == 10
        p99 = _alarm(stack, f"{service}-p99")
        assert p99["MetricName"] == "Duration" and p99["ExtendedStatistic"] == "p99"
        assert (p99["EvaluationPeriods"], p99["DatapointsToAlarm"]) == (3, 2)


def test_p99_thresholds(
    archive_synthesized: Synthesized[ArchiveStack],
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    # 80% of each Lambda's timeout: minting 5 s wait + 10 s, the Archive 29 s ...
    assert _alarm(archive_synthesized, "minting-p99")["Threshold"] == 12_000
    assert _alarm(archive_synthesized, "archive-p99")["Threshold"] == 23_200
    # ... but the resolver's fan-out stops at 80% of its 10 s deadline.
    assert _alarm(resolver_synthesized, "resolver-p99")["Threshold"] == 8_000


def _rate_alarm(stack: Synthesized[Any], name: str, api: Any, metric: str) -> dict[str, Any]:
    alarm = _alarm(stack, name)
    by_id = {m["Id"]: m for m in alarm["Metrics"]}
    (expression,) = [m for m in alarm["Metrics"] if "Expression" in m]
    assert expression["ReturnData"] is True
    by_id["errors"] = by_id.pop(f"errors{metric}")
    for metric_id in ("errors", "requests"):
        stat = by_id[metric_id]["MetricStat"]
        assert stat["Stat"] == "Sum" and stat["Period"] == 300
        assert stat["Metric"]["Namespace"] == "AWS/ApiGateway"
        assert stat["Metric"]["Dimensions"] == [
            {"Name": "ApiId", "Value": {"Ref": stack.logical_id(api)}}
        ]
    assert by_id["requests"]["MetricStat"]["Metric"]["MetricName"] == "Count"
    return {**alarm, "expression": expression["Expression"], "by_id": by_id}


def test_5xx_rates_of_every_api(
    archive_synthesized: Synthesized[ArchiveStack],
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    for stack, service, api in (
        (archive_synthesized, "minting", archive_synthesized.stack.minting.api),
        (archive_synthesized, "archive", archive_synthesized.stack.archive.api),
        (resolver_synthesized, "resolver", resolver_synthesized.stack.resolver.api),
    ):
        alarm = _rate_alarm(stack, f"{service}-5xx-rate", api, "5xx")
        assert alarm["by_id"]["errors"]["MetricStat"]["Metric"]["MetricName"] == "5xx"
        assert alarm["expression"] == ("IF(requests >= 10, 100 * FILL(errors5xx, 0) / requests, 0)")
        assert alarm["Threshold"] == 5
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (2, 2)


def test_the_resolvers_4xx_rate(resolver_synthesized: Synthesized[ResolverStack]) -> None:
    alarm = _rate_alarm(
        resolver_synthesized, "resolver-4xx-rate", resolver_synthesized.stack.resolver.api, "4xx"
    )
    assert alarm["by_id"]["errors"]["MetricStat"]["Metric"]["MetricName"] == "4xx"
    assert alarm["Threshold"] == 50 and alarm["EvaluationPeriods"] == 3


def test_no_4xx_alarm_for_the_iam_apis(archive_synthesized: Synthesized[ArchiveStack]) -> None:
    assert not [name for name in archive_synthesized.stack.operations.alarms if "4xx" in name]


@pytest.mark.parametrize(
    ("service", "metric", "threshold"),
    [
        ("minting", "MintUnavailable", 5),
        ("minting", "MintTooEarly", 20),
        ("minting", "MintConflicts", 50),
        ("archive", "IntegrityProblems", 1),
        ("resolver", "Resolution504", 5),
        ("resolver", "Resolution409", 1),
        ("resolver", "TwoOriginals", 1),
        ("resolver", "RegistrationGuessCap", 1),
    ],
)
def test_the_functions_own_metrics(
    archive_synthesized: Synthesized[ArchiveStack],
    resolver_synthesized: Synthesized[ResolverStack],
    service: str,
    metric: str,
    threshold: int,
) -> None:
    stack = resolver_synthesized if service == "resolver" else archive_synthesized
    alarm = _alarm(stack, f"{service}-{metric}")
    assert alarm["Namespace"] == "ibi" and alarm["MetricName"] == metric
    assert alarm["Dimensions"] == [{"Name": "service", "Value": service}]
    assert alarm["Statistic"] == "Sum" and alarm["Period"] == 300
    assert alarm["Threshold"] == threshold


def test_alarmed_metrics_are_ones_the_handlers_publish() -> None:
    """Each alarmed name is written out in a call to the metrics API of the service's code (an
    f-string's name proves nothing); tests/unit/test_docs_truth.py checks the very module."""
    root = Path(__file__).resolve().parents[2] / "functions"
    for service, signals in SIGNALS.items():
        published = set().union(
            *(emitted_metrics(path.read_text()) for path in (root / service).glob("*.py"))
        )
        for signal in signals:
            assert signal.metric in published, f"{service} never publishes {signal.metric}"
            assert signal.metric in PUBLISHED[service]


def test_alarms_go_to_the_topic_of_their_severity(everything_app: tuple[App, Path]) -> None:
    """``alarm_email`` alone: both topics, one address; each alarm to its own topic."""
    for stack_id, type_ in ((ARCHIVE_STACK_ID, ArchiveStack), (RESOLVER_STACK_ID, ResolverStack)):
        stack = stack_of(everything_app[0], stack_id, type_)
        operations = stack.stack.operations
        topics = {
            severity: {"Ref": stack.logical_id(topic)}
            for severity, topic in operations.topics.items()
        }
        assert set(topics) == {Severity.PAGE, Severity.TICKET}
        subscriptions = stack.resources("AWS::SNS::Subscription").values()
        assert sorted(
            (s["Properties"]["Endpoint"], json.dumps(s["Properties"]["TopicArn"]))
            for s in subscriptions
        ) == sorted(("ibi-alarms@example.org", json.dumps(ref)) for ref in topics.values())
        for name, alarm in operations.alarms.items():
            properties = _alarm(stack, name)
            topic = topics[operations.severities[name]]
            assert properties["AlarmActions"] == [topic]
            assert properties["OKActions"] == [topic]
        for policy in stack.resources("AWS::SNS::TopicPolicy").values():
            (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
            assert statement["Effect"] == "Deny"
            assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"alarm_email": "not an address"}, "alarm_email: 'not an address' is not an address"),
        ({"alarm_email": "a@b"}, "is not an address"),
        ({"alarm_email": 3}, "is not an address"),
        ({"email": "a@example.org"}, "unknown fields ['email']"),
        ("[]", "expected an object"),
    ],
)
def test_operations_config_errors(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^ibi:operations") as error:
        OperationsConfig.from_context(raw)
    assert message in str(error.value)


def test_operations_config_forms() -> None:
    assert OperationsConfig.from_context(None).page_address is None
    split = OperationsConfig.from_context(
        {"alarm_email": "ops@example.org", "page_email": "on-call@example.org"}
    )
    assert split.page_address == "on-call@example.org"
    assert split.ticket_address == "ops@example.org"
    assert OperationsConfig.from_context(None).alarm_email is None
    assert OperationsConfig.from_context({"alarm_email": None}).alarm_email is None
    config = OperationsConfig.from_context('{"alarm_email": "ops@example.org"}')
    assert config.alarm_email == "ops@example.org"
