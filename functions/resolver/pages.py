# TEMPORARY STUB (lead's): to be replaced by the real pages module; same API.
from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


@dataclass(frozen=True)
class ArchiveStatus:
    service_ibi: str
    address: str
    included: bool
    last_answer_iso: str | None
    last_outcome: str | None


def wants_text(accept: str | None) -> bool:
    return bool(accept) and "text/plain" in (accept or "") and "text/html" not in (accept or "")


def landing_page(*, resolver_name: str, service_ibi: str, examples: list[str]) -> str:
    return f"<!doctype html><title>{html.escape(resolver_name)}</title>"


def status_page(archives: list[ArchiveStatus], *, now_iso: str) -> str:
    return "<!doctype html>" + "".join(f"<p>{html.escape(a.service_ibi)}</p>" for a in archives)


def status_text(archives: list[ArchiveStatus], *, now_iso: str) -> str:
    return "\n".join(a.service_ibi for a in archives)


def alert_page(
    status: int,
    title: str,
    message: str,
    *,
    details: Sequence[str] = (),
    persistent_url: str | None = None,
) -> str:
    return f"<!doctype html><h1>{html.escape(title)}</h1><p>{html.escape(message)}</p>" + "".join(
        f"<li>{html.escape(d)}</li>" for d in details
    )


def alert_text(
    status: int,
    title: str,
    message: str,
    *,
    details: Sequence[str] = (),
    persistent_url: str | None = None,
) -> str:
    return f"{status} {title}\n{message}\n" + "".join(f"{d}\n" for d in details)
