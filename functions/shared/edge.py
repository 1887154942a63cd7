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
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

TEXT = "text/plain; charset=us-ascii"
HTML = "text/html; charset=utf-8"
# A caller's correlation id (the resolver sends its own to the Archives), else API Gateway's.
CORRELATION_ID_PATH = 'headers."x-correlation-id" || requestContext.requestId'
IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9._:/+=@-]+")
MAX_IDEMPOTENCY_KEY = 255
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The deepest body any route takes (docs/openapi.yaml): 3 levels, as in {"files": [{…}]},
# {"links": [{…}]} or {"dc": {"creator": […]}}. The limit is far above it, far below the parser's.
DEEPEST_BODY = 3
MAX_JSON_DEPTH = 32
MAX_JSON_NUMBER = 40  # characters of one number: a byte count has at most 11 digits

Handler = Callable[[dict[str, Any], LambdaContext], Any]
# An API's declared routes: each path it serves (as written, no pattern) → the methods there.
# Its 405s name them (``method_not_allowed``); tests/unit/test_error_shape.py checks each
# table against the routes the app answers and against docs/openapi.yaml.
Routes = Mapping[str, tuple[str, ...]]


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


def method_not_allowed(event: Any, routes: Routes) -> Response[str] | None:
    """A 405 naming the methods ``routes`` (an API's declared table) serves on the request's
    path (``Allow``); None if it declares none there."""
    path, method = event.path, event.http_method
    allowed = sorted(routes.get(path, ()))
    if not allowed:
        return None
    return error_response(
        405,
        "MethodNotAllowed",
        f"{method} is not allowed on {path}; use {', '.join(allowed)}",
        Allow=", ".join(allowed),
    )


def servable(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8 cannot encode) replaced by U+FFFD."""
    return LONE_SURROGATE.sub("\ufffd", text)


def text_response(
    status: int, body: str, *, content_type: str = TEXT, **headers: str
) -> Response[str]:
    return Response(
        status_code=status, content_type=content_type, body=servable(body), headers=headers
    )


def html_response(status: int, page: str, **headers: str) -> Response[str]:
    return Response(status_code=status, content_type=HTML, body=servable(page), headers=headers)


class _BytesResponse(Response[bytes]):
    """A response whose body is sent as the bytes it is, whatever its content type.

    Powertools serialises as JSON every body that is not a ``str`` when the content type starts
    with ``application/json``: a JSON *file*'s bytes would fail (``bytes`` is not JSON
    serialisable), and every ``application/json`` file would answer 500.
    """

    def is_json(self) -> bool:
        return False


def bytes_response(
    status: int, body: bytes, *, content_type: str, headers: dict[str, str] | None = None
) -> Response[bytes]:
    """Bytes as they are (a deposited file), base64-encoded for API Gateway by Powertools."""
    return _BytesResponse(
        status_code=status, content_type=content_type, body=body, headers=headers or {}
    )


def redirect(location: str, **headers: str) -> Response[str]:
    return Response(status_code=302, body="", headers={"Location": location, **headers})


# ---------------------------------------------------------------------------- requests


class _Refused(ValueError):
    """A JSON body within the grammar but outside what any route accepts."""


def _number(text: str, kind: Callable[[str], Any]) -> Any:
    if len(text) > MAX_JSON_NUMBER:
        raise _Refused(f"a number in the body has more than {MAX_JSON_NUMBER} characters")
    return kind(text)


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _too_deep(data: Any) -> bool:
    """Whether ``data`` nests objects and arrays deeper than :data:`MAX_JSON_DEPTH`."""
    stack = [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            if level > MAX_JSON_DEPTH:
                return True
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, level + 1) for child in children)
    return False


def json_body(event: Any, *, empty: Any, error: Callable[[str], Exception], hint: str = "") -> Any:
    """The request's JSON body (``empty`` when it has none); ``error(message)`` when malformed.

    Malformed is anything a 400 should answer: bad JSON, UTF-8 or base64; ``NaN`` or
    ``Infinity``; a number of more than :data:`MAX_JSON_NUMBER` characters (Python refuses to
    convert over 4,300 digits); nesting deeper than :data:`MAX_JSON_DEPTH` (the parser itself
    runs out of stack at about 1,000).
    """
    if not event.body:
        return empty
    suffix = f"; {hint}" if hint else ""
    too_deep = f"the body nests objects and arrays more than {MAX_JSON_DEPTH} levels deep"
    try:
        data = json.loads(
            event.decoded_body,
            parse_int=lambda text: _number(text, int),
            parse_float=lambda text: _number(text, float),
            parse_constant=_constant,
        )
    except _Refused as refused:
        raise error(f"{refused}{suffix}") from None
    except RecursionError:
        raise error(too_deep) from None
    except ValueError:  # bad JSON, UTF-8 or base64
        raise error(f"the body is not valid JSON{suffix}") from None
    if _too_deep(data):
        raise error(too_deep)
    return data


def text_body(event: Any, *, error: Callable[[str], Exception], hint: str = "") -> str:
    """The request's body as text (``""`` when it has none): UTF-8, base64-decoded when the
    gateway encoded it; ``error(message)`` when it is not (never a ``UnicodeDecodeError``)."""
    if not event.body:
        return ""
    try:
        return str(event.decoded_body)
    except ValueError:  # bad base64, or bytes that are not UTF-8
        raise error(f"the body is not UTF-8 text{f'; {hint}' if hint else ''}") from None


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
    """``scheme://host`` the request came to (API Gateway's domain, or the local gateway's).

    The scheme is ``X-Forwarded-Proto`` as the gateway sets it (API Gateway: ``https``; the
    local gateway: ``http``); of a list, the last (the nearest proxy's); anything but ``http``
    or ``https`` reads as ``https``.
    """
    proto = (event.headers.get("x-forwarded-proto") or "").split(",")[-1].strip().lower()
    scheme = proto if proto in {"http", "https"} else "https"
    return f"{scheme}://{edge_host(event) or event.request_context.domain_name}"


def edge_host(event: Any) -> str | None:
    """The host a reader asked the edge for (``ibi:waf``), as the origin check passed it on.

    Only the authorizer of the routes behind the edge sets it (functions/origin/), after
    verifying CloudFront's secret header: a client cannot, whatever headers it sends.
    """
    authorizer = getattr(event.request_context, "authorizer", None)
    host = authorizer.get_lambda.get("host") if authorizer else None
    return str(host) if host else None


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
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = app.resolve(event, context)
            return answer
        finally:
            publish(metrics)

    return handle


def publish(metrics: Metrics) -> None:
    """Flush the metrics one invocation added (Powertools' ``log_metrics``, without its warning
    for an invocation that added none: most routes count nothing, and that is normal).

    Metrics switched off (local mode, tests) are dropped: Powertools keeps them unflushed, and
    they would pile up across invocations and be printed, 100 at a time, by the ``add_metric``
    that overflows (a JSON blob in the terminal of ``ibi local``).
    """
    if is_metrics_disabled():
        metrics.clear_metrics()
    elif metrics.metric_set:
        metrics.flush_metrics()
