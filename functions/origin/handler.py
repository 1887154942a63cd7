"""The origin check's Lambda: an HTTP API authorizer (simple responses) on the public routes.

API Gateway calls it only for requests that carry both identity headers (others get 401
without it) and keeps each answer for the cache's time (infra/edge.py), so it runs about once
per edge host every few minutes. The secret's values are read once, then again after
:data:`KEYS_MAX_AGE_SECONDS`, so a rotation (put-secret-value, then a deploy of the edge
stack) is followed without a cold start: the previous value verifies meanwhile.
"""

from __future__ import annotations

import os
import time
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.origin.verify import decide
from functions.shared.keys import SecretKeys

KEYS_MAX_AGE_SECONDS = 300

logger = Logger()


class CachedKeys:
    """The secret's current and previous values, read again after ``max_age`` seconds."""

    def __init__(self, max_age: float = KEYS_MAX_AGE_SECONDS) -> None:
        self.max_age = max_age
        self._read_at: float | None = None
        self._keys: list[bytes] = []

    def get(self, now: float | None = None) -> list[bytes]:
        now = time.monotonic() if now is None else now
        if self._read_at is None or now - self._read_at > self.max_age:
            client = boto3.client("secretsmanager")
            self._keys = SecretKeys(client, os.environ["IBI_ORIGIN_SECRET_ARN"]).load()
            self._read_at = now
        return self._keys


keys = CachedKeys()


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    answer = decide(event.get("headers") or {}, keys.get())
    if not answer["isAuthorized"]:
        logger.info(
            "request without the edge's secret refused",
            extra={"route": event.get("routeKey"), "source": _source(event)},
        )
    return answer


def _source(event: dict[str, Any]) -> str:
    http = (event.get("requestContext") or {}).get("http") or {}
    return str(http.get("sourceIp") or "")
