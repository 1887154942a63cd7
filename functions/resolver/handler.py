"""The resolver's Lambda: persistent URLs in, redirects (or alerts) out (spec §4, §5, §7).

``GET /<ibi>[modifier][/path][?query]`` resolves; ``GET /<resolver service IBI>?servicesubject=``
switches Archives on and off; ``/`` is the landing page, ``/inspect`` decodes an IBI,
``/status`` lists the Archives; ``/admin/archives`` (IAM-authorized in AWS) registers them.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.resolver import pages
from functions.resolver.network import AddressPolicy, ArchiveTransport, Endpoint, Request
from functions.resolver.registry import DynamoRegistry, RegisteredArchive, RegistryError
from functions.resolver.resolution import (
    Alert,
    ArchiveAnswer,
    AskAll,
    Found,
    Resolver,
    acknowledgment_pairs,
)
from functions.resolver.service import RegistrationService
from functions.resolver.settings import ResolverSettings
from ibi.aws import aws_client
from ibi.core.dates import iso_date
from ibi.core.errors import InvalidIBI, InvalidInput
from ibi.core.labels import parse_label
from ibi.core.pairlist import PairList, format_pair_list, parse_query
from ibi.core.persistent_url import parse_persistent_url

warnings.filterwarnings("ignore", message="No application metrics to publish")

logger = Logger(service="resolver")
metrics = Metrics(namespace="ibi", service="resolver")

REGISTRY_CACHE_SECONDS = 5.0
NOTE_EVERY_SECONDS = 60.0
EXAMPLES = [
    "8JMKD3MGP8W/35MME4E",
    "8JMKD3MGP8W/35MMLL8!:(oai_dc)",
    "LK47B6W/362SFKH?ibiurl.verblist=GetFileList",
]


def clock() -> Decimal:
    return Decimal(time.time_ns()) / Decimal(1_000_000_000)


class LocationHints:
    """Where IBIs were found lately: by IBI, and by prefix (the subsystem that minted them).

    Kept in memory, per execution environment, bounded (least recently used out). A hint only
    reorders the asking: the hinted Archive is asked first, alone, and everyone else if it
    does not settle the round. It never replaces the full fan-out when every claim matters.
    """

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._where: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _keys(ibi: str) -> tuple[str, str]:
        label = parse_label(ibi)
        return label.label, "prefix:" + label.prefix

    def learn(self, ibi: str, archive: str) -> None:
        with self._lock:
            for key in self._keys(ibi):
                self._where[key] = archive
                self._where.move_to_end(key)
            while len(self._where) > self._capacity:
                self._where.popitem(last=False)

    def likely(self, ibi: str) -> str | None:
        with self._lock:
            for key in self._keys(ibi):
                if key in self._where:
                    self._where.move_to_end(key)
                    return self._where[key]
        return None


@dataclass
class ResolverRuntime:
    settings: ResolverSettings
    registry: DynamoRegistry
    transport: ArchiveTransport
    registration: RegistrationService
    # Acknowledgments, sent after the answer (the rounds themselves run on the transport's loop).
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=4))
    _archives: tuple[float, list[RegisteredArchive]] | None = None
    _noted: dict[str, float] = field(default_factory=dict)
    hints: LocationHints = field(default_factory=LocationHints)
    requests_made: int = 0  # urlRequests sent by this environment (for the benchmarks)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def included(self) -> list[RegisteredArchive]:
        """The included Archives, re-read from the registry every few seconds."""
        now = time.monotonic()
        with self._lock:
            if self._archives is None or now - self._archives[0] > REGISTRY_CACHE_SECONDS:
                self._archives = (now, self.registry.archives())
            archives = self._archives[1]
        return [a for a in archives if a.included and a.address]

    def forget_archives(self) -> None:
        with self._lock:
            self._archives = None

    def note(self, archive: str, outcome: str) -> None:
        """When each Archive last answered (for /status), written at most once a minute."""
        now = time.monotonic()
        with self._lock:
            if now - self._noted.get(archive, -1e9) < NOTE_EVERY_SECONDS:
                return
            self._noted[archive] = now
        try:
            self.registry.note_answer(
                archive, at=iso_date(Decimal(int(time.time()))), outcome=outcome
            )
        except RegistryError:
            logger.warning("could not note an answer", extra={"archive": archive})

    def ask_all(self, correlation_id: str) -> AskAll:
        def ask(
            ibi: str,
            pairs: Sequence[tuple[str, str]],
            enough: Callable[[PairList], bool] | None = None,
        ) -> list[ArchiveAnswer]:
            archives = self.included()
            message = [("servicesubject", "urlRequest"), *pairs]
            asked: list[ArchiveAnswer] = []
            # A location hint: ask the Archive that held this IBI (or its prefix) before, alone.
            # Only when one answer may settle the round (never when every claim must be seen).
            likely = self.hints.likely(ibi) if enough is not None else None
            if likely is not None and any(a.service_ibi == likely for a in archives):
                hinted = [a for a in archives if a.service_ibi == likely]
                asked = self._fan_out(hinted, message, correlation_id, ibi, enough)
                metrics.add_metric(name="HintsTried", unit=MetricUnit.Count, value=1)
                if any(
                    a.pairs is not None and enough is not None and enough(a.pairs) for a in asked
                ):
                    metrics.add_metric(name="HintsHit", unit=MetricUnit.Count, value=1)
                    return asked
                archives = [a for a in archives if a.service_ibi != likely]
            answers = asked + self._fan_out(archives, message, correlation_id, ibi, enough)
            for answer in answers:
                if answer.pairs is not None and enough is not None and enough(answer.pairs):
                    self.hints.learn(ibi, answer.archive)
                    break
            return answers

        return ask

    def _fan_out(
        self,
        archives: list[RegisteredArchive],
        message: list[tuple[str, str]],
        correlation_id: str,
        ibi: str,
        enough: Callable[[PairList], bool] | None,
    ) -> list[ArchiveAnswer]:
        started = time.monotonic()
        requests: dict[str, Request | None] = {}
        for archive in archives:
            try:
                endpoint = Endpoint.parse(archive.address or "", archive.protocol)
            except InvalidInput:
                requests[archive.service_ibi] = None
                continue
            requests[archive.service_ibi] = Request(
                endpoint, archive.service_ibi, message, correlation_id
            )
        self.requests_made += sum(1 for request in requests.values() if request is not None)
        outcomes = self.transport.ask_all(
            requests,
            timeout=self.settings.archive_timeout,
            deadline=started + self.settings.deadline * 0.8,
            enough=enough,
        )
        by_key = {a.service_ibi: a for a in archives}
        answers = []
        for outcome in outcomes:
            archive = by_key[outcome.key]
            if outcome.problem == "not needed":
                continue  # another Archive settled it first; this one may still answer
            self.note(outcome.key, outcome.problem or "answered")
            if outcome.problem:
                logger.info(
                    "archive did not answer",
                    extra={"archive": outcome.key, "problem": outcome.problem, "ibi": ibi},
                )
                metrics.add_metric(name="ArchiveFailures", unit=MetricUnit.Count, value=1)
            answers.append(
                ArchiveAnswer(outcome.key, archive.address or "", outcome.pairs, outcome.problem)
            )
        return answers

    def acknowledge(
        self, found: Found, persistent_url: str, client_ips: str, correlation_id: str
    ) -> None:
        """Tell the Archive that gave the URL (in the background: never delays the answer)."""
        archive = next((a for a in self.included() if a.service_ibi == found.answer.archive), None)
        if archive is None or not found.answer.pairs or not found.answer.pairs.word("urlkey"):
            return
        pairs = acknowledgment_pairs(found, persistent_url, client_ips)

        def send() -> None:
            try:
                endpoint = Endpoint.parse(archive.address or "", archive.protocol)
                answer = self.transport.get(
                    endpoint,
                    archive.service_ibi,
                    pairs,
                    timeout=self.settings.archive_timeout,
                    correlation_id=correlation_id,
                )
                if answer.words("notice") != ("acknowledgment", "received"):
                    raise ValueError(f"answered {format_pair_list(answer)[:100]!r}")
            except Exception as error:
                logger.warning(
                    "acknowledgment failed",
                    extra={
                        "archive": archive.service_ibi,
                        "ibi": found.ibi,
                        "problem": str(error)[:200],
                    },
                )

        self.pool.submit(send)


def client_ips(event: Any) -> str:
    """The client's IP then its proxies (X-Forwarded-For, then the connection), Table 6.6."""
    chain: list[str] = []
    forwarded = event.headers.get("x-forwarded-for") or ""
    candidates = [*forwarded.split(","), event.request_context.http.source_ip or ""]
    for candidate in candidates:
        text = candidate.strip()
        try:
            canonical = str(ipaddress.ip_address(text))
        except ValueError:
            continue
        if canonical not in chain:
            chain.append(canonical)
    return " ".join(chain[:8]) or "0.0.0.0"  # noqa: S104 - a value, not a bind address


def _safe_location(url: str) -> bool:
    return (
        url.startswith(("http://", "https://"))
        and len(url) <= 4096
        and not any(c in url for c in "\r\n\t ")
        and url.isascii()
    )


def create_app(runtime_provider: Callable[[], ResolverRuntime]) -> APIGatewayHttpResolver:
    app = APIGatewayHttpResolver()

    def html_or_text(status: int, title: str, message: str, **extra: Any) -> Response[str]:
        if pages.wants_text(app.current_event.headers.get("accept")):
            body = pages.alert_text(status, title, message, **extra)
            return Response(status_code=status, content_type="text/plain; charset=utf-8", body=body)
        body = pages.alert_page(status, title, message, **extra)
        return Response(
            status_code=status,
            content_type="text/html; charset=utf-8",
            body=body,
            headers={"Content-Security-Policy": pages.CONTENT_SECURITY_POLICY},
        )

    @app.get("/")
    def landing() -> Response[str]:
        runtime = runtime_provider()
        return Response(
            status_code=200,
            content_type="text/html; charset=utf-8",
            body=pages.landing_page(
                resolver_name=runtime.settings.name,
                service_ibi=runtime.settings.service_ibi,
                examples=EXAMPLES,
            ),
            headers={"Content-Security-Policy": pages.CONTENT_SECURITY_POLICY},
        )

    @app.get("/favicon.ico")
    def favicon() -> Response[str]:
        return Response(status_code=204, body="")

    @app.get("/inspect")
    def inspect() -> Response[str]:
        label = app.current_event.get_query_string_value("ibi") or ""
        try:
            info = parse_label(label.strip()).describe()
        except InvalidIBI as error:
            return Response(
                status_code=400,
                content_type=content_types.APPLICATION_JSON,
                body=json.dumps({"error": {"code": "InvalidIBI", "message": str(error)}}),
            )
        return Response(
            status_code=200, content_type=content_types.APPLICATION_JSON, body=json.dumps(info)
        )

    @app.get("/status")
    def status() -> Response[str]:
        runtime = runtime_provider()
        archives = [
            pages.ArchiveStatus(
                service_ibi=a.service_ibi,
                address=a.address or "",
                included=a.included,
                last_answer_iso=a.last_answer_at,
                last_outcome=a.last_outcome,
            )
            for a in runtime.registry.archives()
        ]
        now = iso_date(Decimal(int(time.time())))
        if pages.wants_text(app.current_event.headers.get("accept")):
            return Response(
                status_code=200,
                content_type="text/plain; charset=utf-8",
                body=pages.status_text(archives, now_iso=now),
            )
        return Response(
            status_code=200,
            content_type="text/html; charset=utf-8",
            body=pages.status_page(archives, now_iso=now),
            headers={"Content-Security-Policy": pages.CONTENT_SECURITY_POLICY},
        )

    @app.post("/admin/archives")
    def register() -> Response[str]:
        runtime = runtime_provider()
        try:
            data = app.current_event.json_body if app.current_event.body else {}
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        if not isinstance(data, dict) or set(data) != {"archiveserviceibi", "registrationkey"}:
            return _json(
                400,
                {
                    "error": {
                        "code": "BadRequest",
                        "message": 'send {"archiveserviceibi": …, "registrationkey": …}',
                    }
                },
            )
        try:
            registered = runtime.registration.register(
                str(data["archiveserviceibi"]), str(data["registrationkey"])
            )
        except InvalidInput as error:
            return _json(400, {"error": {"code": "BadRequest", "message": str(error)}})
        runtime.forget_archives()
        logger.info("archive registered", extra={"archive": registered.service_ibi})
        return _json(200, {"archiveserviceibi": registered.forms, "included": registered.included})

    @app.get("/admin/archives")
    def list_archives() -> Response[str]:
        runtime = runtime_provider()
        return _json(
            200,
            {
                "archives": [
                    {
                        "archiveserviceibi": a.forms,
                        "included": a.included,
                        "address": a.address,
                        "protocol": a.protocol,
                        "confirmed": a.confirmed,
                        "changed_at": a.changed_at,
                        "last_answer_at": a.last_answer_at,
                        "last_outcome": a.last_outcome,
                    }
                    for a in runtime.registry.archives()
                ]
            },
        )

    @app.route("/.+", method=["GET", "HEAD"])  # curl -I, link checkers: HEAD too
    def persistent_url() -> Response[str]:
        runtime = runtime_provider()
        event = app.current_event
        raw_path = event.raw_path if hasattr(event, "raw_path") else event.path
        query = event.raw_query_string or ""
        service_path = "/" + runtime.settings.service_ibi
        if raw_path.lower() == service_path.lower():
            return switch(runtime, query)
        target = raw_path + ("?" + query if query else "")
        try:
            url = parse_persistent_url(target)
        except InvalidInput as error:
            metrics.add_metric(name="MalformedPersistentURL", unit=MetricUnit.Count, value=1)
            return html_or_text(400, "Malformed persistent URL", f"{target[:300]}: {error}")
        ips = client_ips(event)
        correlation_id = event.request_context.request_id
        resolver = Resolver(
            runtime.ask_all(correlation_id), accept_language=event.headers.get("accept-language")
        )
        started = time.monotonic()
        result = resolver.resolve(url, ips)
        elapsed_ms = (time.monotonic() - started) * 1000
        logger.info(
            "resolved",
            extra={
                "ibi": url.ibi.label,
                "rounds": resolver.trace.rounds,
                "status": result.status,
                "ms": round(elapsed_ms, 1),
            },
        )
        metrics.add_metric(name="ResolutionMs", unit=MetricUnit.Milliseconds, value=elapsed_ms)
        if isinstance(result, Alert):
            metrics.add_metric(name=f"Resolution{result.status}", unit=MetricUnit.Count, value=1)
            return html_or_text(
                result.status,
                result.title,
                result.message,
                details=list(result.suspects),
                persistent_url=_persistent(event, target),
            )
        if not _safe_location(result.url):
            logger.warning(
                "archive answered an unusable URL", extra={"archive": result.answer.archive}
            )
            return html_or_text(
                502, "Bad answer", "The Archive holding this item answered an unusable URL."
            )
        runtime.acknowledge(result, _persistent(event, target), ips, correlation_id)
        metrics.add_metric(name="Resolution302", unit=MetricUnit.Count, value=1)
        return Response(
            status_code=302,
            body="",
            headers={"Location": result.url, "Cache-Control": "no-cache"},
        )

    def switch(runtime: ResolverRuntime, query: str) -> Response[str]:
        try:
            pairs = dict(parse_query(query))
        except InvalidInput as error:
            pairs = {"servicesubject": "", "error": str(error)}
        subject = pairs.get("servicesubject")
        if subject not in {"inclusionRequest", "exclusionRequest"}:
            answer_text = "error {servicesubject must be inclusionRequest or exclusionRequest}"
            return Response(
                status_code=400,
                content_type="text/plain; charset=us-ascii",
                body=answer_text + "\r\n",
            )
        answer = runtime.registration.switch(pairs)
        runtime.forget_archives()
        logger.info(
            "switch",
            extra={
                "subject": subject,
                "archive": pairs.get("archiveserviceibi"),
                "status": answer.status,
            },
        )  # never the registration key
        headers = {"Retry-After": str(answer.retry_after)} if answer.retry_after else {}
        return Response(
            status_code=answer.status,
            content_type="text/plain; charset=us-ascii",
            body=format_pair_list(answer.pairs) + "\r\n",
            headers=headers,
        )

    @app.not_found
    def not_found(_: NotFoundError) -> Response[str]:
        return html_or_text(404, "Not found", f"No page {app.current_event.path[:200]}.")

    @app.exception_handler(RegistryError)  # type: ignore[untyped-decorator]
    def registry_error(error: RegistryError) -> Response[str]:
        logger.warning("registry unavailable", extra={"reason": str(error)})
        return html_or_text(
            503, "Unavailable", "The resolver's registry is unavailable; retry shortly."
        )

    @app.exception_handler(Exception)  # type: ignore[untyped-decorator]
    def unexpected(error: Exception) -> Response[str]:
        logger.exception("unexpected error")
        return html_or_text(500, "Resolver error", "The resolver failed; this was logged.")

    return app


def _persistent(event: Any, target: str) -> str:
    proto = event.headers.get("x-forwarded-proto", "https")
    return f"{proto}://{event.request_context.domain_name}{target}"


def _json(status: int, body: Any) -> Response[str]:
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body)
    )


def load_pepper(settings: ResolverSettings, secrets_client: Any = None) -> bytes:
    """The HMAC pepper: from Secrets Manager in AWS, from a file locally (made if missing)."""
    if settings.pepper_secret_arn:
        client = secrets_client or aws_client("secretsmanager")
        value = client.get_secret_value(SecretId=settings.pepper_secret_arn)["SecretString"]
        return str(value).encode()
    path = Path(str(settings.pepper_file))
    if not path.exists():
        import secrets as random_secrets

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(random_secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip().encode()


def runtime_from_settings(
    settings: ResolverSettings, dynamodb: Any, pepper: bytes
) -> ResolverRuntime:
    registry = DynamoRegistry(dynamodb, settings.table)
    transport = ArchiveTransport(
        AddressPolicy(settings.allow_networks), max_answer_bytes=settings.max_answer_bytes
    )
    registration = RegistrationService(
        registry,
        transport,
        pepper=pepper,
        clock=clock,
        confirmation_timeout=settings.archive_timeout,
        failure_limit=settings.failure_limit,
        failure_window=settings.failure_window,
    )
    return ResolverRuntime(
        settings=settings, registry=registry, transport=transport, registration=registration
    )


@lru_cache(maxsize=1)
def _runtime() -> ResolverRuntime:
    settings = ResolverSettings.from_environment()
    return runtime_from_settings(settings, aws_client("dynamodb"), load_pepper(settings))


def make_handler(app: APIGatewayHttpResolver) -> Callable[[dict[str, Any], LambdaContext], Any]:
    @logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
    @metrics.log_metrics
    def handle(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        return app.resolve(event, context)

    return handle


lambda_handler = make_handler(create_app(_runtime))
