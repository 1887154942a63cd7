"""The resolver's Lambda: persistent URLs in, redirects (or alerts) out (spec §4, §5, §7).

``GET /<ibi>[modifier][/path][?query]`` resolves; ``GET /<resolver service IBI>?servicesubject=``
switches Archives on and off; ``/`` is the landing page, ``/inspect`` decodes an IBI,
``/status`` lists the Archives, ``/openapi.json`` documents the administration;
``/admin/`` (IAM-authorized in AWS) registers, switches, re-keys and deregisters them.
Each route parses, makes one call to a service of the runtime (``wiring.py``), and answers.
"""

from __future__ import annotations

import ipaddress
import time
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit

from functions.resolver import negotiation, pages, wiring
from functions.resolver.errors import RegistryError
from functions.resolver.kept import forgetter
from functions.resolver.owners import owned_by
from functions.resolver.registry import PrefixTaken
from functions.resolver.resolving import Lookup, Redirect, degraded_note
from functions.resolver.service import INCLUSION_PAIRS, UnknownArchive
from functions.shared import openapi
from functions.shared.edge import (
    Routes,
    error_response,
    html_response,
    json_body,
    json_response,
    make_handler,
    method_not_allowed,
    public_base,
    redirect,
    text_response,
)
from functions.shared.errors import ErrorTable, Refusal, answer_errors, unavailable
from functions.shared.headers import link_target
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import format_pair_list, parse_query
from ibi.core.persistent_url import parse_persistent_url

if TYPE_CHECKING:
    from functions.resolver.resolution import Tombstone
    from ibi.core.citation import Record

logger = Logger(service="resolver")
metrics = Metrics(namespace="ibi", service="resolver")
app = APIGatewayHttpResolver()
ROUTES: Routes = {  # the routes below of a fixed path, and their methods (405s name them)
    "/": ("GET",),
    "/admin/archives": ("DELETE", "GET", "POST"),
    "/admin/prefixes": ("POST",),
    "/admin/switch": ("POST",),
    "/favicon.ico": ("GET",),
    "/inspect": ("GET",),
    "/openapi.json": ("GET",),
    "/status": ("GET",),
}

TEXT_UTF8 = "text/plain; charset=utf-8"
REGISTRATION_FIELDS = {"archiveserviceibi", "registrationkey"}
REGISTRATION_OPTIONS = {"prefixes", "share_prefix"}
PREFIX_FIELDS = {"archiveserviceibi", "add", "remove"}
EXAMPLES = [
    "8JMKD3MGP8W/35MME4E",
    "8JMKD3MGP8W/35MMLL8!:(oai_dc)",
    "LK47B6W/362SFKH?ibiurl.verblist=GetFileList",
]


SEND = 'send {"archiveserviceibi": …, "registrationkey": …} (and optionally "prefixes": […])'
SEND_PREFIXES = 'send {"archiveserviceibi": …, "add": [prefix, …], "remove": [prefix, …]}'
SEND_SWITCH = (
    "send the eight pairs of an inclusionRequest or exclusionRequest (spec §4) as a JSON object "
    f'of strings ({", ".join(INCLUSION_PAIRS)}), and optionally "rotate": true'
)
# The service's answers to well-formed JSON: a pair missing or malformed is 422, as a prefix.
SWITCH_REFUSALS = {400: (422, "Unprocessable"), 403: (403, "KeyRefused")}


class BadRegistration(ValueError):
    """A registration the resolver cannot take (400): the message says why."""


# ---------------------------------------------------------------------------- the edge


def _page(status: int, body: str) -> Response[str]:
    return html_response(status, body, **pages.PAGE_HEADERS)


def alert(
    status: int,
    title: str,
    message: str,
    *,
    details: tuple[str, ...] = (),
    persistent_url: str | None = None,
    holdings: str | None = None,
    tombstone: Record | None = None,
    headers: dict[str, str] | None = None,
) -> Response[str]:
    """An alert as a page, or as text for a client that prefers ``text/plain``; a 410's with
    what its tombstone says was there."""
    view = pages.AlertView(
        status, title, message, list(details), persistent_url, holdings, tombstone=tombstone
    )
    if pages.wants_text(app.current_event.headers.get("accept")):
        return text_response(status, view.text(), content_type=TEXT_UTF8, **(headers or {}))
    return html_response(status, view.page(), **{**pages.PAGE_HEADERS, **(headers or {})})


def client_ips(event: Any) -> str:
    """The client's IP then its proxies (X-Forwarded-For, then the connection), Table 6.6."""
    chain: list[str] = []
    forwarded = event.headers.get("x-forwarded-for") or ""
    for candidate in [*forwarded.split(","), event.request_context.http.source_ip or ""]:
        try:
            canonical = str(ipaddress.ip_address(candidate.strip()))
        except ValueError:
            continue
        if canonical not in chain:
            chain.append(canonical)
    return " ".join(chain[:8]) or "0.0.0.0"  # noqa: S104 - a value, not a bind address


def _now_iso() -> str:
    return iso_date(Decimal(int(time.time())))


# ---------------------------------------------------------------------------- pages


@app.get("/")
def landing() -> Response[str]:
    settings = wiring.runtime().settings
    page = pages.landing_page(
        resolver_name=settings.name,
        service_ibi=settings.service_ibi,
        examples=settings.examples or EXAMPLES,
    )
    return _page(200, page)


@app.get("/favicon.ico")
def favicon() -> Response[str]:
    return Response(status_code=204, body="")


@app.get("/inspect")
def inspect() -> Response[str]:
    label = app.current_event.get_query_string_value("ibi") or ""
    try:
        return json_response(200, parse_label(label.strip()).describe())
    except InvalidIBI as error:
        return error_response(400, "InvalidIBI", str(error))


@app.get("/status")
def status() -> Response[str]:
    archives = [
        pages.ArchiveStatus(
            service_ibi=a.service_ibi,
            address=a.address or "",
            included=a.included,
            last_answer_iso=a.last_answer_at,
            last_outcome=a.last_outcome,
        )
        for a in wiring.runtime().directory.archives()  # a snapshot: never a scan per request
    ]
    if pages.wants_text(app.current_event.headers.get("accept")):
        return text_response(
            200, pages.status_text(archives, now_iso=_now_iso()), content_type=TEXT_UTF8
        )
    return _page(200, pages.status_page(archives, now_iso=_now_iso()))


@app.get("/holdings/.+")
def holdings() -> Response[str]:
    """Who holds an IBI, in what state, and whether their bytes agree (``holdings.py``).

    A path after ``/holdings/`` that is not exactly one IBI is a persistent URL like any other
    (an rep IBI may start with ``holdings/``): it is resolved.
    """
    event = app.current_event
    rest = unquote(event.raw_path[len("/holdings/") :])
    try:
        label = parse_label(rest).label
    except InvalidIBI:
        return persistent_url()
    # Imported here: a cold start that serves resolutions does not pay for the view.
    from functions.resolver.holdings import HoldingsService, prefers_json

    runtime = wiring.runtime()
    service = HoldingsService(runtime.fanout, deadline=runtime.settings.deadline)
    view = service.view(
        label, client_ips=client_ips(event), correlation_id=event.request_context.request_id
    )
    metrics.add_metric(name="HoldingsViews", unit=MetricUnit.Count, value=1)
    answer = view.to_mapping()
    headers = {"Cache-Control": "no-store", "Vary": "Accept"}
    if prefers_json(event.headers.get("accept")):
        return json_response(200, answer, headers)
    return html_response(
        200,
        pages.holdings_page(answer),
        **{**pages.PAGE_HEADERS, **headers},
    )


@app.get("/archives/.+")
def registered_archive() -> Response[str]:
    """Public, read-only: where a registered Archive is — its service IBI, address, protocol
    and whether it is included; never its key's hash nor its contact. An Archive asks it
    before it transfers an original there (``functions/archive/registered.py``).

    As ``/holdings/``, a path that is not exactly one IBI is a persistent URL like any other.
    """
    rest = unquote(app.current_event.raw_path[len("/archives/") :])
    try:
        label = parse_label(rest).label
    except InvalidIBI:
        return persistent_url()
    found = wiring.runtime().directory.registered(label)
    if found is None:
        message = f"no Archive of service IBI {label} is registered at this resolver"
        return error_response(404, "NotFound", message)
    answer = {
        "archiveserviceibi": found.forms,
        "address": found.address,
        "protocol": found.protocol,
        "included": found.included,
    }
    return json_response(200, answer, {"Cache-Control": "no-store"})


# ---------------------------------------------------------------------------- administration


@app.post("/admin/archives")
def register() -> Response[str]:
    data = json_body(app.current_event, empty={}, error=lambda _: BadRegistration(SEND))
    if not isinstance(data, dict) or not (
        REGISTRATION_FIELDS <= set(data) <= REGISTRATION_FIELDS | REGISTRATION_OPTIONS
    ):
        raise BadRegistration(SEND)
    if not isinstance(data.get("share_prefix", False), bool):
        raise BadRegistration('"share_prefix" is true or false')
    registration = wiring.runtime().registration
    try:
        registered = registration.register(
            str(data["archiveserviceibi"]),
            str(data["registrationkey"]),
            data.get("prefixes", []),
            share_prefix=data.get("share_prefix") is True,
        )
    except InvalidInput as error:
        if error.part == "prefixes":  # well-formed JSON, a prefix that is none
            return error_response(422, "Unprocessable", str(error))
        raise BadRegistration(str(error)) from error
    logger.info(
        "archive registered",
        extra={"archive": registered.service_ibi, "prefixes": registered.prefixes},
    )
    public = registration.public(registered, registration.owned())
    answer = {key: public[key] for key in ("archiveserviceibi", "included", "prefixes", "owns")}
    return json_response(200, answer)


@app.post("/admin/prefixes")
def change_prefixes() -> Response[str]:
    """Add or remove prefixes an Archive owns, its registration key unchanged."""
    error = BadRegistration(SEND_PREFIXES)
    data = json_body(app.current_event, empty={}, error=lambda _: error)
    if not isinstance(data, dict) or not ({"archiveserviceibi"} <= set(data) <= PREFIX_FIELDS):
        raise error
    registration = wiring.runtime().registration
    try:
        changed = registration.change_prefixes(
            str(data["archiveserviceibi"]),
            add=data.get("add", []),
            remove=data.get("remove", []),
        )
    except InvalidInput as invalid:
        if invalid.part == "prefixes":
            return error_response(422, "Unprocessable", str(invalid))
        raise BadRegistration(str(invalid)) from invalid
    logger.info(
        "prefixes changed", extra={"archive": changed.service_ibi, "prefixes": changed.prefixes}
    )
    return json_response(200, registration.public(changed, registration.owned()))


@app.post("/admin/switch")
def administer_switch() -> Response[str]:
    """The administrator switches an Archive on or off with its key, or (``rotate``) gives it
    a new key and includes it with it, all or nothing: authenticated (IAM in AWS), so never
    throttled by anyone's wrong keys."""
    error = BadRegistration(SEND_SWITCH)
    data = json_body(app.current_event, empty={}, error=lambda _: error)
    if not isinstance(data, dict) or not set(INCLUSION_PAIRS) <= set(data) <= {
        *INCLUSION_PAIRS,
        "rotate",
    }:
        raise error
    if not all(isinstance(data[name], str) for name in INCLUSION_PAIRS):
        raise error
    if not isinstance(data.get("rotate", False), bool):
        raise BadRegistration('"rotate" is true or false')
    pairs = {name: data[name] for name in INCLUSION_PAIRS}
    answer = wiring.runtime().registration.administer(pairs, rotate=data.get("rotate") is True)
    logger.info(
        "administrator's switch",
        extra={
            "subject": pairs["servicesubject"],
            "archive": pairs["archiveserviceibi"],
            "rotate": data.get("rotate") is True,
            "status": answer.status,
        },
    )  # never the registration key
    if answer.status == 200:
        return json_response(200, answer.fields())
    status, code = SWITCH_REFUSALS[answer.status]
    return error_response(status, code, answer.message)


@app.delete("/admin/archives")
def deregister() -> Response[str]:
    """``DELETE /admin/archives?ibi=<service IBI>``: remove a registered Archive — never asked
    again, its prefixes free, its kept answers no longer given (``RegistrationService``)."""
    given = app.current_event.get_query_string_value("ibi") or ""
    try:
        label = parse_label(given.strip()).label
    except InvalidIBI as invalid:
        raise BadRegistration(f"DELETE /admin/archives?ibi=<service IBI>: {invalid}") from invalid
    runtime = wiring.runtime()
    registration = runtime.registration
    owned = registration.owned()  # before: what it owned is free from now on
    removed = registration.deregister(label, forget_answers=forgetter(runtime.resolving.kept))
    freed = owned_by(removed.service_ibi, owned)
    logger.info("archive deregistered", extra={"archive": removed.service_ibi, "freed": freed})
    answer = {"archiveserviceibi": removed.forms, "deregistered": True, "freed": freed}
    return json_response(200, answer)


@app.get("/admin/archives")
def list_archives() -> Response[str]:
    registration = wiring.runtime().registration
    owned = registration.owned()
    archives = [registration.public(a, owned) for a in registration.archives()]
    return json_response(200, {"archives": archives})


@app.get("/openapi.json")
def openapi_document() -> Response[str]:
    """Public: the administration API's OpenAPI document."""
    return json_response(200, openapi.document("resolver", public_base(app.current_event)))


# ---------------------------------------------------------------------------- the protocol


@app.route("/.+", method=["GET", "HEAD"])  # curl -I, link checkers: HEAD too
def persistent_url() -> Response[str]:
    event = app.current_event
    runtime = wiring.runtime()
    query = event.raw_query_string or ""
    if event.raw_path.lower() == "/" + runtime.settings.service_ibi.lower():
        return switch(query)
    refused = method_not_allowed(event, ROUTES) if event.path.startswith("/admin/") else None
    if refused is not None:
        return refused  # e.g. GET /admin/prefixes: an administrative path, not an IBI
    target = event.raw_path + ("?" + query if query else "")
    try:
        url = parse_persistent_url(target)
    except InvalidInput as error:
        metrics.add_metric(name="MalformedPersistentURL", unit=MetricUnit.Count, value=1)
        return alert(400, "Malformed persistent URL", f"{target[:300]}: {error}")
    wanted = negotiation.choose(event.headers.get("accept"))
    if isinstance(wanted, negotiation.NotAcceptable):
        return not_acceptable(wanted.asked)
    lookup = Lookup(
        url=url,
        persistent_url=public_base(event) + target,
        client_ips=client_ips(event),
        correlation_id=event.request_context.request_id,
        accept_language=event.headers.get("accept-language"),
        holdings=wanted is not None,
        # COUNTER-Robots reads it at the Archive (issue 35): none sent reads as a robot's
        user_agent=event.headers.get("user-agent") or "",
    )
    result = runtime.resolving.resolve(lookup)
    if isinstance(result, Redirect):
        return answer_found(result, lookup, wanted)
    found = result.alert
    record = tombstone_record(found.tombstone)
    if record is not None and wanted is not None:
        return answer_withdrawn(record, wanted, result.headers)
    note = degraded_note(found.degraded)
    return alert(
        found.status,
        found.title,
        found.message + (" " + note if note else ""),
        details=(*found.suspects, *found.copies),
        persistent_url=result.persistent_url,
        holdings=url.ibi.label,  # who holds it: linked from every alert of a resolution
        tombstone=record,
        headers=result.headers,
    )


def tombstone_record(tombstone: Tombstone | None) -> Record | None:
    """What a 410's tombstone says was there, as a citation record (issue 28)."""
    if tombstone is None:
        return None
    cite_as = link_target(f"{public_base(app.current_event)}/{tombstone.ibi}")
    return negotiation.record_of(tombstone.pairs, persistent_url=cite_as, ibi=tombstone.ibi)


def answer_withdrawn(
    record: Record, wanted: str, more: dict[str, str] | None = None
) -> Response[str]:
    """A deleted IBI's citation in the type asked, with its withdrawn note: still a 410."""
    metrics.add_metric(name="NegotiatedAnswers", unit=MetricUnit.Count, value=1)
    body = negotiation.render(wanted, record)
    headers = {"Cache-Control": "no-cache", "Vary": "Accept", **(more or {})}
    return text_response(410, body, content_type=negotiation.content_type(wanted), **headers)


def answer_found(found: Redirect, lookup: Lookup, wanted: str | None) -> Response[str]:
    """The 302 with its Signposting links, or the negotiated citation (issue 16)."""
    base = public_base(app.current_event)
    cite_as = link_target(f"{base}/{found.ibi or lookup.url.ibi.label}")
    canonical = link_target(lookup.persistent_url)
    headers = {
        "Cache-Control": "no-cache",
        "Vary": "Accept",
        "Link": negotiation.signposting_links(cite_as, canonical=canonical),
        **found.headers,
    }
    if wanted is None:
        return redirect(found.url, **headers)
    record = negotiation.record_of(found.pairs, persistent_url=cite_as, ibi=found.ibi)
    if record is None:
        return not_acceptable(wanted, "The Archive holding this item gives no Dublin Core for it.")
    metrics.add_metric(name="NegotiatedAnswers", unit=MetricUnit.Count, value=1)
    body = negotiation.render(wanted, record)
    return text_response(200, body, content_type=negotiation.content_type(wanted), **headers)


def not_acceptable(asked: str, reason: str = "") -> Response[str]:
    body = (reason + "\n" if reason else "") + negotiation.not_acceptable_text(asked)
    headers = {"Vary": "Accept", "Cache-Control": "no-cache"}
    return text_response(406, body, content_type=TEXT_UTF8, **headers)


def switch(query: str) -> Response[str]:
    """``GET /<resolver service IBI>?servicesubject=inclusionRequest|exclusionRequest&…``.

    Wrong keys are counted per source: the connection's address as API Gateway saw it
    (``sourceIp``), never ``X-Forwarded-For``, which the sender writes.
    """
    try:
        pairs = dict(parse_query(query))
    except InvalidInput as error:
        pairs = {"servicesubject": "", "error": str(error)}
    client_ip = app.current_event.request_context.http.source_ip or ""
    answer = wiring.runtime().registration.switch(pairs, client_ip=client_ip)
    details = {
        "subject": pairs.get("servicesubject"),
        "archive": pairs.get("archiveserviceibi"),
        "source": client_ip,
        "status": answer.status,
    }  # never the registration key
    if answer.over_cap:  # the alarm RegistrationGuessCap watches this metric
        metrics.add_metric(name="RegistrationGuessCap", unit=MetricUnit.Count, value=1)
        logger.warning("wrong registration keys over the cap", extra=details)
    else:
        logger.info("switch", extra=details)
    headers = {"Retry-After": str(answer.retry_after)} if answer.retry_after else {}
    return text_response(answer.status, format_pair_list(answer.pairs) + "\r\n", **headers)


# ---------------------------------------------------------------------------- errors


@app.not_found
def not_found(_: NotFoundError) -> Response[str]:
    if app.current_event.path.startswith("/admin/"):  # JSON callers
        return method_not_allowed(app.current_event, ROUTES) or error_response(
            404, "NotFound", f"no route {app.current_event.path}"
        )
    return alert(404, "Not found", f"No page {app.current_event.path[:200]}.")


ERRORS: ErrorTable = {
    BadRegistration: Refusal(400, "BadRequest"),
    UnknownArchive: Refusal(404, "NotFound"),
    PrefixTaken: Refusal(409, "PrefixOwned"),
    RegistryError: unavailable("registry unavailable"),
    Exception: Refusal(500, "InternalError", "the resolver failed", unexpected=True),
}
# What a reader sees of a failure instead, everywhere but the administration's JSON (/admin/).
ALERTS = {
    RegistryError: ("Unavailable", "The resolver's registry is unavailable; retry shortly."),
    Exception: ("Resolver error", "The resolver failed; this was logged."),
}


def present(error: Exception, answer: Response[str]) -> Response[str]:
    """The JSON answer to an administration request (or a refusal), else an alert."""
    if app.current_event.path.startswith("/admin/") or answer.status_code < 500:
        return answer
    title, message = ALERTS[RegistryError if isinstance(error, RegistryError) else Exception]
    return alert(answer.status_code, title, message)


answer_errors(app, ERRORS, logger=logger, present=present)


lambda_handler = make_handler(
    app,
    logger=logger,
    metrics=metrics,
    correlation_id_path=correlation_paths.API_GATEWAY_HTTP,
)
