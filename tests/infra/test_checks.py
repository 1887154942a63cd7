"""cdk-nag (AwsSolutions) and cfn-lint on the synthesized app."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from aws_cdk import App, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint

from infra import archive
from infra.archive import Archive
from infra.canary import Canary
from infra.ci import CI_DEPOSIT_ROUTES, CiMinter
from infra.config import ConfigError, cdk_json_context
from infra.edge import EdgeStack, OriginVerify
from infra.minting import MintingService
from infra.resolver import Resolver
from infra.stacks import (
    ARCHIVE_STACK_ID,
    EDGE_STACK_ID,
    MINTING_STACK_ID,
    RESOLVER_STACK_ID,
    build_app,
)
from tests.infra.conftest import EDGE, EVERYTHING, MINTING_EVERYTHING
from tests.infra.support import SKIP_BUNDLING

pytestmark = pytest.mark.infra

ACKNOWLEDGED = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
# Rule ids are recorded with the prefix of the kind of validation they acknowledge.
ANNOTATION_PREFIX = "Annotation::"
# W3005: CDK writes DependsOn entries that a Ref or GetAtt already implies.
CFN_LINT_IGNORED = ["W3005"]
# The two apps a platform team can synthesize: the default (an Archive with its minting, and a
# resolver) and a minting-only deployment; each bare, and with every option on; and the
# default in sa-east-1 behind the edge in us-east-1, with the canary and X-Ray (docs/deploy.md).
STACK_IDS = {
    "default": [ARCHIVE_STACK_ID, RESOLVER_STACK_ID],
    "minting-only": [MINTING_STACK_ID],
    "everything": [ARCHIVE_STACK_ID, RESOLVER_STACK_ID],
    "minting-everything": [MINTING_STACK_ID],
    "edge": [ARCHIVE_STACK_ID, RESOLVER_STACK_ID, EDGE_STACK_ID],
}
_EXECUTE_API = (
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:"
)
# The CI role: POST /mint, and the deposit routes of the Archive (each API's stage is "*").
CI_MINT_FINDING = f"{_EXECUTE_API}<MintingApi90BDA48E>/*/POST/mint]"
CI_DEPOSIT_FINDINGS = [
    f"{_EXECUTE_API}<ArchiveApiE2B73998>/*/{method}{path}]" for method, path in CI_DEPOSIT_ROUTES
]
ACCEPTED_FINDINGS = {
    "default": [
        "AwsSolutions-APIG4",  # the Archive's public GET and HEAD /{proxy+}
        "AwsSolutions-APIG4",
        "AwsSolutions-APIG4",  # and its public POST /transfers/confirm (a signed offer)
        "AwsSolutions-APIG4",  # and its public GET and POST /oai (OAI-PMH harvesting)
        "AwsSolutions-APIG4",
        "AwsSolutions-APIG4",  # the resolver's public GET /, GET and HEAD /{proxy+}
        "AwsSolutions-APIG4",
        "AwsSolutions-APIG4",
        "AwsSolutions-APIG4",  # the minting API's public GET /openapi.json
        "AwsSolutions-IAM5[Resource::<ArchiveFilesBucket12AFF5A1.Arn>/history/*]",
        "AwsSolutions-IAM5[Resource::<ArchiveFilesBucket12AFF5A1.Arn>/items/*]",
        "AwsSolutions-IAM5[Resource::<ArchiveFilesBucket12AFF5A1.Arn>/uploads/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:"
        "<AWS::AccountId>:<MintingApi90BDA48E>/*/GET/mints]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:"
        "<AWS::AccountId>:<MintingApi90BDA48E>/*/POST/mint]",
        "AwsSolutions-L1",  # Python 3.13: the minting, Archive, resolver functions
        "AwsSolutions-L1",
        "AwsSolutions-L1",
        "AwsSolutions-L1",  # and the resolver's acknowledgment drain
        "AwsSolutions-L1",  # and the Archive's link check
        "AwsSolutions-SMG4",  # the Archive's urlkey secret: rotated by hand, AWSPREVIOUS kept
        "AwsSolutions-SMG4",  # the resolver's pepper: rotating it would void every key
    ],
    "minting-only": [
        "AwsSolutions-APIG4",  # GET /openapi.json
        "AwsSolutions-L1",
    ],
}
# X-Ray's "*" (ibi:tracing, off by default): once per function that traces.
XRAY = "AwsSolutions-IAM5[Resource::*]"
# With every option on the stacks are pinned to eu-west-1 (ibi:region, which the resolver's
# custom domain needs): the findings name the region, and CDK writes the CI role's partition.
_PINNED = "arn:aws:execute-api:eu-west-1:"
ACCEPTED_FINDINGS["everything"] = sorted(
    [
        *(
            finding.replace("<AWS::Region>", "eu-west-1")
            for finding in ACCEPTED_FINDINGS["default"]
        ),
        CI_MINT_FINDING.replace("arn:<AWS::Partition>:execute-api:<AWS::Region>:", _PINNED),
        *(
            finding.replace("arn:<AWS::Partition>:execute-api:<AWS::Region>:", _PINNED)
            for finding in CI_DEPOSIT_FINDINGS
        ),
    ]
)
ACCEPTED_FINDINGS["minting-everything"] = sorted(
    [*ACCEPTED_FINDINGS["minting-only"], CI_MINT_FINDING]
)
# Behind the edge: the public routes have the origin check (no APIG4 but the minting API's
# document and the resolver's inclusion protocol, reached at its own address); the origin
# checks, the canary and the distributions add theirs; every function traces.
_SA_EAST_1 = ":execute-api:sa-east-1:123456789012:"
ACCEPTED_FINDINGS["edge"] = sorted(
    [
        "AwsSolutions-APIG4",  # the minting API's public GET /openapi.json
        "AwsSolutions-APIG4",  # the resolver's GET /<service IBI>, the inclusion protocol
        *(f for f in ACCEPTED_FINDINGS["default"] if f.startswith("AwsSolutions-IAM5[")),
        *["AwsSolutions-L1"] * 8,  # minting, Archive, link check, resolver, drain, 2 origin
        *[XRAY] * 8,  # checks, canary
        "AwsSolutions-SMG4",  # the urlkey secret
        "AwsSolutions-SMG4",  # the pepper
        "AwsSolutions-SMG4",  # the origin-verify secrets: read by the edge when it deploys
        "AwsSolutions-SMG4",
        "AwsSolutions-CFR1",  # no geo restriction: persistent URLs are for readers anywhere
        "AwsSolutions-CFR1",
        "AwsSolutions-CFR3",  # the web ACL logs every request: the distribution's access log
        "AwsSolutions-CFR3",
    ]
)
ACCEPTED_FINDINGS["edge"] = sorted(
    f.replace(":execute-api:<AWS::Region>:<AWS::AccountId>:", _SA_EAST_1)
    for f in ACCEPTED_FINDINGS["edge"]
)
CONTEXTS = {
    "default": {},
    "minting-only": {"ibi:stacks": ["minting"]},
    "everything": EVERYTHING,
    "minting-everything": MINTING_EVERYTHING,
    "edge": EDGE,
}


APPS = {
    "default": "synthesized_app",
    "minting-only": "minting_app",
    "everything": "everything_app",
    "minting-everything": "minting_everything_app",
    "edge": "edge_app",
}


@pytest.fixture(scope="session", params=sorted(STACK_IDS))
def deployment(request: pytest.FixtureRequest) -> tuple[str, App, Path]:
    app, outdir = request.getfixturevalue(APPS[request.param])
    return request.param, app, outdir


# The minting API's public GET /openapi.json: in the Archive's stack, or a stack of its own.
MINTING_OPENAPI = "Minting/Api/GET--openapi.json/Resource"


def _acknowledgments(app: App) -> Iterator[tuple[str, str, str]]:
    """(construct path, rule id, reason) for every acknowledgment in the app."""
    for construct in app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == ACKNOWLEDGED:
                for rule, reason in entry.data.items():
                    yield construct.node.path, rule.removeprefix(ANNOTATION_PREFIX), reason


def test_cdk_nag_reports_nothing_unacknowledged(deployment: tuple[str, App, Path]) -> None:
    _, app, outdir = deployment
    report = AwsSolutionsChecks().validate_scope(app)
    findings = [
        (violation.rule_name, [r.construct_path for r in violation.violating_resources])
        for violation in report.violations
    ]
    assert findings == []
    assert report.success
    # The synth itself ran the plugin (build_app registers it) and wrote its report.
    assert json.loads((outdir / "validation-report.json").read_text())["pluginReports"] == []


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


def test_every_acknowledgment_carries_a_reason(deployment: tuple[str, App, Path]) -> None:
    name, app, _ = deployment
    acknowledgments = list(_acknowledgments(app))
    assert sorted(rule for _, rule, _ in acknowledgments) == ACCEPTED_FINDINGS[name]
    for path, rule, reason in acknowledgments:
        assert len(reason.split()) >= 10, f"{path}: {rule} needs a real reason, not {reason!r}"


@pytest.mark.parametrize("name", sorted(CONTEXTS))
def test_every_acknowledgment_is_needed(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Without its acknowledgments the app shows exactly the findings they accept."""
    monkeypatch.setattr(MintingService, "_acknowledge_findings", lambda self: None)
    monkeypatch.setattr(Archive, "_acknowledge_findings", lambda self: None)
    monkeypatch.setattr(archive, "_acknowledge_mint_grant", lambda minting, role, route: None)
    monkeypatch.setattr(Resolver, "_acknowledge_findings", lambda self: None)
    monkeypatch.setattr(CiMinter, "_acknowledge_findings", lambda self: None)
    monkeypatch.setattr(OriginVerify, "_acknowledge_findings", lambda self: None)
    monkeypatch.setattr(Canary, "_acknowledge_findings", lambda self: None)
    monkeypatch.setattr(EdgeStack, "_acknowledge_findings", lambda self, *args: None)
    app = build_app(App(context={**cdk_json_context(), **SKIP_BUNDLING, **CONTEXTS[name]}))
    report = AwsSolutionsChecks().validate_scope(app)
    findings = [
        (violation.rule_name, resource.construct_path)
        for violation in report.violations
        for resource in violation.violating_resources
    ]
    assert sorted(rule for rule, _ in findings) == ACCEPTED_FINDINGS[name]
    public = {path for rule, path in findings if rule == "AwsSolutions-APIG4"}
    expected = {
        "default": {
            "IbiArchive/Archive/Api/GET--{proxy+}/Resource",
            "IbiArchive/Archive/Api/HEAD--{proxy+}/Resource",
            "IbiArchive/Archive/Api/POST--transfers--confirm/Resource",
            "IbiArchive/Archive/Api/GET--oai/Resource",
            "IbiArchive/Archive/Api/POST--oai/Resource",
            "IbiResolver/Resolver/Api/GET--/Resource",
            "IbiResolver/Resolver/Api/GET--{proxy+}/Resource",
            "IbiResolver/Resolver/Api/HEAD--{proxy+}/Resource",
            f"IbiArchive/{MINTING_OPENAPI}",
        },
        "minting-only": {f"IbiMinting/{MINTING_OPENAPI}"},
        # behind the edge every public route has the origin check, but these two
        "edge": {
            "IbiResolver/Resolver/Api/GET--J8LNKB5R7W--3FUQHC5/Resource",
            f"IbiArchive/{MINTING_OPENAPI}",
        },
    }
    expected["everything"] = expected["default"]
    expected["minting-everything"] = expected["minting-only"]
    assert public == expected[name]


def test_cfn_lint_covers_every_stack(deployment: tuple[str, App, Path]) -> None:
    name, app, _ = deployment
    stacks = [child.node.id for child in app.node.children if isinstance(child, Stack)]
    assert sorted(stacks) == sorted(STACK_IDS[name])


def test_cfn_lint_passes(deployment: tuple[str, App, Path]) -> None:
    name, app, _ = deployment
    for stack_id in STACK_IDS[name]:
        stack = app.node.find_child(stack_id)
        assert isinstance(stack, Stack)
        _lint(stack)


@pytest.mark.parametrize(
    ("stacks", "message"),
    [
        (["minting", "archive"], "could issue the same IBI twice"),
        (["archive", "minting", "resolver"], "'minting' and 'archive' cannot be deployed together"),
        ('["minting", "archive"]', "cannot be deployed together"),  # -c gives a JSON string
        ("minting,archive", "cannot be deployed together"),
        (["mint"], "unknown stack(s) ['mint']"),
        ([], "a non-empty list"),
    ],
)
def test_minting_and_archive_never_go_together(stacks: object, message: str) -> None:
    context = {**cdk_json_context(), **SKIP_BUNDLING, "ibi:stacks": stacks}
    with pytest.raises(ConfigError, match=r"^ibi:stacks") as error:
        build_app(App(context=context))
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("stacks", "expected"),
    [
        (None, [ARCHIVE_STACK_ID, RESOLVER_STACK_ID]),  # cdk.json's default
        (["resolver"], [RESOLVER_STACK_ID]),
        (["minting", "resolver"], [MINTING_STACK_ID, RESOLVER_STACK_ID]),
        ('["archive"]', [ARCHIVE_STACK_ID]),
    ],
)
def test_the_stacks_chosen(stacks: object, expected: list[str]) -> None:
    context = {**cdk_json_context(), **SKIP_BUNDLING}
    if stacks is not None:
        context["ibi:stacks"] = stacks
    app = build_app(App(context=context))
    assert [child.node.id for child in app.node.children if isinstance(child, Stack)] == expected


def test_the_ci_role_needs_a_stack_that_mints() -> None:
    context = {
        **cdk_json_context(),
        **SKIP_BUNDLING,
        "ibi:stacks": ["resolver"],
        "ibi:ci": {"repository": "inpe/urlib", "branch": "main"},
    }
    with pytest.raises(ConfigError, match="needs the 'archive' or the 'minting' stack"):
        build_app(App(context=context))


def _lint(stack: Stack) -> None:
    template = json.dumps(Template.from_stack(stack).to_json())
    matches = lint(
        template,
        config=ManualArgs(
            ignore_checks=CFN_LINT_IGNORED, regions=["us-east-1", "eu-west-1", "sa-east-1"]
        ),
    )
    assert [f"{match.rule.id}: {match.message}" for match in matches] == []
