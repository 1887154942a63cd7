"""docs/openapi.yaml documents exactly the JSON routes the three Lambdas serve, and each
Lambda serves its part of it at ``GET /openapi.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from functions.archive.handler import app as archive_app
from functions.minting.handler import app as minting_app
from functions.resolver.handler import app as resolver_app
from functions.shared import openapi
from ibi_tools.local.gateway import build_event
from ibi_tools.openapi import SOURCE, as_json

OPENAPI = Path(__file__).parents[2] / "docs" / "openapi.yaml"
SERVICE_PATHS = {
    "minting": ("/mint", "/subsystems"),
    "archive": ("/api/",),
    "resolver": ("/admin/",),
}


def served(app: Any) -> set[str]:
    return {f"{method} {path}" for method, path in ((r.method, r.path) for r in app._static_routes)}


def documented(document: dict[str, Any]) -> set[str]:
    return {
        f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
    }


def test_every_json_route_is_documented_and_nothing_else() -> None:
    document = yaml.safe_load(OPENAPI.read_text())
    assert document["openapi"].startswith("3.")
    json_routes = {r for r in served(minting_app) if " /openapi.json" not in r}
    json_routes |= {r for r in served(archive_app) if " /api/" in r}
    json_routes |= {r for r in served(resolver_app) if " /admin/" in r}
    assert documented(document) == json_routes | {"GET /openapi.json"}
    for item in document["paths"].values():
        for operation in item.values():
            assert operation["summary"] and operation["responses"]
            assert set(operation["tags"]) <= set(openapi.SERVICES)


def test_the_served_json_is_the_yaml_document() -> None:
    """Run ``python -m ibi_tools.openapi`` after editing docs/openapi.yaml."""
    assert SOURCE == OPENAPI
    assert openapi.SOURCE.read_text(encoding="utf-8") == as_json()


def test_each_service_serves_its_own_routes_with_its_own_address() -> None:
    apps = {"minting": minting_app, "archive": archive_app, "resolver": resolver_app}
    for service, app in apps.items():
        document = openapi.document(service, "https://api.example.org")
        assert document["servers"] == [{"url": "https://api.example.org"}]
        assert documented(document) <= served(app)
        assert "GET /openapi.json" in documented(document)
        assert document["paths"]["/openapi.json"]["get"]["security"] == []
        others = documented(document) - {"GET /openapi.json"}
        assert others and all(r.split()[1].startswith(SERVICE_PATHS[service]) for r in others)
        assert not any(key.startswith("x-") for key in document)


def test_every_reference_of_a_service_document_resolves() -> None:
    for service in openapi.SERVICES:
        document = openapi.document(service, "http://127.0.0.1:8800")
        text = json.dumps(document)
        for reference in openapi._references(document):
            _, kind, name = reference.split("/")[-3:]
            assert name in document["components"][kind], (service, reference)
        assert "#/components/" in text


def test_the_route_answers_the_document_with_the_requests_address() -> None:
    event = build_event(
        method="GET",
        target="/openapi.json",
        headers=[],
        body=b"",
        source_ip="192.0.2.1",
        host="mint.example.org",
    )
    event["headers"]["x-forwarded-proto"] = "https"  # as API Gateway says
    answer = minting_app.resolve(event, None)  # type: ignore[arg-type]
    assert answer["statusCode"] == 200
    document = json.loads(answer["body"])
    assert document["servers"] == [{"url": "https://mint.example.org"}]
    assert "/mint" in document["paths"] and "/api/items" not in document["paths"]
