"""Issue 13: what a live account needs of the templates (offline, from synthesized stacks).

The join's resolver IBI (item 5), the certificate's region (6), stages sharing an account (7),
data kept safe (10) and throttles (3).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from infra.archive import DEPOSIT_GUARD_ROUTES, DEPOSIT_ROUTES
from infra.config import (
    ConfigError,
    DeploymentConfig,
    LifecycleConfig,
    ThrottleConfig,
    cdk_json_context,
)
from infra.stacks import (
    ARCHIVE_STACK_ID,
    MINTING_STACK_ID,
    RESOLVER_STACK_ID,
    ArchiveStack,
    ResolverStack,
    build_app,
)
from tests.infra.conftest import CERTIFICATE_ARN
from tests.infra.support import SKIP_BUNDLING, Synthesized

pytestmark = pytest.mark.infra

ARCHIVE_HANDLER = "functions.archive.handler.lambda_handler"
RESOLVER_HANDLER = "functions.resolver.handler.lambda_handler"
CUSTOM_RESOLVER_IBI = "LK47B6W/362SFKH"
JOIN = {"resolver_url": "https://urlib.example.org", "registration_key_parameter": "/ibi/key"}


def synth(tmp_path: Path, **context: Any) -> App:
    app = build_app(
        App(outdir=str(tmp_path), context={**cdk_json_context(), **SKIP_BUNDLING, **context})
    )
    app.synth()  # cdk-nag: raises on a finding not acknowledged
    return app


def function_environment(template: Template, handler: str) -> dict[str, Any]:
    (function,) = [
        f
        for f in template.find_resources("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == handler
    ]
    variables: dict[str, Any] = function["Properties"]["Environment"]["Variables"]
    return variables


# ---------------------------------------------------------------------------- item 5: the join


@pytest.mark.parametrize(
    ("archive", "resolver", "expected"),
    [
        # join names the resolver's IBI: that one, whatever the app's resolver says
        ({"join": {**JOIN, "resolver_service_ibi": "lk47b6w/362sfkh"}}, {}, CUSTOM_RESOLVER_IBI),
        # join does not: the app's resolver's (the resolver deployed next to it)
        ({"join": JOIN}, {"service_ibi": CUSTOM_RESOLVER_IBI}, CUSTOM_RESOLVER_IBI),
        # neither: the default resolver's (urlib.net's)
        ({"join": JOIN}, {}, "J8LNKB5R7W/3FUQHC5"),
    ],
)
def test_the_archive_joins_at_the_resolvers_service_ibi(
    tmp_path: Path, archive: dict[str, Any], resolver: dict[str, Any], expected: str
) -> None:
    """Without IBI_RESOLVER_SERVICE_IBI a joining Archive sends its inclusion request to the
    default IBI's path: a resolver with another IBI never answers it (504)."""
    app = synth(tmp_path, **{"ibi:archive": archive, "ibi:resolver": resolver})
    archive_env = function_environment(
        Template.from_stack(app.node.find_child(ARCHIVE_STACK_ID)), ARCHIVE_HANDLER
    )
    resolver_env = function_environment(
        Template.from_stack(app.node.find_child(RESOLVER_STACK_ID)), RESOLVER_HANDLER
    )
    assert archive_env["IBI_RESOLVER_SERVICE_IBI"] == expected
    assert archive_env["IBI_JOIN_RESOLVER_URL"] == "https://urlib.example.org"
    assert archive_env["IBI_REGISTRATION_KEY_PARAMETER"] == "/ibi/key"
    if not archive.get("join", {}).get("resolver_service_ibi"):
        # the Archive's path is the one the app's resolver serves its protocol at
        assert archive_env["IBI_RESOLVER_SERVICE_IBI"] == resolver_env["IBI_RESOLVER_SERVICE_IBI"]


def test_an_archive_that_joins_nothing_names_no_resolver(
    archive_synthesized: Synthesized[ArchiveStack],
) -> None:
    variables = function_environment(archive_synthesized.template, ARCHIVE_HANDLER)
    assert "IBI_RESOLVER_SERVICE_IBI" not in variables
    assert "IBI_JOIN_RESOLVER_URL" not in variables


@pytest.mark.parametrize(
    "join",
    [
        {**JOIN, "resolver_service_ibi": "not an ibi"},
        {**JOIN, "resolver_service_ibi": 7},
        {**JOIN, "resolver": "x"},
    ],
)
def test_the_joins_resolver_ibi_is_checked(tmp_path: Path, join: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"ibi:archive\.join"):
        synth(tmp_path, **{"ibi:archive": {"join": join}})


# ------------------------------------------------------------- item 6: the certificate's region


DOMAIN = {"domain_name": "urlib.example.org", "certificate_arn": CERTIFICATE_ARN}


def test_a_custom_domain_needs_the_stacks_region(tmp_path: Path) -> None:
    """An environment-agnostic stack cannot check its certificate: synth refuses it."""
    with pytest.raises(ConfigError, match="needs ibi:region"):
        synth(tmp_path, **{"ibi:resolver": DOMAIN})


def test_a_certificate_of_another_region_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="certificate is in eu-west-1, the stack in us-east-1"):
        synth(tmp_path, **{"ibi:resolver": DOMAIN, "ibi:region": "us-east-1"})


def test_the_certificates_region_deploys_the_domain_there(tmp_path: Path) -> None:
    app = synth(tmp_path, **{"ibi:resolver": DOMAIN, "ibi:region": "eu-west-1"})
    stack = app.node.find_child(RESOLVER_STACK_ID)
    assert isinstance(stack, ResolverStack)
    assert stack.region == "eu-west-1"
    # the cloud assembly pins the region: cdk deploy goes there whatever the profile says
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["artifacts"][RESOLVER_STACK_ID]["environment"] == (
        "aws://unknown-account/eu-west-1"
    )


# ------------------------------------------------------------------ item 7: two stages, one account


def _names(app: App) -> dict[str, Any]:
    """Every name two deployments in one account and region must not share."""
    names: dict[str, Any] = {}
    for stack_id in (ARCHIVE_STACK_ID, RESOLVER_STACK_ID):
        stack = next(
            s
            for s in app.node.children
            if getattr(s, "node", None) and s.node.id.startswith(stack_id)
        )
        template = Template.from_stack(stack).to_json()
        names[stack.node.id] = {
            "stack": stack.stack_name,  # type: ignore[attr-defined]
            "dashboards": sorted(
                json.dumps(r["Properties"]["DashboardName"])
                for r in template["Resources"].values()
                if r["Type"] == "AWS::CloudWatch::Dashboard"
            ),
            "apis": sorted(
                r["Properties"]["Name"]
                for r in template["Resources"].values()
                if r["Type"] == "AWS::ApiGatewayV2::Api"
            ),
            "exports": sorted(
                json.dumps(o["Export"])
                for o in template.get("Outputs", {}).values()
                if "Export" in o
            ),
        }
    return names


def test_without_a_stage_the_stacks_keep_their_ids_and_names(tmp_path: Path) -> None:
    app = synth(tmp_path)
    names = _names(app)
    assert set(names) == {ARCHIVE_STACK_ID, RESOLVER_STACK_ID}
    assert names[ARCHIVE_STACK_ID]["stack"] == "IbiArchive"
    assert names[ARCHIVE_STACK_ID]["dashboards"] == ['"IbiArchive-ibi"']
    assert names[ARCHIVE_STACK_ID]["apis"] == ["IbiArchive-archive", "IbiArchive-minting"]
    assert names[RESOLVER_STACK_ID]["apis"] == ["IbiResolver-resolver"]
    for stack_id in (ARCHIVE_STACK_ID, RESOLVER_STACK_ID):
        stack = app.node.find_child(stack_id)
        assert not stack.termination_protection  # type: ignore[attr-defined]
        template = Template.from_stack(stack).to_json()  # type: ignore[arg-type]
        assert "ibi:stage" not in json.dumps(template)


def test_two_stages_share_no_name(tmp_path: Path, stages_dir: Path) -> None:
    staging = _names(synth(tmp_path / "s", **{"ibi:stage": "staging"}))
    production = _names(synth(tmp_path / "p", **{"ibi:stage": "prod"}))
    assert set(staging) == {"IbiArchive-staging", "IbiResolver-staging"}
    assert set(production) == {"IbiArchive-prod", "IbiResolver-prod"}
    assert staging["IbiArchive-staging"]["dashboards"] == ['"IbiArchive-staging-ibi"']
    assert staging["IbiArchive-staging"]["apis"] == [
        "IbiArchive-staging-archive",
        "IbiArchive-staging-minting",
    ]
    every_staging = {json.dumps(v) for names in staging.values() for v in names.values() if v}
    every_production = {json.dumps(v) for names in production.values() for v in names.values() if v}
    assert not every_staging & every_production


def test_production_is_protected_and_every_resource_tagged(
    tmp_path: Path, stages_dir: Path
) -> None:
    app = synth(
        tmp_path,
        **{"ibi:stage": "prod", "ibi:tags": {"cost-center": "cgoi", "project": "urlib"}},
    )
    for stack_id in ("IbiArchive-prod", "IbiResolver-prod"):
        stack = app.node.find_child(stack_id)
        assert stack.termination_protection  # type: ignore[attr-defined]
        template = Template.from_stack(stack)  # type: ignore[arg-type]
        for table in template.find_resources("AWS::DynamoDB::Table").values():
            tags = {t["Key"]: t["Value"] for t in table["Properties"]["Tags"]}
            assert tags == {"ibi:stage": "prod", "cost-center": "cgoi", "project": "urlib"}
        for function in template.find_resources("AWS::Lambda::Function").values():
            tags = {t["Key"]: t["Value"] for t in function["Properties"]["Tags"]}
            assert tags["ibi:stage"] == "prod"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["artifacts"]["IbiArchive-prod"]["properties"]["terminationProtection"]


def test_termination_protection_is_a_flag_too(tmp_path: Path) -> None:
    app = synth(tmp_path, **{"ibi:stage": "staging", "ibi:termination_protection": "true"})
    assert app.node.find_child("IbiArchive-staging").termination_protection  # type: ignore[attr-defined]
    config = DeploymentConfig.from_context(
        App(context={"ibi:stage": "prod", "ibi:termination_protection": False})
    )
    assert not config.termination_protection


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"ibi:stage": "Staging"}, "ibi:stage"),
        ({"ibi:stage": "a" * 17}, "ibi:stage"),
        ({"ibi:region": "mars-1"}, "ibi:region"),
        ({"ibi:account": "12345"}, "ibi:account"),
        ({"ibi:tags": {"aws:x": "y"}}, "ibi:tags"),
        ({"ibi:tags": ["x"]}, "ibi:tags"),
        ({"ibi:termination_protection": "maybe"}, "ibi:termination_protection"),
    ],
)
def test_deployment_context_is_checked(context: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DeploymentConfig.from_context(App(context=context))


def test_the_minting_stack_takes_the_stage(tmp_path: Path) -> None:
    app = synth(tmp_path, **{"ibi:stacks": ["minting"], "ibi:stage": "staging"})
    assert [c.node.id for c in app.node.children if c.node.id.startswith("Ibi")] == [
        f"{MINTING_STACK_ID}-staging"
    ]


# --------------------------------------------------------------------- item 10: data kept safe


def test_every_table_is_protected_from_deletion(
    archive_synthesized: Synthesized[ArchiveStack],
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    """The minting state, the mint record, the Archive's items, the resolver's registry: a
    DeleteTable call (or a replacement) fails until the protection is lifted."""
    for synthesized in (archive_synthesized, resolver_synthesized):
        tables = synthesized.resources("AWS::DynamoDB::Table")
        assert tables
        for table in tables.values():
            assert table["Properties"]["DeletionProtectionEnabled"] is True
            assert table["DeletionPolicy"] == "Retain"
    stack = archive_synthesized.stack
    for table in (stack.minting.state_table, stack.archive.items_table):
        assert archive_synthesized.logical_id(table) in archive_synthesized.resources(
            "AWS::DynamoDB::Table"
        )


def test_access_logs_expire_and_the_lifecycle_is_configurable(tmp_path: Path) -> None:
    lifecycle = {"noncurrent_version_days": 30, "access_log_days": 400}
    app = synth(tmp_path, **{"ibi:archive": {"lifecycle": lifecycle}})
    stack = app.node.find_child(ARCHIVE_STACK_ID)
    assert isinstance(stack, ArchiveStack)
    buckets = Template.from_stack(stack).find_resources("AWS::S3::Bucket")
    logs_id = stack.get_logical_id(stack.archive.access_logs_bucket.node.default_child)  # type: ignore[arg-type]
    files_id = stack.get_logical_id(stack.archive.files_bucket.node.default_child)  # type: ignore[arg-type]
    assert buckets[logs_id]["Properties"]["LifecycleConfiguration"]["Rules"] == [
        {"Id": "ExpireAccessLogs", "Status": "Enabled", "ExpirationInDays": 400}
    ]
    rules = buckets[files_id]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert {"Id": "ExpireNoncurrentVersions", "Status": "Enabled",
            "NoncurrentVersionExpiration": {"NoncurrentDays": 30}} in rules  # fmt: skip
    with pytest.raises(ConfigError, match="noncurrent_version_days"):
        LifecycleConfig.from_context({"noncurrent_version_days": 0})


# ------------------------------------------------------------------------ item 3: throttles


def _stage(synthesized: Synthesized[Any], api: Any) -> dict[str, Any]:
    api_id = synthesized.logical_id(api)
    (stage,) = [
        s
        for s in synthesized.resources("AWS::ApiGatewayV2::Stage").values()
        if s["Properties"]["ApiId"] == {"Ref": api_id}
    ]
    return stage


def test_every_route_has_a_bucket_of_its_own(
    archive_synthesized: Synthesized[ArchiveStack],
    resolver_synthesized: Synthesized[ResolverStack],
) -> None:
    """Issue 26 item 3: a route setting per route (persistent URLs, OAI-PMH and the deposit
    API never share a bucket), the stage's default for a route added later."""
    defaults = ThrottleConfig()
    public = {"ThrottlingRateLimit": defaults.public_rate, "ThrottlingBurstLimit": 200}
    signed = {"ThrottlingRateLimit": defaults.signed_rate, "ThrottlingBurstLimit": 40}
    oai = {"ThrottlingRateLimit": defaults.oai_rate, "ThrottlingBurstLimit": 10}
    archive = archive_synthesized.stack.archive
    stage = _stage(archive_synthesized, archive.api)
    assert stage["Properties"]["DefaultRouteSettings"] == public
    settings = stage["Properties"]["RouteSettings"]
    deposit = {
        f"{method.value} {path}" for method, path in (*DEPOSIT_ROUTES, *DEPOSIT_GUARD_ROUTES)
    }
    assert set(settings) == deposit | {
        "GET /{proxy+}",
        "HEAD /{proxy+}",
        "GET /oai",
        "POST /oai",
        "POST /transfers/confirm",
    }
    assert all(settings[key] == signed for key in deposit | {"POST /transfers/confirm"})
    assert settings["GET /{proxy+}"] == settings["HEAD /{proxy+}"] == public
    assert settings["GET /oai"] == settings["POST /oai"] == oai  # harvesting below readers
    # the stage waits for the routes its settings name
    assert set(stage["DependsOn"]) >= {
        archive_synthesized.logical_id(route) for route in archive.deposit_routes
    }
    minting = _stage(archive_synthesized, archive_synthesized.stack.minting.api)
    assert minting["Properties"]["DefaultRouteSettings"] == signed
    assert minting["Properties"]["RouteSettings"]["POST /mint"] == signed
    assert minting["Properties"]["RouteSettings"]["GET /openapi.json"] == public
    resolver = resolver_synthesized.stack.resolver
    stage = _stage(resolver_synthesized, resolver.api)
    assert stage["Properties"]["DefaultRouteSettings"] == public
    settings = stage["Properties"]["RouteSettings"]
    assert {key for key, value in settings.items() if value == signed} == {
        "POST /admin/archives",
        "GET /admin/archives",
        "DELETE /admin/archives",
        "POST /admin/prefixes",
        "POST /admin/switch",
        "GET /admin/{proxy+}",
        "HEAD /admin/{proxy+}",
    }
    assert {key for key, value in settings.items() if value == public} == {
        "GET /",
        "GET /{proxy+}",
        "HEAD /{proxy+}",
    }


def test_throttles_are_configurable(tmp_path: Path) -> None:
    throttles = {"public_rate": 5, "public_burst": 10, "signed_rate": 1, "signed_burst": 2}
    app = synth(tmp_path, **{"ibi:throttle": throttles})
    template = Template.from_stack(app.node.find_child(RESOLVER_STACK_ID))  # type: ignore[arg-type]
    (stage,) = template.find_resources("AWS::ApiGatewayV2::Stage").values()
    assert stage["Properties"]["DefaultRouteSettings"] == {
        "ThrottlingRateLimit": 5,
        "ThrottlingBurstLimit": 10,
    }
    assert stage["Properties"]["RouteSettings"]["POST /admin/archives"] == {
        "ThrottlingRateLimit": 1,
        "ThrottlingBurstLimit": 2,
    }
    for bad in (
        {"public_rate": 0},
        {"signed_burst": 5001},
        {"public_rate": True},
        {"oai_rate": 0},
        {"x": 1},
    ):
        with pytest.raises(ConfigError, match="ibi:throttle"):
            ThrottleConfig.from_context(bad)
