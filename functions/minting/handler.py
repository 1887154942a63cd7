"""The minting Lambda: ``POST /mint``, ``GET /mints``, ``GET /mints/verify``, ``GET /subsystems``
(HTTP API, v2 events), and ``GET /openapi.json`` (its OpenAPI document, public).

Routes parse, make one service call and answer; the runtime comes from :mod:`wiring`.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit

from functions.minting import wiring
from functions.minting.service import (
    InvalidMintRequest,
    MintingError,
    MintRequest,
    parse_when,
    record_answer,
    verification_answer,
)
from functions.shared import edge, openapi
from functions.shared.edge import error_response, json_response
from functions.shared.errors import ErrorTable, Refusal, answer_errors
from ibi.core.dates import format_date, parse_date
from ibi.core.errors import InvalidInput

logger = Logger(service="minting")
metrics = Metrics(namespace="ibi", service="minting")
app = APIGatewayHttpResolver()

ROUTES: edge.Routes = {  # every route below, and its methods (the 405s name them)
    "/mint": ("POST",),
    "/mints": ("GET",),
    "/mints/verify": ("GET",),
    "/subsystems": ("GET",),
    "/openapi.json": ("GET",),
}
MAX_LIST_LIMIT = 100
BODY_HINT = 'send e.g. {"subsystem": "default", "count": 1}'


@app.post("/mint")
def mint() -> Response[str]:
    event = app.current_event
    request = MintRequest.from_body(
        edge.json_body(event, empty={}, error=InvalidMintRequest, hint=BODY_HINT),
        requester=edge.requester(event),
        request_id=event.request_context.request_id,
        idempotency_key=edge.idempotency_key(event, error=InvalidMintRequest),
    )
    result = wiring.runtime().service.mint(request)
    if result.replayed:
        metrics.add_metric(name="MintReplayed", unit=MetricUnit.Count, value=1)
        return json_response(200, result.answer, {"Idempotent-Replayed": "true"})
    ibis = result.answer["ibis"]
    metrics.add_metric(name="IBIsMinted", unit=MetricUnit.Count, value=len(ibis))
    logger.info(
        "minted",
        extra={
            "subsystem": result.answer["subsystem"],
            "count": len(ibis),
            "first": ibis[0]["ibip"],
            "last": ibis[-1]["ibip"],
            "requester": request.requester,
        },
    )
    return json_response(200, result.answer)


LIST_QUERY = ("subsystem", "after", "limit", "order", "since", "until", "ibi")
ORDERS = ("asc", "desc")


@app.get("/mints")
def list_mints() -> Response[str]:
    event = app.current_event
    query = _query(LIST_QUERY)
    service = wiring.runtime().service
    order = query.get("order", "asc")
    if order not in ORDERS:
        raise InvalidMintRequest(
            f"order must be asc (oldest first) or desc (newest first), not {order!r}"
        )
    limit = edge.query_int(
        event, "limit", default=20, low=1, high=MAX_LIST_LIMIT, error=InvalidMintRequest
    )
    since, until = (parse_when(query[n], n) if n in query else None for n in ("since", "until"))
    after = _after()
    if "ibi" in query:  # the record that issued it, if it is in the page asked for too
        found = service.records_of(
            query["ibi"],
            subsystem=query.get("subsystem"),
            after=after,
            newest_first=order == "desc",
            since=since,
            until=until,
        )
        return json_response(200, {"records": [record_answer(r) for r in found], "next": None})
    records, more = service.records(
        query.get("subsystem"),
        after=after,
        limit=limit,
        newest_first=order == "desc",
        since=since,
        until=until,
    )
    return json_response(
        200,
        {
            "records": [record_answer(record) for record in records],
            "next": format_date(more) if more is not None else None,
        },
    )


@app.get("/mints/verify")
def verify_mints() -> Response[str]:
    subsystem = _query(("subsystem",)).get("subsystem")
    found = wiring.runtime().service.verify(subsystem)
    if not found.ok:
        logger.warning(
            "mint record problems",
            extra={"subsystem": found.subsystem, "problems": len(found.problems)},
        )
    return json_response(200, verification_answer(found))


def _query(known: tuple[str, ...]) -> dict[str, str]:
    """The query's parameters, each once and each one the route knows."""
    given = app.current_event.query_string_parameters or {}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise InvalidMintRequest(
            f"unknown query parameter(s) {unknown}: {app.current_event.path} takes {list(known)}"
        )
    return dict(given)


def _after() -> Decimal | None:
    text = app.current_event.get_query_string_value("after")
    try:
        return parse_date(text, "after") if text else None
    except InvalidInput as error:
        raise InvalidMintRequest(str(error)) from None


@app.get("/subsystems")
def list_subsystems() -> Response[str]:
    service = wiring.runtime().service
    return json_response(
        200,
        {
            "default": service.default_subsystem,
            "subsystems": [s.to_mapping() for s in service.subsystems.values()],
        },
    )


@app.get("/openapi.json")
def openapi_document() -> Response[str]:
    return json_response(200, openapi.document("minting", edge.public_base(app.current_event)))


def present(error: Exception, answer: Response[str]) -> Response[str]:
    """Count what the alarms watch: too early (429), unavailable (5xx, logged)."""
    if isinstance(error, MintingError) and answer.status_code == 429:
        metrics.add_metric(name="MintTooEarly", unit=MetricUnit.Count, value=1)
    elif isinstance(error, MintingError) and answer.status_code >= 500:
        metrics.add_metric(name="MintUnavailable", unit=MetricUnit.Count, value=1)
        logger.warning("mint unavailable", extra={"reason": str(error)})
    return answer


ERRORS: ErrorTable = {
    MintingError: Refusal(),  # its status and Retry-After, its class's name
    InvalidOperation: Refusal(400, "InvalidNumber", "a number in the request is malformed"),
    Exception: Refusal(
        500,
        "InternalError",
        "the minting service failed; nothing was issued to you",
        unexpected=True,
    ),
}
answer_errors(app, ERRORS, logger=logger, present=present)


@app.not_found
def not_found(_: NotFoundError) -> Response[str]:
    path = app.current_event.path
    return edge.method_not_allowed(app.current_event, ROUTES) or error_response(
        404, "NotFound", f"no route {path}; routes: {sorted(ROUTES)}"
    )


lambda_handler = edge.make_handler(
    app,
    logger=logger,
    metrics=metrics,
    correlation_id_path=correlation_paths.API_GATEWAY_HTTP,
)
