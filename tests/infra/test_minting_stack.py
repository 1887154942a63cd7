"""The minting stack's template: tables, function, permissions, API, logs, outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from functions.minting.settings import Settings
from tests.infra.support import Synthesized

pytestmark = pytest.mark.infra

TABLE_ACTIONS = {
    "state": {"dynamodb:GetItem", "dynamodb:UpdateItem"},
    "record": {"dynamodb:PutItem", "dynamodb:Query"},
    "idempotency": {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    },
}
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
LOG_ACTIONS = {"logs:CreateLogStream", "logs:PutLogEvents"}


def _resources(synthesized: Synthesized, type_: str) -> dict[str, Any]:
    found: dict[str, Any] = synthesized.template.find_resources(type_)
    return found


def _only(synthesized: Synthesized, type_: str) -> dict[str, Any]:
    (resource,) = _resources(synthesized, type_).values()
    return dict(resource["Properties"])


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def test_tables_are_on_demand_encrypted_recoverable_and_retained(
    synthesized: Synthesized,
) -> None:
    tables = _resources(synthesized, "AWS::DynamoDB::Table")
    assert len(tables) == 3
    for table in tables.values():
        assert table["DeletionPolicy"] == "Retain"
        assert table["UpdateReplacePolicy"] == "Retain"
        properties = table["Properties"]
        assert properties["BillingMode"] == "PAY_PER_REQUEST"
        assert properties["PointInTimeRecoverySpecification"] == {
            "PointInTimeRecoveryEnabled": True
        }
        assert properties["SSESpecification"] == {"SSEEnabled": True}


@pytest.mark.parametrize(
    ("table", "key_schema", "attributes"),
    [
        ("state_table", [("subsystem", "HASH")], [("subsystem", "S")]),
        (
            "record_table",
            [("subsystem", "HASH"), ("first_date", "RANGE")],
            [("subsystem", "S"), ("first_date", "N")],
        ),
        ("idempotency_table", [("key", "HASH")], [("key", "S")]),
    ],
)
def test_table_keys(
    synthesized: Synthesized,
    table: str,
    key_schema: list[tuple[str, str]],
    attributes: list[tuple[str, str]],
) -> None:
    logical_id = synthesized.logical_id(getattr(synthesized.stack.minting, table))
    properties = _resources(synthesized, "AWS::DynamoDB::Table")[logical_id]["Properties"]
    assert properties["KeySchema"] == [
        {"AttributeName": name, "KeyType": kind} for name, kind in key_schema
    ]
    assert properties["AttributeDefinitions"] == [
        {"AttributeName": name, "AttributeType": kind} for name, kind in attributes
    ]


def test_only_the_idempotency_table_expires_items(synthesized: Synthesized) -> None:
    minting = synthesized.stack.minting
    tables = _resources(synthesized, "AWS::DynamoDB::Table")
    idempotency = tables[synthesized.logical_id(minting.idempotency_table)]["Properties"]
    assert idempotency["TimeToLiveSpecification"] == {
        "AttributeName": "expires_at",
        "Enabled": True,
    }
    for table in (minting.state_table, minting.record_table):
        assert "TimeToLiveSpecification" not in tables[synthesized.logical_id(table)]["Properties"]


def test_function_runtime_and_tracing(synthesized: Synthesized) -> None:
    function = _only(synthesized, "AWS::Lambda::Function")
    assert function["Runtime"] == "python3.13"
    assert function["Architectures"] == ["arm64"]
    assert function["Handler"] == "functions.minting.handler.lambda_handler"
    assert "TracingConfig" not in function  # X-Ray is a choice, off by default (ibi:tracing)
    assert function["Timeout"] == 15  # max_wait_seconds (5) + margin, below the API's 29 s


def test_function_environment(synthesized: Synthesized) -> None:
    minting = synthesized.stack.minting
    variables = _only(synthesized, "AWS::Lambda::Function")["Environment"]["Variables"]
    assert variables["IBI_STATE_TABLE"] == {"Ref": synthesized.logical_id(minting.state_table)}
    assert variables["IBI_RECORD_TABLE"] == {"Ref": synthesized.logical_id(minting.record_table)}
    assert variables["IBI_IDEMPOTENCY_TABLE"] == {
        "Ref": synthesized.logical_id(minting.idempotency_table)
    }
    assert json.loads(variables["IBI_SUBSYSTEMS"]) == [
        {
            "name": "default",
            "host": "ibi.example.org",
            "ip": "192.0.2.10",
            "rep_port": 80,
            "ibip_port": 800,
            "granularity": "0.001",
        }
    ]
    assert variables["IBI_DEFAULT_SUBSYSTEM"] == "default"
    assert variables["IBI_MAX_WAIT_SECONDS"] == "5"
    assert variables["POWERTOOLS_SERVICE_NAME"] == "minting"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "ibi"
    assert variables["LOG_LEVEL"] == "INFO"


def test_the_function_accepts_its_environment(synthesized: Synthesized) -> None:
    """The deployed variables pass the Lambda's own settings validation."""
    variables = _only(synthesized, "AWS::Lambda::Function")["Environment"]["Variables"]
    resolved = {
        name: value if isinstance(value, str) else f"table-{name.lower()}"
        for name, value in variables.items()
    }
    settings = Settings.from_environment(resolved)
    assert list(settings.subsystems) == ["default"]
    assert settings.default_subsystem == "default"


def test_function_role_grants_exactly_what_the_function_does(synthesized: Synthesized) -> None:
    minting = synthesized.stack.minting
    role_id = synthesized.logical_id(minting.role)
    role = _resources(synthesized, "AWS::IAM::Role")[role_id]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert "Policies" not in role

    granted: dict[str, set[str]] = {}
    for policy in _resources(synthesized, "AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            resource = json.dumps(statement["Resource"], sort_keys=True)
            granted.setdefault(resource, set()).update(_actions(statement))

    def arn(construct: Any) -> str:
        return json.dumps({"Fn::GetAtt": [synthesized.logical_id(construct), "Arn"]})

    assert granted == {
        arn(minting.state_table): TABLE_ACTIONS["state"],
        arn(minting.record_table): TABLE_ACTIONS["record"],
        arn(minting.idempotency_table): TABLE_ACTIONS["idempotency"],
        arn(minting.log_group): LOG_ACTIONS,
    }


def test_no_policy_uses_wildcard_or_bulk_dynamodb_actions(synthesized: Synthesized) -> None:
    forbidden = {"dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:BatchGetItem"}
    for policy in _resources(synthesized, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = _actions(statement)
            assert not any(action.endswith("*") for action in actions), statement
            assert not actions & forbidden, statement


def test_every_route_but_the_openapi_document_requires_iam_authorization(
    synthesized: Synthesized,
) -> None:
    routes = _resources(synthesized, "AWS::ApiGatewayV2::Route").values()
    authorization = {
        route["Properties"]["RouteKey"]: route["Properties"]["AuthorizationType"]
        for route in routes
    }
    assert authorization == {
        "POST /mint": "AWS_IAM",
        "GET /mints": "AWS_IAM",
        "GET /mints/verify": "AWS_IAM",
        "GET /subsystems": "AWS_IAM",
        "GET /openapi.json": "NONE",
    }


def test_routes_reach_the_function_with_payload_v2(synthesized: Synthesized) -> None:
    function_id = synthesized.logical_id(synthesized.stack.minting.function)
    for integration in _resources(synthesized, "AWS::ApiGatewayV2::Integration").values():
        assert integration["Properties"]["IntegrationType"] == "AWS_PROXY"
        assert integration["Properties"]["PayloadFormatVersion"] == "2.0"
        assert integration["Properties"]["IntegrationUri"] == {"Fn::GetAtt": [function_id, "Arn"]}


def test_stage_writes_json_access_logs(synthesized: Synthesized) -> None:
    stage = _only(synthesized, "AWS::ApiGatewayV2::Stage")
    assert stage["StageName"] == "$default"
    assert stage["AutoDeploy"] is True
    settings = stage["AccessLogSettings"]
    access_logs_id = synthesized.logical_id(synthesized.stack.minting.access_logs)
    assert settings["DestinationArn"] == {"Fn::GetAtt": [access_logs_id, "Arn"]}
    access_log = json.loads(settings["Format"])
    assert access_log["requestId"] == "$context.requestId"
    assert access_log["userArn"] == "$context.identity.userArn"


def test_function_and_api_have_their_own_log_groups_with_retention(
    synthesized: Synthesized,
) -> None:
    minting = synthesized.stack.minting
    log_groups = _resources(synthesized, "AWS::Logs::LogGroup")
    assert set(log_groups) == {
        synthesized.logical_id(minting.log_group),
        synthesized.logical_id(minting.access_logs),
    }
    for log_group in log_groups.values():
        assert log_group["Properties"]["RetentionInDays"] == 30
    function = _only(synthesized, "AWS::Lambda::Function")
    assert function["LoggingConfig"] == {
        "LogGroup": {"Ref": synthesized.logical_id(minting.log_group)}
    }


def test_outputs(synthesized: Synthesized) -> None:
    minting = synthesized.stack.minting
    template = synthesized.template
    template.has_output(
        "MintUrl",
        {"Value": {"Fn::Join": ["", Match.array_with([Match.string_like_regexp("/mint$")])]}},
    )
    template.has_output("ApiUrl", {"Value": Match.any_value()})
    for output, table in (
        ("StateTableName", minting.state_table),
        ("RecordTableName", minting.record_table),
        ("IdempotencyTableName", minting.idempotency_table),
    ):
        template.has_output(output, {"Value": {"Ref": synthesized.logical_id(table)}})
