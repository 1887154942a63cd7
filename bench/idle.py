"""What a stage costs a month with no traffic, counted from its synthesized templates.

``python -m bench.idle``: synthesizes the default app and the documented production one (in
sa-east-1 behind the edge, with SnapStart), counts what CloudWatch, Secrets Manager, WAF and
SnapStart charge for by the month whatever the traffic, and prices it at the list prices below
(us-east-1, as known when this was written: check the AWS pricing pages, they are not fetched
from here). docs/scale.md quotes its output.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.config import cdk_json_context
from infra.stacks import build_app

DASHBOARD = 3.00  # per dashboard a month, beyond the account's first 3
ALARM_METRIC = 0.10  # per standard-resolution metric an alarm evaluates, a month
INSIGHTS_ALARM = 0.30  # per Metrics Insights query alarm, a month (assumed: check pricing)
SECRET = 0.40  # per secret, and per replica, a month
WEB_ACL, WAF_RULE = 5.00, 1.00  # a month
SNAPSTART_CACHE = 0.0000015046  # per GB-second of a cached snapshot (Python)
SECONDS_A_MONTH = 30 * 24 * 3600
CANARY_METRICS = 2 * 0.30  # CanaryResolved, CanaryMs: custom metrics published all month

CONFIGURATIONS: Mapping[str, dict[str, Any]] = {
    "default": {},
    "production (edge, canary, SnapStart)": {
        "ibi:region": "sa-east-1",
        "ibi:resolver": {
            "domain_name": "urlib.inpe.br",
            "certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/1",
        },
        "ibi:waf": {
            "archive_domain_name": "archive.inpe.br",
            "archive_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/2",
        },
        "ibi:canary": {"ibi": "8JMKD3MGP8W/35MME4E"},
        "ibi:operations": {"page_email": "on-call@inpe.br", "ticket_email": "ibi@inpe.br"},
        "ibi:snapstart": True,
    },
}


def count(context: Mapping[str, Any]) -> dict[str, float]:
    """What the app's stacks hold that is billed by the month."""
    app = build_app(
        App(
            outdir=tempfile.mkdtemp(prefix="idle-"),
            context={**cdk_json_context(), "aws:cdk:bundling-stacks": [], **context},
        )
    )
    totals = dict.fromkeys(
        ("dashboards", "alarm_metrics", "insights_alarms", "secrets", "acls", "rules", "gb"), 0.0
    )
    for stack in (c for c in app.node.children if isinstance(c, Stack)):
        resources = Template.from_stack(stack).to_json()["Resources"].values()
        for resource in resources:
            kind, properties = resource["Type"], resource.get("Properties", {})
            if kind == "AWS::CloudWatch::Dashboard":
                totals["dashboards"] += 1
            elif kind == "AWS::CloudWatch::Alarm":
                queries = [m for m in properties.get("Metrics", []) if "SELECT" in str(m)]
                stats = [m for m in properties.get("Metrics", []) if "MetricStat" in m]
                totals["insights_alarms"] += len(queries)
                totals["alarm_metrics"] += len(stats) + (1 if "MetricName" in properties else 0)
            elif kind == "AWS::SecretsManager::Secret":
                totals["secrets"] += 1 + len(properties.get("ReplicaRegions", []))
            elif kind == "AWS::WAFv2::WebACL":
                totals["acls"] += 1
                totals["rules"] += len(properties["Rules"])
            elif kind == "AWS::Lambda::Function" and "SnapStart" in properties:
                totals["gb"] += properties["MemorySize"] / 1024
    return totals


def monthly(totals: Mapping[str, float], *, canary: bool) -> dict[str, float]:
    return {
        "dashboards": totals["dashboards"] * DASHBOARD,
        "alarms": totals["alarm_metrics"] * ALARM_METRIC
        + totals["insights_alarms"] * INSIGHTS_ALARM,
        "secrets": totals["secrets"] * SECRET,
        "waf": totals["acls"] * WEB_ACL + totals["rules"] * WAF_RULE,
        "snapstart": totals["gb"] * SECONDS_A_MONTH * SNAPSTART_CACHE,
        "canary metrics": CANARY_METRICS if canary else 0.0,
    }


def main() -> None:
    for name, context in CONFIGURATIONS.items():
        totals = count(context)
        prices = monthly(totals, canary="ibi:canary" in context)
        print(f"{name}: {', '.join(f'{k} {v:g}' for k, v in totals.items())}")
        print("  " + ", ".join(f"{k} ${v:.2f}" for k, v in prices.items()))
        print(f"  total ≈ ${sum(prices.values()):.2f} a month")


if __name__ == "__main__":
    main()
