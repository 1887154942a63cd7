"""The resolver: its administrative API, and an Archive's inclusion or exclusion request
(spec §4), which is a pair list sent to the resolver's service IBI, not a JSON API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack
from urllib.parse import quote, urlsplit

from ibi import __version__, defaults
from ibi.client.api import ApiClient
from ibi.client.transport import ApiError, http_send, page_text
from ibi.core.pairlist import encode_query

if TYPE_CHECKING:
    from ibi.client.archive import ArchiveClient


class ResolverClient(ApiClient):
    """The resolver's administrative API and its Archive-switching service."""

    service_name = "the resolver"

    def register(
        self,
        archive_service_ibi: str,
        registration_key: str,
        prefixes: Sequence[str] = (),
        *,
        share_prefix: bool = False,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "archiveserviceibi": archive_service_ibi,
            "registrationkey": registration_key,
        }
        if prefixes:
            body["prefixes"] = list(prefixes)
        if share_prefix:
            body["share_prefix"] = True
        answer: dict[str, Any] = self.call("POST", "/admin/archives", body)
        return answer

    def change_prefixes(
        self, archive_service_ibi: str, *, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Add or remove prefixes registered with an Archive (``POST /admin/prefixes``)."""
        body = {"archiveserviceibi": archive_service_ibi, "add": list(add), "remove": list(remove)}
        answer: dict[str, Any] = self.call("POST", "/admin/prefixes", body)
        return answer

    def switch(self, pairs: Mapping[str, str], *, rotate: bool = False) -> dict[str, str]:
        """The administrator's switch (``POST /admin/switch``): the eight pairs of an
        inclusion or exclusion request, never throttled by anyone's wrong keys; ``rotate``: the
        key given becomes the Archive's and it is included with it, or nothing changes. The
        answer's pairs: ``{"status.archive": "included", "status.confirmation": …}``."""
        body: dict[str, Any] = dict(pairs)
        if rotate:
            body["rotate"] = True
        answer: dict[str, str] = self.call("POST", "/admin/switch", body)
        return answer

    def deregister(self, archive_service_ibi: str) -> dict[str, Any]:
        """Remove a registered Archive (``DELETE /admin/archives?ibi=``): its prefixes are
        freed, it is never asked again."""
        answer: dict[str, Any] = self.call("DELETE", "/admin/archives", ibi=archive_service_ibi)
        return answer

    def archives(self) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self.call("GET", "/admin/archives")["archives"]
        return answer

    def holdings(self, ibi: str) -> dict[str, Any]:
        """The holdings view of ``ibi``: every included Archive's answer, and the verdict
        (``GET /holdings/<ibi>`` with ``Accept: application/json``; public, never signed
        unless the client was made to sign)."""
        answer = self.request("GET", "/holdings/" + quote(ibi.strip().strip("/"), safe="/@.-"))
        body = self.ok(answer, "GET /holdings/")
        if not isinstance(body, dict) or not isinstance(body.get("archives"), list):
            raise ApiError(answer.status, "the resolver answered no holdings view")
        return body


class SwitchOptions(TypedDict, total=False):
    """What an inclusion or exclusion request may say besides the Archive's own details."""

    resolver_service_ibi: str  # default RESOLVER_SERVICE_IBI
    admin_email: str  # default admin@localhost
    archive_ip: str | None  # default the base URL's host
    timeout: float  # default 30 s
    administrator: ResolverClient | None  # the administrator's route first (never throttled)


def switch_archive(
    archive: ArchiveClient,
    resolver_url: str,
    registration_key: str,
    *,
    on: bool,
    **options: Unpack[SwitchOptions],
) -> str:
    """Send ``inclusionRequest``/``exclusionRequest`` (spec §4) for ``archive``; the answer text.

    The eight pairs of seed 001 Table 5.2, the Archive's own details read from its API.
    """
    service = archive.service()
    label = service["archiveserviceibi"].get("ibip") or service["archiveserviceibi"]["rep"]
    return send_switch(
        resolver_url,
        address=service["archiveaddress"],
        service_ibi=label,
        base_url=service["base_url"],
        registration_key=registration_key,
        on=on,
        **options,
    )


def send_switch(
    resolver_url: str,
    *,
    address: str,
    service_ibi: str,
    base_url: str,
    registration_key: str,
    on: bool,
    **options: Unpack[SwitchOptions],
) -> str:
    """The inclusion or exclusion request itself, from the Archive's details; the answer.

    With ``administrator``, through the administrator's route first (``POST /admin/switch``:
    never throttled by a stranger's wrong keys), and through the public route (§4, throttled
    per source) only when that caller is not the administrator there (IAM refused it) or the
    resolver has no such route. A refusal is :class:`ApiError` with the resolver's text; a
    ``429``'s says which Archive, why, and when to retry, and its ``Retry-After`` is added when
    the text has no time.
    """
    pairs = switch_pairs(
        address=address,
        service_ibi=service_ibi,
        base_url=base_url,
        registration_key=registration_key,
        on=on,
        **options,
    )
    administrator = options.get("administrator")
    if administrator is not None:
        answered = _as_administrator(administrator, pairs)
        if answered is not None:
            return answered
    resolver_service = options.get("resolver_service_ibi", defaults.RESOLVER_SERVICE_IBI)
    raw = http_send(
        "GET",
        f"{resolver_url.rstrip('/')}/{resolver_service}?{encode_query(pairs)}",
        headers={"User-Agent": f"ibi/{__version__}"},
        timeout=options.get("timeout", 30.0),
        where=resolver_url,
    )
    text = raw.content.decode("ascii", "replace").strip()
    if not 200 <= raw.status < 300:
        said = page_text(text) if text else "no answer body"
        retry_after = {k.lower(): v for k, v in raw.headers.items()}.get("retry-after", "")
        if retry_after and "retry after" not in said:
            said += f"; retry after {retry_after} s"
        raise ApiError(raw.status, said)
    return text


def _as_administrator(administrator: ResolverClient, pairs: list[tuple[str, str]]) -> str | None:
    """The administrator's switch, its answer as the public route words it; None when this
    caller is not the administrator there (API Gateway's own 403, no ibi error code) or the
    resolver has no such route (an older one): then the public route is for it."""
    try:
        answer = administrator.switch(dict(pairs))
    except ApiError as error:
        if _not_for_this_caller(error):
            return None
        raise
    return "\r\n".join(f"{name} {value}" for name, value in answer.items())


def _not_for_this_caller(error: ApiError) -> bool:
    """API Gateway refused the caller (IAM: 401/403 without an ibi error code), or there is no
    such route there (API Gateway's 404, or an older resolver's ``no route``)."""
    if error.status in (401, 403, 404, 405) and not error.code:
        return True
    return error.code == "MethodNotAllowed" or (
        error.code == "NotFound" and error.message.startswith("no route")
    )


def switch_pairs(
    *,
    address: str,
    service_ibi: str,
    base_url: str,
    registration_key: str,
    on: bool,
    **options: Unpack[SwitchOptions],
) -> list[tuple[str, str]]:
    """The eight pairs of an inclusion or exclusion request (seed 001 Table 5.2)."""
    split = urlsplit(base_url)
    return [
        ("servicesubject", "inclusionRequest" if on else "exclusionRequest"),
        ("archiveaddress", address),
        ("archiveserviceibi", service_ibi),
        ("archiveip", options.get("archive_ip") or split.hostname or ""),
        ("archiveprotocol", split.scheme.upper()),
        ("archiveplatformversion", f"ibi-{__version__}"),
        ("archiveadmemailaddress", options.get("admin_email", "admin@localhost")),
        ("registrationkey", registration_key),
    ]
