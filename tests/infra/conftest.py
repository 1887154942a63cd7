"""One synthesized app shared by the CDK tests: synthesis is the slow part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra import guardrails
from infra.config import cdk_json_context
from infra.stacks import (
    ARCHIVE_STACK_ID,
    MINTING_STACK_ID,
    RESOLVER_STACK_ID,
    ArchiveStack,
    MintingStack,
    ResolverStack,
    build_app,
)
from tests.infra.support import SKIP_BUNDLING, StackT, Synthesized


@pytest.fixture(scope="session")
def synthesized_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[App, Path]:
    """The default app as ``cdk synth`` builds it (cdk.json context, cdk-nag on), bundling
    skipped: the Archive (with its minting) and the resolver.

    ``app.synth()`` raises if cdk-nag reports a finding that is not acknowledged.
    """
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = build_app(App(outdir=str(outdir), context={**cdk_json_context(), **SKIP_BUNDLING}))
    app.synth()
    return app, outdir


@pytest.fixture(scope="session")
def minting_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[App, Path]:
    """The app of a minting-only deployment (``ibi:stacks`` = ["minting"])."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    context = {**cdk_json_context(), **SKIP_BUNDLING, "ibi:stacks": ["minting"]}
    app = build_app(App(outdir=str(outdir), context=context))
    app.synth()
    return app, outdir


# Every optional resource on: the CI role, the resolver's custom domain, the alarm topic, an
# Archive that joins its resolver. The checks (cdk-nag, cfn-lint) run on these apps too.
CERTIFICATE_ARN = (
    "arn:aws:acm:eu-west-1:123456789012:certificate/11111111-2222-3333-4444-555555555555"
)
EVERYTHING = {
    "ibi:ci": {"repository": "inpe/urlib", "environment": "release"},
    "ibi:resolver": {"domain_name": "urlib.example.org", "certificate_arn": CERTIFICATE_ARN},
    "ibi:region": "eu-west-1",  # a custom domain needs the stacks' region (the certificate's)
    "ibi:operations": {"alarm_email": "ibi-alarms@example.org"},
    "ibi:archive": {
        "join": {
            "resolver_url": "https://urlib.example.org",
            "registration_key_parameter": "/ibi/archive/registration-key",
        }
    },
}
MINTING_EVERYTHING = {
    "ibi:stacks": ["minting"],
    "ibi:ci": {"repository": "inpe/urlib", "branch": "main"},
    "ibi:operations": {"alarm_email": "ibi-alarms@example.org"},
}


# An institution in sa-east-1 behind the edge (us-east-1): the resolver and the Archive fronted
# with their own domains, the canary, two alarm topics, reserved concurrency, X-Ray on.
EDGE_CERTIFICATE_ARN = (
    "arn:aws:acm:us-east-1:123456789012:certificate/66666666-7777-8888-9999-000000000000"
)
CANARY_IBI = "8JMKD3MGP8W/35MME4E"
EDGE = {
    "ibi:region": "sa-east-1",
    "ibi:account": "123456789012",
    "ibi:resolver": {"domain_name": "urlib.example.org", "certificate_arn": EDGE_CERTIFICATE_ARN},
    "ibi:waf": {
        "rate_limit": 500,
        "retry_after_seconds": 120,
        "archive_domain_name": "archive.example.org",
        "archive_certificate_arn": EDGE_CERTIFICATE_ARN,
        "archive_rate_limit": 30000,
    },
    "ibi:canary": {"ibi": CANARY_IBI},
    "ibi:operations": {"page_email": "on-call@example.org", "ticket_email": "team@example.org"},
    "ibi:concurrency": {"minting": 5, "archive": 20, "resolver": 50},
    "ibi:tracing": True,
}


def _synth(
    tmp_path_factory: pytest.TempPathFactory, context: dict[str, object]
) -> tuple[App, Path]:
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = build_app(
        App(outdir=str(outdir), context={**cdk_json_context(), **SKIP_BUNDLING, **context})
    )
    app.synth()  # raises on any cdk-nag finding not acknowledged
    return app, outdir


@pytest.fixture(scope="session")
def everything_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[App, Path]:
    """The default app with every option on (:data:`EVERYTHING`)."""
    return _synth(tmp_path_factory, EVERYTHING)


@pytest.fixture(scope="session")
def edge_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[App, Path]:
    """The default app in sa-east-1 behind the edge, with the canary (:data:`EDGE`)."""
    return _synth(tmp_path_factory, EDGE)


@pytest.fixture(scope="session")
def minting_everything_app(tmp_path_factory: pytest.TempPathFactory) -> tuple[App, Path]:
    """A minting-only app with its options on (:data:`MINTING_EVERYTHING`)."""
    return _synth(tmp_path_factory, MINTING_EVERYTHING)


def stack_of(app: App, stack_id: str, type_: type[StackT]) -> Synthesized[StackT]:
    """One stack of a synthesized app, with its template."""
    stack = app.node.find_child(stack_id)
    assert isinstance(stack, type_)
    return Synthesized(app, stack, Template.from_stack(stack), Path(app.outdir))


@pytest.fixture(scope="session")
def synthesized(minting_app: tuple[App, Path]) -> Synthesized[MintingStack]:
    """The minting stack of a minting-only app."""
    app, outdir = minting_app
    stack = app.node.find_child(MINTING_STACK_ID)
    assert isinstance(stack, MintingStack)
    return Synthesized(app, stack, Template.from_stack(stack), outdir)


@pytest.fixture(scope="session")
def archive_synthesized(synthesized_app: tuple[App, Path]) -> Synthesized[ArchiveStack]:
    """The Archive stack of the app (an Archive and its own minting service)."""
    app, outdir = synthesized_app
    stack = app.node.find_child(ARCHIVE_STACK_ID)
    assert isinstance(stack, ArchiveStack)
    return Synthesized(app, stack, Template.from_stack(stack), outdir)


@pytest.fixture(scope="session")
def resolver_synthesized(synthesized_app: tuple[App, Path]) -> Synthesized[ResolverStack]:
    """The resolver stack of the app."""
    app, outdir = synthesized_app
    stack = app.node.find_child(RESOLVER_STACK_ID)
    assert isinstance(stack, ResolverStack)
    return Synthesized(app, stack, Template.from_stack(stack), outdir)


# A production stage's committed settings (stages/prod.json): an institution's own subsystem
# (the spec's example host and address, never deployed from here) and its alarm addresses.
PRODUCTION = {
    "ibi:minting": {
        "subsystems": [
            {
                "name": "default",
                "host": "mtc-m18.sid.inpe.br",
                "ip": "150.163.34.243",
                "granularity": "0.001",
            }
        ],
        "default_subsystem": "default",
    },
    "ibi:operations": {"page_email": "on-call@inpe.br", "ticket_email": "urlib@inpe.br"},
}


@pytest.fixture
def stages_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stages/ directory holding :data:`PRODUCTION` as prod.json, in place of the repo's."""
    directory = tmp_path / "stages"
    directory.mkdir()
    (directory / "prod.json").write_text(json.dumps(PRODUCTION))
    monkeypatch.setattr(guardrails, "STAGES_DIR", directory)
    return directory
