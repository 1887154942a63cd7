"""Data access for an Archive's items: the only module here that talks to DynamoDB.

One table. An item is stored under its main label (its ibip form when it has one) with
the item as JSON and a ``version`` for optimistic updates; its other label is an alias
record pointing to the main one, so the item is found by either form (spec §7.4). Both are
written with ``attribute_not_exists``: an Archive holds at most one item per IBI.
Alongside: ``#service`` (the Archive's own service item), ``#profile`` (the languages it
holds, from which its relation set is derived) and ``#urlkey#…`` (urlkeys already spent by an
acknowledgment, kept until their validity window ends, then removed by the table's TTL).
Urlkeys are signed, not stored when issued (``urlkeys.py``): a urlRequest only reads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from functions.archive.mapping import item_from_mapping, item_to_mapping
from functions.archive.model import Forms, Item, Profile, State
from functions.shared.dynamo import AWS_ERRORS, StoreError, is_conditional_failure, translate
from functions.shared.dynamo import ensure_table as create_table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

SERVICE_KEY = "#service"
PROFILE_KEY = "#profile"
URLKEY_PREFIX = "#urlkey#"


class ArchiveStoreError(StoreError):
    """The items table failed (throttled, unreachable, refused)."""


class ItemExists(Exception):
    """The Archive already holds an item with this IBI (as ``existing``)."""

    def __init__(self, existing: Item | None) -> None:
        super().__init__("the Archive already holds an item with this IBI")
        self.existing = existing


class StaleItem(Exception):
    """The item changed since it was read: re-read and retry."""


class ItemStore(Protocol):
    def get(self, label: str) -> Item | None: ...
    def create(self, item: Item, *, accesses: int = 0) -> None: ...
    def add_alias(self, alias: str, key: str) -> None: ...
    def replace(self, item: Item, *, expected_version: int) -> None: ...
    def remove(self, item: Item) -> None: ...
    def note_item(self, item: Item) -> None: ...
    def profile(self) -> Profile: ...
    def profile_and_item(self, label: str) -> tuple[Profile, Item | None]: ...
    def service_item(self) -> Forms | None: ...
    def claim_service_item(self, forms: Forms) -> Forms: ...
    def spend_urlkey(self, urlkey: str, *, expires_at: int) -> bool: ...
    def count_access(self, label: str) -> int: ...
    def access_count(self, label: str) -> int: ...
    def scan(
        self, *, after: str | None, limit: int, consistent: bool = True
    ) -> tuple[list[Item], str | None]: ...


def _profile(record: dict[str, Any] | None) -> Profile:
    record = record or {}
    return Profile(
        languages=frozenset(record.get("languages", {}).get("SS", [])),
        unspecified_language=bool(record.get("unspecified", {}).get("BOOL", False)),
    )


def _error(error: Exception, action: str) -> Exception:
    return translate(error, action, ArchiveStoreError)


# ---------------------------------------------------------------------------- DynamoDB


class DynamoItemStore:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table
        # Languages (None: unspecified) this process has noted in the profile. The profile
        # only grows, so a language noted once needs no write again (issue 14: a deposit in a
        # language already noted makes one DynamoDB request fewer).
        self._noted: set[str | None] = set()

    def _get(self, key: str) -> dict[str, Any] | None:
        try:
            answer = self._client.get_item(
                TableName=self._table, Key={"label": {"S": key}}, ConsistentRead=True
            )
        except AWS_ERRORS as error:
            raise _error(error, "reading an item") from error
        item: dict[str, Any] | None = answer.get("Item")
        return item

    def get(self, label: str) -> Item | None:
        return self._item(self._get(label))

    def _item(self, record: dict[str, Any] | None) -> Item | None:
        """The item a record stands for: itself, or the one an alias record points to."""
        if record is not None and "alias_of" in record:
            record = self._get(record["alias_of"]["S"])
        if record is None or "data" not in record:
            return None
        return item_from_mapping(json.loads(record["data"]["S"]), int(record["version"]["N"]))

    def create(self, item: Item, *, accesses: int = 0) -> None:
        """Write a new item (and its aliases); ``accesses``: its count so far (a transfer)."""
        aliases = [label for label in item.ibi.labels if label != item.key]
        written: list[str] = []
        record = self._record(item)
        if accesses:
            record["access_count"] = {"N": str(accesses)}
        try:
            for alias in aliases:
                self._put_new({"label": {"S": alias}, "alias_of": {"S": item.key}})
                written.append(alias)
            self._put_new(record)
        except ItemExists:
            for alias in written:  # undo: the IBI belongs to the item already here
                self._delete_alias(alias, item.key)
            raise ItemExists(self._existing(item)) from None

    def add_alias(self, alias: str, key: str) -> None:
        """``alias`` (another form of the IBI) now finds item ``key``; ``ItemExists`` if the
        label is taken (by that item already, or by another)."""
        self._put_new({"label": {"S": alias}, "alias_of": {"S": key}})

    def _existing(self, item: Item) -> Item | None:
        for label in item.ibi.labels:
            found = self.get(label)
            if found is not None:
                return found
        return None

    def _record(self, item: Item) -> dict[str, Any]:
        return {
            "label": {"S": item.key},
            "data": {"S": json.dumps(item_to_mapping(item), separators=(",", ":"))},
            "version": {"N": str(item.version)},
            "state": {"S": item.state.value},
        }

    def _put_new(self, record: dict[str, Any]) -> None:
        try:
            self._client.put_item(
                TableName=self._table,
                Item=record,
                ConditionExpression="attribute_not_exists(#label)",
                ExpressionAttributeNames={"#label": "label"},
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                raise ItemExists(None) from None
            raise _error(error, "writing an item") from error

    def _delete_alias(self, alias: str, main: str) -> None:
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={"label": {"S": alias}},
                ConditionExpression="alias_of = :main",
                ExpressionAttributeValues={":main": {"S": main}},
            )
        except AWS_ERRORS as error:
            if not is_conditional_failure(error):
                raise _error(error, "undoing an alias") from error

    def replace(self, item: Item, *, expected_version: int) -> None:
        record = self._record(item)
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"label": record["label"]},
                UpdateExpression="SET #data = :data, #version = :version, #state = :state",
                ConditionExpression="#version = :expected",
                ExpressionAttributeNames={
                    "#data": "data",
                    "#version": "version",
                    "#state": "state",
                },
                ExpressionAttributeValues={
                    ":data": record["data"],
                    ":version": record["version"],
                    ":state": record["state"],
                    ":expected": {"N": str(expected_version)},
                },
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                raise StaleItem(item.key) from None
            raise _error(error, "updating an item") from error
        self._note_language(item.language)

    def remove(self, item: Item) -> None:
        """Forget ``item`` (at its version) and its aliases: only an incoming transfer that
        never completed, which nobody was ever answered about (``StaleItem`` if it changed)."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={"label": {"S": item.key}},
                ConditionExpression="#version = :expected",
                ExpressionAttributeNames={"#version": "version"},
                ExpressionAttributeValues={":expected": {"N": str(item.version)}},
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                raise StaleItem(item.key) from None
            raise _error(error, "removing an item") from error
        for alias in item.ibi.labels:
            if alias != item.key:
                self._delete_alias(alias, item.key)

    def _note_language(self, language: str | None) -> None:
        if language in self._noted:
            return
        values: dict[str, Any]
        if language is None:
            expression, values = "SET unspecified = :yes", {":yes": {"BOOL": True}}
        else:
            expression, values = "ADD languages :language", {":language": {"SS": [language]}}
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"label": {"S": PROFILE_KEY}},
                UpdateExpression=expression,
                ExpressionAttributeValues=values,
            )
        except AWS_ERRORS as error:
            raise _error(error, "noting a language") from error
        self._noted.add(language)

    def note_item(self, item: Item) -> None:
        """Record in the profile what the relation set must cover for ``item``."""
        self._note_language(item.language)
        for translation in item.translations:
            self._note_language(translation.language)

    def profile(self) -> Profile:
        return _profile(self._get(PROFILE_KEY))

    def profile_and_item(self, label: str) -> tuple[Profile, Item | None]:
        """The profile and ``label``'s item in one round trip (what every urlRequest reads)."""
        if label == PROFILE_KEY:
            return self.profile(), None
        keys = [{"label": {"S": PROFILE_KEY}}, {"label": {"S": label}}]
        try:
            answer = self._client.batch_get_item(
                RequestItems={self._table: {"Keys": keys, "ConsistentRead": True}}
            )
        except AWS_ERRORS as error:
            raise _error(error, "reading an item") from error
        records: dict[str, dict[str, Any]] = {
            record["label"]["S"]: record
            for record in answer.get("Responses", {}).get(self._table, [])
        }
        # Keys DynamoDB left unprocessed (throttling) are read again, one by one.
        left: dict[str, Any] = dict(answer.get("UnprocessedKeys", {}).get(self._table, {}))
        unprocessed: list[dict[str, Any]] = left.get("Keys", [])
        for key in unprocessed:
            record = self._get(key["label"]["S"])
            if record is not None:
                records[key["label"]["S"]] = record
        return _profile(records.get(PROFILE_KEY)), self._item(records.get(label))

    # -- the Archive's own service item --------------------------------------------------------

    def service_item(self) -> Forms | None:
        record = self._get(SERVICE_KEY)
        if record is None:
            return None
        return Forms(**json.loads(record["forms"]["S"]))

    def claim_service_item(self, forms: Forms) -> Forms:
        """Record ``forms`` as this Archive's service IBI, unless one is recorded already."""
        try:
            self._put_new(
                {"label": {"S": SERVICE_KEY}, "forms": {"S": json.dumps(forms.to_mapping())}}
            )
            return forms
        except ItemExists:
            existing = self.service_item()
            assert existing is not None
            return existing

    # -- urlkeys and access counts ---------------------------------------------------------------

    def spend_urlkey(self, urlkey: str, *, expires_at: int) -> bool:
        """Mark a genuine urlkey spent; False if it was spent already (one write, conditional
        on the key's id: of concurrent acknowledgments of one key, exactly one spends it).
        The record lives until ``expires_at``, the end of the key's window (table TTL)."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    "label": {"S": URLKEY_PREFIX + urlkey},
                    "expires_at": {"N": str(expires_at)},
                },
                ConditionExpression="attribute_not_exists(#label)",
                ExpressionAttributeNames={"#label": "label"},
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                return False
            raise _error(error, "spending a urlkey") from error
        return True

    def count_access(self, label: str) -> int:
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key={"label": {"S": label}},
                UpdateExpression="ADD access_count :one",
                # an item deleted since the urlkey was issued counts no more accesses
                ConditionExpression=(
                    "attribute_exists(#label)"
                    " AND (attribute_not_exists(#state) OR #state <> :deleted)"
                ),
                ExpressionAttributeNames={"#label": "label", "#state": "state"},
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":deleted": {"S": State.DELETED.value},
                },
                ReturnValues="UPDATED_NEW",
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                return 0
            raise _error(error, "counting an access") from error
        return int(answer["Attributes"]["access_count"]["N"])

    def access_count(self, label: str) -> int:
        record = self._get(label) or {}
        return int(record.get("access_count", {}).get("N", "0"))

    def scan(
        self, *, after: str | None, limit: int, consistent: bool = True
    ) -> tuple[list[Item], str | None]:
        """The items (no aliases, no bookkeeping), a page at a time: ``limit`` records read
        (DynamoDB's Limit counts before the filter), and the key the next page starts after.
        ``consistent=False``: half the read capacity (the public OAI-PMH harvest)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Limit": limit,
            "FilterExpression": "attribute_exists(#data)",
            "ExpressionAttributeNames": {"#data": "data"},
            "ConsistentRead": consistent,
        }
        if after:
            request["ExclusiveStartKey"] = {"label": {"S": after}}
        try:
            answer = self._client.scan(**request)
        except AWS_ERRORS as error:
            raise _error(error, "listing items") from error
        items = [
            item_from_mapping(json.loads(r["data"]["S"]), int(r["version"]["N"]))
            for r in answer.get("Items", [])
        ]
        more = answer.get("LastEvaluatedKey")
        return items, (more["label"]["S"] if more else None)


TABLE_SCHEMA: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "label", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "label", "AttributeType": "S"}],
}


def ensure_table(client: DynamoDBClient, name: str) -> None:
    """Create the items table if missing, TTL on ``expires_at`` (spent urlkeys), as the stack
    makes it (local mode and tests only)."""
    create_table(client, name, TABLE_SCHEMA, ttl="expires_at")
