"""The CI role (GitHub OIDC), the deposit workflow, and the dashboard and alarms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.ci import CI_DEPOSIT_ROUTES, CiConfig, CiConfigError
from infra.config import cdk_json_context
from infra.stacks import ARCHIVE_STACK_ID, ArchiveStack, ResolverStack, build_app
from tests.infra.support import SKIP_BUNDLING, Synthesized

pytestmark = pytest.mark.infra
WORKFLOW = Path(__file__).parents[2] / ".github" / "workflows" / "deposit.yml"


@pytest.fixture(scope="module")
def with_ci(tmp_path_factory: pytest.TempPathFactory) -> Template:
    context = {
        **cdk_json_context(),
        **SKIP_BUNDLING,
        "ibi:ci": {"repository": "inpe/urlib", "environment": "release"},
    }
    app = build_app(App(outdir=str(tmp_path_factory.mktemp("ci")), context=context))
    app.synth()  # cdk-nag runs: any unacknowledged finding fails here
    stack = app.node.find_child(ARCHIVE_STACK_ID)
    assert isinstance(stack, ArchiveStack)
    return Template.from_stack(stack)


def test_trust_is_one_repository_and_one_environment(with_ci: Template) -> None:
    providers = with_ci.find_resources("AWS::IAM::OIDCProvider")
    ((_, provider),) = providers.items()
    assert provider["Properties"] == {
        "ClientIdList": ["sts.amazonaws.com"],
        "Url": "https://token.actions.githubusercontent.com",
    }
    roles = [
        r
        for r in with_ci.find_resources("AWS::IAM::Role").values()
        if "Federated" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    ]
    ((role),) = roles
    (statement,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Condition"] == {
        "StringEquals": {
            "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
            "token.actions.githubusercontent.com:sub": "repo:inpe/urlib:environment:release",
        }
    }
    assert role["Properties"]["MaxSessionDuration"] == 3600


def test_the_ci_role_may_mint_and_deposit_only(with_ci: Template) -> None:
    policies = [
        p
        for p in with_ci.find_resources("AWS::IAM::Policy").values()
        if any("Ci" in r["Ref"] for r in p["Properties"]["Roles"])
    ]
    ((policy),) = policies
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke"
    routes = sorted(
        json.dumps(resource)[-60:].split("/*/")[-1].rstrip('"]}')
        for resource in statement["Resource"]
    )
    assert routes == sorted(["POST/mint", *(f"{m}{p}" for m, p in CI_DEPOSIT_ROUTES)])


@pytest.mark.parametrize(
    "raw",
    [
        {"repository": "inpe/*", "branch": "main"},
        {"repository": "inpe", "branch": "main"},
        {"repository": "inpe/urlib"},
        {"repository": "inpe/urlib", "branch": "main", "environment": "release"},
        {"repository": "inpe/urlib", "branch": "release/*"},
        {"repository": "inpe/urlib", "branch": "main", "colour": "red"},
    ],
)
def test_ci_config_refuses_wildcards_and_ambiguity(raw: dict[str, Any]) -> None:
    with pytest.raises(CiConfigError):
        CiConfig.from_context(raw)


def test_no_ci_role_without_its_context(archive_synthesized: Synthesized[ArchiveStack]) -> None:
    assert archive_synthesized.resources("AWS::IAM::OIDCProvider") == {}


def test_the_workflow_uses_oidc_and_never_mints_twice() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow["permissions"] == {"id-token": "write", "contents": "read"}
    job = workflow["jobs"]["deposit"]
    steps = {step.get("name", step.get("uses")): step for step in job["steps"]}
    assume = steps["Assume the CI role"]
    assert assume["uses"].startswith("aws-actions/configure-aws-credentials@")
    assert assume["with"]["role-to-assume"] == "${{ vars.IBI_CI_ROLE_ARN }}"
    deposit = steps["Deposit"]["run"]
    assert "--idempotency-key" in deposit and "github.run_id" in deposit and "sha256sum" in deposit
    assert "GITHUB_STEP_SUMMARY" in deposit and "GITHUB_OUTPUT" in deposit
    assert set(job["outputs"]) == {"ibis", "persistent_urls"}
    assert "AWS_SECRET_ACCESS_KEY" not in WORKFLOW.read_text()  # no stored keys


def test_dashboards_and_alarms(
    archive_synthesized: Synthesized[ArchiveStack], resolver_synthesized: Synthesized[ResolverStack]
) -> None:
    for synthesized, services in (
        (archive_synthesized, ["minting", "archive"]),
        (resolver_synthesized, ["resolver"]),
    ):
        assert len(synthesized.resources("AWS::CloudWatch::Dashboard")) == 1
        alarms = synthesized.resources("AWS::CloudWatch::Alarm").values()
        descriptions = " ".join(a["Properties"]["AlarmDescription"] for a in alarms)
        for service in services:
            assert f"the {service} Lambda fails" in descriptions
            assert f"the {service} API answers 5xx" in descriptions
            assert f"the {service} Lambda's p99 latency" in descriptions
        assert all(a["Properties"]["TreatMissingData"] == "notBreaching" for a in alarms)
    resolver_alarms = json.dumps(resolver_synthesized.resources("AWS::CloudWatch::Alarm"))
    assert "Resolution409" in resolver_alarms and "Resolution504" in resolver_alarms
    assert "ArchiveFailures" in resolver_alarms
    archive_alarms = json.dumps(archive_synthesized.resources("AWS::CloudWatch::Alarm"))
    assert "MintUnavailable" in archive_alarms and "IntegrityProblems" in archive_alarms
