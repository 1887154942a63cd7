"""An Archive function's configuration: read once from the environment, validated."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from functions.archive.model import Forms
from functions.shared.errors import ConfigurationError
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.defaults import (
    ADMIN_EMAIL,
    OAI_PAGE_SIZE,
    OAI_PAGE_SIZE_RANGE,
    RESOLVER_SERVICE_IBI,
    SERVE_INLINE_BYTES,
    URLKEY_TTL_RANGE,
    URLKEY_TTL_SECONDS,
)

_BASE_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?")


@dataclass(frozen=True, slots=True)
class ArchiveSettings:
    table: str
    base_url: str | None  # None: the address the request came to (API Gateway's domain)
    platform: Forms | None
    mint_endpoint: str | None
    mint_subsystem: str | None
    bucket: str | None
    urlkey_ttl_seconds: int = URLKEY_TTL_SECONDS
    join_resolver_url: str | None = None  # switch on at this resolver when first started
    # The resolver its pages link persistent URLs to (IBI_RESOLVER_URL), when it joins none
    # itself (``ibi local`` registers its Archives at its resolver).
    resolver_url: str | None = None
    registration_key_parameter: str | None = None  # SSM SecureString holding the key
    resolver_service_ibi: str = RESOLVER_SERVICE_IBI
    admin_email: str = ADMIN_EMAIL
    serve_inline_bytes: int = SERVE_INLINE_BYTES
    # The IBI prefixes of this Archive's own subsystems (its minting service's, both forms):
    # the only IBIs it takes an original for without a transfer or an operator's import.
    subsystem_prefixes: tuple[str, ...] = ()
    # Who this Archive is at its minting service, as the mint record names a requester: its
    # Lambda role's ARN in AWS, ``anonymous:127.0.0.1`` locally (issued.py).
    principal: str = "unknown"
    # Networks a transfer may reach besides public addresses (loopback, locally).
    allow_networks: tuple[str, ...] = ()
    # The HMAC key urlkeys are signed under (urlkeys.py): a Secrets Manager secret in AWS, a
    # file locally; neither: a key of this process only (tests, one in-process Archive).
    urlkey_secret_arn: str | None = None
    urlkey_secret_file: str | None = None
    # How many records (or headers) one OAI-PMH list answer carries (oai.py).
    oai_page_size: int = OAI_PAGE_SIZE
    # The only networks the link checker contacts (links.py), when set: the e2e tests keep it
    # on loopback. None: public addresses and ``allow_networks``.
    link_check_networks: tuple[str, ...] | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ArchiveSettings:
        env = os.environ if environ is None else environ
        try:
            table = env["IBI_ARCHIVE_TABLE"]
            base_url = env.get("IBI_ARCHIVE_BASE_URL") or None
            if base_url is not None and not _BASE_URL.fullmatch(base_url.rstrip("/")):
                raise ValueError(f"IBI_ARCHIVE_BASE_URL {base_url!r} is not http(s)://host[:port]")
            platform_text = env.get("IBI_PLATFORM_SOFTWARE", "")
            ttl = int(env.get("IBI_URLKEY_TTL_SECONDS", str(URLKEY_TTL_SECONDS)))
            joining = (
                bool(env.get("IBI_JOIN_RESOLVER_URL")),
                bool(env.get("IBI_REGISTRATION_KEY_PARAMETER")),
            )
            if joining[0] != joining[1]:
                raise ValueError(
                    "IBI_JOIN_RESOLVER_URL and IBI_REGISTRATION_KEY_PARAMETER go together"
                )
            low, high = URLKEY_TTL_RANGE
            if not low <= ttl <= high:
                raise ValueError(f"IBI_URLKEY_TTL_SECONDS must be from {low} to {high}")
            return cls(
                table=table,
                base_url=base_url.rstrip("/") if base_url else None,
                platform=Forms.of(platform_text) if platform_text else None,
                mint_endpoint=env.get("IBI_MINT_ENDPOINT") or None,
                mint_subsystem=env.get("IBI_MINT_SUBSYSTEM") or None,
                bucket=env.get("IBI_ARCHIVE_BUCKET") or None,
                urlkey_ttl_seconds=ttl,
                join_resolver_url=env.get("IBI_JOIN_RESOLVER_URL") or None,
                resolver_url=_resolver_url(env.get("IBI_RESOLVER_URL") or None),
                registration_key_parameter=env.get("IBI_REGISTRATION_KEY_PARAMETER") or None,
                resolver_service_ibi=env.get("IBI_RESOLVER_SERVICE_IBI") or RESOLVER_SERVICE_IBI,
                admin_email=env.get("IBI_ADMIN_EMAIL") or ADMIN_EMAIL,
                subsystem_prefixes=tuple(
                    subsystem_prefix(p) for p in _listed(env, "IBI_ARCHIVE_SUBSYSTEM_PREFIXES")
                ),
                principal=env.get("IBI_ARCHIVE_PRINCIPAL") or "unknown",
                allow_networks=tuple(
                    str(ipaddress.ip_network(n)) for n in _listed(env, "IBI_ALLOW_NETWORKS")
                ),
                urlkey_secret_arn=env.get("IBI_URLKEY_SECRET_ARN") or None,
                urlkey_secret_file=env.get("IBI_URLKEY_SECRET_FILE") or None,
                oai_page_size=_oai_page_size(env),
                link_check_networks=tuple(
                    str(ipaddress.ip_network(n)) for n in _listed(env, "IBI_LINK_CHECK_NETWORKS")
                )
                or None,
            )
        except (KeyError, ValueError, InvalidInput) as error:
            raise ConfigurationError(f"invalid Archive configuration: {error}") from error


def _oai_page_size(env: Mapping[str, str]) -> int:
    text, (low, high) = env.get("IBI_OAI_PAGE_SIZE") or str(OAI_PAGE_SIZE), OAI_PAGE_SIZE_RANGE
    if not text.isdigit() or not low <= int(text) <= high:
        raise ValueError(f"IBI_OAI_PAGE_SIZE must be a whole number from {low} to {high}")
    return int(text)


def _listed(env: Mapping[str, str], name: str) -> list[str]:
    """A comma-separated setting, as its non-empty parts."""
    return [part.strip() for part in env.get(name, "").split(",") if part.strip()]


def subsystem_prefix(text: str) -> str:
    """An IBI prefix, canonical: ``sid.inpe.br/mtc-m18`` (rep) or ``8JMKD3MGP8W`` (ibip)."""
    sample = f"{text}/2009/07.21.13.23" if "/" in text else f"{text}/35MME4E"
    label = parse_label(sample)
    if label.prefix.lower() != text.lower():
        raise InvalidInput("prefix", f"{text!r} is not an IBI prefix")
    return label.prefix


def _resolver_url(url: str | None) -> str | None:
    if url is not None and not _BASE_URL.fullmatch(url.rstrip("/")):
        raise ValueError(f"IBI_RESOLVER_URL {url!r} is not http(s)://host[:port]")
    return url.rstrip("/") if url else None
