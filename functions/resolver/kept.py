"""What each authority last said (issue 34, rule 3): kept answers, by request.

When the authority of an IBI does not answer (it failed, timed out, or is switched off), the
resolver answers from what that authority last answered to the same request — the IBI, the
verb list and the file path (``resolution.kept_key``) — and says so (``IBI-Degraded``). Only an
authority's answers are kept (``resolution.Resolver``); a stranger's never are.

Kept in a DynamoDB table of their own, shared by every execution environment, one item per
request (GetItem and PutItem only, never a Scan), each expiring ``TTL_SECONDS`` after it was
last written; in front of it a bounded memory of this environment, so that an answer that did
not change costs no write: the table is written when the answer differs from the one this
environment last kept, or when that was written more than ``REFRESH_SECONDS`` ago (so that an
unchanged answer never expires while it is being given), and a request nothing is kept for is
read again at most once a minute. A table that fails is logged and
costs the resolution nothing: keeping is a safety net, never on the answer's path.

A deregistered Archive's answers are never served as its word (issue 39): its deregistration
first writes ``#deregistered <its service IBI>`` here, with when; an answer it gave by then is
given no more (each environment reads that item at most every ``VOID_CHECK_SECONDS``), and what
it says after a new registration counts again.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from functions.resolver.errors import RegistryError
from functions.resolver.resolution import Kept
from functions.shared import dynamo
from functions.shared.dynamo import AWS_ERRORS, translate
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, format_pair_list, parse_pair_list

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

logger = Logger(service="resolver", child=True)

TTL_ATTRIBUTE = "expires_at"
TTL_SECONDS = 30 * 86400  # an answer not given for 30 days is forgotten
REFRESH_SECONDS = 86400  # an unchanged answer is written again after a day
MISS_SECONDS = 60  # a request the table keeps nothing for is read again after a minute
VOID_CHECK_SECONDS = 5.0  # whether an Archive was deregistered, read again after 5 s (directory)
DEREGISTERED = "#deregistered "  # + a service IBI (no request's key starts with '#')
CAPACITY = 10_000  # requests remembered by one execution environment
TABLE_SCHEMA: dict[str, Any] = {
    "KeySchema": [{"AttributeName": "request", "KeyType": "HASH"}],
    "AttributeDefinitions": [{"AttributeName": "request", "AttributeType": "S"}],
}


def default_table(registry_table: str) -> str:
    """The kept answers' table name when the settings give none (local mode and tests)."""
    return f"{registry_table}-kept"


class MemoryKept:
    """Kept answers in this process only, bounded (least recently used out): tests, and the
    memory in front of :class:`TableKept`."""

    def __init__(self, capacity: int = CAPACITY, clock: Callable[[], float] = time.time) -> None:
        self._capacity = capacity
        self._clock = clock
        self._items: OrderedDict[str, tuple[Kept, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Kept | None:
        with self._lock:
            held = self._items.get(key)
            if held is None:
                return None
            self._items.move_to_end(key)
            return held[0]

    def written(self, key: str) -> float | None:
        """When ``key`` was last kept here (epoch seconds), if it is."""
        with self._lock:
            held = self._items.get(key)
            return held[1] if held is not None else None

    def keep(self, key: str, archive: str, address: str, pairs: PairList) -> None:
        now = self._clock()
        self.put(key, Kept(archive, address, pairs, iso_date(Decimal(int(now)))), now)

    def forget_archive(self, archive: str) -> None:
        """Drop every answer ``archive`` gave (it was deregistered)."""
        with self._lock:
            for key in [k for k, (kept, _) in self._items.items() if kept.archive == archive]:
                del self._items[key]

    def put(self, key: str, kept: Kept, at: float) -> None:
        with self._lock:
            self._items[key] = (kept, at)
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)


def _same(a: Kept, archive: str, address: str, pairs: PairList) -> bool:
    return a.archive == archive and a.address == address and a.pairs == pairs


class TableKept:
    """:class:`~functions.resolver.resolution.KeptAnswers` in a DynamoDB table, with this
    environment's memory in front (module notes)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table: str,
        *,
        memory: MemoryKept | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = table
        self._clock = clock
        self.memory = memory or MemoryKept(clock=clock)
        self._missing: OrderedDict[str, float] = OrderedDict()  # key -> when it was not found
        self._voided: dict[str, tuple[str, float]] = {}  # archive -> (deregistered at, read at)
        self._lock = threading.Lock()

    def get(self, key: str) -> Kept | None:
        found = self._read(key)
        if found is None:
            return None
        written = self.memory.written(key)
        if written is not None and self._clock() - written < VOID_CHECK_SECONDS:
            return found  # its Archive answered here just now: registered as the directory says
        return None if self._void(found) else found

    def _read(self, key: str) -> Kept | None:
        found = self.memory.get(key)
        if found is not None:
            return found
        now = self._clock()
        with self._lock:
            missed = self._missing.get(key)
            if missed is not None and now - missed < MISS_SECONDS:
                return None  # read lately, nothing there: no read per resolution
        try:
            item = self._client.get_item(TableName=self._table, Key=_key(key)).get("Item")
        except AWS_ERRORS as error:
            logger.warning("kept answer not read", extra={"problem": str(error)[:200]})
            return None
        kept = _kept(item)
        if kept is not None:
            self.memory.put(key, kept, 0.0)  # read, not written: the next keep writes
        else:
            with self._lock:
                self._missing[key] = now
                self._missing.move_to_end(key)
                while len(self._missing) > CAPACITY:
                    self._missing.popitem(last=False)
        return kept

    def _void(self, kept: Kept) -> bool:
        """Whether ``kept`` was said by an Archive deregistered since (module notes)."""
        now = self._clock()
        with self._lock:
            voided = self._voided.get(kept.archive)
        if voided is None or now - voided[1] >= VOID_CHECK_SECONDS:
            try:
                item = self._client.get_item(
                    TableName=self._table, Key=_key(DEREGISTERED + kept.archive)
                ).get("Item")
            except AWS_ERRORS as error:  # as last read: keeping costs the resolution nothing
                logger.warning("deregistrations not read", extra={"problem": str(error)[:200]})
                return voided is not None and bool(voided[0]) and kept.at <= voided[0]
            voided = ((item or {}).get("at", {}).get("S", ""), now)
            with self._lock:
                self._voided[kept.archive] = voided
                while len(self._voided) > CAPACITY:
                    self._voided.pop(next(iter(self._voided)))
        return bool(voided[0]) and kept.at <= voided[0]

    def forget_archive(self, archive: str) -> None:
        """``archive`` is being deregistered: none of the answers it gave is given again.
        :class:`RegistryError` if that cannot be written (then deregister it no more)."""
        now = self._clock()
        at = iso_date(Decimal(int(now)))
        item = {
            **_key(DEREGISTERED + archive),
            "at": {"S": at},
            TTL_ATTRIBUTE: {"N": str(int(now) + TTL_SECONDS)},  # its answers expire by then
        }
        try:
            self._client.put_item(TableName=self._table, Item=item)
        except AWS_ERRORS as error:
            raise translate(error, "voiding the kept answers", RegistryError) from error
        self.memory.forget_archive(archive)
        with self._lock:
            self._voided[archive] = (at, now)

    def keep(self, key: str, archive: str, address: str, pairs: PairList) -> None:
        now = self._clock()
        held, written = self.memory.get(key), self.memory.written(key)
        fresh = written is not None and now - written < REFRESH_SECONDS
        if held is not None and fresh and _same(held, archive, address, pairs):
            return  # unchanged, and written lately: nothing to write
        kept = Kept(archive, address, pairs, iso_date(Decimal(int(now))))
        try:
            self._client.put_item(TableName=self._table, Item=_item(key, kept, int(now)))
        except AWS_ERRORS as error:
            logger.warning("answer not kept", extra={"problem": str(error)[:200]})
            return
        self.memory.put(key, kept, now)
        with self._lock:
            self._missing.pop(key, None)


def _key(key: str) -> dict[str, Any]:
    return {"request": {"S": key}}


def forgetter(kept: object) -> Callable[[str], None]:
    """What voids a deregistered Archive's kept answers in ``kept`` (nothing, for a store
    that keeps none)."""
    forget: Callable[[str], None] | None = getattr(kept, "forget_archive", None)
    return forget if forget is not None else (lambda _: None)


def _item(key: str, kept: Kept, now: int) -> dict[str, Any]:
    return {
        **_key(key),
        "archive": {"S": kept.archive},
        "address": {"S": kept.address},
        "pairs": {"S": format_pair_list(kept.pairs)},
        "at": {"S": kept.at},
        TTL_ATTRIBUTE: {"N": str(now + TTL_SECONDS)},
    }


def _kept(item: dict[str, Any] | None) -> Kept | None:
    """The kept answer of a table item (None: none, or one that no longer reads)."""
    if not item:
        return None
    try:
        return Kept(
            archive=item["archive"]["S"],
            address=item.get("address", {}).get("S", ""),
            pairs=parse_pair_list(item["pairs"]["S"]),
            at=item.get("at", {}).get("S", ""),
        )
    except (KeyError, TypeError, InvalidInput):
        return None


def ensure_table(client: DynamoDBClient, name: str) -> None:
    """Create the kept answers' table if missing, TTL on ``expires_at``, as CDK makes it in
    AWS (local mode and tests only)."""
    dynamo.ensure_table(client, name, TABLE_SCHEMA, ttl=TTL_ATTRIBUTE)
