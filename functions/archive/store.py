"""Data access for an Archive's items: the only module here that talks to DynamoDB.

One table. An item is stored under its main label (its ibip form when it has one) with
the item as JSON and a ``version`` for optimistic updates; its other label is an alias
record pointing to the main one, so the item is found by either form (spec §7.4). Both are
written with ``attribute_not_exists``: an Archive holds at most one item per IBI.
Alongside: ``#service`` (the Archive's own service item), ``#profile`` (the languages it
holds, from which its relation set is derived) and ``#urlkey#…`` (urlkeys already spent by an
acknowledgment, kept until their validity window ends, then removed by the table's TTL).
An item's record also counts its accesses: ``access_count`` in all and ``accesses_YYYY_MM``
per calendar month (UTC), with ``unique_count`` and ``unique_YYYY_MM`` for the first request
of a client's session, all added by the one update an acknowledgment makes. Before it, the
client's request is claimed on ``#request#<item>#<client digest>`` (one conditional update, kept
until its session ends: the double-click and session rules, ``protocol.py``).
Beside them, ``link_check``: the last check of the item's external URL (``links.py``), written
by its own update, conditional on the item's version, which it leaves as it is.
Urlkeys are signed, not stored when issued (``urlkeys.py``): a urlRequest only reads.

OAI-PMH's index (:data:`DATESTAMP_INDEX`, a global secondary index): a record (an item that is
neither the service item nor on its way in) carries its set (``oai_set``: its content type)
and its datestamp (``oai_datestamp``: its timestamp in whole seconds), the index's partition
and sort keys; nothing else has them, so the index holds the records only (sparse). It
projects ``data`` and ``version``: a list request reads its records from the index alone, and
an access count (``count_access``) does not write to it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from functions.archive.holdings import Requests
from functions.archive.mapping import item_from_mapping, item_to_mapping
from functions.archive.model import Forms, Item, LinkCheck, Profile, State
from functions.shared.dynamo import AWS_ERRORS, StoreError, is_conditional_failure, translate
from functions.shared.dynamo import ensure_table as create_table
from ibi.core.usage import MONTH, NO_USAGE, Usage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

DATESTAMP_INDEX = "oai-datestamp"  # OAI-PMH's records by set and datestamp
SET_ATTRIBUTE = "oai_set"
DATESTAMP_ATTRIBUTE = "oai_datestamp"
SERVICE_KEY = "#service"
PROFILE_KEY = "#profile"
URLKEY_PREFIX = "#urlkey#"
MONTH_PREFIX = "accesses_"  # accesses_2026_11: the accesses of 2026-11 (usage.py)
UNIQUE_PREFIX = "unique_"  # unique_2026_11: the unique requests of 2026-11
REQUEST_PREFIX = "#request#"  # #request#<item>#<client digest>: its last counted request
LINK_CHECK_ATTRIBUTE = "link_check"  # the last check of the item's external URL (links.py)


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
    def claim_request(
        self, label: str, client: str, *, at: int, window: int, session_seconds: int
    ) -> bool | None: ...
    def count_access(self, label: str, *, month: str, unique: bool = False) -> int: ...
    def access_count(self, label: str) -> int: ...
    def scan(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]: ...
    def query_datestamps(
        self,
        set_spec: str,
        *,
        first: int | None,
        last: int | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[Item]: ...


def is_record(item: Item) -> bool:
    """Whether ``item`` is an OAI-PMH record: not the service item, not on its way in."""
    return not item.service and not item.pending


def datestamp_of(item: Item) -> int:
    """The item's datestamp as the index sorts it: its timestamp in whole seconds."""
    return int(item.timestamp)


def _profile(record: dict[str, Any] | None) -> Profile:
    record = record or {}
    return Profile(
        languages=frozenset(record.get("languages", {}).get("SS", [])),
        unspecified_language=bool(record.get("unspecified", {}).get("BOOL", False)),
    )


def month_attribute(month: str, prefix: str = MONTH_PREFIX) -> str:
    """The attribute counting the accesses of ``month`` (``YYYY-MM``): ``accesses_YYYY_MM``
    (``unique_YYYY_MM`` with :data:`UNIQUE_PREFIX`)."""
    if not MONTH.fullmatch(month):
        raise ValueError(f"{month!r} is not a month (YYYY-MM)")
    return prefix + month.replace("-", "_")


def _counts(record: dict[str, Any], total: str, prefix: str) -> tuple[int, dict[str, int]]:
    months = {
        name.removeprefix(prefix).replace("_", "-"): int(value["N"])
        for name, value in record.items()
        if name.startswith(prefix) and "N" in value and name != total
    }
    return int(record.get(total, {}).get("N", "0")), months


def _usage(record: dict[str, Any]) -> Usage:
    """The accesses a record counts, in all and per month, and its unique requests."""
    total, months = _counts(record, "access_count", MONTH_PREFIX)
    if not total and not months:
        return NO_USAGE
    unique, unique_months = _counts(record, "unique_count", UNIQUE_PREFIX)
    if not unique and not unique_months:  # counted before unique requests were (issue 35)
        return Usage.of(total, months)
    return Requests.of(total, months, unique=Usage.of(unique, unique_months))


def _with_link_check(item: Item, record: dict[str, Any]) -> Item:
    """``item`` with the link check its record keeps (``link_check``), if any."""
    kept = record.get(LINK_CHECK_ATTRIBUTE, {}).get("S")
    return replace(item, link_check=LinkCheck.from_record(json.loads(kept))) if kept else item


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
        item = _with_link_check(
            item_from_mapping(json.loads(record["data"]["S"]), int(record["version"]["N"])), record
        )
        usage = _usage(record)
        return item if usage is NO_USAGE else replace(item, usage=usage)

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
        record = {
            "label": {"S": item.key},
            "data": {"S": json.dumps(item_to_mapping(item), separators=(",", ":"))},
            "version": {"N": str(item.version)},
            "state": {"S": item.state.value},
        }
        if is_record(item):
            record[SET_ATTRIBUTE] = {"S": item.content_type.value}
            record[DATESTAMP_ATTRIBUTE] = {"N": str(datestamp_of(item))}
        return record

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
        names = {"#data": "data", "#version": "version", "#state": "state"}
        names |= {"#set": SET_ATTRIBUTE, "#datestamp": DATESTAMP_ATTRIBUTE}
        values = {
            ":data": record["data"],
            ":version": record["version"],
            ":state": record["state"],
            ":expected": {"N": str(expected_version)},
        }
        expression = "SET #data = :data, #version = :version, #state = :state"
        if is_record(item):  # in the index, where its datestamp says
            expression += ", #set = :set, #datestamp = :datestamp"
            values |= {":set": record[SET_ATTRIBUTE], ":datestamp": record[DATESTAMP_ATTRIBUTE]}
        else:
            expression += " REMOVE #set, #datestamp"
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"label": record["label"]},
                UpdateExpression=expression,
                ConditionExpression="#version = :expected",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
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

    def claim_request(
        self, label: str, client: str, *, at: int, window: int, session_seconds: int
    ) -> bool | None:
        """Claim a request by ``client`` (a digest) for ``label``'s item at ``at``: None when
        one was claimed ``window`` seconds before or less (a double-click); else whether it is
        the first of the client's session (``at`` in whole ``session_seconds``: a unique
        request). One conditional update of ``#request#<item>#<client>``, its old session read
        from the update's answer; the record lives until its session and window end (table
        TTL), all that either rule looks back on."""
        session = at // session_seconds
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key={"label": {"S": f"{REQUEST_PREFIX}{label}#{client}"}},
                UpdateExpression="SET #at = :at, #session = :session, #expires = :expires",
                ConditionExpression="attribute_not_exists(#at) OR #at < :before",
                ExpressionAttributeNames={
                    "#at": "at",
                    "#session": "session",
                    "#expires": "expires_at",
                },
                ExpressionAttributeValues={
                    ":at": {"N": str(at)},
                    ":session": {"N": str(session)},
                    ":before": {"N": str(at - window)},
                    ":expires": {"N": str(max(at + window, (session + 1) * session_seconds))},
                },
                ReturnValues="ALL_OLD",
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                return None
            raise _error(error, "claiming a request") from error
        before = answer.get("Attributes", {}).get("session", {}).get("N")
        return before != str(session)

    def count_access(self, label: str, *, month: str, unique: bool = False) -> int:
        """One access to ``label``'s item in ``month`` (``YYYY-MM``): its total and its month's
        count (``unique``: and its unique requests', in all and in the month), in one update
        (no more writes than the total alone); 0 if it is gone."""
        names = {"#label": "label", "#state": "state", "#month": month_attribute(month)}
        expression = "ADD access_count :one, #month :one"
        if unique:
            names["#unique"] = month_attribute(month, UNIQUE_PREFIX)
            expression += ", unique_count :one, #unique :one"
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key={"label": {"S": label}},
                UpdateExpression=expression,
                # an item deleted since the urlkey was issued counts no more accesses
                ConditionExpression=(
                    "attribute_exists(#label)"
                    " AND (attribute_not_exists(#state) OR #state <> :deleted)"
                ),
                ExpressionAttributeNames=names,
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

    def scan(self, *, after: str | None, limit: int) -> tuple[list[Item], str | None]:
        """The items (no aliases, no bookkeeping), a page at a time: ``limit`` records read
        (DynamoDB's Limit counts before the filter), and the key the next page starts after."""
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
        except AWS_ERRORS as error:
            raise _error(error, "listing items") from error
        items = [
            _with_link_check(
                item_from_mapping(json.loads(r["data"]["S"]), int(r["version"]["N"])), r
            )
            for r in answer.get("Items", [])
        ]
        more = answer.get("LastEvaluatedKey")
        return items, (more["label"]["S"] if more else None)

    def note_link_check(self, item: Item, check: LinkCheck) -> bool:
        """Keep ``check`` beside ``item`` (``link_check``), unless the item changed since it was
        read (its version: its URL may have changed): False then. One conditional update that
        leaves the item's JSON, version and datestamp alone (an offer names a version)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"label": {"S": item.key}},
                UpdateExpression="SET #link = :link",
                ConditionExpression="#version = :version",
                ExpressionAttributeNames={"#link": LINK_CHECK_ATTRIBUTE, "#version": "version"},
                ExpressionAttributeValues={
                    ":link": {"S": json.dumps(check.to_record(), separators=(",", ":"))},
                    ":version": {"N": str(item.version)},
                },
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                return False
            raise _error(error, "recording a link check") from error
        return True

    def query_datestamps(
        self,
        set_spec: str,
        *,
        first: int | None,
        last: int | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[Item]:
        """The records of set ``set_spec`` whose datestamps lie in ``first``..``last`` (either
        may be open), in datestamp order, after the record at ``after`` (its datestamp and
        key): ``limit`` of them, fewer only when no more follow. Queries of OAI-PMH's index
        (eventually consistent: a global secondary index has no other reads)."""
        names = {"#set": SET_ATTRIBUTE}
        values: dict[str, Any] = {":set": {"S": set_spec}}
        condition = "#set = :set"
        if first is not None and last is not None:
            condition += " AND #datestamp BETWEEN :first AND :last"
        elif first is not None:
            condition += " AND #datestamp >= :first"
        elif last is not None:
            condition += " AND #datestamp <= :last"
        bounds = {":first": first, ":last": last}
        values |= {name: {"N": str(v)} for name, v in bounds.items() if v is not None}
        if first is not None or last is not None:
            names["#datestamp"] = DATESTAMP_ATTRIBUTE
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": DATESTAMP_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if after is not None:
            request["ExclusiveStartKey"] = {
                "label": {"S": after[1]},
                SET_ATTRIBUTE: {"S": set_spec},
                DATESTAMP_ATTRIBUTE: {"N": str(after[0])},
            }
        found: list[Item] = []
        while len(found) < limit:  # (a page may end before Limit, at 1 MB)
            request["Limit"] = limit - len(found)
            try:
                answer = self._client.query(**request)
            except AWS_ERRORS as error:
                raise _error(error, "listing records by datestamp") from error
            found += [
                item_from_mapping(json.loads(r["data"]["S"]), int(r["version"]["N"]))
                for r in answer.get("Items", [])
            ]
            if "LastEvaluatedKey" not in answer:
                break
            request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
        return found

    def index_records(self, *, after: str | None, limit: int) -> tuple[int, str | None]:
        """Put into OAI-PMH's index the records of a Scan page (``limit`` items read) that are
        not in it yet: those written before the index was (run over the whole table once
        after adding it: ``python -m ibi_tools.oai_index``). How many it put, and the key
        the next page starts after (None: the table's end)."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "Limit": limit,
            "FilterExpression": "attribute_exists(#data) AND attribute_not_exists(#set)",
            "ExpressionAttributeNames": {"#data": "data", "#set": SET_ATTRIBUTE},
            "ConsistentRead": True,
        }
        if after:
            request["ExclusiveStartKey"] = {"label": {"S": after}}
        try:
            answer = self._client.scan(**request)
        except AWS_ERRORS as error:
            raise _error(error, "listing items to index") from error
        indexed = 0
        for record in answer.get("Items", []):
            item = item_from_mapping(json.loads(record["data"]["S"]), int(record["version"]["N"]))
            if is_record(item) and self._index(item):
                indexed += 1
        more = answer.get("LastEvaluatedKey")
        return indexed, (more["label"]["S"] if more else None)

    def _index(self, item: Item) -> bool:
        """Give a record its index attributes, unless it changed since it was read (then its
        change gave them: :meth:`replace`)."""
        record = self._record(item)
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"label": record["label"]},
                UpdateExpression="SET #set = :set, #datestamp = :datestamp",
                ConditionExpression="#version = :version",
                ExpressionAttributeNames={
                    "#set": SET_ATTRIBUTE,
                    "#datestamp": DATESTAMP_ATTRIBUTE,
                    "#version": "version",
                },
                ExpressionAttributeValues={
                    ":set": record[SET_ATTRIBUTE],
                    ":datestamp": record[DATESTAMP_ATTRIBUTE],
                    ":version": record["version"],
                },
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                return False
            raise _error(error, "indexing a record") from error
        return True


INDEX_DEFINITIONS = [
    {"AttributeName": SET_ATTRIBUTE, "AttributeType": "S"},
    {"AttributeName": DATESTAMP_ATTRIBUTE, "AttributeType": "N"},
]
# As infra/archive.py declares it (tests/infra check they agree).
DATESTAMP_INDEX_SCHEMA: dict[str, Any] = {
    "IndexName": DATESTAMP_INDEX,
    "KeySchema": [
        {"AttributeName": SET_ATTRIBUTE, "KeyType": "HASH"},
        {"AttributeName": DATESTAMP_ATTRIBUTE, "KeyType": "RANGE"},
    ],
    "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["data", "version"]},
}
TABLE_SCHEMA: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "label", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "label", "AttributeType": "S"}, *INDEX_DEFINITIONS],
    "GlobalSecondaryIndexes": [DATESTAMP_INDEX_SCHEMA],
}
INDEX_PAGE = 1000  # items a Scan page reads when indexing the records written before the index


def ensure_table(client: DynamoDBClient, name: str) -> None:
    """Create the items table if missing, TTL on ``expires_at`` (spent urlkeys), with OAI-PMH's
    index, as the stack makes it (local mode and tests only). A table made before the index
    (an earlier version's data directory) gets it, and its records are put into it."""
    create_table(client, name, TABLE_SCHEMA, ttl="expires_at")
    try:
        described = client.describe_table(TableName=name)["Table"]
        indexes = {i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])}
        if DATESTAMP_INDEX in indexes:
            return
        client.update_table(
            TableName=name,
            AttributeDefinitions=INDEX_DEFINITIONS,  # type: ignore[arg-type]
            GlobalSecondaryIndexUpdates=[{"Create": DATESTAMP_INDEX_SCHEMA}],  # type: ignore[typeddict-item]
        )
    except AWS_ERRORS as error:
        raise _error(error, "adding OAI-PMH's index") from error
    index_all(DynamoItemStore(client, name))


def index_all(store: DynamoItemStore, *, page: int = INDEX_PAGE) -> int:
    """Put every record of the table not in OAI-PMH's index yet into it; how many."""
    indexed, after = store.index_records(after=None, limit=page)
    while after is not None:
        more, after = store.index_records(after=after, limit=page)
        indexed += more
    return indexed
