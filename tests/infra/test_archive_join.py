"""An Archive configured to join a resolver (context ibi:archive.join)."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.config import ArchiveConfig, ConfigError, cdk_json_context
from infra.stacks import ARCHIVE_STACK_ID, ArchiveStack, build_app
from tests.infra.support import SKIP_BUNDLING

pytestmark = pytest.mark.infra
JOIN = {
    "resolver_url": "https://urlib.example.org",
    "registration_key_parameter": "/ibi/archive/key",
}


def test_joining_archive_gets_the_settings_and_reads_only_its_key(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    context = {**cdk_json_context(), **SKIP_BUNDLING, "ibi:archive": {"join": JOIN}}
    app = build_app(App(outdir=str(tmp_path_factory.mktemp("join")), context=context))
    app.synth()  # cdk-nag: no finding for the parameter grant (it names one parameter)
    stack = app.node.find_child(ARCHIVE_STACK_ID)
    assert isinstance(stack, ArchiveStack)
    template = Template.from_stack(stack)
    archive_fn = [
        f
        for f in template.find_resources("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "functions.archive.handler.lambda_handler"
    ]
    variables = archive_fn[0]["Properties"]["Environment"]["Variables"]
    assert variables["IBI_JOIN_RESOLVER_URL"] == "https://urlib.example.org"
    assert variables["IBI_REGISTRATION_KEY_PARAMETER"] == "/ibi/archive/key"
    statements = [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "ssm:GetParameter" in json.dumps(statement["Action"])
    ]
    (statement,) = statements
    assert statement["Action"] == "ssm:GetParameter"
    assert json.dumps(statement["Resource"]).endswith(':parameter/ibi/archive/key"]]}')


@pytest.mark.parametrize(
    "join",
    [
        {"resolver_url": "https://urlib.example.org"},
        {"resolver_url": "ftp://x", "registration_key_parameter": "/k"},
        {"resolver_url": "https://urlib.example.org", "registration_key_parameter": "a b"},
    ],
)
def test_join_context_is_checked(join: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        ArchiveConfig.from_context({"join": join})
