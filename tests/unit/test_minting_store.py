"""The minting store's DynamoDB requests and error translation, over botocore's Stubber.

No moto and no network: each test says which request the store must send and what
DynamoDB answers (the integration tests run the same store over moto and local mode's tables).
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import botocore.session
import pytest
from botocore.stub import ANY, Stubber

from functions.minting import wiring
from functions.minting.settings import Settings
from functions.minting.store import (
    DynamoMintStore,
    IdempotencyClaim,
    StateConflict,
    StateWrite,
    StoreError,
)
from tests.conftest import minting_environment


@pytest.fixture
def stubbed() -> Iterator[tuple[DynamoMintStore, Stubber]]:
    client: Any = botocore.session.get_session().create_client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    with Stubber(client) as stubber:
        yield (
            DynamoMintStore(client, state_table="s", record_table="r", idempotency_table="i"),
            stubber,
        )
        stubber.assert_no_pending_responses()


def test_a_throttled_read_is_a_throttled_store_error(
    stubbed: tuple[DynamoMintStore, Stubber],
) -> None:
    store, stubber = stubbed
    stubber.add_client_error("get_item", "ProvisionedThroughputExceededException")
    with pytest.raises(StoreError, match="reading the subsystem state") as caught:
        store.last_date("default")
    assert caught.value.throttled


def test_a_lost_write_names_the_winners_date(stubbed: tuple[DynamoMintStore, Stubber]) -> None:
    store, stubber = stubbed
    write = StateWrite("default", Decimal(1), Decimal(2), "1", 1)
    stubber.add_client_error(
        "update_item",
        "ConditionalCheckFailedException",
        response_meta={},
        modeled_fields={"Item": {"last_date": {"N": "7"}}},
    )
    with pytest.raises(StateConflict) as caught:
        store.advance(write)
    assert caught.value.current == Decimal(7)
    # Without the old item (dynalite), the winner's date is read.
    stubber.add_client_error("update_item", "ConditionalCheckFailedException")
    stubber.add_response("get_item", {"Item": {"last_date": {"N": "8"}}})
    with pytest.raises(StateConflict) as caught:
        store.advance(write)
    assert caught.value.current == Decimal(8)
    stubber.add_client_error("update_item", "ValidationException")
    with pytest.raises(StoreError, match="advancing the subsystem state: ValidationException"):
        store.advance(write)


def test_a_noted_claim_is_not_taken_over_by_a_plain_claim(
    stubbed: tuple[DynamoMintStore, Stubber],
) -> None:
    store, stubber = stubbed
    stubber.add_client_error(
        "put_item",
        "ConditionalCheckFailedException",
        expected_params={
            "TableName": "i",
            "Item": ANY,
            "ConditionExpression": "attribute_not_exists(#key) OR "
            "(#status = :in_progress AND #lease < :now AND attribute_not_exists(minted))",
            "ExpressionAttributeNames": ANY,
            "ExpressionAttributeValues": ANY,
        },
    )
    stored = {
        "key": {"S": "k"},
        "fingerprint": {"S": "default:1"},
        "status": {"S": "in_progress"},
        "lease_until": {"N": "10"},
        "minted": {"S": "my subsystem 5.5"},
    }
    stubber.add_response("get_item", {"Item": stored})
    claim = store.claim("k", "default:1", now=Decimal(20), lease_until=Decimal(85), expires_at=9)
    assert claim == IdempotencyClaim(
        "k", "default:1", "in_progress", Decimal(10), minted=("my subsystem", Decimal("5.5"))
    )
    stubber.add_response("put_item", {})
    assert store.take_over(claim, lease_until=Decimal(85), expires_at=9)
    stubber.add_client_error("put_item", "ConditionalCheckFailedException")
    assert not store.take_over(claim, lease_until=Decimal(85), expires_at=9)


def test_find_record_reads_one_record_by_its_first_date(
    stubbed: tuple[DynamoMintStore, Stubber],
) -> None:
    store, stubber = stubbed
    item: dict[str, Any] = {
        "subsystem": {"S": "default"},
        "first_date": {"N": "5"},
        "dates": {"S": "5 6"},
        "rep_prefix": {"S": "r"},
        "ibip_prefix": {"S": "I"},
        "requester": {"S": "me"},
        "request_id": {"S": "q"},
        "recorded_at": {"N": "4"},
        "idempotency_key": {"S": "k"},
    }
    stubber.add_response("query", {"Items": [item]})
    record = store.find_record("default", Decimal(5))
    assert record is not None and record.dates == (Decimal(5), Decimal(6))
    assert record.idempotency_key == "k" and record.previous_date is None
    stubber.add_response("query", {"Items": []})
    assert store.find_record("default", Decimal(9)) is None


def test_wiring_builds_once_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    def aws_client(service: str) -> object:
        made.append(service)
        return object()

    monkeypatch.setattr("ibi.aws.aws_client", aws_client)
    for name, value in minting_environment().items():
        monkeypatch.setenv(name, value)
    wiring.uninstall()
    try:
        first = wiring.runtime()
        assert wiring.runtime() is first and made == ["dynamodb"]
        installed = wiring.install(
            wiring.build(Settings.from_environment(minting_environment()), dynamodb=object())
        )
        assert wiring.runtime() is installed is not first
        assert installed.service.default_subsystem == "default"
    finally:
        wiring.uninstall()


def test_a_write_after_the_state_needs_no_read_and_names_what_it_replaced() -> None:
    """``StateWrite.first``: the write wins when the state is earlier than the first date
    handed out, whatever ``previous`` was, and answers the date it replaced (issue 14)."""
    import boto3
    from moto import mock_aws

    from functions.minting.store import ensure_tables

    names = {"state": "s", "record": "r", "idempotency": "i"}
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_tables(client, names)
        store = DynamoMintStore(client, state_table="s", record_table="r", idempotency_table="i")

        def write(new: str, previous: str | None = None) -> Decimal | None:
            known = Decimal(previous) if previous else None
            step = StateWrite("default", known, Decimal(new), "0.001", 1, first=Decimal(new))
            replaced = store.advance(step)
            return replaced.end if replaced is not None else None

        assert write("10") is None  # the first write of the subsystem
        assert write("12", previous="5") == Decimal(10)  # stale, but 12 is after 10: it wins
        with pytest.raises(StateConflict) as lost:
            write("12", previous="10")  # not after the state: another environment's date
        assert lost.value.current == Decimal(12)
        assert store.last_date("default") == Decimal(12)
