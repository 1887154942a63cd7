"""The minting Lambda under fuzzed requests: every route, any body, query and header (issue 11,
finding 8). The real handler and the real DynamoDB store over moto, in-process; a fake clock so
that no request waits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

from functions.minting import wiring
from functions.minting.handler import lambda_handler
from functions.minting.service import MintingService
from functions.minting.settings import Settings
from functions.minting.store import DynamoMintStore, ensure_tables
from functions.shared.edge import MAX_JSON_DEPTH
from tests.conftest import TABLES, minting_environment
from tests.fakes import FakeClock
from tests.fuzzing import (
    FUZZ,
    bodies,
    check_answer,
    event,
    json_values,
    numbers,
    objects,
    query_strings,
    texts,
)

MINT_FIELDS = {
    "subsystem": st.sampled_from(["default", "classic", "nope", ""]) | texts,
    "count": st.integers(min_value=-2, max_value=1002) | numbers,
}
DATES = ["1287588115.346", "0", "-1", "1e999", "NaN", "sNaN", "9" * 60, "2026-01-01"]


@pytest.fixture(scope="module")
def minting() -> Iterator[None]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, TABLES)
        settings = Settings.from_environment(minting_environment())
        clock = FakeClock(Decimal("1795473000"))
        store = DynamoMintStore(
            client,
            state_table=TABLES["state"],
            record_table=TABLES["record"],
            idempotency_table=TABLES["idempotency"],
        )
        service = MintingService(
            store,
            settings.subsystems,
            default_subsystem=settings.default_subsystem,
            clock=clock,
            sleep=clock.sleep,
            max_wait=settings.max_wait,
        )
        wiring.install(wiring.Runtime(service=service, settings=settings))
        yield
        wiring.uninstall()


def mint(body: bytes, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return lambda_handler(event("POST", "/mint", body=body, headers=headers), context())


def context() -> Any:
    from ibi_tools.local.gateway import LocalContext

    return LocalContext("minting", "fuzz")


def error_of(answer: dict[str, Any]) -> dict[str, str]:
    error: dict[str, str] = json.loads(answer["body"])["error"]
    return error


@pytest.mark.parametrize(
    ("body", "says"),
    [
        pytest.param(
            b'{"count": ' + b"9" * 5000 + b"}", "more than 40 characters", id="5000-digits"
        ),
        pytest.param(b'{"count": 1' + b"0" * 50 + b"}", "more than 40 characters", id="51-digits"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "levels deep", id="nested-100000"),
        pytest.param(b"[" * 500 + b"]" * 500, "levels deep", id="nested-500"),
        pytest.param(
            b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1),
            f"more than {MAX_JSON_DEPTH} levels deep",
            id="nested-one-too-deep",
        ),
        pytest.param(b"null", "must be a JSON object", id="null"),
        pytest.param(b"[]", "must be a JSON object", id="list"),
        pytest.param(b'{"count": NaN}', "NaN is not a JSON number", id="NaN"),
        pytest.param(b'{"count": Infinity}', "Infinity is not a JSON number", id="Infinity"),
        pytest.param(b"\xff\xfe not UTF-8", "not valid JSON", id="not-UTF-8"),
    ],
)
def test_what_broke_minting_is_a_400_that_says_why(minting: None, body: bytes, says: str) -> None:
    answer = mint(body)
    assert answer["statusCode"] == 400, answer["body"][:300]
    assert answer["headers"]["Content-Type"] == "application/json"
    error = error_of(answer)
    assert error["code"] == "InvalidMintRequest" and says in error["message"]


def test_an_empty_body_still_mints_one(minting: None) -> None:
    answer = mint(b"")
    assert answer["statusCode"] == 200
    assert len(json.loads(answer["body"])["ibis"]) == 1


def test_a_base64_body_that_is_not_base64_is_a_400(minting: None) -> None:
    request = event("POST", "/mint", body=b'{"count": 1}')
    request.update(body="%%%not base64", isBase64Encoded=True)
    answer = lambda_handler(request, context())
    assert answer["statusCode"] == 400 and error_of(answer)["code"] == "InvalidMintRequest"


@FUZZ
@given(
    body=bodies(objects(MINT_FIELDS)),
    key=st.none() | st.sampled_from(["k-1", "k-2"]) | texts,
)
def test_post_mint_never_fails_with_a_500(minting: None, body: bytes, key: str | None) -> None:
    headers = {"content-type": "application/json"}
    if key is not None and key.isascii() and key.isprintable():
        headers["idempotency-key"] = key
    request = event("POST", "/mint", body=body, headers=headers)
    check_answer(lambda_handler, request, json_api=True)


@FUZZ
@given(
    route=st.sampled_from(["/mints", "/subsystems", "/mint", "/", "/mints/x", "/MINT"]),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
    query=query_strings(["subsystem", "after", "limit"], ["default", "classic", *DATES]),
    body=st.one_of(st.just(b""), json_values.map(lambda v: json.dumps(v).encode())),
)
def test_every_minting_route_answers_json_whatever_the_query(
    minting: None, route: str, method: str, query: str, body: bytes
) -> None:
    request = event(method, route, query, body=body)
    check_answer(lambda_handler, request, json_api=True, server_errors=frozenset({503}))
