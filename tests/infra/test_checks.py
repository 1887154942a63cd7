"""cdk-nag (AwsSolutions) and cfn-lint on the synthesized app."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk import App, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint

from infra import archive
from infra.archive import Archive
from infra.config import cdk_json_context
from infra.minting import MintingService
from infra.resolver import Resolver
from infra.stacks import ARCHIVE_STACK_ID, MINTING_STACK_ID, RESOLVER_STACK_ID, build_app
from tests.infra.support import SKIP_BUNDLING, Synthesized

pytestmark = pytest.mark.infra

ACKNOWLEDGED = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
# Rule ids are recorded with the prefix of the kind of validation they acknowledge.
ANNOTATION_PREFIX = "Annotation::"
# W3005: CDK writes DependsOn entries that a Ref or GetAtt already implies.
CFN_LINT_IGNORED = ["W3005"]
STACK_IDS = [MINTING_STACK_ID, ARCHIVE_STACK_ID, RESOLVER_STACK_ID]
# Every finding accepted on purpose, in either stack (see infra/minting.py, infra/archive.py).
ACCEPTED_FINDINGS = [
    "AwsSolutions-APIG4",  # the Archive's public GET /{proxy+}
    "AwsSolutions-APIG4",  # the resolver's public GET /, GET and HEAD /{proxy+}
    "AwsSolutions-APIG4",
    "AwsSolutions-APIG4",
    "AwsSolutions-IAM5[Resource::*]",  # X-Ray: minting (twice), Archive, resolver functions
    "AwsSolutions-IAM5[Resource::*]",
    "AwsSolutions-IAM5[Resource::*]",
    "AwsSolutions-IAM5[Resource::*]",
    "AwsSolutions-IAM5[Resource::<ArchiveFilesBucket12AFF5A1.Arn>/items/*]",
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:"
    "<AWS::AccountId>:<MintingApi90BDA48E>/*/POST/mint]",
    "AwsSolutions-L1",  # Python 3.13: minting (twice), Archive, resolver functions
    "AwsSolutions-L1",
    "AwsSolutions-L1",
    "AwsSolutions-L1",
    "AwsSolutions-SMG4",  # the resolver's pepper: rotating it would void every key
]


def _acknowledgments(app: App) -> Iterator[tuple[str, str, str]]:
    """(construct path, rule id, reason) for every acknowledgment in the app."""
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == ACKNOWLEDGED:
                for rule, reason in entry.data.items():
                    yield construct.node.path, rule.removeprefix(ANNOTATION_PREFIX), reason


def test_cdk_nag_reports_nothing_unacknowledged(synthesized: Synthesized[Any]) -> None:
    report = AwsSolutionsChecks().validate_scope(synthesized.app)
    findings = [
        (violation.rule_name, [r.construct_path for r in violation.violating_resources])
        for violation in report.violations
    ]
    assert findings == []
    assert report.success
    # The synth itself ran the plugin (build_app registers it) and wrote its report.
    assert synthesized.validation_report()["pluginReports"] == []


def test_cdk_nag_fails_the_synth_on_a_finding() -> None:
    """The check above is not vacuous: an unacknowledged finding stops the synth."""
    app = App(outdir=tempfile.mkdtemp(prefix="cdk-nag-"))
    stack = Stack(app, "Careless")
    dynamodb.Table(
        stack,
        "NoRecovery",
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        removal_policy=RemovalPolicy.DESTROY,
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed") as failure:
        app.synth()
    assert "AwsSolutions-DDB3" in str(failure.value)  # no point-in-time recovery


def test_every_acknowledgment_carries_a_reason(synthesized: Synthesized[Any]) -> None:
    acknowledgments = list(_acknowledgments(synthesized.app))
    assert sorted(rule for _, rule, _ in acknowledgments) == ACCEPTED_FINDINGS
    for path, rule, reason in acknowledgments:
        assert len(reason.split()) >= 10, f"{path}: {rule} needs a real reason, not {reason!r}"


def test_every_acknowledgment_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its acknowledgments the app shows exactly the findings they accept."""
    monkeypatch.setattr(MintingService, "_acknowledge_findings", lambda self: None)
    monkeypatch.setattr(Archive, "_acknowledge_findings", lambda self: None)
    monkeypatch.setattr(archive, "_acknowledge_mint_grant", lambda minting, role: None)
    monkeypatch.setattr(Resolver, "_acknowledge_findings", lambda self: None)
    app = build_app(App(context={**cdk_json_context(), **SKIP_BUNDLING}))
    report = AwsSolutionsChecks().validate_scope(app)
    findings = [
        (violation.rule_name, resource.construct_path)
        for violation in report.violations
        for resource in violation.violating_resources
    ]
    assert sorted(rule for rule, _ in findings) == ACCEPTED_FINDINGS
    assert {path for rule, path in findings if rule == "AwsSolutions-APIG4"} == {
        "IbiArchive/Archive/Api/GET--{proxy+}/Resource",
        "IbiResolver/Resolver/Api/GET--/Resource",
        "IbiResolver/Resolver/Api/GET--{proxy+}/Resource",
        "IbiResolver/Resolver/Api/HEAD--{proxy+}/Resource",
    }


def test_cfn_lint_covers_every_stack(synthesized: Synthesized[Any]) -> None:
    stacks = [child.node.id for child in synthesized.app.node.children if isinstance(child, Stack)]
    assert sorted(stacks) == sorted(STACK_IDS)


@pytest.mark.parametrize("stack_id", STACK_IDS)
def test_cfn_lint_passes(synthesized: Synthesized[Any], stack_id: str) -> None:
    stack = synthesized.app.node.find_child(stack_id)
    assert isinstance(stack, Stack)
    template = json.dumps(Template.from_stack(stack).to_json())
    matches = lint(
        template,
        config=ManualArgs(ignore_checks=CFN_LINT_IGNORED, regions=["us-east-1", "eu-west-1"]),
    )
    assert [f"{match.rule.id}: {match.message}" for match in matches] == []
