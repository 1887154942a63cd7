"""The resolver's registry of Archives: the only module here that talks to DynamoDB.

One item per registered Archive, keyed by its service IBI (canonical label): the registration
key's keyed hash, whether it is included, where it is, and when it last answered; and one
``#generation`` item, a counter bumped after every registration, inclusion, exclusion and
deregistration, so that readers learn with one GetItem whether the list they hold is still the
registry's (``directory.py``). Nothing else is written here: wrong keys are counted in a table
of their own (``throttle.py``), and nothing at all is written for an IBI that is not registered.

Owners (issue 24): each Archive's item lists the prefixes (identification subsystems) it mints
under, ``prefixes``; a prefix has at most one owner, which one ``#prefix <prefix>`` item per
prefix enforces: its ``owner`` is claimed with a conditional write (free, or already the same
Archive's), and a refusal reads the owner from the failed write itself. The claims are written
before the Archive's list, and released after it, so that no two lists ever share a prefix.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from functions.resolver.errors import RegistryError
from functions.shared import dynamo
from functions.shared.dynamo import AWS_ERRORS, is_conditional_failure, translate

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

GENERATION = "#generation"  # not an IBI (no IBI starts with '#'), and never has a key hash
PREFIX_CLAIM = "#prefix "  # + a prefix: who owns it (never has a key hash: no Archive's item)
TABLE_SCHEMA: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "service", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "service", "AttributeType": "S"}],
}


class PrefixTaken(Exception):
    """``prefix`` is owned by another registered Archive, ``owner`` (its service IBI)."""

    def __init__(self, prefix: str, owner: str) -> None:
        super().__init__(
            f"the prefix {prefix} is owned by the Archive {owner}: a prefix has one owner "
            "(remove it from that Archive's prefixes first)"
        )
        self.prefix = prefix
        self.owner = owner


@dataclass(frozen=True, slots=True)
class Contact:
    """Where an included Archive is and who runs it (the pairs of an inclusionRequest)."""

    address: str | None = None
    protocol: str | None = None
    ip: str | None = None
    platform_version: str | None = None
    admin_email: str | None = None


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
    prefixes: tuple[str, ...] = ()  # the identification subsystems it mints under (it owns)

    def public(self) -> dict[str, Any]:
        """What an administrator may list: never the key's hash, nor the contact's details."""
        return {
            "archiveserviceibi": self.forms,
            "included": self.included,
            "address": self.address,
            "protocol": self.protocol,
            "confirmed": self.confirmed,
            "changed_at": self.changed_at,
            "last_answer_at": self.last_answer_at,
            "last_outcome": self.last_outcome,
            "prefixes": list(self.prefixes),
        }


class Registry(Protocol):
    """The registry of Archives, as the registration service and the fan-out use it."""

    def get(self, service_ibi: str) -> RegisteredArchive | None: ...

    def register(self, service_ibi: str, forms: dict[str, str], key_hash: str) -> None: ...

    def include(self, service_ibi: str, contact: Contact, *, at: str, confirmed: bool) -> None: ...

    def exclude(self, service_ibi: str, *, at: str) -> None: ...

    def note_answer(self, service_ibi: str, *, at: str, outcome: str) -> None: ...

    def archives(self) -> list[RegisteredArchive]: ...

    def generation(self) -> int: ...

    def claim_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None: ...

    def set_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None: ...

    def release_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None: ...

    def deregister(self, archive: RegisteredArchive) -> bool: ...


def _s(value: str | None) -> dict[str, Any]:
    return {"S": value} if value is not None else {"NULL": True}


def _text(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    return value["S"] if value and "S" in value else None


def _key(service: str) -> dict[str, Any]:
    return {"service": {"S": service}}


class DynamoRegistry:
    """:class:`Registry` in one DynamoDB table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def get(self, service_ibi: str) -> RegisteredArchive | None:
        item = self._raw(service_ibi)
        return _archive(item) if item and "key_hash" in item else None

    def register(self, service_ibi: str, forms: dict[str, str], key_hash: str) -> None:
        """Register (or re-key) an Archive; its inclusion state is kept."""
        self._update(
            "registering an Archive",
            Key=_key(service_ibi),
            UpdateExpression="SET key_hash = :hash, forms = :forms, "
            "included = if_not_exists(included, :no)",
            ExpressionAttributeValues={
                ":hash": {"S": key_hash},
                ":forms": {"S": json.dumps(forms)},
                ":no": {"BOOL": False},
            },
        )
        self._changed()

    def include(self, service_ibi: str, contact: Contact, *, at: str, confirmed: bool) -> None:
        """Switch a registered Archive on, at ``contact``."""
        self._update(
            "switching an Archive",
            Key=_key(service_ibi),
            UpdateExpression="SET included = :included, changed_at = :at, "
            "#address = :address, #protocol = :protocol, ip = :ip, "
            "platform_version = :version, admin_email = :email, confirmed = :confirmed",
            ConditionExpression="attribute_exists(key_hash)",
            ExpressionAttributeNames={"#address": "address", "#protocol": "protocol"},
            ExpressionAttributeValues={
                ":included": {"BOOL": True},
                ":at": {"S": at},
                ":address": _s(contact.address),
                ":protocol": _s(contact.protocol),
                ":ip": _s(contact.ip),
                ":version": _s(contact.platform_version),
                ":email": _s(contact.admin_email),
                ":confirmed": {"BOOL": confirmed},
            },
        )
        self._changed()

    def exclude(self, service_ibi: str, *, at: str) -> None:
        """Switch a registered Archive off (where it was is kept, for /status)."""
        self._update(
            "switching an Archive",
            Key=_key(service_ibi),
            UpdateExpression="SET included = :included, changed_at = :at",
            ConditionExpression="attribute_exists(key_hash)",
            ExpressionAttributeValues={":included": {"BOOL": False}, ":at": {"S": at}},
        )
        self._changed()

    def note_answer(self, service_ibi: str, *, at: str, outcome: str) -> None:
        """When the Archive last answered and how (nothing, if it is no longer registered)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(service_ibi),
                UpdateExpression="SET last_answer_at = :at, last_outcome = :outcome",
                ConditionExpression="attribute_exists(key_hash)",
                ExpressionAttributeValues={":at": {"S": at}, ":outcome": {"S": outcome[:200]}},
            )
        except AWS_ERRORS as error:
            if not is_conditional_failure(error):
                raise translate(error, "noting an answer", RegistryError) from error

    def archives(self) -> list[RegisteredArchive]:
        """Every registered Archive (the registry is small: one item per Archive).

        A Scan: read only when the generation moved, or once a minute (``directory.py``),
        never per request. The filter leaves out the generation, and the ``#throttle#``
        records an earlier version kept here (they expire through the table's TTL).
        """
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
        except AWS_ERRORS as error:
            raise translate(error, "listing the registry", RegistryError) from error

    # -- owners: the prefixes each Archive mints under ---------------------------------------

    def claim_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None:
        """Make ``service_ibi`` the owner of each of ``prefixes``, or of none of them:
        :class:`PrefixTaken` names the first one another Archive owns (the claims made by this
        call are released again)."""
        claimed: list[str] = []
        for prefix in prefixes:
            try:
                answer = self._client.update_item(
                    TableName=self._table,
                    Key=_key(PREFIX_CLAIM + prefix),
                    UpdateExpression="SET #owner = :me",
                    ConditionExpression="attribute_not_exists(#owner) OR #owner = :me",
                    ExpressionAttributeNames={"#owner": "owner"},
                    ExpressionAttributeValues={":me": {"S": service_ibi}},
                    ReturnValues="UPDATED_OLD",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except AWS_ERRORS as error:
                if not is_conditional_failure(error):
                    raise translate(error, "claiming a prefix", RegistryError) from error
                self.release_prefixes(service_ibi, claimed)
                item: Any = getattr(error, "response", {}).get("Item") or {}
                raise PrefixTaken(prefix, _text(item, "owner") or "another Archive") from None
            if "owner" not in answer.get("Attributes", {}):  # new: released on a refusal
                claimed.append(prefix)

    def set_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None:
        """The prefixes ``service_ibi`` mints under (claimed first: :meth:`claim_prefixes`)."""
        self._update(
            "recording prefixes",
            Key=_key(service_ibi),
            UpdateExpression="SET prefixes = :prefixes",
            ConditionExpression="attribute_exists(key_hash)",
            ExpressionAttributeValues={":prefixes": {"S": json.dumps(list(prefixes))}},
        )
        self._changed()

    def release_prefixes(self, service_ibi: str, prefixes: Sequence[str]) -> None:
        """``service_ibi`` no longer owns ``prefixes`` (those another Archive owns: untouched)."""
        for prefix in prefixes:
            try:
                self._client.delete_item(
                    TableName=self._table,
                    Key=_key(PREFIX_CLAIM + prefix),
                    ConditionExpression="#owner = :me",
                    ExpressionAttributeNames={"#owner": "owner"},
                    ExpressionAttributeValues={":me": {"S": service_ibi}},
                )
            except AWS_ERRORS as error:
                if not is_conditional_failure(error):
                    raise translate(error, "releasing a prefix", RegistryError) from error

    def deregister(self, archive: RegisteredArchive) -> bool:
        """Remove ``archive``'s item as it was read (its key's hash unchanged since), then its
        claims on the prefixes registered with it, then bump the generation: every environment
        stops asking it within its next check (``directory.py``). False, and nothing changed,
        if its item changed or went meanwhile."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=_key(archive.service_ibi),
                ConditionExpression="key_hash = :hash",
                ExpressionAttributeValues={":hash": {"S": archive.key_hash}},
            )
        except AWS_ERRORS as error:
            if is_conditional_failure(error):
                return False
            raise translate(error, "deregistering an Archive", RegistryError) from error
        self.release_prefixes(archive.service_ibi, archive.prefixes)
        self._changed()
        return True

    # -- the generation: whether the registry changed -------------------------------------

    def generation(self) -> int:
        """How many changes the registry has seen (0 before the first): one GetItem."""
        item = self._raw(GENERATION)
        return int(item["generation"]["N"]) if item and "generation" in item else 0

    def _changed(self) -> None:
        """Bump the generation, after the change itself: whoever reads the new generation,
        then the list, sees the change."""
        self._update(
            "noting a change",
            Key=_key(GENERATION),
            UpdateExpression="ADD generation :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )

    # -- the two DynamoDB calls -------------------------------------------------------------

    def _update(self, action: str, **request: Any) -> Any:
        try:
            return self._client.update_item(TableName=self._table, **request)
        except AWS_ERRORS as error:
            raise translate(error, action, RegistryError) from error

    def _raw(self, key: str) -> dict[str, Any] | None:
        try:
            answer = self._client.get_item(
                TableName=self._table, Key=_key(key), ConsistentRead=True
            )
        except AWS_ERRORS as error:
            raise translate(error, "reading the registry", RegistryError) from error
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
        prefixes=tuple(json.loads(item["prefixes"]["S"])) if "prefixes" in item else (),
    )


def ensure_table(client: DynamoDBClient, name: str) -> None:
    """Create the registry table if missing (local mode and tests only; its throttle table is
    ``throttle.ensure_table``'s, both made by ``wiring.ensure_tables``)."""
    dynamo.ensure_table(client, name, TABLE_SCHEMA, ttl="expires_at")
