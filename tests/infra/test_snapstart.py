"""Issue 13 item 11: SnapStart on request (context ``ibi:snapstart``), off by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.config import ConfigError, cdk_json_context, snapstart_enabled
from infra.stacks import ARCHIVE_STACK_ID, RESOLVER_STACK_ID, build_app
from tests.infra.support import SKIP_BUNDLING

pytestmark = pytest.mark.infra
API_HANDLERS = {
    "functions.shared.snapstart.archive",
    "functions.shared.snapstart.minting",
    "functions.shared.snapstart.resolver",
}


def _templates(app: App) -> list[Template]:
    return [
        Template.from_stack(app.node.find_child(stack_id))  # type: ignore[arg-type]
        for stack_id in (ARCHIVE_STACK_ID, RESOLVER_STACK_ID)
    ]


SCHEDULED_HANDLERS = {
    "functions.resolver.drain.lambda_handler",
    "functions.archive.linkcheck.lambda_handler",
}


def test_snapstart_publishes_a_version_and_the_api_calls_its_alias(tmp_path: Path) -> None:
    from tests.infra.test_checks import _lint

    app = build_app(
        App(
            outdir=str(tmp_path),
            context={**cdk_json_context(), **SKIP_BUNDLING, "ibi:snapstart": "true"},
        )
    )
    app.synth()  # cdk-nag clean
    handlers = set()
    for template in _templates(app):
        functions = template.find_resources("AWS::Lambda::Function")
        aliases = template.find_resources("AWS::Lambda::Alias")
        integrations = template.find_resources("AWS::ApiGatewayV2::Integration")
        for logical_id, function in functions.items():
            properties = function["Properties"]
            if properties["Handler"] in SCHEDULED_HANDLERS:
                assert "SnapStart" not in properties  # the queue's drain, the link check:
                continue  # no one waits on them
            handlers.add(properties["Handler"])
            assert properties["SnapStart"] == {"ApplyOn": "PublishedVersions"}
            (alias,) = [
                a
                for a in aliases.values()
                if a["Properties"]["FunctionName"] == {"Ref": logical_id}
            ]
            assert alias["Properties"]["Name"] == "live"
        alias_ids = set(aliases)
        for integration in integrations.values():
            uri = json.dumps(integration["Properties"]["IntegrationUri"])
            assert any(alias_id in uri for alias_id in alias_ids), uri
    assert handlers == API_HANDLERS
    for stack_id in (ARCHIVE_STACK_ID, RESOLVER_STACK_ID):
        _lint(app.node.find_child(stack_id))  # type: ignore[arg-type]


def test_snapstart_is_off_by_default(tmp_path: Path) -> None:
    app = build_app(App(outdir=str(tmp_path), context={**cdk_json_context(), **SKIP_BUNDLING}))
    for template in _templates(app):
        assert not template.find_resources("AWS::Lambda::Alias")
        for function in template.find_resources("AWS::Lambda::Function").values():
            assert "SnapStart" not in function["Properties"]
            assert not function["Properties"]["Handler"].startswith("functions.shared.snapstart")
    with pytest.raises(ConfigError, match="ibi:snapstart"):
        snapstart_enabled(App(context={"ibi:snapstart": "yes"}))
