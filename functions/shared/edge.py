"""The HTTP edge every Lambda shares: answers, request parsing, the entry point, the clock.

Routes stay short because what they all need is here, once: JSON, text and HTML answers, the
error body ``{"error": {"code", "message"}}``, a JSON body read with a clear 400, a bounded
integer from the query, the Idempotency-Key rule, and ``make_handler`` (logging with a
correlation id, metrics flushed after each invocation).
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext

# Routes that publish no metric are normal; Powertools would warn about each of them.
warnings.filterwarnings("ignore", message="No application metrics to publish")

TEXT = "text/plain; charset=us-ascii"
HTML = "text/html; charset=utf-8"
# A caller's correlation id (the resolver sends its own to the Archives), else API Gateway's.
CORRELATION_ID_PATH = 'headers."x-correlation-id" || requestContext.requestId'
IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9._:/+=@-]+")
MAX_IDEMPOTENCY_KEY = 255

Handler = Callable[[dict[str, Any], LambdaContext], Any]


def clock() -> Decimal:
    """Now, exactly, as a decimal number of seconds since 1970."""
    return Decimal(time.time_ns()) / Decimal(1_000_000_000)


# ---------------------------------------------------------------------------- answers


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body),
        headers=headers or {},
    )


def error_response(status: int, code: str, message: str, **headers: str) -> Response[str]:
    """The one error body of every JSON API: ``{"error": {"code": …, "message": …}}``."""
    return json_response(status, {"error": {"code": code, "message": message}}, headers)


def text_response(
    status: int, body: str, *, content_type: str = TEXT, **headers: str
) -> Response[str]:
    return Response(status_code=status, content_type=content_type, body=body, headers=headers)


def html_response(status: int, page: str, **headers: str) -> Response[str]:
    return Response(status_code=status, content_type=HTML, body=page, headers=headers)


def redirect(location: str, **headers: str) -> Response[str]:
    return Response(status_code=302, body="", headers={"Location": location, **headers})


# ---------------------------------------------------------------------------- requests


def json_body(event: Any, *, empty: Any, error: Callable[[str], Exception], hint: str = "") -> Any:
    """The request's JSON body (``empty`` when it has none); ``error(message)`` when malformed."""
    if not event.body:
        return empty
    try:
        return event.json_body
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise error("the body is not valid JSON" + (f"; {hint}" if hint else "")) from None


def query_int(
    event: Any,
    name: str,
    *,
    default: int,
    low: int,
    high: int,
    error: Callable[[str], Exception],
) -> int:
    """A whole number from ``low`` to ``high`` in the query string, or ``default``."""
    text = event.get_query_string_value(name, None) or str(default)
    if not text.isdigit() or len(text) > len(str(high)) or not low <= int(text) <= high:
        raise error(f"{name} must be an integer from {low} to {high}")
    return int(text)


def idempotency_key(
    event: Any, *, error: Callable[[str], Exception], max_length: int = MAX_IDEMPOTENCY_KEY
) -> str | None:
    """The request's ``Idempotency-Key`` header, checked: 1 to ``max_length`` safe characters."""
    key: str | None = event.headers.get("idempotency-key")
    if key is None:
        return None
    if not 1 <= len(key) <= max_length or not IDEMPOTENCY_KEY.fullmatch(key):
        raise error(
            f"the Idempotency-Key must be 1-{max_length} of A-Z a-z 0-9 . _ : / + = @ - "
            "(e.g. a UUID)"
        )
    return key


def requester(event: Any) -> str:
    """Who is asking: the IAM principal in AWS, else the source address."""
    context = event.request_context
    iam = context.authorizer.iam if context.authorizer else None
    if iam is not None and iam.user_arn:
        return str(iam.user_arn)
    return f"anonymous:{context.http.source_ip}"


def public_base(event: Any) -> str:
    """``scheme://host`` the request came to (API Gateway's domain, or the local gateway's)."""
    proto = event.headers.get("x-forwarded-proto", "https")
    return f"{proto}://{event.request_context.domain_name}"


# ---------------------------------------------------------------------------- the entry point


def make_handler(
    app: APIGatewayHttpResolver,
    *,
    logger: Logger,
    metrics: Metrics,
    correlation_id_path: str = CORRELATION_ID_PATH,
) -> Handler:
    """The Lambda entry point around ``app``: structured logs, a correlation id, metrics."""

    @logger.inject_lambda_context(correlation_id_path=correlation_id_path)
    @metrics.log_metrics
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return app.resolve(event, context)

    return handle
