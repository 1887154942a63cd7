"""What the CDK tests share: the synthesized app and how to look into it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from aws_cdk import App, Stack
from aws_cdk.assertions import Template

# Bundling is tested once, in test_bundling.py; elsewhere the asset is only hashed.
SKIP_BUNDLING = {"aws:cdk:bundling-stacks": []}

StackT = TypeVar("StackT", bound=Stack)


@dataclass(frozen=True)
class Synthesized(Generic[StackT]):
    """One stack of the synthesized app, with its template."""

    app: App
    stack: StackT
    template: Template
    outdir: Path

    def logical_id(self, construct: Any) -> str:
        """The template's name for an L2 construct's resource."""
        return self.stack.get_logical_id(construct.node.default_child)

    def validation_report(self) -> dict[str, Any]:
        """The policy-validation report the synth wrote (cdk-nag's findings)."""
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text())
        return report

    def resources(self, type_: str) -> dict[str, Any]:
        found: dict[str, Any] = self.template.find_resources(type_)
        return found

    def only(self, type_: str) -> dict[str, Any]:
        """The properties of the template's one resource of ``type_``."""
        (resource,) = self.resources(type_).values()
        return dict(resource["Properties"])


def actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def granted(template: Template, role_id: str) -> dict[str, set[str]]:
    """What the role's inline policies allow: resource (as JSON) -> actions."""
    grants: dict[str, set[str]] = {}
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            assert "Condition" not in statement
            resource = json.dumps(statement["Resource"], sort_keys=True)
            grants.setdefault(resource, set()).update(actions(statement))
    return grants


def arn_of(logical_id: str, suffix: str = "") -> str:
    """A statement resource as ``granted`` keys it: the ARN of a resource, or under it."""
    arn = {"Fn::GetAtt": [logical_id, "Arn"]}
    return json.dumps({"Fn::Join": ["", [arn, suffix]]} if suffix else arn, sort_keys=True)
