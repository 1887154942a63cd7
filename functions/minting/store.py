"""Data access for minting: the only module here that talks to DynamoDB.

Three tables:

- state: one item per identification subsystem, ``last_date`` (its last-date-for-suffix),
  advanced only by a conditional write on the previous value;
- record: one item per mint request, every date it handed out, who asked and the
  idempotency key (partition ``subsystem``, sort ``first_date``);
- idempotency: one item per (requester, Idempotency-Key), claimed before minting and
  completed with the answer, so that a retried request gets the same IBIs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from ibi.core.dates import format_date

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

THROTTLING_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "LimitExceededException",
}


class StoreError(Exception):
    """The store could not do what was asked (throttled, unreachable, failed)."""

    def __init__(self, message: str, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.throttled = throttled


class StateConflict(Exception):
    """The conditional write lost: another minter advanced the state first."""

    def __init__(self, current: Decimal | None) -> None:
        super().__init__("the subsystem's last date changed")
        self.current = current


@dataclass(frozen=True, slots=True)
class MintRecord:
    """What one mint request handed out, recorded before any IBI is returned."""

    subsystem: str
    rep_prefix: str
    ibip_prefix: str
    dates: tuple[Decimal, ...]
    previous_date: Decimal | None
    requester: str
    request_id: str
    recorded_at: Decimal
    idempotency_key: str | None = None

    @property
    def first_date(self) -> Decimal:
        return self.dates[0]


@dataclass(slots=True)
class IdempotencyClaim:
    """The state of an Idempotency-Key: ``in_progress`` or ``complete`` with its answer."""

    key_id: str
    fingerprint: str
    status: str
    lease_until: Decimal
    answer: dict[str, Any] | None = field(default=None)


class MintStore(Protocol):
    def last_date(self, subsystem: str) -> Decimal | None: ...

    def advance(
        self,
        subsystem: str,
        previous: Decimal | None,
        new: Decimal,
        *,
        granularity: str,
        count: int,
    ) -> None: ...

    def put_record(self, record: MintRecord) -> None: ...

    def list_records(
        self, subsystem: str, *, after: Decimal | None, limit: int
    ) -> tuple[list[MintRecord], Decimal | None]: ...

    def claim(
        self, key_id: str, fingerprint: str, *, now: Decimal, lease_until: Decimal, expires_at: int
    ) -> IdempotencyClaim | None: ...

    def complete(self, key_id: str, answer: dict[str, Any]) -> None: ...

    def release(self, key_id: str) -> None: ...


def _n(value: Decimal | int) -> dict[str, str]:
    return {"N": format_date(Decimal(value))}


def _store_error(error: Exception, action: str) -> StoreError:
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        return StoreError(f"{action}: {code}", throttled=code in THROTTLING_CODES)
    return StoreError(f"{action}: {type(error).__name__}")


class DynamoMintStore:
    """:class:`MintStore` on DynamoDB (or anything that speaks its API: moto, dynalite)."""

    def __init__(
        self, client: DynamoDBClient, *, state_table: str, record_table: str, idempotency_table: str
    ) -> None:
        self._client = client
        self._state_table = state_table
        self._record_table = record_table
        self._idempotency_table = idempotency_table

    # -- state ---------------------------------------------------------------------------------

    def last_date(self, subsystem: str) -> Decimal | None:
        try:
            answer = self._client.get_item(
                TableName=self._state_table,
                Key={"subsystem": {"S": subsystem}},
                ConsistentRead=True,
                ProjectionExpression="#last",
                ExpressionAttributeNames={"#last": "last_date"},
            )
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error, "reading the subsystem state") from error
        item = answer.get("Item")
        return Decimal(item["last_date"]["N"]) if item else None

    def advance(
        self,
        subsystem: str,
        previous: Decimal | None,
        new: Decimal,
        *,
        granularity: str,
        count: int,
    ) -> None:
        names = {"#last": "last_date"}
        values: dict[str, Any] = {
            ":new": _n(new),
            ":granularity": {"S": granularity},
            ":count": _n(count),
        }
        if previous is None:
            condition = "attribute_not_exists(#subsystem)"
            names["#subsystem"] = "subsystem"
        else:
            condition = "#last = :previous"
            values[":previous"] = _n(previous)
        try:
            self._client.update_item(
                TableName=self._state_table,
                Key={"subsystem": {"S": subsystem}},
                UpdateExpression=(
                    "SET #last = :new, granularity = :granularity ADD minted_count :count"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise _store_error(error, "advancing the subsystem state") from error
            item: Any = error.response.get("Item")
            if item is not None:  # the winner's state, without a second read
                raise StateConflict(Decimal(item["last_date"]["N"])) from None
            raise StateConflict(self.last_date(subsystem)) from None
        except BotoCoreError as error:
            raise _store_error(error, "advancing the subsystem state") from error

    # -- the record ----------------------------------------------------------------------------

    def put_record(self, record: MintRecord) -> None:
        item: dict[str, Any] = {
            "subsystem": {"S": record.subsystem},
            "first_date": _n(record.first_date),
            "last_date": _n(record.dates[-1]),
            "dates": {"S": " ".join(format_date(date) for date in record.dates)},
            "count": _n(len(record.dates)),
            "rep_prefix": {"S": record.rep_prefix},
            "ibip_prefix": {"S": record.ibip_prefix},
            "requester": {"S": record.requester},
            "request_id": {"S": record.request_id},
            "recorded_at": _n(record.recorded_at),
        }
        if record.previous_date is not None:
            item["previous_date"] = _n(record.previous_date)
        if record.idempotency_key is not None:
            item["idempotency_key"] = {"S": record.idempotency_key}
        try:
            self._client.put_item(
                TableName=self._record_table,
                Item=item,
                ConditionExpression="attribute_not_exists(#subsystem)",
                ExpressionAttributeNames={"#subsystem": "subsystem"},
            )
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error, "recording the minted IBIs") from error

    def list_records(
        self, subsystem: str, *, after: Decimal | None, limit: int
    ) -> tuple[list[MintRecord], Decimal | None]:
        query: dict[str, Any] = {
            "TableName": self._record_table,
            "KeyConditionExpression": "#subsystem = :subsystem",
            "ExpressionAttributeNames": {"#subsystem": "subsystem"},
            "ExpressionAttributeValues": {":subsystem": {"S": subsystem}},
            "Limit": limit,
            "ConsistentRead": True,
        }
        if after is not None:
            query["KeyConditionExpression"] += " AND #first > :after"
            query["ExpressionAttributeNames"]["#first"] = "first_date"
            query["ExpressionAttributeValues"][":after"] = _n(after)
        try:
            answer = self._client.query(**query)
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error, "listing the record") from error
        records = [_record_from_item(item) for item in answer.get("Items", [])]
        more = answer.get("LastEvaluatedKey")
        return records, (Decimal(more["first_date"]["N"]) if more else None)

    # -- idempotency ---------------------------------------------------------------------------

    def claim(
        self, key_id: str, fingerprint: str, *, now: Decimal, lease_until: Decimal, expires_at: int
    ) -> IdempotencyClaim | None:
        """Claim ``key_id`` for this request; ``None`` if claimed, else the existing claim."""
        try:
            self._client.put_item(
                TableName=self._idempotency_table,
                Item={
                    "key": {"S": key_id},
                    "fingerprint": {"S": fingerprint},
                    "status": {"S": "in_progress"},
                    "lease_until": _n(lease_until),
                    "expires_at": _n(expires_at),
                },
                ConditionExpression=(
                    "attribute_not_exists(#key) OR (#status = :in_progress AND #lease < :now)"
                ),
                ExpressionAttributeNames={
                    "#key": "key",
                    "#status": "status",
                    "#lease": "lease_until",
                },
                ExpressionAttributeValues={":in_progress": {"S": "in_progress"}, ":now": _n(now)},
            )
            return None
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise _store_error(error, "claiming the idempotency key") from error
        except BotoCoreError as error:
            raise _store_error(error, "claiming the idempotency key") from error
        existing = self._get_claim(key_id)
        if existing is None:  # released between our write and our read: try once more
            return self.claim(
                key_id, fingerprint, now=now, lease_until=lease_until, expires_at=expires_at
            )
        return existing

    def _get_claim(self, key_id: str) -> IdempotencyClaim | None:
        try:
            answer = self._client.get_item(
                TableName=self._idempotency_table, Key={"key": {"S": key_id}}, ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error, "reading the idempotency key") from error
        item = answer.get("Item")
        if item is None:
            return None
        return IdempotencyClaim(
            key_id=key_id,
            fingerprint=item["fingerprint"]["S"],
            status=item["status"]["S"],
            lease_until=Decimal(item["lease_until"]["N"]),
            answer=json.loads(item["answer"]["S"]) if "answer" in item else None,
        )

    def complete(self, key_id: str, answer: dict[str, Any]) -> None:
        try:
            self._client.update_item(
                TableName=self._idempotency_table,
                Key={"key": {"S": key_id}},
                UpdateExpression="SET #status = :complete, answer = :answer",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":complete": {"S": "complete"},
                    ":answer": {"S": json.dumps(answer, separators=(",", ":"))},
                },
            )
        except (ClientError, BotoCoreError) as error:
            raise _store_error(error, "completing the idempotency key") from error

    def release(self, key_id: str) -> None:
        try:
            self._client.delete_item(
                TableName=self._idempotency_table,
                Key={"key": {"S": key_id}},
                ConditionExpression="#status = :in_progress",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":in_progress": {"S": "in_progress"}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise _store_error(error, "releasing the idempotency key") from error
        except BotoCoreError as error:
            raise _store_error(error, "releasing the idempotency key") from error


def _record_from_item(item: dict[str, Any]) -> MintRecord:
    return MintRecord(
        subsystem=item["subsystem"]["S"],
        rep_prefix=item["rep_prefix"]["S"],
        ibip_prefix=item["ibip_prefix"]["S"],
        dates=tuple(Decimal(text) for text in item["dates"]["S"].split()),
        previous_date=Decimal(item["previous_date"]["N"]) if "previous_date" in item else None,
        requester=item["requester"]["S"],
        request_id=item["request_id"]["S"],
        recorded_at=Decimal(item["recorded_at"]["N"]),
        idempotency_key=item["idempotency_key"]["S"] if "idempotency_key" in item else None,
    )


# Table shapes, for local mode and tests (the CDK construct declares the same for AWS).
TABLE_SCHEMAS: dict[str, dict[str, Any]] = {
    "state": {
        "KeySchema": [{"AttributeName": "subsystem", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "subsystem", "AttributeType": "S"}],
    },
    "record": {
        "KeySchema": [
            {"AttributeName": "subsystem", "KeyType": "HASH"},
            {"AttributeName": "first_date", "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": "subsystem", "AttributeType": "S"},
            {"AttributeName": "first_date", "AttributeType": "N"},
        ],
    },
    "idempotency": {
        "KeySchema": [{"AttributeName": "key", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "key", "AttributeType": "S"}],
    },
}


def ensure_tables(client: DynamoDBClient, names: dict[str, str]) -> None:
    """Create the minting tables that do not exist yet (local mode and tests only)."""
    existing = set(client.list_tables().get("TableNames", []))
    for role, name in names.items():
        if name in existing:
            continue
        client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **TABLE_SCHEMAS[role])
        client.get_waiter("table_exists").wait(
            TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )
