"""An Archive's Lambda: the service protocol, what browsers get, and the deposit API.

Public (no authorization): ``GET /<archive service IBI>?servicesubject=…`` (spec §3, §6),
``GET /col/<ibi>[/<path>]`` files, ``GET /list/<ibi>`` the file-list page,
``GET /metadata/<ibi>[?format=oai_dc]``. IAM-authorized in AWS: ``/api/…`` (deposit).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.archive.files import FileMismatch, FileMissing, FileStoreError, FileTooLarge
from functions.archive.model import Forms, Item
from functions.archive.protocol import ArchiveIdentity, make_url_list, new_urlkey, relations_for
from functions.archive.service import (
    ArchiveError,
    ArchiveService,
    BadRequest,
    NotHeld,
    parse_files,
)
from functions.archive.settings import ArchiveSettings
from functions.archive.store import ArchiveStoreError, DynamoItemStore
from functions.archive.transfer import TransferFailed, check_item
from functions.archive.transfer import transfer as transfer_item
from functions.archive.views import ArchiveViews, file_list_page, metadata_page, oai_dc
from ibi.aws import aws_client
from ibi.core.errors import InvalidInput
from ibi.core.pairlist import PairList, encode_value, format_pair_list, parse_query
from ibi.core.relations import parse_verb_list, wants_file_list

warnings.filterwarnings("ignore", message="No application metrics to publish")

logger = Logger(service="archive")
metrics = Metrics(namespace="ibi", service="archive")

TEXT = "text/plain; charset=us-ascii"
CORRELATION_ID_PATH = 'headers."x-correlation-id" || requestContext.requestId'


@dataclass
class ArchiveRuntime:
    """Everything a request needs, built once per execution environment."""

    service: ArchiveService
    store: DynamoItemStore
    settings: ArchiveSettings
    clock: Callable[[], Decimal]
    files: Any = None  # functions.archive.files.S3FileStore, when this Archive keeps files
    key_source: Callable[[], str] | None = None  # the registration key (SSM), when joining
    _identity: ArchiveIdentity | None = None
    _views: ArchiveViews | None = None

    def start(self, base_url: str, *, join: bool = True) -> tuple[ArchiveIdentity, ArchiveViews]:
        """On the first request: the base URL, and the Archive's service item (minted once)."""
        if self._identity is None or self._views is None:
            base = self.settings.base_url or base_url
            service_item = self.service.ensure_service_item(base)
            address = base.split("://", 1)[1]
            self._identity = ArchiveIdentity(
                address=address, service=service_item.ibi, platform=self.settings.platform
            )
            self._views = ArchiveViews(base)
            # Not while answering the protocol: the resolver's confirmation call must not
            # start another inclusion.
            if join and self.settings.join_resolver_url and self.key_source is not None:
                self._join(base, address, service_item.ibi.key)
        return self._identity, self._views

    def _join(self, base: str, address: str, service_ibi: str) -> None:
        """Switch this Archive on at its resolver (spec §4), once per execution environment.

        The resolver calls the Archive back, on another execution environment; a failure is
        logged and does not stop the Archive from serving (an administrator can `ibi archive on`).
        """
        from ibi.client import ApiError, send_switch

        assert self.key_source is not None and self.settings.join_resolver_url is not None
        try:
            answer = send_switch(
                self.settings.join_resolver_url,
                address=address,
                service_ibi=service_ibi,
                base_url=base,
                registration_key=self.key_source(),
                on=True,
                resolver_service_ibi=self.settings.resolver_service_ibi,
                admin_email=self.settings.admin_email,
                timeout=10,
            )
            logger.info("switched on at the resolver", extra={"answer": " ".join(answer.split())})
        except (ApiError, OSError) as error:
            logger.warning(
                "could not switch on at the resolver", extra={"reason": str(error)[:200]}
            )


def clock() -> Decimal:
    return Decimal(time.time_ns()) / Decimal(1_000_000_000)


def _text(status: int, pairs: PairList | str) -> Response[str]:
    body = pairs if isinstance(pairs, str) else format_pair_list(pairs)
    return Response(status_code=status, content_type=TEXT, body=body + ("\r\n" if body else ""))


def _json(status: int, body: Any, **headers: str) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body),
        headers=headers,
    )


def _html(status: int, page: str, **headers: str) -> Response[str]:
    return Response(
        status_code=status, content_type="text/html; charset=utf-8", body=page, headers=headers
    )


def _protocol_error(message: str) -> Response[str]:
    """A 400 whose body is still a pair list: ``error {words of the reason}``."""
    return _text(400, PairList([("error", tuple(encode_value(word) for word in message.split()))]))


def create_app(runtime_provider: Callable[[], ArchiveRuntime]) -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver()

    def runtime() -> tuple[ArchiveRuntime, ArchiveIdentity, ArchiveViews]:
        current = runtime_provider()
        context = app.current_event.request_context
        proto = app.current_event.headers.get("x-forwarded-proto", "https")
        protocol = "servicesubject" in (app.current_event.raw_query_string or "")
        identity, views = current.start(f"{proto}://{context.domain_name}", join=not protocol)
        return current, identity, views

    def after(prefix: str) -> str:
        """The rest of the path (routes that take slashes match with a bare regex)."""
        return app.current_event.path[len(prefix) :]

    def ibi_from(path: str) -> tuple[str, str]:
        """``<ibi>[/<file path>]`` from a public path: the IBI's shape says where it ends."""
        text = unquote(path)
        parts = text.split("/")
        for length in (1, 4):  # ibip: PREFIX/SUFFIX; rep: sub/word/YYYY/MM.DD.hh.mm…
            if len(parts) > length:
                candidate = "/".join(parts[: length + 1])
                try:
                    label = Forms.of(candidate).key
                except InvalidInput:
                    continue
                return label, "/".join(parts[length + 1 :])
        raise BadRequest(f"{text!r} does not start with an IBI")

    # -- the service protocol and public pages -----------------------------------------------

    @app.get("/col/.+")
    def get_file() -> Response[str]:
        rest = after("/col/")
        current, _, views = runtime()
        label, path = ibi_from(rest)
        item = current.service.get(label)
        if item.deleted:
            return _html(410, file_list_page(item, views))
        chosen = item.file(path) if path else item.main_file
        if chosen is None:
            if not path and item.external_url:
                return Response(status_code=302, body="", headers={"Location": item.external_url})
            raise NotHeld(
                f"{item.key} has no file {path!r}" if path else f"{item.key} has no default file"
            )
        files = current.files
        if files is None:
            raise NotHeld("this Archive keeps no files")
        etag = f'"{chosen.sha256}"'
        if app.current_event.headers.get("if-none-match") == etag:
            return Response(status_code=304, body="", headers={"ETag": etag})
        headers = {"ETag": etag, "Cache-Control": "public, max-age=3600"}
        if chosen.size > current.settings.serve_inline_bytes:
            headers["Location"] = files.presign_download(
                item.key, chosen.path, filename=chosen.path.rsplit("/", 1)[-1]
            )
            return Response(status_code=302, body="", headers=headers)
        data = files.read(item.key, chosen.path, max_bytes=current.settings.serve_inline_bytes)
        if hashlib.sha256(data).hexdigest() != chosen.sha256:  # never serve damaged content
            metrics.add_metric(name="IntegrityProblems", unit=MetricUnit.Count, value=1)
            logger.error("file damaged", extra={"ibi": item.key, "path": chosen.path})
            return _html(500, "<!doctype html><p>This file failed its integrity check.</p>")
        return Response(
            status_code=200,
            content_type=chosen.content_type,
            body=data,  # bytes: Powertools sends them base64-encoded
            headers=headers,
        )

    @app.get("/list/.+")
    def get_file_list() -> Response[str]:
        rest = after("/list/")
        current, _, views = runtime()
        label, _ = ibi_from(rest)
        item = current.service.get(label)
        status = 403 if not item.listable else 200
        return _html(status, file_list_page(item, views))

    @app.get("/metadata/.+")
    def get_metadata() -> Response[str]:
        rest = after("/metadata/")
        current, _, views = runtime()
        label, _ = ibi_from(rest)
        item = current.service.get(label)
        if not item.dc:
            raise NotHeld(f"{item.key} has no metadata in this Archive")
        if app.current_event.get_query_string_value("format") == "oai_dc":
            return Response(
                status_code=200,
                content_type="text/xml; charset=utf-8",
                body=oai_dc(item),
                headers={"Cache-Control": "public, max-age=300"},
            )
        return _html(200, metadata_page(item, views), **{"Cache-Control": "public, max-age=300"})

    # -- the deposit API (IAM-authorized in AWS) ---------------------------------------------

    def body() -> Any:
        event = app.current_event
        if not event.body:
            return {}
        try:
            return event.json_body
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("the body is not valid JSON") from None

    def item_label() -> str:
        label = app.current_event.get_query_string_value("ibi")
        if not label:
            raise BadRequest("say which item: ?ibi=<label>")
        return label

    def item_answer(item: Item, current: ArchiveRuntime, views: ArchiveViews) -> dict[str, Any]:
        return {
            **item.summary(),
            "urls": {
                "item": views.item_url(item),
                "files": views.file_list_url(item),
                "metadata": views.metadata_url(item, None) if item.dc else None,
            },
            "accesses": current.store.access_count(item.key),
        }

    @app.get("/api/service")
    def get_service() -> Response[str]:
        _, identity, views = runtime()
        return _json(
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
        current, _, views = runtime()
        key = app.current_event.headers.get("idempotency-key")
        if key is not None and not re.fullmatch(r"[A-Za-z0-9._:/+=@-]{1,200}", key):
            raise BadRequest("the Idempotency-Key must be 1-200 of A-Z a-z 0-9 . _ : / + = @ -")
        item = current.service.create_original(body(), idempotency_key=key)
        metrics.add_metric(name="ItemsCreated", unit=MetricUnit.Count, value=1)
        logger.info("original created", extra={"ibi": item.key})
        return _json(201, item_answer(item, current, views))

    @app.post("/api/copies")
    def create_copy() -> Response[str]:
        current, _, views = runtime()
        item = current.service.add_copy(body())
        logger.info("copy added", extra={"ibi": item.key})
        return _json(201, item_answer(item, current, views))

    @app.get("/api/item")
    def get_item() -> Response[str]:
        current, _, views = runtime()
        return _json(200, item_answer(current.service.get(item_label()), current, views))

    @app.patch("/api/item")
    def update_item() -> Response[str]:
        current, _, views = runtime()
        return _json(200, item_answer(current.service.update(item_label(), body()), current, views))

    @app.post("/api/item/links")
    def link_item() -> Response[str]:
        current, _, views = runtime()
        return _json(200, item_answer(current.service.link(item_label(), body()), current, views))

    @app.delete("/api/item")
    def delete_item() -> Response[str]:
        current, _, views = runtime()
        item = current.service.delete(item_label())
        logger.info("item deleted", extra={"ibi": item.key})
        return _json(200, item_answer(item, current, views))

    @app.get("/api/items")
    def list_items() -> Response[str]:
        current, _, _ = runtime()
        limit_text = app.current_event.get_query_string_value("limit", "50") or "50"
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 200:
            raise BadRequest("limit must be from 1 to 200")
        items, more = current.store.scan(
            after=app.current_event.get_query_string_value("after"), limit=int(limit_text)
        )
        return _json(200, {"items": [i.summary() for i in items], "next": more})

    def files_of(current: ArchiveRuntime) -> Any:
        if current.files is None:
            raise BadRequest("this Archive keeps no files: give the item a url instead")
        return current.files

    def declared_files(data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, dict) or not isinstance(data.get("files"), list):
            raise BadRequest('the body is {"files": [{"path", "sha256", "size", "content_type"?}]}')
        return list(data["files"])

    @app.post("/api/item/uploads")
    def presign_uploads() -> Response[str]:
        """Presigned PUT URLs for files of an item (any size, straight to S3)."""
        current, _, _ = runtime()
        declared_list = parse_files(declared_files(body()))
        item = current.service.get(item_label())
        files = files_of(current)
        uploads = []
        for declared in declared_list:
            upload = files.presign_upload(
                item.key,
                declared.path,
                sha256_hex=declared.sha256,
                size=declared.size,
                content_type=declared.content_type,
            )
            uploads.append({"path": declared.path, **upload})
        return _json(200, {"ibi": item.ibi.to_mapping(), "uploads": uploads})

    @app.post("/api/item/files")
    def commit_files() -> Response[str]:
        """Check uploaded files against their SHA-256 and size, then add them to the item."""
        current, _, views = runtime()
        data = body()
        declared = parse_files(declared_files(data))
        label = item_label()
        item = current.service.get(label)
        files = files_of(current)
        for stored in declared:
            files.commit(item.key, stored.path, sha256_hex=stored.sha256, size=stored.size)
        default = data.get("default_file")
        if default is not None and not isinstance(default, str):
            raise BadRequest('"default_file" must be the path of one of the item\'s files')
        changed = current.service.set_files(label, declared, default)
        logger.info("files committed", extra={"ibi": changed.key, "files": len(declared)})
        return _json(200, item_answer(changed, current, views))

    @app.post("/api/verify")
    def verify() -> Response[str]:
        """Stored files against their SHA-256; a copy against the original's checksum."""
        current, _, _ = runtime()
        files = files_of(current)
        label = app.current_event.get_query_string_value("ibi")
        if label:
            items, more = [current.service.get(label)], None
        else:
            items, more = current.store.scan(
                after=app.current_event.get_query_string_value("after"), limit=25
            )
        report = [check_item(item, files) for item in items if not item.deleted]
        problems = [p for entry in report for p in entry["problems"]]
        if problems:
            metrics.add_metric(name="IntegrityProblems", unit=MetricUnit.Count, value=len(problems))
            logger.error("integrity problems", extra={"problems": problems})
        return _json(200, {"items": report, "problems": len(problems), "next": more})

    @app.post("/api/item/transfer")
    def transfer() -> Response[str]:
        """Move a transferable original to another Archive (seed 001 §3.2).

        This Archive first stops answering Original (it keeps a Copy, or a tombstone), then
        the receiving Archive creates the Original and gets the files: at no moment do both
        answer Original. If the receiver refuses the item, this Archive takes it back.
        """
        from ibi.client import ApiError, ArchiveClient

        current, _, _ = runtime()
        data = body()
        if not isinstance(data, dict) or not isinstance(data.get("to"), str):
            raise BadRequest(
                'send {"to": "<receiving Archive API URL>", "leave": "copy"|"tombstone"}'
            )
        try:
            receiver = ArchiveClient(data["to"], timeout=20)
        except ApiError as error:
            raise BadRequest(f'"to": {error.message}') from None
        label = item_label()
        try:
            moved = transfer_item(
                current.service,
                current.files,
                receiver,
                label,
                leave=str(data.get("leave", "copy")),
                errors=(ApiError,),
            )
        except TransferFailed as failure:
            code = "TransferRefused" if failure.refused else "TransferIncomplete"
            logger.warning("transfer failed", extra={"ibi": label, "code": code})
            return _json(502, {"error": {"code": code, "message": str(failure)}})
        logger.info("transferred", extra={"ibi": moved.here.key, "to": data["to"]})
        return _json(200, {"here": moved.here.summary(), "there": moved.there})

    # -- the protocol, at the Archive service's own IBI (matched last) ------------------------

    @app.get("/.+")
    def protocol() -> Response[str]:
        rest = after("/")
        current, identity, views = runtime()
        try:
            label, extra = ibi_from(rest)
        except BadRequest:
            raise NotHeld(f"no page {rest!r}") from None
        if extra or (label != identity.service.key and label not in identity.service.labels):
            # Any other item's IBI on this host: answer as its persistent content would.
            raise NotHeld(f"{label} is not this Archive's service; try /col/{label}")
        try:
            query = dict(parse_query(app.current_event.raw_query_string or ""))
        except InvalidInput as error:
            return _protocol_error(str(error))
        subject = query.get("servicesubject")
        if subject == "inclusionConfirmationRequest":
            return _text(200, PairList([("confirmation", "yes")]))
        if subject == "urlRequest":
            return url_request(current, identity, views, query)
        if subject == "acknowledgment":
            return acknowledgment(current, query)
        return _protocol_error(
            "servicesubject must be inclusionConfirmationRequest, urlRequest or acknowledgment"
        )

    def url_request(
        current: ArchiveRuntime,
        identity: ArchiveIdentity,
        views: ArchiveViews,
        query: dict[str, str],
    ) -> Response[str]:
        requested = query.get("parsedibiurl.ibi", "")
        if "clientinformation.ipaddress" not in query:
            return _protocol_error("clientinformation.ipaddress is mandatory in urlRequest")
        try:
            label = Forms.of(requested).key
            verbs = parse_verb_list(query.get("parsedibiurl.verblist", ""))
        except InvalidInput as error:
            return _protocol_error(f"{error}")
        filepath = query.get("parsedibiurl.filepath", "").strip("/")
        profile, asked = current.store.profile_and_item(label)  # one round trip
        relations = relations_for(verbs, profile.languages, profile.unspecified_language)
        now = current.clock()

        def issue() -> str:
            key = new_urlkey(now)
            current.store.issue_urlkey(
                key, label, expires_at=int(now) + current.settings.urlkey_ttl_seconds
            )
            return key

        def holdings(wanted: str) -> Item | None:
            return asked if wanted == label else current.store.get(wanted)

        pairs, item = make_url_list(
            label,
            holdings=holdings,
            identity=identity,
            views=views,
            relations=relations,
            filepath=filepath,
            file_list=wants_file_list(verbs),
            urlkey=issue,
        )
        metrics.add_metric(
            name="UrlRequestsHeld" if item else "UrlRequestsNotHeld", unit=MetricUnit.Count, value=1
        )
        logger.info(
            "urlRequest", extra={"ibi": label, "held": item is not None, "pairs": len(pairs)}
        )
        return _text(200, pairs)

    def acknowledgment(current: ArchiveRuntime, query: dict[str, str]) -> Response[str]:
        urlkey = query.get("urlkey", "")
        label = current.store.use_urlkey(urlkey, now=int(current.clock())) if urlkey else None
        if label is None:
            return _protocol_error("urlkey: not one this Archive issued recently (or used already)")
        count = current.store.count_access(label)
        logger.info("acknowledged", extra={"ibi": label, "accesses": count})
        metrics.add_metric(name="Acknowledgments", unit=MetricUnit.Count, value=1)
        return _text(200, PairList([("notice", ("acknowledgment", "received"))]))

    # -- errors ---------------------------------------------------------------------------------

    @app.exception_handler(ArchiveError)  # type: ignore[untyped-decorator]
    def archive_error(error: ArchiveError) -> Response[str]:
        if app.current_event.path.startswith("/api/"):
            return _json(
                error.status, {"error": {"code": type(error).__name__, "message": str(error)}}
            )
        return _html(error.status, f"<!doctype html><title>{error.status}</title><p>{error}</p>")

    @app.exception_handler(FileMissing)  # type: ignore[untyped-decorator]
    def file_missing(error: FileMissing) -> Response[str]:
        return _json(
            409, {"error": {"code": "FileMissing", "message": f"{error}: upload it first"}}
        )

    @app.exception_handler(FileMismatch)  # type: ignore[untyped-decorator]
    def file_mismatch(error: FileMismatch) -> Response[str]:
        return _json(422, {"error": {"code": "FileMismatch", "message": str(error)}})

    @app.exception_handler(FileTooLarge)  # type: ignore[untyped-decorator]
    def file_too_large(error: FileTooLarge) -> Response[str]:
        return _json(413, {"error": {"code": "FileTooLarge", "message": str(error)}})

    @app.exception_handler(FileStoreError)  # type: ignore[untyped-decorator]
    def file_store_error(error: FileStoreError) -> Response[str]:
        logger.warning("file store unavailable", extra={"reason": str(error)})
        return _json(
            503,
            {"error": {"code": "Unavailable", "message": "retry shortly"}},
            **{"Retry-After": "1"},
        )

    @app.exception_handler(ArchiveStoreError)  # type: ignore[untyped-decorator]
    def store_error(error: ArchiveStoreError) -> Response[str]:
        logger.warning("store unavailable", extra={"reason": str(error)})
        return _json(
            503,
            {"error": {"code": "Unavailable", "message": "retry shortly"}},
            **{"Retry-After": "1"},
        )

    @app.not_found
    def not_found(_: NotFoundError) -> Response[str]:
        return _json(
            404, {"error": {"code": "NotFound", "message": f"no route {app.current_event.path}"}}
        )

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def unexpected(error: Exception) -> Response[str]:
        logger.exception("unexpected error")
        return _json(500, {"error": {"code": "InternalError", "message": "the Archive failed"}})

    return app


def mint_through(endpoint: str, subsystem: str | None) -> Callable[[str | None, str | None], Forms]:
    """Mint through the minting API (signed with SigV4 in AWS)."""
    from ibi.client import MintingClient

    client = MintingClient(endpoint, timeout=20)

    def mint(requested: str | None, idempotency_key: str | None) -> Forms:
        key = f"deposit:{idempotency_key}" if idempotency_key else None
        answer = client.mint(subsystem=requested or subsystem, count=1, idempotency_key=key)
        ibi = answer["ibis"][0]
        return Forms(rep=ibi["rep"], ibip=ibi["ibip"])

    return mint


def runtime_from_settings(
    settings: ArchiveSettings, dynamodb: Any, s3: Any = None
) -> ArchiveRuntime:
    store = DynamoItemStore(dynamodb, settings.table)
    mint = (
        mint_through(settings.mint_endpoint, settings.mint_subsystem)
        if settings.mint_endpoint
        else None
    )
    runtime = ArchiveRuntime(
        service=ArchiveService(store, clock=clock, mint=mint),
        store=store,
        settings=settings,
        clock=clock,
    )
    if s3 is not None and settings.bucket:
        from functions.archive.files import S3FileStore

        runtime.files = S3FileStore(s3, settings.bucket)
    return runtime


@lru_cache(maxsize=1)
def _runtime() -> ArchiveRuntime:
    settings = ArchiveSettings.from_environment()
    from botocore.config import Config

    # SigV4 presigning signs the length and checksum of uploads (SigV2 would not).
    s3 = aws_client("s3", config=Config(signature_version="s3v4")) if settings.bucket else None
    runtime = runtime_from_settings(settings, aws_client("dynamodb"), s3)
    parameter = settings.registration_key_parameter
    if parameter:
        ssm = aws_client("ssm")

        def read_key() -> str:
            answer = ssm.get_parameter(Name=parameter, WithDecryption=True)
            return str(answer["Parameter"]["Value"]).strip()

        runtime.key_source = read_key
    return runtime


def make_handler(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], LambdaContext], Any]:
    # A resolver's request carries its correlation id: the Archive's logs then share it.
    @logger.inject_lambda_context(correlation_id_path=CORRELATION_ID_PATH)
    @metrics.log_metrics
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return app.resolve(event, context)

    return handle


lambda_handler = make_handler(create_app(_runtime))
