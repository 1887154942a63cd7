"""The minting Lambda: ``POST /mint``, ``GET /mints``, ``GET /subsystems`` (HTTP API, v2 events)."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.minting.service import (
    InvalidMintRequest,
    MintingError,
    MintingService,
    MintRequest,
    record_answer,
)
from functions.minting.settings import Settings
from functions.minting.store import DynamoMintStore
from ibi.aws import aws_client
from ibi.core.dates import format_date, parse_date
from ibi.core.errors import InvalidInput

logger = Logger(service="minting")
metrics = Metrics(namespace="ibi", service="minting")

# GET routes publish no metric; Powertools would warn about that on every call.
warnings.filterwarnings("ignore", message="No application metrics to publish")

ROUTES = {"/mint": ("POST",), "/mints": ("GET",), "/subsystems": ("GET",)}
MAX_LIST_LIMIT = 100


def clock() -> Decimal:
    """Now, exactly, as a decimal number of seconds since 1970."""
    return Decimal(time.time_ns()) / Decimal(1_000_000_000)


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body),
        headers=headers or {},
    )


def error_response(status: int, code: str, message: str, **headers: str) -> Response[str]:
    return _json(status, {"error": {"code": code, "message": message}}, headers)


def create_app(service_provider: Callable[[], MintingService]) -> APIGatewayHttpResolver:
    """The routes, over whatever service ``service_provider`` gives (built on first use)."""
    app = APIGatewayHttpResolver()

    def requester() -> str:
        context = app.current_event.request_context
        iam = context.authorizer.iam if context.authorizer else None
        if iam is not None and iam.user_arn:
            return iam.user_arn
        return f"anonymous:{context.http.source_ip}"

    @app.post("/mint")
    def mint() -> Response[str]:
        event = app.current_event
        try:
            body = event.json_body if event.body else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise InvalidMintRequest(
                'the body is not valid JSON; send e.g. {"subsystem": "default", "count": 1}'
            ) from None
        request = MintRequest.from_body(
            body,
            requester=requester(),
            request_id=event.request_context.request_id,
            idempotency_key=event.headers.get("idempotency-key"),
        )
        result = service_provider().mint(request)
        if result.replayed:
            metrics.add_metric(name="MintReplayed", unit=MetricUnit.Count, value=1)
            return _json(200, result.answer, {"Idempotent-Replayed": "true"})
        minted = len(result.answer["ibis"])
        metrics.add_metric(name="IBIsMinted", unit=MetricUnit.Count, value=minted)
        logger.info(
            "minted",
            extra={
                "subsystem": result.answer["subsystem"],
                "count": minted,
                "first": result.answer["ibis"][0]["ibip"],
                "last": result.answer["ibis"][-1]["ibip"],
                "requester": request.requester,
            },
        )
        return _json(200, result.answer)

    @app.get("/mints")
    def list_mints() -> Response[str]:
        event = app.current_event
        limit_text = event.get_query_string_value("limit", "20") or "20"
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIST_LIMIT:
            raise InvalidMintRequest(f"limit must be an integer from 1 to {MAX_LIST_LIMIT}")
        after_text = event.get_query_string_value("after")
        try:
            after = parse_date(after_text, "after") if after_text else None
        except InvalidInput as error:
            raise InvalidMintRequest(str(error)) from None
        service = service_provider()
        records, more = service.records(
            event.get_query_string_value("subsystem"), after=after, limit=int(limit_text)
        )
        return _json(
            200,
            {
                "records": [record_answer(record) for record in records],
                "next": format_date(more) if more is not None else None,
            },
        )

    @app.get("/subsystems")
    def list_subsystems() -> Response[str]:
        service = service_provider()
        return _json(
            200,
            {
                "default": service.default_subsystem,
                "subsystems": [s.to_mapping() for s in service.subsystems.values()],
            },
        )

    @app.exception_handler(MintingError)  # type: ignore[untyped-decorator]
    def minting_error(error: MintingError) -> Response[str]:
        headers = {"Retry-After": str(error.retry_after)} if error.retry_after else {}
        if error.status == 429:
            metrics.add_metric(name="MintTooEarly", unit=MetricUnit.Count, value=1)
        elif error.status >= 500:
            metrics.add_metric(name="MintUnavailable", unit=MetricUnit.Count, value=1)
            logger.warning("mint unavailable", extra={"reason": str(error)})
        return error_response(error.status, type(error).__name__, str(error), **headers)

    @app.exception_handler(InvalidOperation)  # type: ignore[untyped-decorator]
    def bad_number(_: InvalidOperation) -> Response[str]:
        return error_response(400, "InvalidNumber", "a number in the request is malformed")

    @app.not_found
    def not_found(_: NotFoundError) -> Response[str]:
        allowed = ROUTES.get(app.current_event.path)
        if allowed:
            return error_response(
                405,
                "MethodNotAllowed",
                f"{app.current_event.http_method} is not allowed on {app.current_event.path}; "
                f"use {', '.join(allowed)}",
                Allow=", ".join(allowed),
            )
        return error_response(
            404, "NotFound", f"no route {app.current_event.path}; routes: {sorted(ROUTES)}"
        )

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def unexpected(error: Exception) -> Response[str]:
        logger.exception("unexpected error")
        return error_response(
            500, "InternalError", "the minting service failed; nothing was issued to you"
        )

    return app


def service_from_settings(settings: Settings, dynamodb: Any) -> MintingService:
    def count_conflict() -> None:
        metrics.add_metric(name="MintConflicts", unit=MetricUnit.Count, value=1)

    return MintingService(
        DynamoMintStore(
            dynamodb,
            state_table=settings.state_table,
            record_table=settings.record_table,
            idempotency_table=settings.idempotency_table,
        ),
        settings.subsystems,
        default_subsystem=settings.default_subsystem,
        clock=clock,
        sleep=time.sleep,
        max_wait=settings.max_wait,
        idempotency_ttl_seconds=settings.idempotency_ttl_seconds,
        on_conflict=count_conflict,
    )


@lru_cache(maxsize=1)
def _service() -> MintingService:
    """Built once per execution environment, on the first request (the cold start)."""
    settings = Settings.from_environment()
    return service_from_settings(settings, aws_client("dynamodb"))


def make_handler(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], LambdaContext], Any]:
    """The Lambda entry point around ``app``, with logging and metrics."""

    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @metrics.log_metrics
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return app.resolve(event, context)

    return handle


lambda_handler = make_handler(create_app(_service))
