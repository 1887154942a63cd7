"""Issue 26: cdk-nag's Serverless pack on every configuration, each finding fixed or accepted.

AwsSolutions runs in every synth (infra/stacks.py) and must be clean. The Serverless pack is
run here: what it still reports is one of the rules below, each accepted for the reason given,
on the resources named; anything else fails (so a new finding is fixed or argued here).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App
from cdk_nag import ServerlessChecks

from tests.infra.test_checks import APPS

pytestmark = pytest.mark.infra

ACCEPTED = {
    "Serverless-LambdaDLQ": (
        "A Lambda dead-letter queue holds failed asynchronous invocations only. The API "
        "functions and the origin check are invoked synchronously by API Gateway (the caller "
        "gets the error); the drain's failures stay in its SQS queue and go to that queue's "
        "dead-letter queue; the canary's failure is its metric, which pages; the link check's "
        "failed run is a missed run: the next one starts from the items checked longest ago."
    ),
    "Serverless-LambdaEventSourceMappingDestination": (
        "On-failure destinations exist for stream and Kafka sources, not for SQS: the "
        "acknowledgment queue's redrive policy moves a message that failed 3 receives to its "
        "dead-letter queue, which raises a ticket."
    ),
    "Serverless-LambdaLatestVersion": (
        "Python 3.13 is the runtime the wheels (cp313, infra/bundling.py) and the tests target; "
        "a newer one is adopted by changing both together (AwsSolutions-L1, same reason)."
    ),
    "Serverless-LambdaTracing": (
        "X-Ray is a choice (ibi:tracing), off by default: at low traffic it traces every "
        "request, about 15 USD per million resolutions (docs/scale.md), more than the "
        "resolution itself. The edge configuration turns it on and is not reported."
    ),
    "Serverless-SQSRedrivePolicy": (
        "Reported on the acknowledgment dead-letter queue itself: a dead-letter queue of a "
        "dead-letter queue would only move the same messages once more. It keeps them 14 days "
        "for an operator to redrive or purge (docs/deploy.md)."
    ),
    "Serverless-SNSRedrivePolicy": (
        "The alarm topics deliver e-mail; SNS retries a delivery itself, and a mail lost after "
        "that loses no alarm: the state stays in CloudWatch, on the dashboard and in the "
        "alarm's history, and the canary pages again while it lasts."
    ),
    "Serverless-EventBusDLQ": (
        "The canary's schedule invokes it with no retry on purpose: a run that could not be "
        "delivered is a missing datum, which the canary's alarm treats as breaching and pages. "
        "The link check's schedule likewise: a run not delivered is checked by the next one."
    ),
}
# Where each accepted rule may be reported: a part of the construct's path.
WHERE = {
    "Serverless-LambdaDLQ": {"Function", "DrainFunction", "LinkCheckFunction"},
    "Serverless-LambdaEventSourceMappingDestination": {"DrainFunction"},
    "Serverless-LambdaLatestVersion": {"Function", "DrainFunction", "LinkCheckFunction"},
    "Serverless-LambdaTracing": {"Function", "DrainFunction", "LinkCheckFunction"},
    "Serverless-SQSRedrivePolicy": {"AcknowledgmentDeadLetters"},
    "Serverless-SNSRedrivePolicy": {"PageTopic", "TicketTopic"},
    "Serverless-EventBusDLQ": {"Schedule", "LinkCheckSchedule"},
}


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_serverless_pack_reports_only_accepted_findings(
    request: pytest.FixtureRequest, name: str
) -> None:
    app: App
    app, _ = request.getfixturevalue(APPS[name])
    report = ServerlessChecks().validate_scope(app)
    findings = {
        (violation.rule_name, resource.construct_path)
        for violation in report.violations
        for resource in violation.violating_resources
    }
    assert findings, "the pack ran"
    for rule, construct in findings:
        assert rule in ACCEPTED, f"{rule} on {construct}: fix it, or accept it with a reason"
        assert set(construct.split("/")) & WHERE[rule], f"{rule} on {construct}"
    if name == "edge":  # tracing on: nothing to accept there
        assert "Serverless-LambdaTracing" not in {rule for rule, _ in findings}
    assert "Serverless-APIGWDefaultThrottling" not in {rule for rule, _ in findings}


def test_every_accepted_finding_has_a_reason() -> None:
    for rule, reason in ACCEPTED.items():
        assert len(reason.split()) >= 20, rule
    assert set(WHERE) == set(ACCEPTED)
    assert Path(__file__).read_text().count("Serverless-") >= 2 * len(ACCEPTED)
