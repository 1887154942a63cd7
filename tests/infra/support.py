"""What the CDK tests share: the synthesized app and how to look into it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template

from infra.stacks import MintingStack

# Bundling is tested once, in test_bundling.py; elsewhere the asset is only hashed.
SKIP_BUNDLING = {"aws:cdk:bundling-stacks": []}


@dataclass(frozen=True)
class Synthesized:
    app: App
    stack: MintingStack
    template: Template
    outdir: Path

    def logical_id(self, construct: Any) -> str:
        """The template's name for an L2 construct's resource."""
        return self.stack.get_logical_id(construct.node.default_child)

    def validation_report(self) -> dict[str, Any]:
        """The policy-validation report the synth wrote (cdk-nag's findings)."""
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text())
        return report
