"""The origin check's Lambda: an HTTP API authorizer (simple responses) on the public routes.

API Gateway calls it only for requests that carry both identity headers (others get 401
without it) and keeps each answer for the cache's time (infra/edge.py), so it runs about once
per edge host every few minutes. The secret's values are held as every function holds its
keys (``functions.shared.keys.CachedKeys``): read once, then again after
:data:`KEYS_MAX_AGE_SECONDS`, so a rotation (put-secret-value, then a deploy of the edge
stack) is followed without a cold start: the previous value verifies meanwhile. A read that
fails then keeps the values known.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.origin.verify import decide
from functions.shared.keys import CachedKeys, SecretKeys

KEYS_MAX_AGE_SECONDS = 300

logger = Logger()


class OriginSecret:
    """The edge's secret (``IBI_ORIGIN_SECRET_ARN``): current and previous values, its client
    made at the first read, not at import."""

    def load(self) -> list[bytes]:
        client = boto3.client("secretsmanager")
        return SecretKeys(client, os.environ["IBI_ORIGIN_SECRET_ARN"]).load()


keys = CachedKeys(OriginSecret(), name="origin keys", logger=logger, max_age=KEYS_MAX_AGE_SECONDS)


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    answer = decide(event.get("headers") or {}, keys.load())
    if not answer["isAuthorized"]:
        logger.info(
            "request without the edge's secret refused",
            extra={"route": event.get("routeKey"), "source": _source(event)},
        )
    return answer


def _source(event: dict[str, Any]) -> str:
    http = (event.get("requestContext") or {}).get("http") or {}
    return str(http.get("sourceIp") or "")
