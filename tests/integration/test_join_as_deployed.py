"""Issue 13 item 5: an Archive joins a resolver whose service IBI is not the default, with the
environment the synthesized templates give the two Lambdas (as set in AWS), on loopback.

Only what cannot exist off AWS is swapped: table names (CloudFormation references) for local
tables, the pepper secret for a file, the resolver's public address for its loopback one, the
SSM registration key for a function returning it. Every other variable, the resolver service
IBI included, is the template's.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from functions.archive.model import Forms
from ibi.client import ResolverClient
from ibi_tools.local.gateway import LocalGateway
from ibi_tools.local.stores import free_port
from infra.config import cdk_json_context
from infra.stacks import ARCHIVE_STACK_ID, RESOLVER_STACK_ID, build_app

CUSTOM_RESOLVER_IBI = "LK47B6W/362SFKH"
ARCHIVE_SERVICE = Forms(ibip="8JMKD3MGP8W/3FSUP4L")
KEY = "1234567890-0987654321"
SKIP_BUNDLING = {"aws:cdk:bundling-stacks": []}


def _environments(tmp_path: Path, join: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The archive and resolver Lambdas' variables in a synthesized app (cdk.json + context)."""
    context = {
        **cdk_json_context(),
        **SKIP_BUNDLING,
        "ibi:resolver": {"service_ibi": CUSTOM_RESOLVER_IBI},
        "ibi:archive": {"join": join},
    }
    app = build_app(App(outdir=str(tmp_path / "cdk.out"), context=context))
    found = []
    for stack_id, handler in (
        (ARCHIVE_STACK_ID, "functions.archive.handler.lambda_handler"),
        (RESOLVER_STACK_ID, "functions.resolver.handler.lambda_handler"),
    ):
        functions = Template.from_stack(app.node.find_child(stack_id)).find_resources(  # type: ignore[arg-type]
            "AWS::Lambda::Function"
        )
        (function,) = [f for f in functions.values() if f["Properties"]["Handler"] == handler]
        found.append(function["Properties"]["Environment"]["Variables"])
    return found[0], found[1]


def _literal(variables: dict[str, Any]) -> dict[str, str]:
    """The variables whose values the template spells out (not references)."""
    return {name: value for name, value in variables.items() if isinstance(value, str)}


def _start_resolver(variables: dict[str, Any], tables: Any, tmp_path: Path) -> LocalGateway:
    from functions.resolver import wiring
    from functions.resolver.settings import ResolverSettings

    wiring.ensure_tables(tables.client(), "registry")
    environment = {
        **_literal(variables),
        "IBI_RESOLVER_TABLE": "registry",  # a Ref in the template
        "IBI_PEPPER_FILE": str(tmp_path / "pepper"),  # the secret, off AWS
        "IBI_ALLOW_NETWORKS": "127.0.0.0/8",  # the Archive is on loopback
        "IBI_ARCHIVE_TIMEOUT_SECONDS": "1",
    }
    settings = ResolverSettings.from_environment(environment)
    assert settings.service_ibi == CUSTOM_RESOLVER_IBI

    def handler() -> Any:
        from functions.resolver.handler import lambda_handler

        wiring.install(wiring.build(settings, dynamodb=tables.client()))
        return lambda_handler

    return LocalGateway("resolver", handler, free_port(), workers=2).start()


def _start_archive(
    variables: dict[str, Any], resolver_url: str, tables: Any, client: Any
) -> LocalGateway:
    from functions.archive import wiring
    from functions.archive.settings import ArchiveSettings
    from functions.archive.store import DynamoItemStore, ensure_table

    ensure_table(client, "items")
    DynamoItemStore(client, "items").claim_service_item(ARCHIVE_SERVICE)
    port = free_port()
    environment = {
        **_literal(variables),
        "IBI_ARCHIVE_TABLE": "items",  # a Ref in the template
        "IBI_ARCHIVE_BASE_URL": f"http://127.0.0.1:{port}",
        "IBI_JOIN_RESOLVER_URL": resolver_url,  # the template's https://urlib.example.org
    }
    settings = ArchiveSettings.from_environment(environment)

    def handler() -> Any:
        from functions.archive.handler import lambda_handler

        runtime = wiring.build(settings, dynamodb=tables.client(), registration_key=lambda: KEY)
        wiring.install(runtime)
        return lambda_handler

    return LocalGateway("archive", handler, port, workers=2).start()


@pytest.mark.parametrize(
    "join",
    [
        # the app's resolver's IBI, found by the app (ibi:resolver.service_ibi)
        {"resolver_url": "https://urlib.example.org", "registration_key_parameter": "/ibi/k"},
        # named in the join itself (a resolver deployed elsewhere)
        {
            "resolver_url": "https://urlib.example.org",
            "registration_key_parameter": "/ibi/k",
            "resolver_service_ibi": CUSTOM_RESOLVER_IBI,
        },
    ],
)
def test_an_archive_joins_a_resolver_with_its_own_service_ibi(
    local_tables: Any, tmp_path: Path, join: dict[str, Any]
) -> None:
    tables, client = local_tables
    archive_env, resolver_env = _environments(tmp_path, join)
    assert archive_env["IBI_REGISTRATION_KEY_PARAMETER"] == "/ibi/k"
    resolver = _start_resolver(resolver_env, tables, tmp_path)
    archive = None
    try:
        admin = ResolverClient(resolver.url, sign=False)
        admin.register(ARCHIVE_SERVICE.ibip or "", KEY)
        archive = _start_archive(archive_env, resolver.url, tables, client)
        # the first request starts the execution environment, which switches itself on
        request = urllib.request.Request(
            f"{archive.url}/api/service", headers={"Accept": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
        [entry] = admin.archives()
        assert entry["included"] and entry["confirmed"], entry
    finally:
        if archive is not None:
            archive.shutdown()
        resolver.shutdown()


def test_without_the_resolvers_ibi_the_join_goes_nowhere(local_tables: Any, tmp_path: Path) -> None:
    """The template before issue 13 (no IBI_RESOLVER_SERVICE_IBI): the Archive asks at the
    default IBI's path, which this resolver does not serve, and is never included."""
    tables, client = local_tables
    join = {"resolver_url": "https://urlib.example.org", "registration_key_parameter": "/ibi/k"}
    archive_env, resolver_env = _environments(tmp_path, join)
    del archive_env["IBI_RESOLVER_SERVICE_IBI"]
    resolver = _start_resolver(resolver_env, tables, tmp_path)
    archive = None
    try:
        admin = ResolverClient(resolver.url, sign=False)
        admin.register(ARCHIVE_SERVICE.ibip or "", KEY)
        archive = _start_archive(archive_env, resolver.url, tables, client)
        request = urllib.request.Request(
            f"{archive.url}/api/service", headers={"Accept": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200  # the Archive serves; the join failed quietly
        [entry] = admin.archives()
        assert not entry["included"]
    finally:
        if archive is not None:
            archive.shutdown()
        resolver.shutdown()
