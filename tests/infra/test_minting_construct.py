"""MintingService on its own, in a bare stack, with props other than the defaults."""

from __future__ import annotations

import json

import pytest
from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from ibi.core.distributor import Granularity
from ibi.core.subsystem import Subsystem
from infra.minting import MintingService

pytestmark = pytest.mark.infra

SUBSYSTEMS = (
    Subsystem(name="default", host="ibi.example.org", ip="192.0.2.10", granularity=Granularity(1)),
    Subsystem(
        name="archive",
        host="archive.example.net",
        ip="198.51.100.7",
        rep_port=8080,
        ibip_port=8800,
        granularity=Granularity(60),
    ),
)


@pytest.fixture(scope="module")
def construct() -> tuple[Stack, MintingService]:
    stack = Stack()
    minting = MintingService(
        stack,
        "Minting",
        subsystems=SUBSYSTEMS,
        default_subsystem="archive",
        max_wait_seconds=2,
        log_retention=logs.RetentionDays.ONE_WEEK,
        log_level="DEBUG",
        code=lambda_.Code.from_inline("def lambda_handler(event, context):\n    return {}\n"),
    )
    reader = iam.Role(stack, "Archive", assumed_by=iam.AccountRootPrincipal())
    minting.grant_invoke(reader)
    return stack, minting


@pytest.fixture(scope="module")
def template(construct: tuple[Stack, MintingService]) -> Template:
    return Template.from_stack(construct[0])


def test_props_reach_the_function(template: Template) -> None:
    (function,) = template.find_resources("AWS::Lambda::Function").values()
    properties = function["Properties"]
    variables = properties["Environment"]["Variables"]
    assert json.loads(variables["IBI_SUBSYSTEMS"]) == [
        {
            "name": "default",
            "host": "ibi.example.org",
            "ip": "192.0.2.10",
            "rep_port": 80,
            "ibip_port": 800,
            "granularity": "1",
        },
        {
            "name": "archive",
            "host": "archive.example.net",
            "ip": "198.51.100.7",
            "rep_port": 8080,
            "ibip_port": 8800,
            "granularity": "60",
        },
    ]
    assert variables["IBI_DEFAULT_SUBSYSTEM"] == "archive"
    assert variables["IBI_MAX_WAIT_SECONDS"] == "2"
    assert variables["LOG_LEVEL"] == "DEBUG"
    assert properties["Timeout"] == 12


def test_log_retention_applies_to_both_log_groups(template: Template) -> None:
    template.resource_count_is("AWS::Logs::LogGroup", 2)
    template.all_resources_properties("AWS::Logs::LogGroup", {"RetentionInDays": 7})


def test_construct_owns_three_tables_one_function_one_api(template: Template) -> None:
    template.resource_count_is("AWS::DynamoDB::Table", 3)
    template.resource_count_is("AWS::Lambda::Function", 1)
    template.resource_count_is("AWS::ApiGatewayV2::Api", 1)
    template.resource_count_is("AWS::ApiGatewayV2::Route", 5)  # and the public GET /openapi.json


def test_grant_invoke_allows_execute_api_on_each_route(template: Template) -> None:
    (policy,) = [
        policy
        for policy in template.find_resources("AWS::IAM::Policy").values()
        if policy["Properties"]["Roles"][0]["Ref"].startswith("Archive")
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert {statement["Action"] for statement in statements} == {"execute-api:Invoke"}
    assert {statement["Resource"]["Fn::Join"][1][-1] for statement in statements} == {
        "/*/POST/mint",
        "/*/GET/mints",
        "/*/GET/mints/verify",
        "/*/GET/subsystems",
    }


def test_url_properties(construct: tuple[Stack, MintingService]) -> None:
    stack, minting = construct
    assert stack.resolve(minting.mint_url)["Fn::Join"][1][-1] == "/mint"
    assert stack.resolve(minting.url)["Fn::Join"][1][-1] == "/"
