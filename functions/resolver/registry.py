"""The resolver's registry of Archives: the only module here that talks to DynamoDB.

One item per registered Archive, keyed by its service IBI (canonical label): the registration
key's keyed hash, whether it is included, where it is, and when it last answered. A
``#throttle#<ibi>`` item counts failed inclusion/exclusion attempts for any IBI, registered
or not, so a wrong key and an unknown Archive are throttled alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

THROTTLE_PREFIX = "#throttle#"


class RegistryError(Exception):
    """The registry is unavailable."""


@dataclass(frozen=True, slots=True)
class RegisteredArchive:
    service_ibi: str  # canonical label: the key
    forms: dict[str, str]
    key_hash: str
    included: bool = False
    address: str | None = None
    protocol: str = "HTTP"
    ip: str | None = None
    platform_version: str | None = None
    admin_email: str | None = None
    confirmed: bool = False
    changed_at: str | None = None
    last_answer_at: str | None = None
    last_outcome: str | None = None


def _error(error: Exception, action: str) -> RegistryError:
    if isinstance(error, ClientError):
        return RegistryError(f"{action}: {error.response.get('Error', {}).get('Code', '')}")
    return RegistryError(f"{action}: {type(error).__name__}")


def _s(value: str | None) -> dict[str, Any]:
    return {"S": value} if value is not None else {"NULL": True}


def _text(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value["S"] if value and "S" in value else None


class DynamoRegistry:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def get(self, service_ibi: str) -> RegisteredArchive | None:
        try:
            answer = self._client.get_item(
                TableName=self._table, Key={"service": {"S": service_ibi}}, ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "reading the registry") from error
        item = answer.get("Item")
        return _archive(item) if item and "key_hash" in item else None

    def register(self, service_ibi: str, forms: dict[str, str], key_hash: str) -> None:
        """Register (or re-key) an Archive; its inclusion state is kept."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"service": {"S": service_ibi}},
                UpdateExpression="SET key_hash = :hash, forms = :forms, "
                "included = if_not_exists(included, :no)",
                ExpressionAttributeValues={
                    ":hash": {"S": key_hash},
                    ":forms": {"S": json.dumps(forms)},
                    ":no": {"BOOL": False},
                },
            )
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "registering an Archive") from error

    def set_included(
        self,
        service_ibi: str,
        *,
        included: bool,
        at: str,
        address: str | None = None,
        protocol: str | None = None,
        ip: str | None = None,
        platform_version: str | None = None,
        admin_email: str | None = None,
        confirmed: bool = False,
    ) -> None:
        names = {"#address": "address", "#protocol": "protocol"}
        values: dict[str, Any] = {":included": {"BOOL": included}, ":at": {"S": at}}
        expression = "SET included = :included, changed_at = :at"
        if included:
            expression += (
                ", #address = :address, #protocol = :protocol, ip = :ip, "
                "platform_version = :version, admin_email = :email, confirmed = :confirmed"
            )
            values.update(
                {
                    ":address": _s(address),
                    ":protocol": _s(protocol),
                    ":ip": _s(ip),
                    ":version": _s(platform_version),
                    ":email": _s(admin_email),
                    ":confirmed": {"BOOL": confirmed},
                }
            )
        else:
            names = {}
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": {"service": {"S": service_ibi}},
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(key_hash)",
            "ExpressionAttributeValues": values,
        }
        if names:
            request["ExpressionAttributeNames"] = names
        try:
            self._client.update_item(**request)
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "switching an Archive") from error

    def note_answer(self, service_ibi: str, *, at: str, outcome: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"service": {"S": service_ibi}},
                UpdateExpression="SET last_answer_at = :at, last_outcome = :outcome",
                ConditionExpression="attribute_exists(key_hash)",
                ExpressionAttributeValues={":at": {"S": at}, ":outcome": {"S": outcome[:200]}},
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise _error(error, "noting an answer") from error
        except BotoCoreError as error:
            raise _error(error, "noting an answer") from error

    def archives(self) -> list[RegisteredArchive]:
        """Every registered Archive (the registry is small: one item per Archive)."""
        found: list[RegisteredArchive] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "attribute_exists(key_hash)",
            "ConsistentRead": True,
        }
        try:
            while True:
                answer = self._client.scan(**request)
                found += [_archive(item) for item in answer.get("Items", [])]
                if "LastEvaluatedKey" not in answer:
                    return sorted(found, key=lambda a: a.service_ibi)
                request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "listing the registry") from error

    # -- throttling failed attempts ----------------------------------------------------------

    def blocked_until(self, service_ibi: str) -> int:
        item = self._raw(THROTTLE_PREFIX + service_ibi)
        return int(item["blocked_until"]["N"]) if item and "blocked_until" in item else 0

    def note_failure(self, service_ibi: str, *, now: int, limit: int, window: int) -> int:
        """Count a failed attempt; block the IBI for ``window`` s after ``limit`` in a window."""
        key = {"service": {"S": THROTTLE_PREFIX + service_ibi}}
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression="ADD failures :one SET expires_at = :expires",
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":expires": {"N": str(now + window)},
                },
                ReturnValues="ALL_NEW",
            )
            failures = int(answer["Attributes"]["failures"]["N"])
            if failures >= limit:
                self._client.update_item(
                    TableName=self._table,
                    Key=key,
                    UpdateExpression="SET blocked_until = :until, failures = :zero",
                    ExpressionAttributeValues={
                        ":until": {"N": str(now + window)},
                        ":zero": {"N": "0"},
                    },
                )
            return failures
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "counting a failure") from error

    def _raw(self, key: str) -> dict[str, Any] | None:
        try:
            answer = self._client.get_item(
                TableName=self._table, Key={"service": {"S": key}}, ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "reading the registry") from error
        item: dict[str, Any] | None = answer.get("Item")
        return item


def _archive(item: dict[str, Any]) -> RegisteredArchive:
    return RegisteredArchive(
        service_ibi=item["service"]["S"],
        forms=json.loads(item["forms"]["S"]) if "forms" in item else {},
        key_hash=item["key_hash"]["S"],
        included=bool(item.get("included", {}).get("BOOL", False)),
        address=_text(item, "address"),
        protocol=_text(item, "protocol") or "HTTP",
        ip=_text(item, "ip"),
        platform_version=_text(item, "platform_version"),
        admin_email=_text(item, "admin_email"),
        confirmed=bool(item.get("confirmed", {}).get("BOOL", False)),
        changed_at=_text(item, "changed_at"),
        last_answer_at=_text(item, "last_answer_at"),
        last_outcome=_text(item, "last_outcome"),
    )


TABLE_SCHEMA: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "service", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "service", "AttributeType": "S"}],
}


def ensure_table(client: DynamoDBClient, name: str) -> None:
    """Create the registry table if missing (local mode and tests only)."""
    if name in client.list_tables().get("TableNames", []):
        return
    client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **TABLE_SCHEMA)
    client.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
