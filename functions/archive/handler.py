"""An Archive's Lambda: the service protocol, what browsers get, and the deposit API.

Public (no authorization): ``GET /<archive service IBI>?servicesubject=…`` (spec §3, §6),
``GET /col/<ibi>[/<path>]`` files, ``GET /list/<ibi>`` the file-list page,
``GET /metadata/<ibi>[?format=oai_dc]``, ``POST /transfers/confirm`` (an offer, offers.py),
``GET /transfers/held?ibi=`` (what is held for a transfer, staged included: registered.py),
``GET|POST /oai`` (OAI-PMH 2.0, oai.py), ``GET /openapi.json``.
IAM-authorized in AWS: ``/api/…`` (deposit; ``/api/links…``, the external URLs checked).
Routes parse, make one call on ``site().content`` (``content.py``, the Archive's facade over
its files and its item layer, ``service.py``) or ``site().protocol`` (``protocol.py``), and
answer; ``wiring.py`` builds them.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.metrics import MetricUnit

from functions.archive import links, oai, views, wiring
from functions.archive.content import FileAnswer, Page
from functions.archive.errors import ArchiveError, BadRequest, NotHeld, ProtocolError
from functions.archive.files import FileMismatch, FileMissing, FileStoreError, FileTooLarge
from functions.archive.mapping import item_to_mapping
from functions.archive.model import Item
from functions.archive.parsing import ibi_from
from functions.archive.store import ArchiveStoreError
from functions.archive.transfer import TransferFailed
from functions.archive.wiring import Site
from functions.shared import edge, openapi
from functions.shared.edge import error_response, html_response, json_response, text_response
from functions.shared.errors import ErrorTable, Refusal, answer_errors, unavailable
from ibi.core.pairlist import PairList, encode_value, format_pair_list

logger = Logger(service="archive")
metrics = Metrics(namespace="ibi", service="archive")
app = APIGatewayHttpResolver()
ROUTES: edge.Routes = {  # the routes below of a fixed path, and their methods (405s name them)
    "/api/copies": ("POST",),
    "/api/imports": ("POST",),
    "/api/item": ("DELETE", "GET", "PATCH"),
    "/api/item/files": ("POST",),
    "/api/item/files/replace": ("POST",),
    "/api/item/links": ("DELETE", "POST"),
    "/api/item/offers": ("POST",),
    "/api/item/previous": ("GET",),
    "/api/item/transfer": ("POST",),
    "/api/item/uploads": ("POST",),
    "/api/items": ("GET", "POST"),
    "/api/links": ("GET",),
    "/api/links/check": ("POST",),
    "/api/service": ("GET",),
    "/api/transfers": ("DELETE", "POST"),
    "/api/transfers/accept": ("POST",),
    "/api/transfers/complete": ("POST",),
    "/api/verify": ("POST",),
    "/oai": ("GET", "POST"),
    "/openapi.json": ("GET",),
    "/transfers/confirm": ("POST",),
    "/transfers/held": ("GET",),
}
JSON_PATHS = ("/api/", "/transfers/")  # errors there are JSON; elsewhere, a page

MAX_IDEMPOTENCY_KEY = 200
# A link check asked through the API ends within the API's 29 s (infra/archive.py's TIMEOUT).
LINK_CHECK_SECONDS = 20.0
OAI_XML = "text/xml; charset=utf-8"
OAI_FORM = (
    "send the arguments as application/x-www-form-urlencoded UTF-8, e.g. "
    "verb=ListRecords&metadataPrefix=oai_dc (OAI-PMH 2.0 §3.1.1.2)"
)


def count(name: str) -> None:
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)


def site() -> Site:
    return wiring.runtime().site


def start(router: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """Before the first route of an execution environment: the Archive's bootstrap.

    A protocol request (the resolver's confirmation call among them) never starts a join.
    """
    event = router.current_event
    protocol = "servicesubject" in (event.raw_query_string or "")
    wiring.runtime().start(edge.public_base(event), join=not protocol)
    return next_middleware(router)


app.use(middlewares=[start])


# ---------------------------------------------------------------------------- answers


def pairs_response(status: int, pairs: PairList) -> Response[str]:
    body = format_pair_list(pairs)
    return text_response(status, body + ("\r\n" if body else ""))


def page_response(page: Page) -> Response[Any]:
    """One of the Archive's own documents: a page (under its strict CSP) or an XML record."""
    if page.content_type == "html":
        return html_response(page.status, str(page.body), **page.headers, **views.PAGE_HEADERS)
    return Response(
        status_code=page.status,
        content_type=page.content_type,
        body=page.body,
        headers={**page.headers, "X-Content-Type-Options": "nosniff"},
    )


def file_response(answer: FileAnswer, label: str) -> Response[Any]:
    if answer.damaged:  # never serve damaged content
        count("IntegrityProblems")
        logger.error("file damaged", extra={"ibi": label, "path": answer.path})
    page = answer.page
    if page is not None and answer.status == 200 and isinstance(page.body, bytes):
        # A deposited file's bytes: never a page of this origin (views.file_headers).
        return edge.bytes_response(  # as they are, JSON files too; sent base64-encoded
            200,
            page.body,
            content_type=page.content_type,
            headers={**page.headers, **views.file_headers(page.content_type, answer.path)},
        )
    if page is not None:
        return page_response(page)
    return Response(status_code=answer.status, body="", headers=answer.headers)


def after(prefix: str) -> str:
    """The rest of the path (routes that take slashes match with a bare regex)."""
    return app.current_event.path[len(prefix) :]


def query(name: str) -> str | None:
    return app.current_event.get_query_string_value(name, None)


def body() -> Any:
    return edge.json_body(app.current_event, empty={}, error=BadRequest)


def item_label() -> str:
    label = query("ibi")
    if not label:
        raise BadRequest("say which item: ?ibi=<label>")
    return label


def principal() -> str:
    """Who is asking: the IAM principal in AWS, ``anonymous:<ip>`` locally."""
    return edge.requester(app.current_event)


def item_json(status: int, item: Item) -> Response[str]:
    return json_response(status, site().content.item_answer(item))


# ---------------------------------------------------------------------------- public pages


@app.route("/col/.+", method=["GET", "HEAD"])  # HEAD: Signposting crawlers
def get_file() -> Response[Any]:
    label, path = ibi_from(after("/col/"))
    etag = app.current_event.headers.get("if-none-match")
    return file_response(site().content.serve_file(label, path, etag), label)


@app.route("/list/.+", method=["GET", "HEAD"])  # HEAD: Signposting crawlers
def get_file_list() -> Response[Any]:
    label, _ = ibi_from(after("/list/"))
    return page_response(site().content.file_list(label))


@app.route("/linkset/.+", method=["GET", "HEAD"])
def get_linkset() -> Response[Any]:
    label, _ = ibi_from(after("/linkset/"))
    return page_response(site().content.linkset(label))


@app.route("/metadata/.+", method=["GET", "HEAD"])  # HEAD: Signposting crawlers
def get_metadata() -> Response[Any]:
    label, _ = ibi_from(after("/metadata/"))
    return page_response(site().content.metadata(label, query("format")))


@app.route("/oai", method=["GET", "POST"])  # POST: the arguments in a form body (OAI-PMH §3.1.1)
def oai_pmh() -> Response[Any]:
    """OAI-PMH 2.0 (oai.py): every answer is 200 and XML, the protocol's errors included."""
    event, settings = app.current_event, wiring.runtime().settings
    repository = oai.archive_repository(
        site().content.items,
        address=site().identity.address,
        service_ibi=site().identity.service.key,
        base_url=site().views.base_url,
        admin_email=settings.admin_email,
        clock=wiring.runtime().clock,
        page_size=settings.oai_page_size,
        resolver_url=site().views.resolver_url,
    )
    if event.http_method == "GET":
        arguments = event.raw_query_string
    else:
        try:
            arguments = edge.text_body(event, error=BadRequest, hint=OAI_FORM)
        except BadRequest as unreadable:
            return Response(400, OAI_XML, repository.unreadable(str(unreadable)))
    return Response(200, OAI_XML, repository.answer(arguments or ""))


# ---------------------------------------------------------------------------- the deposit API


@app.get("/openapi.json")
def openapi_document() -> Response[str]:
    """Public: the deposit API's OpenAPI document."""
    return json_response(200, openapi.document("archive", edge.public_base(app.current_event)))


@app.get("/api/service")
def get_service() -> Response[str]:
    identity, views = site().identity, site().views
    return json_response(
        200,
        {
            "archiveaddress": identity.address,
            "archiveserviceibi": identity.service.to_mapping(),
            "platformsoftware": identity.platform.to_mapping() if identity.platform else None,
            "base_url": views.base_url,
            "protocol_url": f"{views.base_url}/{identity.service.key}",
        },
    )


@app.post("/api/items")
def create_original() -> Response[str]:
    key = edge.idempotency_key(app.current_event, error=BadRequest, max_length=MAX_IDEMPOTENCY_KEY)
    item, replayed = site().content.deposit_original(
        body(), idempotency_key=key, principal=principal()
    )
    if replayed:  # the same depositor's same request again: its item, as first answered
        count("DepositsReplayed")
        return json_response(201, site().content.item_answer(item), {"Idempotent-Replayed": "true"})
    count("ItemsCreated")
    logger.info("original created", extra={"ibi": item.key, "by": item.creator})
    return item_json(201, item)


@app.post("/api/copies")
def create_copy() -> Response[str]:
    item = site().content.add_copy(body(), principal=principal())
    check = item.original_check.to_mapping() if item.original_check else {}
    checked = {"check": check.get("status"), "reason": check.get("reason")}
    logger.info("copy added", extra={"ibi": item.key, "by": item.creator, **checked})
    return item_json(201, item)


@app.get("/api/item")
def get_item() -> Response[str]:
    return item_json(200, site().content.get(item_label()))


@app.patch("/api/item")
def update_item() -> Response[str]:
    return item_json(200, site().content.update(item_label(), body(), principal()))


@app.post("/api/item/links")
def link_item() -> Response[str]:
    return item_json(200, site().content.link(item_label(), body()))


@app.delete("/api/item/links")
def unlink_item() -> Response[str]:
    """Remove one link (``?link=next_edition|translation(LANG)|metadata|metadata_oai_dc``)."""
    item = site().content.unlink(item_label(), query("link"), principal())
    logger.info("link removed", extra={"ibi": item.key, "link": query("link"), "by": principal()})
    return item_json(200, item)


@app.delete("/api/item")
def delete_item() -> Response[str]:
    """Withdraw an item (``?reason=`` says why: its tombstone pages and citation show it)."""
    reason = query("reason")
    item = site().content.delete(item_label(), reason=reason, principal=principal())
    logger.info("item deleted", extra={"ibi": item.key, "by": principal(), "reason": reason})
    return item_json(200, item)


@app.get("/api/items")
def list_items() -> Response[str]:
    limit = edge.query_int(
        app.current_event, "limit", default=50, low=1, high=200, error=BadRequest
    )
    items, more = site().content.list_items(after=query("after"), limit=limit)
    return json_response(200, {"items": [item_to_mapping(i) for i in items], "next": more})


@app.post("/api/item/uploads")
def presign_uploads() -> Response[str]:
    """Presigned PUT URLs for files of an item (any size, straight to S3)."""
    return json_response(200, site().content.presign_uploads(item_label(), body()))


@app.post("/api/item/files")
def commit_files() -> Response[str]:
    """Check uploaded files against their SHA-256 and size, then add them to the item."""
    item, files = site().content.commit_files(item_label(), body(), principal())
    logger.info("files committed", extra={"ibi": item.key, "files": files})
    return item_json(200, item)


@app.post("/api/item/files/replace")
def revise_files() -> Response[str]:
    """An operator adds or replaces files of any item; previous versions kept, all recorded."""
    item, files = site().content.revise_files(item_label(), body(), principal())
    logger.info("files revised", extra={"ibi": item.key, "files": files, "by": principal()})
    return item_json(200, item)


@app.get("/api/item/previous")
def previous_version() -> Response[str]:
    """A replaced version of a file: its checksum and a short-lived download URL."""
    answer = site().content.previous_version(item_label(), query("path"), query("sha256"))
    return json_response(200, answer)


@app.post("/api/imports")
def import_original() -> Response[str]:
    """An original for an IBI of another subsystem, authorised by an operator (recorded)."""
    item = site().content.import_original(body(), principal=principal())
    logger.info("original imported", extra={"ibi": item.key, "by": item.creator})
    return item_json(201, item)


@app.post("/api/transfers")
def receive_transfer() -> Response[str]:
    """The receiving side of a transfer: hold the item, answering no one yet (transfer.py)."""
    item = site().content.receive_transfer(body(), principal())
    logger.info("transfer incoming", extra={"ibi": item.key, "by": item.creator})
    return item_json(201, item)


@app.post("/api/transfers/complete")
def complete_transfer() -> Response[str]:
    item = site().content.complete_transfer(item_label(), principal())
    logger.info("transfer received", extra={"ibi": item.key, "by": principal()})
    return item_json(200, item)


@app.delete("/api/transfers")
def cancel_transfer() -> Response[str]:
    item = site().content.cancel_transfer(item_label())
    logger.info("transfer cancelled", extra={"ibi": item.key, "by": principal()})
    return json_response(200, {"cancelled": item.ibi.to_mapping()})


@app.post("/api/item/offers")
def offer() -> Response[str]:
    """An offer of this original to another institution's Archive (offers.py): no write."""
    made, token = site().content.make_offer(
        item_label(), body(), sender=site().identity.service.key
    )
    logger.info("offer made", extra={"ibi": made.ibi, "to": made.to, "offer": made.id})
    return json_response(
        201,
        {"offer": token, "id": made.id, "ibi": made.ibi, "to": made.to, "expires": made.expires},
    )


@app.post("/api/transfers/accept")
def accept_offer() -> Response[str]:
    """Take an original another institution's Archive offered (offers.py)."""
    item = site().content.accept_offer(body(), me=site().identity.service, principal=principal())
    logger.info("transfer accepted", extra={"ibi": item.key, "by": principal()})
    return item_json(200, item)


@app.post("/transfers/confirm")
def confirm_offer() -> Response[str]:
    """Public: a receiver confirms it holds what one of our offers named (offers.py)."""
    answer = site().content.confirm_offer(body(), sender=site().identity.service.key)
    logger.info("offer confirmed", extra={"offer": answer.get("offer"), "answer": answer})
    return json_response(200, answer)


@app.get("/transfers/held")
def held_for_transfer() -> Response[str]:
    """Public: what this Archive holds of an IBI for a transfer, a staged one included: how a
    sender reads it at the address the resolver registered (registered.py)."""
    return json_response(200, site().content.held_for_transfer(item_label()))


@app.post("/api/verify")
def verify() -> Response[str]:
    """Stored files against their SHA-256; a copy against its original's files (read again
    from the original's Archive while the copy is unverified: ``copies.py``)."""
    report = site().content.verify(query("ibi"), query("after"))
    if report.problems:
        metrics.add_metric(
            name="IntegrityProblems", unit=MetricUnit.Count, value=len(report.problems)
        )
        logger.error("integrity problems", extra={"problems": report.problems})
    answer = {
        "items": report.items,
        "problems": len(report.problems),
        "unverified": report.unverified,
        "next": report.next,
    }
    return json_response(200, answer)


@app.post("/api/links/check")
def check_links() -> Response[str]:
    """Check the items' external URLs (``links.py``): those ``ibis`` names, else the items due
    (oldest-checked first) for up to :data:`LINK_CHECK_SECONDS`; ``left``: those not reached."""
    labels, checked_before = links.run_request(body())
    run = site().links.run(seconds=LINK_CHECK_SECONDS, labels=labels, checked_before=checked_before)
    logger.info(
        "links checked",
        extra={"checked": len(run.results), "broken": len(run.broken), "left": run.left},
    )
    return json_response(200, run.to_mapping())


@app.get("/api/links")
def list_broken_links() -> Response[str]:
    """The items whose external URL the last check found broken (``?status=broken``), one
    Scan page (``limit`` records read) at a time: ``next`` says where the next one starts."""
    if (query("status") or "broken") != "broken":
        raise BadRequest("?status=broken is the one list kept (a working link needs no list)")
    limit = edge.query_int(
        app.current_event, "limit", default=200, low=1, high=1000, error=BadRequest
    )
    items, more = site().links.broken(after=query("after"), limit=limit)
    found = [
        {"ibi": item.ibi.to_mapping(), **item.link.to_mapping()} for item in items if item.link
    ]
    return json_response(200, {"broken": found, "next": more})


@app.post("/api/item/transfer")
def transfer() -> Response[str]:
    """Move a transferable original to another Archive (seed 001 §3.2; see transfer.py)."""
    data, label = body(), item_label()
    moved = site().content.transfer(label, data)
    logger.info("transferred", extra={"ibi": moved.here.key, "to": data["to"]})
    return json_response(200, {"here": item_to_mapping(moved.here), "there": moved.there})


# ---------------------------------------------------------------------------- the protocol


@app.get("/.+")
def protocol() -> Response[str]:
    """The service protocol, at the Archive service's own IBI (matched last)."""
    rest = after("/")
    if rest.startswith("api/"):  # the deposit API: JSON, and a 405 for a method it lacks
        refused: Response[str] = not_found(NotFoundError())
        return refused
    try:
        label, extra = ibi_from(rest)
    except BadRequest:
        raise NotHeld(f"no page {rest!r}") from None
    service = site().protocol
    if extra or not service.is_service(label):
        # Any other item's IBI on this host: answer as its persistent content would.
        raise NotHeld(f"{label} is not this Archive's service; try /col/{label}")
    answer = service.answer(app.current_event.raw_query_string or "")
    if answer.metric:
        count(answer.metric)
    if answer.event:
        logger.info(answer.event, extra=answer.details)
    return pairs_response(200, answer.pairs)


# ---------------------------------------------------------------------------- errors


@app.exception_handler(ProtocolError)  # type: ignore[untyped-decorator]
def protocol_error(error: ProtocolError) -> Response[str]:
    """A 400 whose body is still a pair list: ``error {words of the reason}``."""
    words = tuple(encode_value(word) for word in str(error).split())
    return pairs_response(400, PairList([("error", words)]))


@app.exception_handler(TransferFailed)  # type: ignore[untyped-decorator]
def transfer_failed(failure: TransferFailed) -> Response[str]:
    code = "TransferRefused" if failure.refused else "TransferIncomplete"
    logger.warning("transfer failed", extra={"ibi": query("ibi"), "code": code})
    return error_response(502, code, str(failure))


ERRORS: ErrorTable = {
    ArchiveError: Refusal(),  # its own status, its class's name
    FileMissing: Refusal(409, "FileMissing", hint=": upload it first"),
    FileMismatch: Refusal(422, "FileMismatch"),
    FileTooLarge: Refusal(413, "FileTooLarge"),
    FileStoreError: unavailable("file store unavailable"),
    ArchiveStoreError: unavailable("store unavailable"),
    Exception: Refusal(500, "InternalError", "the Archive failed", unexpected=True),
}


def present(error: Exception, answer: Response[str]) -> Response[str]:
    """The JSON answer to the APIs (``/api/``, ``/transfers/``); a reader gets an Archive's
    refusal as a page."""
    if not isinstance(error, ArchiveError) or app.current_event.path.startswith(JSON_PATHS):
        return answer
    status = answer.status_code
    return html_response(status, views.error_page(status, str(error)), **views.PAGE_HEADERS)


answer_errors(app, ERRORS, logger=logger, present=present)


@app.not_found
def not_found(_: NotFoundError) -> Response[str]:
    return edge.method_not_allowed(app.current_event, ROUTES) or error_response(
        404, "NotFound", f"no route {app.current_event.path}"
    )


lambda_handler = edge.make_handler(app, logger=logger, metrics=metrics)
