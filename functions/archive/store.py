"""Data access for an Archive's items: the only module here that talks to DynamoDB.

One table. An item is stored under its main label (its ibip form when it has one) with
the item as JSON and a ``version`` for optimistic updates; its other label is an alias
record pointing to the main one, so the item is found by either form (spec §7.4). Both are
written with ``attribute_not_exists``: an Archive holds at most one item per IBI.
Alongside: ``#service`` (the Archive's own service item), ``#profile`` (the languages it
holds, from which its relation set is derived) and ``#urlkey#…`` (keys issued in answers,
expiring through the table's TTL).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from functions.archive.model import (
    ContentType,
    Forms,
    Item,
    State,
    StoredFile,
    Translation,
)
from ibi.core.dates import format_date

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

SERVICE_KEY = "#service"
PROFILE_KEY = "#profile"
URLKEY_PREFIX = "#urlkey#"


class ArchiveStoreError(Exception):
    """The store failed (throttled, unreachable, refused)."""

    def __init__(self, message: str, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.throttled = throttled


class ItemExists(Exception):
    """The Archive already holds an item with this IBI (as ``existing``)."""

    def __init__(self, existing: Item | None) -> None:
        super().__init__("the Archive already holds an item with this IBI")
        self.existing = existing


class StaleItem(Exception):
    """The item changed since it was read: re-read and retry."""


@dataclass(frozen=True, slots=True)
class Profile:
    """What the Archive holds, as far as its relation set is concerned."""

    languages: frozenset[str] = frozenset()
    unspecified_language: bool = False


class ItemStore(Protocol):
    def get(self, label: str) -> Item | None: ...
    def create(self, item: Item) -> None: ...
    def replace(self, item: Item, *, expected_version: int) -> None: ...
    def profile(self) -> Profile: ...
    def profile_and_item(self, label: str) -> tuple[Profile, Item | None]: ...
    def service_item(self) -> Forms | None: ...
    def claim_service_item(self, forms: Forms) -> Forms: ...
    def issue_urlkey(self, urlkey: str, label: str, *, expires_at: int) -> None: ...
    def use_urlkey(self, urlkey: str, *, now: int) -> str | None: ...
    def count_access(self, label: str) -> int: ...
    def access_count(self, label: str) -> int: ...
    def scan(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]: ...


# ---------------------------------------------------------------------------- (de)serialisation


def forms_json(forms: Forms | None) -> dict[str, str] | None:
    return forms.to_mapping() if forms is not None else None


def item_to_json(item: Item) -> dict[str, Any]:
    return {
        "ibi": item.ibi.to_mapping(),
        "state": item.state.value,
        "timestamp": format_date(item.timestamp),
        "content_type": item.content_type.value,
        "language": item.language,
        "files": [f.to_mapping() for f in item.files],
        "default_file": item.default_file,
        "external_url": item.external_url,
        "transferable": item.transferable,
        "listable": item.listable,
        "next_edition": forms_json(item.next_edition),
        "translations": [
            {"language": t.language, "ibi": forms_json(t.ibi), "url": t.url}
            for t in item.translations
        ],
        "metadata": forms_json(item.metadata),
        "metadata_oai_dc": forms_json(item.metadata_oai_dc),
        "dc": {k: list(v) for k, v in item.dc.items()},
        "original_sha256": item.original_sha256,
        "service": item.service,
    }


def _forms(data: dict[str, str] | None) -> Forms | None:
    return Forms(rep=data.get("rep"), ibip=data.get("ibip")) if data else None


def item_from_json(data: dict[str, Any], version: int) -> Item:
    return Item(
        ibi=Forms(rep=data["ibi"].get("rep"), ibip=data["ibi"].get("ibip")),
        state=State(data["state"]),
        timestamp=Decimal(data["timestamp"]),
        content_type=ContentType(data["content_type"]),
        language=data.get("language"),
        files=tuple(StoredFile(**f) for f in data.get("files", [])),
        default_file=data.get("default_file"),
        external_url=data.get("external_url"),
        transferable=bool(data.get("transferable", True)),
        listable=bool(data.get("listable", True)),
        next_edition=_forms(data.get("next_edition")),
        translations=tuple(
            Translation(language=t["language"], ibi=_forms(t.get("ibi")), url=t.get("url"))
            for t in data.get("translations", [])
        ),
        metadata=_forms(data.get("metadata")),
        metadata_oai_dc=_forms(data.get("metadata_oai_dc")),
        dc={k: tuple(v) for k, v in data.get("dc", {}).items()},
        original_sha256=data.get("original_sha256"),
        service=bool(data.get("service", False)),
        version=version,
    )


def _profile(record: dict[str, Any] | None) -> Profile:
    record = record or {}
    return Profile(
        languages=frozenset(record.get("languages", {}).get("SS", [])),
        unspecified_language=bool(record.get("unspecified", {}).get("BOOL", False)),
    )


def _error(error: Exception, action: str) -> ArchiveStoreError:
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        throttled = code in {"ProvisionedThroughputExceededException", "ThrottlingException"}
        return ArchiveStoreError(f"{action}: {code}", throttled=throttled)
    return ArchiveStoreError(f"{action}: {type(error).__name__}")


def _condition_failed(error: ClientError) -> bool:
    return error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


# ---------------------------------------------------------------------------- DynamoDB


class DynamoItemStore:
    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def _get(self, key: str) -> dict[str, Any] | None:
        try:
            answer = self._client.get_item(
                TableName=self._table, Key={"label": {"S": key}}, ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
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
        return item_from_json(json.loads(record["data"]["S"]), int(record["version"]["N"]))

    def create(self, item: Item) -> None:
        aliases = [label for label in item.ibi.labels if label != item.key]
        written: list[str] = []
        try:
            for alias in aliases:
                self._put_new({"label": {"S": alias}, "alias_of": {"S": item.key}})
                written.append(alias)
            self._put_new(self._record(item))
        except ItemExists:
            for alias in written:  # undo: the IBI belongs to the item already here
                self._delete_alias(alias, item.key)
            raise ItemExists(self._existing(item)) from None

    def _existing(self, item: Item) -> Item | None:
        for label in item.ibi.labels:
            found = self.get(label)
            if found is not None:
                return found
        return None

    def _record(self, item: Item) -> dict[str, Any]:
        return {
            "label": {"S": item.key},
            "data": {"S": json.dumps(item_to_json(item), separators=(",", ":"))},
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
        except ClientError as error:
            if _condition_failed(error):
                raise ItemExists(None) from None
            raise _error(error, "writing an item") from error
        except BotoCoreError as error:
            raise _error(error, "writing an item") from error

    def _delete_alias(self, alias: str, main: str) -> None:
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={"label": {"S": alias}},
                ConditionExpression="alias_of = :main",
                ExpressionAttributeValues={":main": {"S": main}},
            )
        except ClientError as error:
            if not _condition_failed(error):
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
        except ClientError as error:
            if _condition_failed(error):
                raise StaleItem(item.key) from None
            raise _error(error, "updating an item") from error
        except BotoCoreError as error:
            raise _error(error, "updating an item") from error
        self._note_language(item.language)

    def _note_language(self, language: str | None) -> None:
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
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "noting a language") from error

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
        except (ClientError, BotoCoreError) as error:
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

    def issue_urlkey(self, urlkey: str, label: str, *, expires_at: int) -> None:
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    "label": {"S": URLKEY_PREFIX + urlkey},
                    "item": {"S": label},
                    "expires_at": {"N": str(expires_at)},
                },
            )
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "issuing a urlkey") from error

    def use_urlkey(self, urlkey: str, *, now: int) -> str | None:
        """Spend a urlkey issued by this Archive and still fresh; the item it was for."""
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key={"label": {"S": URLKEY_PREFIX + urlkey}},
                UpdateExpression="SET used_at = :now",
                ConditionExpression="attribute_exists(#label) AND attribute_not_exists(used_at)"
                " AND expires_at > :now",
                ExpressionAttributeNames={"#label": "label"},
                ExpressionAttributeValues={":now": {"N": str(now)}},
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if _condition_failed(error):
                return None
            raise _error(error, "spending a urlkey") from error
        except BotoCoreError as error:
            raise _error(error, "spending a urlkey") from error
        label: str = answer["Attributes"]["item"]["S"]
        return label

    def count_access(self, label: str) -> int:
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key={"label": {"S": label}},
                UpdateExpression="ADD access_count :one",
                ConditionExpression="attribute_exists(#label)",
                ExpressionAttributeNames={"#label": "label"},
                ExpressionAttributeValues={":one": {"N": "1"}},
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as error:
            if _condition_failed(error):
                return 0
            raise _error(error, "counting an access") from error
        except BotoCoreError as error:
            raise _error(error, "counting an access") from error
        return int(answer["Attributes"]["access_count"]["N"])

    def access_count(self, label: str) -> int:
        record = self._get(label) or {}
        return int(record.get("access_count", {}).get("N", "0"))

    def scan(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]:
        """The items (no aliases, no bookkeeping), a page at a time."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Limit": limit,
            "FilterExpression": "attribute_exists(#data)",
            "ExpressionAttributeNames": {"#data": "data"},
            "ConsistentRead": True,
        }
        if after:
            request["ExclusiveStartKey"] = {"label": {"S": after}}
        try:
            answer = self._client.scan(**request)
        except (ClientError, BotoCoreError) as error:
            raise _error(error, "listing items") from error
        items = [
            item_from_json(json.loads(r["data"]["S"]), int(r["version"]["N"]))
            for r in answer.get("Items", [])
        ]
        more = answer.get("LastEvaluatedKey")
        return items, (more["label"]["S"] if more else None)


TABLE_SCHEMA: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "label", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "label", "AttributeType": "S"}],
}


def ensure_table(client: DynamoDBClient, name: str) -> None:
    """Create the items table if missing (local mode and tests only)."""
    if name in client.list_tables().get("TableNames", []):
        return
    client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **TABLE_SCHEMA)
    client.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
    )
