"""One synthesized app shared by the CDK tests: synthesis is the slow part."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

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
from tests.infra.support import SKIP_BUNDLING, Synthesized


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
