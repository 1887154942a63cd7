"""Issue 28 point 2: the Archive's scheduled link check — its rule, its role, its alarm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.archive import LINK_CHECK_HANDLER
from infra.config import ArchiveConfig, ConfigError
from infra.operations import Severity
from infra.stacks import ARCHIVE_STACK_ID, ArchiveStack
from tests.infra.conftest import _synth, stack_of
from tests.infra.support import Synthesized, arn_of, granted

pytestmark = pytest.mark.infra


def _link_check(archive: Synthesized[ArchiveStack]) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (logical_id, resource["Properties"])
        for logical_id, resource in archive.resources("AWS::Lambda::Function").items()
        if resource["Properties"]["Handler"] == LINK_CHECK_HANDLER
    ]
    return found


def test_the_link_check_runs_daily_by_default(
    archive_synthesized: Synthesized[ArchiveStack],
) -> None:
    function_id, properties = _link_check(archive_synthesized)
    (rule,) = [
        r["Properties"]
        for r in archive_synthesized.resources("AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]} for t in r["Properties"]["Targets"])
    ]
    assert rule["ScheduleExpression"] == "rate(1 day)"
    assert rule["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    variables = properties["Environment"]["Variables"]
    table = archive_synthesized.logical_id(archive_synthesized.stack.archive.items_table)
    assert variables["IBI_ARCHIVE_TABLE"] == {"Ref": table}
    assert "IBI_ARCHIVE_BASE_URL" in variables  # what is outside the Archive
    assert properties["Timeout"] == 300


def test_the_link_check_s_role_scans_the_items_and_writes_their_link_checks_only(
    archive_synthesized: Synthesized[ArchiveStack],
) -> None:
    archive = archive_synthesized.stack.archive
    assert archive.link_check is not None
    role = archive_synthesized.logical_id(archive.link_check_role)
    grants = granted(archive_synthesized.template, role)
    table = archive_synthesized.logical_id(archive.items_table)
    logs = archive_synthesized.logical_id(archive.link_check_logs)
    assert grants[arn_of(table)] == {"dynamodb:Scan", "dynamodb:GetItem", "dynamodb:UpdateItem"}
    assert set(grants) == {arn_of(table), arn_of(logs)}  # no bucket, no secret, no other table
    assert not any(a.startswith(("dynamodb:Put", "dynamodb:Delete")) for a in grants[arn_of(table)])


def test_broken_links_open_a_ticket_on_the_last_run_s_count(
    archive_synthesized: Synthesized[ArchiveStack],
) -> None:
    operations = archive_synthesized.stack.operations
    alarm = operations.alarms["archive-BrokenLinks"]
    assert operations.severities["archive-BrokenLinks"] is Severity.TICKET
    properties = archive_synthesized.resources("AWS::CloudWatch::Alarm")[
        archive_synthesized.logical_id(alarm)
    ]["Properties"]
    assert (properties["Namespace"], properties["MetricName"]) == ("ibi", "BrokenLinks")
    assert properties["Dimensions"] == [{"Name": "service", "Value": "archive"}]
    assert properties["Threshold"] == 1 and properties["Period"] == 86400
    assert properties["TreatMissingData"] == "ignore"  # a run a day: the state holds between


@pytest.fixture(scope="module")
def every_six_hours(tmp_path_factory: pytest.TempPathFactory) -> tuple[App, Path]:
    return _synth(tmp_path_factory, {"ibi:archive": {"link_check": {"every_hours": 6}}})


@pytest.fixture(scope="module")
def never(tmp_path_factory: pytest.TempPathFactory) -> tuple[App, Path]:
    return _synth(tmp_path_factory, {"ibi:archive": {"link_check": {"every_hours": 0}}})


def test_the_schedule_is_configurable(every_six_hours: tuple[App, Path]) -> None:
    archive = stack_of(every_six_hours[0], ARCHIVE_STACK_ID, ArchiveStack)
    schedules = {
        r["Properties"]["ScheduleExpression"]
        for r in archive.resources("AWS::Events::Rule").values()
    }
    assert "rate(6 hours)" in schedules
    alarm = archive.stack.operations.alarms["archive-BrokenLinks"]
    period = archive.resources("AWS::CloudWatch::Alarm")[archive.logical_id(alarm)]
    assert period["Properties"]["Period"] == 6 * 3600


def test_no_schedule_no_link_check_function_no_alarm(never: tuple[App, Path]) -> None:
    archive = stack_of(never[0], ARCHIVE_STACK_ID, ArchiveStack)
    template: Template = archive.template
    handlers = {
        r["Properties"]["Handler"]
        for r in template.find_resources("AWS::Lambda::Function").values()
    }
    assert LINK_CHECK_HANDLER not in handlers
    assert "archive-BrokenLinks" not in archive.stack.operations.alarms
    rules = json.dumps(template.find_resources("AWS::Events::Rule"))
    assert "LinkCheck" not in rules


@pytest.mark.parametrize("value", [-1, 24 * 31 + 1, "daily", True])
def test_a_schedule_outside_its_range_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"ibi:archive\.link_check\.every_hours"):
        ArchiveConfig.from_context({"link_check": {"every_hours": value}})
