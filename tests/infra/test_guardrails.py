"""Issue 26 item 4: production guardrails (infra/guardrails.py) and one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.config import REPO_ROOT, ConfigError, cdk_json_context
from infra.guardrails import CONTEXT_KEYS, is_documentation_host
from infra.stacks import build_app
from tests.infra.conftest import PRODUCTION
from tests.infra.support import SKIP_BUNDLING

pytestmark = pytest.mark.infra


def _app(**context: Any) -> App:
    return build_app(App(context={**cdk_json_context(), **SKIP_BUNDLING, **context}))


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"ibi:resolvr": {}}, "ibi:resolvr is not a context key: did you mean ibi:resolver?"),
        ({"ibi:snapstrat": True}, "did you mean ibi:snapstart?"),
        (
            {"ibi:resolver.domain_name": "urlib.example.org"},
            "ibi:resolver.domain_name is not a context key: domain_name is a field of "
            "ibi:resolver, give -c 'ibi:resolver={\"domain_name\": …}'",
        ),
        ({"ibi:zzz": 1}, "ibi:zzz is not a context key: the keys are ibi:stacks"),
    ],
)
def test_unknown_keys_are_refused_with_what_was_meant(
    context: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        _app(**context)
    assert message in str(error.value)


def test_every_key_of_cdk_json_and_the_docs_is_known() -> None:
    keys = {key for key in cdk_json_context() if key.startswith("ibi:")}
    assert keys <= set(CONTEXT_KEYS)
    table = (REPO_ROOT / "docs" / "deploy.md").read_text()
    for key in CONTEXT_KEYS:
        assert f"`{key}" in table, f"docs/deploy.md does not document {key}"


def test_a_production_stage_needs_its_committed_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infra import guardrails

    monkeypatch.setattr(guardrails, "STAGES_DIR", tmp_path)
    with pytest.raises(ConfigError, match=r"commit its settings in stages/prod.json first"):
        _app(**{"ibi:stage": "prod"})
    _app(**{"ibi:stage": "staging"})  # elsewhere a file is optional


def test_the_stage_file_is_the_stages_settings(stages_dir: Path) -> None:
    (stages_dir / "staging.json").write_text(
        json.dumps(
            {"ibi:snapstart": True, "ibi:waf": {"rate_limit": 300}, "ibi:region": "eu-west-1"}
        )
    )
    app = _app(**{"ibi:stage": "staging"})
    assert app.node.try_get_context("ibi:snapstart") is True
    edge = app.node.find_child("IbiEdge-staging")  # the WAF without any -c
    assert isinstance(edge, Stack)
    (acl,) = Template.from_stack(edge).find_resources("AWS::WAFv2::WebACL").values()
    assert acl["Properties"]["Rules"][0]["Statement"]["RateBasedStatement"]["Limit"] == 300
    # the same value on the command line is fine; another is refused
    _app(**{"ibi:stage": "staging", "ibi:waf": '{"rate_limit": 300}'})
    with pytest.raises(ConfigError) as error:
        _app(**{"ibi:stage": "staging", "ibi:waf": "false"})
    assert str(error.value) == (
        'ibi:waf: the command line gives false, staging.json says {"rate_limit":300}; change '
        "stages/staging.json (committed), not the command"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ibi:resolvr": {}}, "stages/prod.json: ibi:resolvr is not a context key"),
        ({"ibi:stage": "prod"}, "stages/prod.json: the stage is the file's name"),
        ([], "stages/prod.json: expected an object of ibi: keys"),
    ],
)
def test_a_stage_file_is_checked_too(stages_dir: Path, settings: Any, message: str) -> None:
    (stages_dir / "prod.json").write_text(json.dumps(settings))
    with pytest.raises(ConfigError, match=message):
        _app(**{"ibi:stage": "prod"})


def test_production_refuses_documentation_values(stages_dir: Path) -> None:
    """cdk.json's example subsystem (192.0.2.10, ibi.example.org) would mint production IBIs
    under a documentation prefix, which cannot be withdrawn."""
    (stages_dir / "prod.json").write_text(
        json.dumps(
            {
                "ibi:operations": PRODUCTION["ibi:operations"],
                "ibi:resolver": {
                    "domain_name": "urlib.example.net",
                    "certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/1",
                },
                "ibi:region": "us-east-1",
            }
        )
    )
    with pytest.raises(ConfigError) as error:
        _app(**{"ibi:stage": "prod"})
    message = str(error.value)
    assert message.startswith("ibi:stage=prod is a production stage and these are documentation")
    assert "ibi:minting.subsystems[default].host = ibi.example.org" in message
    assert "ibi:minting.subsystems[default].ip = 192.0.2.10" in message
    assert "ibi:resolver.domain_name = urlib.example.net" in message


def test_production_needs_somewhere_to_page(stages_dir: Path) -> None:
    (stages_dir / "prod.json").write_text(json.dumps({"ibi:minting": PRODUCTION["ibi:minting"]}))
    with pytest.raises(ConfigError, match="give its alarms somewhere to go"):
        _app(**{"ibi:stage": "prod"})


def test_production_with_its_own_values_synthesizes(stages_dir: Path, tmp_path: Path) -> None:
    app = build_app(
        App(
            outdir=str(tmp_path / "out"),
            context={**cdk_json_context(), **SKIP_BUNDLING, "ibi:stage": "prod"},
        )
    )
    app.synth()
    assert {c.node.id for c in app.node.children if isinstance(c, Stack)} == {
        "IbiArchive-prod",
        "IbiResolver-prod",
    }


@pytest.mark.parametrize(
    ("host", "documentation"),
    [
        ("192.0.2.10", True),
        ("198.51.100.7", True),
        ("203.0.113.255", True),
        ("2001:db8::1", True),
        ("ibi.example.org", True),
        ("EXAMPLE.COM", True),
        ("urlib.example", True),
        ("ibi.test", True),
        ("150.163.34.243", False),
        ("mtc-m18.sid.inpe.br", False),
        ("example.org.br", False),
        ("myexample.org", False),
    ],
)
def test_documentation_hosts(host: str, documentation: bool) -> None:
    assert is_documentation_host(host) is documentation


def test_a_refusal_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """What `cdk synth` prints: the app's stderr, exit status 1."""
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "CDK_OUTDIR": str(tmp_path),
            "CDK_CONTEXT_JSON": json.dumps({"ibi:waf": True, **SKIP_BUNDLING}),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("ibi: ")]
    assert errors == [
        "ibi: ibi:waf needs ibi:region: the edge stack in us-east-1 reads the APIs it fronts "
        "from their stacks, in a region it must know (any region)"
    ]
    assert "Traceback" not in result.stderr
