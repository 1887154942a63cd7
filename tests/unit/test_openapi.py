"""docs/openapi.yaml documents exactly the JSON routes the three Lambdas serve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from functions.archive.handler import app as archive_app
from functions.minting.handler import app as minting_app
from functions.resolver.handler import app as resolver_app

OPENAPI = Path(__file__).parents[2] / "docs" / "openapi.yaml"


def served(app: Any) -> set[str]:
    return {f"{method} {path}" for method, path in ((r.method, r.path) for r in app._static_routes)}


def test_every_json_route_is_documented_and_nothing_else() -> None:
    document = yaml.safe_load(OPENAPI.read_text())
    assert document["openapi"].startswith("3.")
    documented = {
        f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
    }
    json_routes = served(minting_app)
    json_routes |= {r for r in served(archive_app) if " /api/" in r}
    json_routes |= {r for r in served(resolver_app) if " /admin/" in r}
    assert documented == json_routes
    for item in document["paths"].values():
        for operation in item.values():
            assert operation["summary"] and operation["responses"]
