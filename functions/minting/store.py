"""Data access for minting: the only module here that talks to DynamoDB.

Three tables:

- state: one item per identification subsystem, ``last_date`` (its last-date-for-suffix),
  advanced only by a conditional write on the previous value;
- record: one item per mint request, every date it handed out, who asked and the
  idempotency key (partition ``subsystem``, sort ``first_date``), and the block of dates
  (:class:`Reservation`) its dates came from: each state write reserves the dates from the
  state it replaced to the state it wrote, and the record of the request that made it says so
  (``claimed``), with the reservation it replaced as the state item described it (who, when),
  so that a reservation whose own record was never written (its Lambda killed in flight) is
  still on the record. The state item describes its latest reservation the same way.
- idempotency: one item per (requester, Idempotency-Key), claimed before minting, noted with
  the first date once the state write won (before the record is written), and completed with
  the answer, so that a retried request gets the same IBIs. A claim whose lease ran out is
  taken over only when it was never noted; a noted one is settled from the record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from functions.shared import dynamo
from functions.shared.dynamo import AWS_ERRORS, ensure_table, is_conditional_failure
from ibi.core.dates import format_date

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any


class StoreError(dynamo.StoreError):
    """The minting store could not do what was asked (throttled, unreachable, failed)."""


class StateConflict(Exception):
    """The conditional write lost: another minter advanced the state first."""

    def __init__(self, current: Decimal | None) -> None:
        super().__init__("the subsystem's last date changed")
        self.current = current


@dataclass(frozen=True, slots=True)
class Reservation:
    """The dates one state write reserved: after ``start`` up to ``end``, by whom and when.

    ``start`` is the state the write replaced (``None``: the subsystem's first write); the
    requester, request id and time are those of the request that made the write (``None``
    when the state item predates the record of reservations).
    """

    start: Decimal | None
    end: Decimal
    requester: str | None = None
    request_id: str | None = None
    reserved_at: Decimal | None = None


@dataclass(frozen=True, slots=True)
class StateWrite:
    """Advance ``subsystem`` from ``previous`` (``None``: never minted) to ``new``.

    With ``first`` (the first date handed out), the write is conditional on the state being
    *earlier than* ``first`` rather than equal to ``previous``: every date handed out is then
    after every date issued before, whatever the state was, so ``previous`` may be any date
    the state held (a value read earlier, or this environment's own last write) and no read
    is needed before the write (issue 14).
    """

    subsystem: str
    previous: Decimal | None
    new: Decimal
    granularity: str
    count: int
    first: Decimal | None = None
    requester: str = ""  # who reserves the dates, for the record (see Reservation)
    request_id: str = ""
    reserved_at: Decimal | None = None


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
    # The reservation its dates came from, named by its end (None: a record from before
    # reservations were recorded, its own reservation). ``claimed``: this request's state
    # write made it, from ``previous_date``; ``replaced``: the one that write replaced.
    block_end: Decimal | None = None
    claimed: bool = False
    replaced: Reservation | None = None

    @property
    def first_date(self) -> Decimal:
        return self.dates[0]

    @property
    def last_date(self) -> Decimal:
        return self.dates[-1]


@dataclass(slots=True)
class IdempotencyClaim:
    """The state of an Idempotency-Key: ``in_progress`` or ``complete`` with its answer."""

    key_id: str
    fingerprint: str
    status: str
    lease_until: Decimal
    answer: dict[str, Any] | None = field(default=None)
    minted: tuple[str, Decimal] | None = None  # (subsystem, first date) once the state moved


class MintStore(Protocol):
    def last_date(self, subsystem: str) -> Decimal | None: ...

    def head(self, subsystem: str) -> Reservation | None: ...

    def advance(self, write: StateWrite) -> Reservation | None: ...

    def put_record(self, record: MintRecord) -> None: ...

    def list_records(
        self,
        subsystem: str,
        *,
        after: Decimal | None,
        limit: int,
        newest_first: bool = False,
        since: Decimal | None = None,
        until: Decimal | None = None,
    ) -> tuple[list[MintRecord], Decimal | None]: ...

    def record_holding(self, subsystem: str, date: Decimal) -> MintRecord | None: ...

    def claim(
        self, key_id: str, fingerprint: str, *, now: Decimal, lease_until: Decimal, expires_at: int
    ) -> IdempotencyClaim | None: ...

    def note(self, key_id: str, subsystem: str, first_date: Decimal) -> None: ...

    def take_over(
        self, claim: IdempotencyClaim, *, lease_until: Decimal, expires_at: int
    ) -> bool: ...

    def find_record(self, subsystem: str, first_date: Decimal) -> MintRecord | None: ...

    def complete(self, key_id: str, answer: dict[str, Any]) -> None: ...

    def release(self, key_id: str) -> None: ...


def _n(value: Decimal | int) -> dict[str, str]:
    return {"N": format_date(Decimal(value))}


def _failure(error: BaseException, action: str) -> Exception:
    return dynamo.translate(error, action, StoreError)


IN_PROGRESS = {":in_progress": {"S": "in_progress"}}
STATUS = {"#status": "status"}


class DynamoMintStore:
    """:class:`MintStore` on DynamoDB (or what answers its calls: moto, local mode's tables)."""

    def __init__(
        self, client: DynamoDBClient, *, state_table: str, record_table: str, idempotency_table: str
    ) -> None:
        self._client = client
        self._state_table = state_table
        self._record_table = record_table
        self._idempotency_table = idempotency_table

    def _call(
        self, operation: str, action: str, *, tolerate_condition: bool = False, **request: Any
    ) -> Any:
        """``client.<operation>(**request)``; AWS errors become :class:`StoreError`.

        With ``tolerate_condition``, a failed condition returns the ``ClientError`` instead.
        """
        try:
            return getattr(self._client, operation)(**request)
        except AWS_ERRORS as error:
            if tolerate_condition and is_conditional_failure(error):
                return error
            raise _failure(error, action) from error

    # -- state ---------------------------------------------------------------------------------

    def _get(self, action: str, table: str, key: dict[str, Any], **read: Any) -> Any:
        """The item at ``key`` in ``table`` (a consistent read), or None."""
        answer = self._call(
            "get_item", action, TableName=table, Key=key, ConsistentRead=True, **read
        )
        return answer.get("Item")

    def last_date(self, subsystem: str) -> Decimal | None:
        item = self._get(
            "reading the subsystem state",
            self._state_table,
            {"subsystem": {"S": subsystem}},
            ProjectionExpression="#last",
            ExpressionAttributeNames={"#last": "last_date"},
        )
        return Decimal(item["last_date"]["N"]) if item else None

    def head(self, subsystem: str) -> Reservation | None:
        """The subsystem's latest reservation, as its state item describes it (None: none)."""
        item = self._get("reading the subsystem state", self._state_table, _state_key(subsystem))
        return _reservation(item) if item else None

    def advance(self, write: StateWrite) -> Reservation | None:
        """Write the state, reserving the dates after the one it replaces up to ``write.new``,
        and describe that reservation on the state item; the reservation it replaced
        (``None``: the subsystem's first write)."""
        names = {"#last": "last_date", **RESERVATION_NAMES}
        values: dict[str, Any] = {
            ":new": _n(write.new),
            ":granularity": {"S": write.granularity},
            ":count": _n(write.count),
            ":none": {"NULL": True},
            ":by": {"S": write.requester},
            ":request": {"S": write.request_id},
            ":at": _n(write.reserved_at) if write.reserved_at is not None else {"NULL": True},
        }
        if write.first is not None:  # earlier than the first date handed out: no read needed
            condition = "attribute_not_exists(#subsystem) OR #last < :first"
            names["#subsystem"] = "subsystem"
            values[":first"] = _n(write.first)
        elif write.previous is None:
            condition = "attribute_not_exists(#subsystem)"
            names["#subsystem"] = "subsystem"
        else:
            condition = "#last = :previous"
            values[":previous"] = _n(write.previous)
        answer = self._call(
            "update_item",
            "advancing the subsystem state",
            tolerate_condition=True,
            TableName=self._state_table,
            Key=_state_key(write.subsystem),
            # (every operand is the item's value before the update: #from the state replaced)
            UpdateExpression="SET #from = if_not_exists(#last, :none), #last = :new, "
            "granularity = :granularity, #by = :by, #request = :request, #at = :at "
            "ADD minted_count :count",
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_OLD",  # (UPDATED_OLD may leave out what the write did not change)
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if isinstance(answer, Exception):
            item: Any = getattr(answer, "response", {}).get("Item")
            if item is not None:  # the winner's state, without a second read
                raise StateConflict(Decimal(item["last_date"]["N"]))
            raise StateConflict(self.last_date(write.subsystem))
        old = answer.get("Attributes", {})
        return _reservation(old) if "last_date" in old else None

    # -- the record ----------------------------------------------------------------------------

    def put_record(self, record: MintRecord) -> None:
        self._call(
            "put_item",
            "recording the minted IBIs",
            TableName=self._record_table,
            Item=_item_from_record(record),
            ConditionExpression="attribute_not_exists(#subsystem)",
            ExpressionAttributeNames={"#subsystem": "subsystem"},
        )

    def list_records(
        self,
        subsystem: str,
        *,
        after: Decimal | None,
        limit: int,
        newest_first: bool = False,
        since: Decimal | None = None,
        until: Decimal | None = None,
    ) -> tuple[list[MintRecord], Decimal | None]:
        """A page of the record by first date, from ``since`` to ``until`` (inclusive), oldest
        first (or newest), continuing after ``after`` in that order; and the next page's
        ``after`` (None: the last page). One Query on the key: its condition is the near bound,
        the far one ends the page."""
        bound: tuple[str, Decimal | None]
        if newest_first:
            cursor = after is not None and (until is None or after <= until)
            bound = ("<", after) if cursor else ("<=", until)
        else:
            cursor = after is not None and (since is None or after >= since)
            bound = (">", after) if cursor else (">=", since)
        records, more = self._query_records(
            subsystem, bound=bound, limit=limit, newest_first=newest_first
        )
        ended = [r for r in records if _within(r.first_date, since, until)]
        if len(ended) < len(records):  # past the far bound: nothing further
            return ended, None
        return ended, more

    def record_holding(self, subsystem: str, date: Decimal) -> MintRecord | None:
        """The record whose dates hold ``date``, if any: the last one whose first date is not
        after it (one Query, newest first, one item)."""
        records, _ = self._query_records(subsystem, bound=("<=", date), limit=1, newest_first=True)
        return records[0] if records and date in records[0].dates else None

    def _query_records(
        self,
        subsystem: str,
        *,
        bound: tuple[str, Decimal | None],
        limit: int,
        newest_first: bool,
    ) -> tuple[list[MintRecord], Decimal | None]:
        query: dict[str, Any] = {
            "TableName": self._record_table,
            "KeyConditionExpression": "#subsystem = :subsystem",
            "ExpressionAttributeNames": {"#subsystem": "subsystem"},
            "ExpressionAttributeValues": {":subsystem": {"S": subsystem}},
            "Limit": limit,
            "ConsistentRead": True,
        }
        operator, date = bound
        if date is not None:
            query["KeyConditionExpression"] += f" AND #first {operator} :bound"
            query["ExpressionAttributeNames"]["#first"] = "first_date"
            query["ExpressionAttributeValues"][":bound"] = _n(date)
        if newest_first:
            query["ScanIndexForward"] = False
        answer = self._call("query", "listing the record", **query)
        records = [_record_from_item(item) for item in answer.get("Items", [])]
        more = answer.get("LastEvaluatedKey")
        return records, (Decimal(more["first_date"]["N"]) if more else None)

    # -- idempotency ---------------------------------------------------------------------------

    def claim(
        self, key_id: str, fingerprint: str, *, now: Decimal, lease_until: Decimal, expires_at: int
    ) -> IdempotencyClaim | None:
        """Claim ``key_id`` for this request; ``None`` if claimed, else the existing claim."""
        if self._put_claim(
            IdempotencyClaim(key_id, fingerprint, "in_progress", lease_until),
            expires_at,
            condition="attribute_not_exists(#key) OR "
            "(#status = :in_progress AND #lease < :now AND attribute_not_exists(minted))",
            names={"#key": "key"},
            values={":now": _n(now)},
        ):
            return None
        existing = self._get_claim(key_id)
        if existing is None:  # released between our write and our read: try once more
            return self.claim(
                key_id, fingerprint, now=now, lease_until=lease_until, expires_at=expires_at
            )
        return existing

    def take_over(self, claim: IdempotencyClaim, *, lease_until: Decimal, expires_at: int) -> bool:
        """Claim again a key whose noted attempt recorded nothing; False if another did first."""
        return self._put_claim(
            IdempotencyClaim(claim.key_id, claim.fingerprint, "in_progress", lease_until),
            expires_at,
            condition="#status = :in_progress AND #lease = :seen",
            names={},
            values={":seen": _n(claim.lease_until)},
        )

    def _put_claim(
        self,
        claim: IdempotencyClaim,
        expires_at: int,
        *,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> bool:
        """Put ``claim`` if ``condition`` holds; ``names`` and ``values`` are the condition's
        own beyond ``#status``, ``#lease`` and ``:in_progress`` (DynamoDB refuses unused ones)."""
        lost = self._call(
            "put_item",
            "claiming the idempotency key",
            tolerate_condition=True,
            TableName=self._idempotency_table,
            Item={
                "key": {"S": claim.key_id},
                "fingerprint": {"S": claim.fingerprint},
                "status": {"S": claim.status},
                "lease_until": _n(claim.lease_until),
                "expires_at": _n(expires_at),
            },
            ConditionExpression=condition,
            ExpressionAttributeNames={**names, "#lease": "lease_until", **STATUS},
            ExpressionAttributeValues={**values, **IN_PROGRESS},
        )
        return not isinstance(lost, Exception)

    def note(self, key_id: str, subsystem: str, first_date: Decimal) -> None:
        """The state write of the claim's attempt won at ``first_date``: the record is next."""
        self._update_claim(
            key_id,
            "noting the idempotency key's dates",
            "SET minted = :minted",
            {":minted": {"S": f"{subsystem} {format_date(first_date)}"}},
            in_progress=True,
        )

    def _update_claim(
        self, key_id: str, action: str, update: str, values: dict[str, Any], *, in_progress: bool
    ) -> None:
        condition: dict[str, Any] = (
            {"ConditionExpression": "#status = :in_progress"} if in_progress else {}
        )
        self._call(
            "update_item",
            action,
            TableName=self._idempotency_table,
            Key={"key": {"S": key_id}},
            UpdateExpression=update,
            ExpressionAttributeNames=STATUS,
            ExpressionAttributeValues={**values, **(IN_PROGRESS if in_progress else {})},
            **condition,
        )

    def find_record(self, subsystem: str, first_date: Decimal) -> MintRecord | None:
        answer = self._call(
            "query",
            "reading the record",
            TableName=self._record_table,
            KeyConditionExpression="#subsystem = :subsystem AND #first = :first",
            ExpressionAttributeNames={"#subsystem": "subsystem", "#first": "first_date"},
            ExpressionAttributeValues={":subsystem": {"S": subsystem}, ":first": _n(first_date)},
            ConsistentRead=True,
        )
        items = answer.get("Items", [])
        return _record_from_item(items[0]) if items else None

    def _get_claim(self, key_id: str) -> IdempotencyClaim | None:
        item = self._get(
            "reading the idempotency key", self._idempotency_table, {"key": {"S": key_id}}
        )
        if item is None:
            return None
        return IdempotencyClaim(
            key_id=key_id,
            fingerprint=item["fingerprint"]["S"],
            status=item["status"]["S"],
            lease_until=Decimal(item["lease_until"]["N"]),
            answer=json.loads(item["answer"]["S"]) if "answer" in item else None,
            minted=_minted(item["minted"]["S"]) if "minted" in item else None,
        )

    def complete(self, key_id: str, answer: dict[str, Any]) -> None:
        self._update_claim(
            key_id,
            "completing the idempotency key",
            "SET #status = :complete, answer = :answer",
            {
                ":complete": {"S": "complete"},
                ":answer": {"S": json.dumps(answer, separators=(",", ":"))},
            },
            in_progress=False,
        )

    def release(self, key_id: str) -> None:
        self._call(
            "delete_item",
            "releasing the idempotency key",
            tolerate_condition=True,
            TableName=self._idempotency_table,
            Key={"key": {"S": key_id}},
            ConditionExpression="#status = :in_progress",
            ExpressionAttributeNames=STATUS,
            ExpressionAttributeValues=IN_PROGRESS,
        )


def _minted(text: str) -> tuple[str, Decimal]:
    subsystem, _, first_date = text.rpartition(" ")
    return subsystem, Decimal(first_date)


def _item_from_record(record: MintRecord) -> dict[str, Any]:
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
    if record.block_end is not None:
        item["block_end"] = _n(record.block_end)
    if record.claimed:
        item["claimed"] = {"BOOL": True}
    if record.replaced is not None:
        replaced = record.replaced
        if replaced.start is not None:
            item["replaced_start"] = _n(replaced.start)
        for name, value in (
            ("replaced_by", replaced.requester),
            ("replaced_request", replaced.request_id),
        ):
            if value is not None:
                item[name] = {"S": value}
        if replaced.reserved_at is not None:
            item["replaced_at"] = _n(replaced.reserved_at)
    return item


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
        block_end=_number(item.get("block_end")),
        claimed="claimed" in item,
        replaced=Reservation(
            start=_number(item.get("replaced_start")),
            end=Decimal(item["previous_date"]["N"]),
            requester=_text(item.get("replaced_by")),
            request_id=_text(item.get("replaced_request")),
            reserved_at=_number(item.get("replaced_at")),
        )
        if "claimed" in item and "previous_date" in item
        else None,
    )


# The state item's description of its latest reservation (see DynamoMintStore.advance).
RESERVATION_NAMES = {
    "#from": "block_from",
    "#by": "reserved_by",
    "#request": "reserved_request",
    "#at": "reserved_at",
}


def _state_key(subsystem: str) -> dict[str, Any]:
    return {"subsystem": {"S": subsystem}}


def _reservation(item: dict[str, Any]) -> Reservation:
    """The reservation a state item (or its old attributes) describes."""
    return Reservation(
        start=_number(item.get("block_from")),
        end=Decimal(item["last_date"]["N"]),
        requester=_text(item.get("reserved_by")),
        request_id=_text(item.get("reserved_request")),
        reserved_at=_number(item.get("reserved_at")),
    )


def _number(value: dict[str, Any] | None) -> Decimal | None:
    return Decimal(value["N"]) if value and "N" in value else None


def _text(value: dict[str, Any] | None) -> str | None:
    return value["S"] if value and "S" in value else None


def _within(date: Decimal, since: Decimal | None, until: Decimal | None) -> bool:
    return (since is None or since <= date) and (until is None or date <= until)


# Table shapes, for local mode and tests (the CDK construct declares the same for AWS).
TTL = {"idempotency": "expires_at"}  # as the stack declares it (infra/minting.py)
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
    for role, name in names.items():
        ensure_table(client, name, TABLE_SCHEMAS[role], ttl=TTL.get(role))
