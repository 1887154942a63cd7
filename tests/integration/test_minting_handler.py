"""The real Lambda handler over moto, fed the API Gateway events in events/minting/."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from functions.minting import wiring
from functions.minting.handler import lambda_handler
from functions.minting.settings import ConfigurationError, Settings
from functions.minting.store import StoreError
from ibi.core.labels import parse_label
from ibi_tools.local.gateway import LocalContext
from tests.conftest import minting_environment

EVENTS = Path(__file__).parents[2] / "events" / "minting"
Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def event(name: str, **changes: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text())
    loaded.update(changes)
    return loaded


@pytest.fixture(autouse=True)
def fresh_runtime() -> Iterator[None]:
    yield
    wiring.uninstall()


@pytest.fixture
def invoke(dynamodb: Any) -> Invoke:
    settings = Settings.from_environment(minting_environment())
    wiring.install(wiring.build(settings, dynamodb=dynamodb))
    return lambda e: lambda_handler(e, context("minting", "test-request"))


def context(function: str, request_id: str) -> Any:
    """A Lambda context, as local mode makes one."""
    return LocalContext(function, request_id)


def body(answer: dict[str, Any]) -> Any:
    return json.loads(answer["body"])


def test_every_event_has_an_answer(invoke: Invoke) -> None:
    expected = {
        "mint.json": 200,
        "mint_batch.json": 200,
        "mint_idempotent.json": 200,
        "mint_malformed_json.json": 400,
        "mint_count_out_of_range.json": 400,
        "mint_unknown_subsystem.json": 404,
        "mint_wrong_method.json": 405,
        "list_mints.json": 200,
        "list_mints_newest.json": 200,
        "list_mints_bad_order.json": 400,
        "find_mint.json": 404,
        "verify_mints.json": 200,
        "list_subsystems.json": 200,
    }
    assert sorted(expected) == sorted(p.name for p in EVENTS.glob("*.json"))
    for name, status in expected.items():
        answer = invoke(event(name))
        assert answer["statusCode"] == status, (name, answer["body"])
        assert answer["headers"]["Content-Type"] == "application/json"
        if status >= 400:
            error = body(answer)["error"]
            assert error["code"] and error["message"]
            assert "Traceback" not in answer["body"]


def test_mint_answers_both_forms_of_one_date(invoke: Invoke) -> None:
    ibis = body(invoke(event("mint.json")))["ibis"]
    assert len(ibis) == 1
    rep, ibip = parse_label(ibis[0]["rep"]), parse_label(ibis[0]["ibip"])
    assert rep.date == ibip.date == Decimal(ibis[0]["date"])
    assert rep.host == "ibi.example.org" and ibip.ip == "192.0.2.10"
    assert ibis[0]["iso"].endswith("Z")


@pytest.mark.parametrize(
    ("sent", "says"),
    [
        ("null", "must be a JSON object"),
        ('{"count": ' + "7" * 5000 + "}", "more than 40 characters"),
        ("[" * 20_000 + "]" * 20_000, "levels deep"),
    ],
    ids=["null", "5000-digit-count", "nested-20000"],
)
def test_a_body_minting_cannot_take_is_a_400_and_mints_nothing(
    invoke: Invoke, sent: str, says: str
) -> None:
    answer = invoke(event("mint.json", body=sent))
    assert answer["statusCode"] == 400 and says in body(answer)["error"]["message"]
    assert body(invoke(event("list_mints.json")))["records"] == []


def test_the_record_holds_who_asked_and_the_key(invoke: Invoke) -> None:
    minted = body(invoke(event("mint_idempotent.json")))["ibis"]
    listed = body(invoke(event("list_mints.json")))
    [record] = listed["records"]
    assert record["ibis"] == minted
    assert (
        record["requester"] == "arn:aws:sts::123456789012:assumed-role/ibi-ci-minter/github-actions"
    )
    assert record["idempotency_key"] == "run-4242-attempt-1-sha256-9f86d081884c7d65"
    assert listed["next"] is None


def test_retried_request_gets_the_same_ibis(invoke: Invoke) -> None:
    first = invoke(event("mint_idempotent.json"))
    again = invoke(event("mint_idempotent.json"))
    assert body(again) == body(first)
    assert again["headers"].get("Idempotent-Replayed") == "true"
    assert len(body(invoke(event("list_mints.json")))["records"]) == 1


def test_state_survives_a_new_execution_environment(dynamodb: Any) -> None:
    """A cold start reads the last date from the table: dates keep increasing."""
    dates = []
    for _ in range(3):
        settings = Settings.from_environment(minting_environment())
        wiring.install(wiring.build(settings, dynamodb=dynamodb))  # a new environment
        answer = lambda_handler(event("mint_batch.json", body='{"count": 5}'), context("m", "r"))
        dates += [Decimal(i["date"]) for i in json.loads(answer["body"])["ibis"]]
    assert dates == sorted(set(dates)) and len(dates) == 15


def test_too_early_is_429_with_retry_after(dynamodb: Any) -> None:
    settings = Settings.from_environment(minting_environment(max_wait="1"))
    wiring.install(wiring.build(settings, dynamodb=dynamodb))
    answer = lambda_handler(
        event("mint.json", body='{"subsystem": "classic", "count": 30}'), context("m", "r")
    )
    assert answer["statusCode"] == 429
    assert int(answer["headers"]["Retry-After"]) >= 1


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ({"limit": "0"}, 400),
        ({"limit": "abc"}, 400),
        ({"after": "yesterday"}, 400),
        ({"subsystem": "nope"}, 404),
        ({"subsystem": "classic"}, 200),
    ],
)
def test_listing_validates_its_query(invoke: Invoke, query: dict[str, str], status: int) -> None:
    assert invoke(event("list_mints.json", queryStringParameters=query))["statusCode"] == status


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"IBI_SUBSYSTEMS": "not json"}, "invalid minting configuration"),
        ({"IBI_SUBSYSTEMS": "[]"}, "at least one"),
        ({"IBI_DEFAULT_SUBSYSTEM": "missing"}, "not one of"),
        ({"IBI_MAX_WAIT_SECONDS": "99"}, "between 0 and 20"),
        ({"IBI_STATE_TABLE": ""}, "IBI_STATE_TABLE"),
        (
            {
                "IBI_SUBSYSTEMS": json.dumps(
                    [
                        {
                            "name": "a",
                            "host": "x.example.org",
                            "ip": "192.0.2.1",
                            "granularity": "1",
                        },
                        {
                            "name": "b",
                            "host": "x.example.org",
                            "ip": "192.0.2.2",
                            "granularity": "1",
                        },
                    ]
                )
            },
            "share the prefix",
        ),
        (
            {
                "IBI_SUBSYSTEMS": json.dumps(
                    [{"name": "a", "host": "x.example.org", "ip": "192.0.2.1", "granularity": "2"}]
                )
            },
            "granularity",
        ),
    ],
)
def test_bad_configuration_is_refused_at_cold_start(changes: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_environment({**minting_environment(), **changes})


def test_an_answer_lost_after_the_record_is_replayed_not_minted_again(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Lambda failed after the state write and the record: a retry gets those IBIs."""
    service = wiring.runtime().service

    def died(*_: Any) -> None:
        raise StoreError("the execution environment died", throttled=False)

    monkeypatch.setattr(service.store, "complete", died)
    assert invoke(event("mint_idempotent.json"))["statusCode"] == 503
    monkeypatch.undo()
    assert invoke(event("mint_idempotent.json"))["statusCode"] == 409  # its lease still runs
    later = Decimal(120) + service._clock()
    monkeypatch.setattr(service, "_clock", lambda: later)
    again = invoke(event("mint_idempotent.json"))
    assert again["statusCode"] == 200 and again["headers"].get("Idempotent-Replayed") == "true"
    [record] = body(invoke(event("list_mints.json")))["records"]
    assert body(again)["ibis"] == record["ibis"]
