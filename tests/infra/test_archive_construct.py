"""Archive on its own, in a bare stack, with props other than the defaults."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from ibi.core.distributor import Granularity
from ibi.core.subsystem import Subsystem
from infra.archive import Archive, grant_mint
from infra.minting import MintingService

pytestmark = pytest.mark.infra

MINT_ENDPOINT = "https://mint.example.org/"
INLINE = lambda_.Code.from_inline("def lambda_handler(event, context):\n    return {}\n")


def _roles_policy(template: Template, role_prefix: str) -> list[dict[str, Any]]:
    (policy,) = [
        policy
        for policy in template.find_resources("AWS::IAM::Policy").values()
        if policy["Properties"]["Roles"][0]["Ref"].startswith(role_prefix)
    ]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


@pytest.fixture(scope="module")
def alone() -> tuple[Stack, Archive]:
    """An Archive minting through a minting API outside its stack, with every option set."""
    stack = Stack()
    archive = Archive(
        stack,
        "Archive",
        mint_endpoint=MINT_ENDPOINT,
        mint_subsystem="archive",
        base_url="https://archive.example.org",
        platform_software="8JMKD3MGP8W/3FSUP4L",
        urlkey_ttl_seconds=120,
        log_retention=logs.RetentionDays.ONE_WEEK,
        log_level="DEBUG",
        code=INLINE,
    )
    depositor = iam.Role(stack, "Depositor", assumed_by=iam.AccountRootPrincipal())
    archive.grant_deposit(depositor)
    return stack, archive


@pytest.fixture(scope="module")
def template(alone: tuple[Stack, Archive]) -> Template:
    return Template.from_stack(alone[0])


def test_props_reach_the_function(template: Template) -> None:
    (function,) = template.find_resources("AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["IBI_ARCHIVE_BASE_URL"] == "https://archive.example.org"
    assert variables["IBI_PLATFORM_SOFTWARE"] == "8JMKD3MGP8W/3FSUP4L"
    assert variables["IBI_URLKEY_TTL_SECONDS"] == "120"
    assert variables["LOG_LEVEL"] == "DEBUG"
    assert variables["IBI_MINT_ENDPOINT"] == MINT_ENDPOINT
    assert variables["IBI_MINT_SUBSYSTEM"] == "archive"
    # the construct grants nothing on another API: that is grant_mint's (or the caller's) job
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if policy["Properties"]["Roles"][0]["Ref"].startswith("ArchiveFunctionRole"):
                assert statement["Action"] != "execute-api:Invoke"


def test_log_retention_applies_to_both_log_groups(template: Template) -> None:
    template.resource_count_is("AWS::Logs::LogGroup", 2)
    template.all_resources_properties("AWS::Logs::LogGroup", {"RetentionInDays": 7})


def test_construct_owns_one_table_two_buckets_one_function_one_api(template: Template) -> None:
    template.resource_count_is("AWS::DynamoDB::Table", 1)
    template.resource_count_is("AWS::S3::Bucket", 2)
    template.resource_count_is("AWS::Lambda::Function", 1)
    template.resource_count_is("AWS::ApiGatewayV2::Api", 1)
    # GET and HEAD public, POST /transfers/confirm and POST /oai public, 23 deposit routes,
    # the GET and HEAD guards of /api/
    template.resource_count_is("AWS::ApiGatewayV2::Route", 30)
    # API Gateway may invoke the function once per route, from that route only
    template.resource_count_is("AWS::Lambda::Permission", 30)


def test_grant_deposit_allows_execute_api_on_each_deposit_route(template: Template) -> None:
    statements = _roles_policy(template, "Depositor")
    assert {statement["Action"] for statement in statements} == {"execute-api:Invoke"}
    assert {statement["Resource"]["Fn::Join"][1][-1] for statement in statements} == {
        "/*/GET/api/service",
        "/*/POST/api/items",
        "/*/POST/api/copies",
        "/*/GET/api/item",
        "/*/PATCH/api/item",
        "/*/DELETE/api/item",
        "/*/POST/api/item/links",
        "/*/DELETE/api/item/links",
        "/*/GET/api/items",
        "/*/POST/api/item/uploads",
        "/*/POST/api/item/files",
        "/*/POST/api/verify",
        "/*/POST/api/item/transfer",
        "/*/POST/api/item/files/replace",
        "/*/GET/api/item/previous",
        "/*/POST/api/imports",
        "/*/POST/api/transfers",
        "/*/POST/api/transfers/complete",
        "/*/DELETE/api/transfers",
        "/*/POST/api/item/offers",
        "/*/POST/api/transfers/accept",
        "/*/POST/api/links/check",
        "/*/GET/api/links",
        "/*/GET/api/*",
        "/*/HEAD/api/*",
    }


def test_grant_transfer_in_allows_a_sending_archive_the_receiving_routes_only() -> None:
    stack = Stack()
    receiver = Archive(stack, "Receiver", mint_endpoint=MINT_ENDPOINT, code=INLINE)
    sender = iam.Role(stack, "Sender", assumed_by=iam.AccountRootPrincipal())
    receiver.grant_transfer_in(sender)
    statements = _roles_policy(Template.from_stack(stack), "Sender")
    assert {statement["Resource"]["Fn::Join"][1][-1] for statement in statements} == {
        "/*/POST/api/transfers",
        "/*/POST/api/item/uploads",
        "/*/POST/api/item/files",
        "/*/GET/api/item",
        "/*/POST/api/transfers/complete",
        "/*/DELETE/api/transfers",
    }


def test_the_archive_takes_originals_of_the_subsystems_it_is_given() -> None:
    stack = Stack()
    Archive(
        stack,
        "Archive",
        mint_endpoint=MINT_ENDPOINT,
        subsystem_prefixes=["sid.inpe.br/mtc-m18", "8JMKD3MGP8W"],
        code=INLINE,
    )
    (function,) = Template.from_stack(stack).find_resources("AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["IBI_ARCHIVE_SUBSYSTEM_PREFIXES"] == "sid.inpe.br/mtc-m18,8JMKD3MGP8W"


def test_url_properties(alone: tuple[Stack, Archive]) -> None:
    stack, archive = alone
    assert stack.resolve(archive.url)["Fn::Join"][1][-1] == "/"
    assert stack.resolve(archive.deposit_url)["Fn::Join"][1][-1] == "/api/"


def test_grant_mint_allows_post_mint_and_get_mints_only() -> None:
    """With a minting service: IBI_MINT_ENDPOINT is its URL, and only POST /mint (to mint) and
    GET /mints (an IBI's record, issued.py) are allowed; IBI_ARCHIVE_PRINCIPAL is its role."""
    stack = Stack()
    minting = MintingService(
        stack,
        "Minting",
        subsystems=(
            Subsystem(
                name="archive", host="a.example.net", ip="198.51.100.7", granularity=Granularity(1)
            ),
        ),
        default_subsystem="archive",
        max_wait_seconds=1,
        code=INLINE,
    )
    archive = Archive(
        stack, "Archive", mint_endpoint=minting.url, mint_subsystem="archive", code=INLINE
    )
    grants = grant_mint(minting, archive.role)
    assert all(grant.success for grant in grants)
    template = Template.from_stack(stack)

    (function,) = [
        function
        for name, function in template.find_resources("AWS::Lambda::Function").items()
        if name.startswith("Archive")
    ]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["IBI_MINT_ENDPOINT"] == stack.resolve(minting.url)
    assert variables["IBI_MINT_SUBSYSTEM"] == "archive"
    assert variables["IBI_ARCHIVE_PRINCIPAL"] == stack.resolve(archive.role.role_arn)

    invoked = [
        statement["Resource"]
        for statement in _roles_policy(template, "ArchiveFunctionRole")
        if statement["Action"] == "execute-api:Invoke"
    ]
    resources = [r for found in invoked for r in (found if isinstance(found, list) else [found])]
    api = {"Ref": stack.resolve(minting.api.api_id)["Ref"]}
    assert all(api in resource["Fn::Join"][1] for resource in resources)
    assert sorted(resource["Fn::Join"][1][-1] for resource in resources) == [
        "/*/GET/mints",
        "/*/POST/mint",
    ]
