"""The resolver's real handler over moto, fed the events in events/resolver/ (no Archive up)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from functions.resolver import handler, wiring
from functions.resolver.settings import ResolverSettings
from functions.resolver.wiring import ensure_tables
from ibi_tools.local.gateway import LocalContext

EVENTS = Path(__file__).parents[2] / "events" / "resolver"


def event(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return loaded


@pytest.fixture
def invoke(tmp_path: Path) -> Iterator[Callable[[str], dict[str, Any]]]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, "resolver")
        settings = ResolverSettings.from_environment(
            {"IBI_RESOLVER_TABLE": "resolver", "IBI_PEPPER_FILE": str(tmp_path / "pepper")}
        )
        wiring.install(wiring.build(settings, dynamodb=client))
        try:
            yield lambda name: handler.lambda_handler(event(name), LocalContext("resolver", "t"))
        finally:
            wiring.install(None)


EXPECTED = {
    "landing.json": (200, "text/html"),
    "inspect.json": (200, "application/json"),
    "inspect_invalid.json": (400, "application/json"),
    "status.json": (200, "text/html"),
    "favicon.json": (204, None),
    "register_archive.json": (200, "application/json"),
    "list_archives.json": (200, "application/json"),
    "inclusion_request.json": (400, "text/plain"),  # its address is not a public one here
    "exclusion_request.json": (200, "text/plain"),
    "resolve.json": (504, "text/html"),  # no Archive is included: nobody answers
    "resolve_modifier.json": (504, "text/html"),
    "resolve_original_required.json": (504, "text/html"),
    "resolve_file_list.json": (504, "text/html"),
    "resolve_malformed.json": (400, "text/plain"),
}


def test_every_resolver_event(invoke: Callable[[str], dict[str, Any]]) -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in EVENTS.glob("*.json"))
    for name, (status, kind) in EXPECTED.items():
        answer = invoke(name)
        assert answer["statusCode"] == status, (name, answer.get("body", "")[:300])
        if kind:
            assert answer["headers"]["Content-Type"].startswith(kind), name
        assert "Traceback" not in answer.get("body", "")
    inspected = json.loads(invoke("inspect.json")["body"])
    assert inspected["ip"] == "150.163.34.243" and inspected["port"] == 800
    listed = json.loads(invoke("list_archives.json")["body"])["archives"]
    assert listed[0]["archiveserviceibi"] == {"ibip": "8JMKD3MGP8W/3FSUP4L"}
    assert "key" not in json.dumps(listed).replace("key_", "")  # never the key nor its hash
    assert invoke("exclusion_request.json")["body"].strip() == "status.archive excluded"
    html = invoke("landing.json")
    assert "Content-Security-Policy" in html["headers"]


def test_registration_keys_never_reach_a_log(invoke: Callable[[str], dict[str, Any]]) -> None:
    import io
    import logging

    from functions.resolver.handler import logger

    buffer = io.StringIO()
    stream = logging.StreamHandler(buffer)
    stream.setFormatter(logger.registered_formatter)
    logger.addHandler(stream)
    logger.setLevel("DEBUG")
    try:
        for name in ("register_archive.json", "inclusion_request.json", "exclusion_request.json"):
            invoke(name)
    finally:
        logger.setLevel("WARNING")
        logger.removeHandler(stream)
    logged = buffer.getvalue()
    assert '"switch"' in logged and "archive registered" in logged  # they were logged…
    assert "0987654321" not in logged  # …never with the key
