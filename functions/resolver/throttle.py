"""Wrong registration keys, counted in a DynamoDB table of their own: never the registry.

One item per counter: ``source <ibi> <source>`` (the wrong keys one source address, or one
IPv6 /64, sent for one registered Archive) and ``archive <ibi>`` (every wrong key sent for
that Archive, from anywhere). Each counts within a fixed window that starts at its first
failure; the item carries ``expires_at`` (the window's end), the table's TTL attribute, so the
state is bounded: one item per (registered Archive, guessing source) and one per Archive,
each gone after its window. The registration service writes here only for a registered IBI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from functions.resolver.errors import RegistryError
from functions.shared import dynamo
from functions.shared.dynamo import AWS_ERRORS, is_conditional_failure, translate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

TTL_ATTRIBUTE = "expires_at"
TABLE_SCHEMA: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "counter", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "counter", "AttributeType": "S"}],
}


def default_table(registry_table: str) -> str:
    """The throttle table's name when the settings give none (local mode and tests)."""
    return f"{registry_table}-throttle"


@dataclass(frozen=True, slots=True)
class Tally:
    """A counter: ``failures`` within a window that ends at ``window_ends`` (epoch s)."""

    failures: int = 0
    window_ends: int = 0

    def current(self, now: int) -> int:
        """The failures that still count at ``now`` (none once the window is over)."""
        return self.failures if self.window_ends > now else 0


class Throttle(Protocol):
    """Counters of wrong keys, as the registration service uses them."""

    def tally(self, counter: str, *, now: int) -> Tally: ...

    def count_failure(self, counter: str, *, now: int, window: int, weight: int = 1) -> Tally: ...


def _key(counter: str) -> dict[str, Any]:
    return {"counter": {"S": counter}}


def _tally(item: dict[str, Any] | None) -> Tally:
    if not item or "failures" not in item or "window_ends" not in item:
        return Tally()
    return Tally(int(item["failures"]["N"]), int(item["window_ends"]["N"]))


class DynamoThrottle:
    """:class:`Throttle` in one DynamoDB table (GetItem and UpdateItem only)."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def tally(self, counter: str, *, now: int) -> Tally:
        try:
            answer = self._client.get_item(
                TableName=self._table, Key=_key(counter), ConsistentRead=True
            )
        except AWS_ERRORS as error:
            raise translate(error, "reading a throttle", RegistryError) from error
        return _tally(answer.get("Item"))

    def count_failure(self, counter: str, *, now: int, window: int, weight: int = 1) -> Tally:
        """Add ``weight`` failures to the counter's window, or start a window of ``window`` s.

        Two conditional writes at most, three when another request starts the new window
        between them; a counter never goes back below what was counted in its window.
        """
        for _ in range(2):
            added = self._write(
                counter,
                UpdateExpression="ADD failures :weight",
                ConditionExpression="window_ends > :now",
                ExpressionAttributeValues={":weight": {"N": str(weight)}, ":now": {"N": str(now)}},
            )
            if added is not None:
                return added
            ends = now + window
            started = self._write(
                counter,
                UpdateExpression="SET failures = :weight, window_ends = :ends, #ttl = :ends",
                ConditionExpression="attribute_not_exists(window_ends) OR window_ends <= :now",
                ExpressionAttributeNames={"#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":weight": {"N": str(weight)},
                    ":ends": {"N": str(ends)},
                    ":now": {"N": str(now)},
                },
            )
            if started is not None:
                return started
        raise RegistryError("counting a failure: the window kept changing")

    def _write(self, counter: str, **request: Any) -> Tally | None:
        """The counter after a conditional update, or None if the condition failed."""
        try:
            answer = self._client.update_item(
                TableName=self._table, Key=_key(counter), ReturnValues="ALL_NEW", **request
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                return None
            raise translate(error, "counting a failure", RegistryError) from error
        return _tally(answer.get("Attributes"))


def ensure_table(client: DynamoDBClient, name: str) -> None:
    """Create the throttle table if missing, TTL on its windows' ends, as CDK makes it in AWS
    (local mode and tests only)."""
    dynamo.ensure_table(client, name, TABLE_SCHEMA, ttl=TTL_ATTRIBUTE)
