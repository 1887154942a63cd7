"""The CI role (GitHub OIDC): whom it trusts, what it may do, and the ``ibi:ci`` context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.archive import Archive
from infra.ci import CI_DEPOSIT_ROUTES, CiMinter
from infra.config import DEFAULT_SUBSYSTEMS, CiConfig, ConfigError
from infra.minting import MintingService
from infra.stacks import ARCHIVE_STACK_ID, MINTING_STACK_ID, ArchiveStack, MintingStack
from tests.infra.conftest import stack_of
from tests.infra.support import SKIP_BUNDLING, Synthesized

pytestmark = pytest.mark.infra

PROVIDER_ARN = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"


@pytest.fixture(scope="module")
def archive_with_ci(everything_app: tuple[App, Path]) -> Synthesized[ArchiveStack]:
    return stack_of(everything_app[0], ARCHIVE_STACK_ID, ArchiveStack)


@pytest.fixture(scope="module")
def minting_with_ci(minting_everything_app: tuple[App, Path]) -> Synthesized[MintingStack]:
    return stack_of(minting_everything_app[0], MINTING_STACK_ID, MintingStack)


def _ci_role(synthesized: Synthesized[Any]) -> dict[str, Any]:
    ci = synthesized.stack.ci
    assert isinstance(ci, CiMinter)
    role: dict[str, Any] = synthesized.resources("AWS::IAM::Role")[synthesized.logical_id(ci.role)]
    return role


def _ci_statements(synthesized: Synthesized[Any]) -> list[dict[str, Any]]:
    ci = synthesized.stack.ci
    assert isinstance(ci, CiMinter)
    role_ref = {"Ref": synthesized.logical_id(ci.role)}
    return [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        if role_ref in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _listed(value: Any) -> list[Any]:
    """A policy statement's Resource: one value or a list of them."""
    return value if isinstance(value, list) else [value]


def _execute_api_route(resource: Any) -> tuple[str, str]:
    """(API logical id, "METHOD/path") of an execute-api ARN as the template writes it."""
    parts = resource["Fn::Join"][1]
    (api,) = [
        part["Ref"]
        for part in parts
        if isinstance(part, dict) and "Ref" in part and not part["Ref"].startswith("AWS::")
    ]
    tail = parts[-1]
    assert isinstance(tail, str) and tail.startswith("/*/"), tail  # any stage, nothing else
    return api, tail.removeprefix("/*/")


def test_trust_is_one_repository_and_one_environment(
    archive_with_ci: Synthesized[ArchiveStack],
) -> None:
    ((_, provider),) = archive_with_ci.resources("AWS::IAM::OIDCProvider").items()
    assert provider["Properties"] == {
        "ClientIdList": ["sts.amazonaws.com"],
        "Url": "https://token.actions.githubusercontent.com",
    }
    role = _ci_role(archive_with_ci)
    assert role["Properties"]["MaxSessionDuration"] == 3600
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    ci = archive_with_ci.stack.ci
    assert ci is not None and ci.provider is not None
    provider_id = archive_with_ci.stack.get_logical_id(ci.provider)
    assert statement["Principal"] == {"Federated": {"Fn::GetAtt": [provider_id, "Arn"]}}
    assert statement["Condition"] == {
        "StringEquals": {
            "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
            "token.actions.githubusercontent.com:sub": "repo:inpe/urlib:environment:release",
        },
        # each session named after its run: the Archive records it as the items' depositor
        "StringLike": {"sts:RoleSessionName": "gh-*"},
    }


def test_the_ci_role_may_mint_and_deposit_only(
    archive_with_ci: Synthesized[ArchiveStack],
) -> None:
    (statement,) = _ci_statements(archive_with_ci)
    assert statement["Effect"] == "Allow" and "Condition" not in statement
    assert statement["Action"] == "execute-api:Invoke"
    stack = archive_with_ci.stack
    minting_api = archive_with_ci.logical_id(stack.minting.api)
    archive_api = archive_with_ci.logical_id(stack.archive.api)
    routes = sorted(_execute_api_route(resource) for resource in _listed(statement["Resource"]))
    assert routes == sorted(
        [
            (minting_api, "POST/mint"),
            *((archive_api, f"{method}{path}") for method, path in CI_DEPOSIT_ROUTES),
        ]
    )
    assert ("POST", "/api/items") in CI_DEPOSIT_ROUTES
    assert not {path for _, path in CI_DEPOSIT_ROUTES} & {
        "/api/verify",
        "/api/item/transfer",
        # issue 11: replacing a published file, importing another subsystem's original and
        # receiving a transfer are an operator's (grant_deposit), never a pipeline's
        "/api/item/files/replace",
        "/api/imports",
        "/api/transfers",
        "/api/transfers/complete",
    }
    outputs = archive_with_ci.template.find_outputs("CiRoleArn")
    assert outputs["CiRoleArn"]["Value"] == {
        "Fn::GetAtt": [archive_with_ci.logical_id(stack.ci.role), "Arn"]  # type: ignore[union-attr]
    }


def test_a_minting_only_deployment_gets_a_role_that_mints_only(
    minting_with_ci: Synthesized[MintingStack],
) -> None:
    role = _ci_role(minting_with_ci)
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Condition"]["StringEquals"] == {
        "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
        "token.actions.githubusercontent.com:sub": "repo:inpe/urlib:ref:refs/heads/main",
    }
    (statement,) = _ci_statements(minting_with_ci)
    api = minting_with_ci.logical_id(minting_with_ci.stack.minting.api)
    assert [_execute_api_route(resource) for resource in _listed(statement["Resource"])] == [
        (api, "POST/mint")
    ]
    assert "CiRoleArn" in minting_with_ci.template.find_outputs("*")


def test_no_ci_role_without_its_context(archive_synthesized: Synthesized[ArchiveStack]) -> None:
    assert archive_synthesized.stack.ci is None
    assert archive_synthesized.resources("AWS::IAM::OIDCProvider") == {}
    assert "CiRoleArn" not in archive_synthesized.template.find_outputs("*")


def test_an_existing_provider_is_reused() -> None:
    """An account has at most one provider per URL: ``provider_arn`` uses it, makes none."""
    stack = Stack(App(context=SKIP_BUNDLING), "Bare")
    minting = MintingService(
        stack,
        "Minting",
        subsystems=DEFAULT_SUBSYSTEMS,
        default_subsystem="default",
        max_wait_seconds=1,
    )
    archive = Archive(stack, "Archive", mint_endpoint="https://mint.example.org/")
    config = CiConfig("inpe/urlib", branch="main", provider_arn=PROVIDER_ARN)
    ci = CiMinter(stack, "Ci", config=config, minting=minting, archive=archive)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::IAM::OIDCProvider", 0)
    role_id = stack.get_logical_id(ci.role.node.default_child)  # type: ignore[arg-type]
    role = template.find_resources("AWS::IAM::Role")[role_id]
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Federated": PROVIDER_ARN}
    assert (
        statement["Condition"]["StringEquals"]["token.actions.githubusercontent.com:sub"]
        == "repo:inpe/urlib:ref:refs/heads/main"
    )


@pytest.mark.parametrize(
    ("raw", "subject"),
    [
        ({"repository": "inpe/urlib", "branch": "main"}, "repo:inpe/urlib:ref:refs/heads/main"),
        (
            {"repository": "inpe/urlib", "branch": "release/v1"},
            "repo:inpe/urlib:ref:refs/heads/release/v1",
        ),
        (
            '{"repository": "inpe/urlib", "environment": "release"}',  # -c gives a JSON string
            "repo:inpe/urlib:environment:release",
        ),
        (
            {"repository": "inpe/urlib", "environment": "release", "provider_arn": PROVIDER_ARN},
            "repo:inpe/urlib:environment:release",
        ),
    ],
)
def test_ci_config_names_one_subject(raw: Any, subject: str) -> None:
    config = CiConfig.from_context(raw)
    assert config is not None and config.subject == subject


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"repository": "inpe/*", "branch": "main"}, "repository: 'inpe/*' is not OWNER/REPO"),
        ({"repository": "*", "branch": "main"}, "is not OWNER/REPO"),
        ({"repository": "inpe", "branch": "main"}, "is not OWNER/REPO"),
        ({"repository": "inpe/urlib/x", "branch": "main"}, "is not OWNER/REPO"),
        ({"branch": "main"}, "repository: missing"),
        ({"repository": "inpe/urlib"}, "exactly one of branch and environment"),
        (
            {"repository": "inpe/urlib", "branch": "main", "environment": "release"},
            "exactly one of branch and environment",
        ),
        ({"repository": "inpe/urlib", "branch": "*"}, "branch: '*' is not one branch"),
        ({"repository": "inpe/urlib", "branch": "release/*"}, "is not one branch"),
        ({"repository": "inpe/urlib", "branch": "v?"}, "is not one branch"),
        ({"repository": "inpe/urlib", "branch": "refs/heads/main"}, "no refs/ prefix"),
        ({"repository": "inpe/urlib", "branch": "a/../b"}, "is not one branch"),
        ({"repository": "inpe/urlib", "environment": "*"}, "environment: '*' is not one"),
        ({"repository": "inpe/urlib", "environment": "a/b"}, "is not one environment"),
        (
            {"repository": "inpe/urlib", "branch": "main", "provider_arn": "arn:aws:iam::1:x"},
            "provider_arn",
        ),
        ({"repository": "inpe/urlib", "branch": "main", "colour": "red"}, "unknown fields"),
        ("{not json", "not valid JSON"),
    ],
)
def test_ci_config_refuses_wildcards_and_ambiguity(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^ibi:ci") as error:
        CiConfig.from_context(raw)
    assert message in str(error.value)


def test_no_context_no_role() -> None:
    assert CiConfig.from_context(None) is None


def test_trust_policy_is_plain_json(archive_with_ci: Synthesized[ArchiveStack]) -> None:
    """No wildcard in whom the trust policy admits (StringEquals on the token's audience and
    subject); the one StringLike names the session, never the repository or its ref."""
    role = _ci_role(archive_with_ci)
    document = json.loads(json.dumps(role["Properties"]["AssumeRolePolicyDocument"]))  # a copy
    (statement,) = document["Statement"]
    like = statement["Condition"].pop("StringLike")
    assert like == {"sts:RoleSessionName": "gh-*"}
    trust = json.dumps(document)
    assert "StringLike" not in trust and "*" not in trust


def test_the_workflow_names_its_session_after_its_run_as_the_trust_policy_requires() -> None:
    """The deposit records the session as the items' depositor (issue 11, finding 5)."""
    import fnmatch
    from pathlib import Path

    import yaml

    from infra.ci import SESSION_NAME_PATTERN

    workflow = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "deposit.yml"
    steps = yaml.safe_load(workflow.read_text())["jobs"]["deposit"]["steps"]
    (assume,) = [step for step in steps if step.get("name") == "Assume the CI role"]
    name = assume["with"]["role-session-name"]
    assert "${{ github.run_id }}" in name
    assert fnmatch.fnmatchcase(name.replace("${{ github.run_id }}", "4242"), SESSION_NAME_PATTERN)
