"""Issue 13, item 8: one minting state per prefix, across deploys.

``IbiMinting`` and ``IbiArchive`` each keep a minting state; deployed separately (two apps, two
stages) with subsystems of one prefix they would issue the same labels. Each minting state
claims its prefixes with SSM parameters named after the prefix alone, so CloudFormation refuses
the second stack that claims one in an account and region. :class:`Account` plays that rule on
the synthesized templates: names are unique in an account and region, whoever made them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack

from infra.config import DEFAULT_SUBSYSTEMS, cdk_json_context
from infra.minting import CLAIM_PARAMETER_PATH, claim_parameter_name
from infra.stacks import build_app
from tests.infra.conftest import PRODUCTION
from tests.infra.support import SKIP_BUNDLING

pytestmark = pytest.mark.infra

STAGING_SUBSYSTEM = {
    "name": "staging",
    "host": "staging.ibi.example.org",
    "ip": "192.0.2.20",
    "granularity": "0.001",
}


class AlreadyExists(Exception):
    """What CloudFormation answers a stack that creates a named resource another one holds."""


class Account:
    """One account and region: the SSM parameter names each deployed stack holds."""

    def __init__(self) -> None:
        self.parameters: dict[str, str] = {}

    def deploy(self, template: dict[str, Any], stack_name: str) -> None:
        names = [
            resource["Properties"]["Name"]
            for resource in template["Resources"].values()
            if resource["Type"] == "AWS::SSM::Parameter" and "Name" in resource["Properties"]
        ]
        taken = [name for name in names if self.parameters.get(name, stack_name) != stack_name]
        if taken:
            raise AlreadyExists(f"{stack_name}: {taken} already exist")
        self.parameters.update(dict.fromkeys(names, stack_name))

    def delete(self, stack_name: str) -> None:
        self.parameters = {n: s for n, s in self.parameters.items() if s != stack_name}


def _templates(context: dict[str, object], tmp_path: Path) -> dict[str, dict[str, Any]]:
    app = build_app(
        App(outdir=str(tmp_path), context={**cdk_json_context(), **SKIP_BUNDLING, **context})
    )
    assembly = app.synth()
    return {
        child.stack_name: assembly.get_stack_by_name(child.stack_name).template
        for child in app.node.children
        if isinstance(child, Stack)
    }


def _claims(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        resource["Properties"]["Name"]: resource
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::SSM::Parameter"
        and str(resource["Properties"].get("Name", "")).startswith(CLAIM_PARAMETER_PATH)
    }


def test_every_prefix_the_minting_state_mints_under_is_claimed(tmp_path: Path) -> None:
    templates = _templates({}, tmp_path)
    claims = _claims(templates["IbiArchive"])
    (subsystem,) = DEFAULT_SUBSYSTEMS
    assert set(claims) == {
        claim_parameter_name(subsystem.rep_prefix),
        claim_parameter_name(subsystem.ibip_prefix),
    }
    values = [json.loads(c["Properties"]["Value"]) for c in claims.values()]
    assert {v["prefix"] for v in values} == {subsystem.rep_prefix, subsystem.ibip_prefix}
    assert all(v["subsystem"] == subsystem.name for v in values)
    # the resolver mints nothing and claims nothing
    assert _claims(templates["IbiResolver"]) == {}
    # deleting the stack releases its claims (its state table is kept)
    assert all(c.get("DeletionPolicy", "Delete") == "Delete" for c in claims.values())


def test_a_minting_stack_deployed_beside_the_archive_stack_is_refused(tmp_path: Path) -> None:
    """IbiArchive from one app, IbiMinting from another, the same subsystem: refused."""
    account = Account()
    archive_app = _templates({}, tmp_path / "a")
    minting_app = _templates({"ibi:stacks": ["minting"]}, tmp_path / "m")
    account.deploy(archive_app["IbiArchive"], "IbiArchive")
    account.deploy(archive_app["IbiArchive"], "IbiArchive")  # an update of itself is fine
    with pytest.raises(AlreadyExists, match="IbiMinting"):
        account.deploy(minting_app["IbiMinting"], "IbiMinting")
    account.delete("IbiArchive")
    account.deploy(minting_app["IbiMinting"], "IbiMinting")  # once the first is gone


def test_two_stages_need_two_subsystems(tmp_path: Path, stages_dir: Path) -> None:
    account = Account()
    production = _templates({"ibi:stage": "prod"}, tmp_path / "p")  # stages/prod.json's
    account.deploy(production["IbiArchive-prod"], "IbiArchive-prod")
    same = _templates(
        {"ibi:stage": "staging", "ibi:minting": PRODUCTION["ibi:minting"]}, tmp_path / "s"
    )
    with pytest.raises(AlreadyExists):
        account.deploy(same["IbiArchive-staging"], "IbiArchive-staging")
    own = _templates(
        {
            "ibi:stage": "staging",
            "ibi:minting": {"subsystems": [STAGING_SUBSYSTEM], "default_subsystem": "staging"},
        },
        tmp_path / "o",
    )
    account.deploy(own["IbiArchive-staging"], "IbiArchive-staging")
    assert len(account.parameters) == 4


def test_the_claim_name_fits_ssm_whatever_the_prefix() -> None:
    for prefix in ("example.org/ibi", "urlib.net:8080/rep", "8JMKD3MGP8W/35MME4E"):
        name = claim_parameter_name(prefix)
        assert name.startswith(CLAIM_PARAMETER_PATH) and len(name) < 1011
        assert all(c.isalnum() or c in "/_.-" for c in name)
    assert claim_parameter_name("a/b") != claim_parameter_name("a/c")
