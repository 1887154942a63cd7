"""Each service's OpenAPI document, as ``GET /openapi.json`` serves it.

One source: ``docs/openapi.yaml``, every operation tagged with the service that serves it
(``minting``, ``archive``, ``resolver``). ``openapi.json`` beside this module is that document
as JSON (a Lambda asset has no YAML parser), written by ``python -m ibi_tools.openapi``;
``tests/unit/test_openapi.py`` checks that the two agree.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("openapi.json")
SERVICES = ("minting", "archive", "resolver")


@functools.cache
def _source() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SOURCE.read_text(encoding="utf-8"))
    return document


def _references(value: Any) -> set[str]:
    """The ``$ref`` targets anywhere in ``value``."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("$ref"), str):
                found.add(item["$ref"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _used_components(components: dict[str, Any], paths: dict[str, Any]) -> dict[str, Any]:
    """The components ``paths`` refer to, directly or through other components."""
    kept: dict[str, dict[str, Any]] = {}
    pending = _references(paths)
    while pending:
        _, kind, name = pending.pop().split("/")[-3:]
        if name not in kept.setdefault(kind, {}):
            kept[kind][name] = components[kind][name]
            pending |= _references(components[kind][name])
    return kept


def document(service: str, base_url: str) -> dict[str, Any]:
    """The OpenAPI document of ``service`` (one of :data:`SERVICES`), served from ``base_url``."""
    source = _source()
    paths = {
        path: operations
        for path, item in source["paths"].items()
        if (operations := {m: o for m, o in item.items() if service in o.get("tags", ())})
    }
    components = _used_components(source["components"], paths)
    components["securitySchemes"] = source["components"]["securitySchemes"]
    tag = next(t for t in source["tags"] if t["name"] == service)
    info = {
        **source["info"],
        "title": f"ibi {tag['x-title']}",
        "description": f"{tag['description']}\n\n{source['info']['description']}",
    }
    return copy.deepcopy(
        {
            **{key: value for key, value in source.items() if not key.startswith("x-")},
            "info": info,
            "servers": [{"url": base_url}],
            "tags": [{"name": service, "description": tag["description"]}],
            "paths": paths,
            "components": components,
        }
    )
