"""AWS error plumbing every data-access layer shares (DynamoDB, S3): errors, conditions, tables.

Only data-access modules (``store.py``, ``registry.py``) import this; it never builds a client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

# Error codes that mean "slow down and retry", from DynamoDB and S3 alike.
THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "LimitExceededException",
        "SlowDown",
        "Throttling",
        "RequestThrottled",
        "TooManyRequestsException",
    }
)
CONDITIONAL_CHECK_FAILED = "ConditionalCheckFailedException"
AWS_ERRORS = (ClientError, BotoCoreError)


class StoreFailure(Protocol):
    """A data-access layer's own error class: ``(message, *, throttled)``."""

    def __call__(self, message: str, *, throttled: bool = False) -> Exception: ...


def error_code(error: BaseException) -> str:
    """The service's error code of a ``ClientError`` ('' for anything else)."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def is_throttled(error: BaseException) -> bool:
    if not isinstance(error, ClientError):
        return False
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return error_code(error) in THROTTLING_CODES or status == 503


# How local mode's stores say that their disk is full (ibi_tools/local/tables/client.py):
# DynamoDB has no disk, so only there does a failure name one.
FULL_DISK = "the disk holding"


def full_disk(error: BaseException) -> str | None:
    """``the disk holding <directory> is full`` when a (local) store said so, else None."""
    if isinstance(error, ClientError):
        text = str(error.response.get("Error", {}).get("Message", ""))
    else:
        text = str(error)
    start = text.find(FULL_DISK)
    return text[start:] if start >= 0 else None


def is_conditional_failure(error: BaseException) -> bool:
    return error_code(error) == CONDITIONAL_CHECK_FAILED


def translate(error: BaseException, action: str, failure: StoreFailure) -> Exception:
    """``failure("<action>: <code>", throttled=…)`` for an AWS error met while doing ``action``."""
    code = error_code(error) or type(error).__name__
    disk = full_disk(error)
    message = f"{action}: {code}: {disk}" if disk else f"{action}: {code}"
    return failure(message, throttled=is_throttled(error))


def ensure_table(
    client: DynamoDBClient, name: str, schema: dict[str, Any], *, ttl: str | None = None
) -> None:
    """Create table ``name`` with ``schema`` if it is missing, with its TTL on ``ttl`` as the
    stack declares it (local mode and tests only; a backend without TTL keeps every item)."""
    if name not in client.list_tables().get("TableNames", []):
        made = client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **schema)
        if made.get("TableDescription", {}).get("TableStatus") != "ACTIVE":
            client.get_waiter("table_exists").wait(
                TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
            )
    if ttl is None:
        return
    try:  # a table made by an earlier version, without its TTL, gets it too
        described = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if described.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
            return
        client.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl}
        )
    except ClientError as error:
        if error_code(error) not in ("UnknownOperationException", "ValidationException"):
            raise  # (dynalite answers UnknownOperationException: it keeps no TTL)


class StoreError(Exception):
    """A data store failed (throttled, unreachable, refused); a base for each store's error."""

    def __init__(self, message: str, *, throttled: bool = False) -> None:
        super().__init__(message)
        self.throttled = throttled
