"""What the app refuses before it builds a stack: unknown keys, drifting stages, example values.

* Every ``ibi:`` context key must be one the app reads (:data:`CONTEXT_KEYS`): a misspelt key
  (``ibi:resolvr``) or a dotted one (``ibi:resolver.domain_name``, which is a field of the
  ``ibi:resolver`` object) would otherwise be ignored, and the deploy go ahead without it.
* A stage's settings live in a committed file, ``stages/<stage>.json`` (an object of ``ibi:``
  keys): a later deploy that forgets a ``-c`` cannot remove the CI role, the edge or the
  SnapStart alias. A production stage (``prod``, ``production``) must have one. A ``-c`` that
  contradicts the file is refused: change the file, review it, commit it.
* A production stage refuses the documentation values of ``cdk.json`` and the docs (RFC 5737
  and RFC 3849 addresses, RFC 2606 and RFC 6761 names): minting production IBIs under a
  documentation prefix cannot be undone. It needs somewhere for its alarms to go, too.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from constructs import Construct

from infra import config as c

STAGES_DIR = c.REPO_ROOT / "stages"

# Every key the app reads; each is an object, a list or a scalar as docs/deploy.md shows.
CONTEXT_KEYS = (
    c.STACKS_CONTEXT_KEY,
    c.MINTING_CONTEXT_KEY,
    c.ARCHIVE_CONTEXT_KEY,
    c.RESOLVER_CONTEXT_KEY,
    c.CI_CONTEXT_KEY,
    c.OPERATIONS_CONTEXT_KEY,
    c.STAGE_CONTEXT_KEY,
    c.REGION_CONTEXT_KEY,
    c.ACCOUNT_CONTEXT_KEY,
    c.TERMINATION_PROTECTION_CONTEXT_KEY,
    c.TAGS_CONTEXT_KEY,
    c.THROTTLE_CONTEXT_KEY,
    c.WAF_CONTEXT_KEY,
    c.SNAPSTART_CONTEXT_KEY,
    c.TRACING_CONTEXT_KEY,
    c.CONCURRENCY_CONTEXT_KEY,
    c.CANARY_CONTEXT_KEY,
)
PREFIX = "ibi:"

# Addresses reserved for documentation: RFC 5737 (IPv4), RFC 3849 and RFC 9637 (IPv6).
DOCUMENTATION_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in (
        "192.0.2.0/24",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "2001:db8::/32",
        "3fff::/20",
    )
)
# Names reserved for documentation and tests: RFC 2606 and RFC 6761.
DOCUMENTATION_DOMAINS = ("example.com", "example.net", "example.org")
DOCUMENTATION_TLDS = ("example", "test", "invalid", "localhost")


def check_context_keys(scope: Construct) -> None:
    """Refuse an ``ibi:`` key the app does not read, saying which one was meant."""
    unknown = sorted(
        key
        for key in scope.node.get_all_context()
        if key.startswith(PREFIX) and key not in CONTEXT_KEYS
    )
    if unknown:
        raise c.ConfigError("; ".join(_unknown_key(key) for key in unknown))


def _unknown_key(key: str) -> str:
    base, dot, field = key.partition(".")
    if dot and base in CONTEXT_KEYS:
        return (
            f"{key} is not a context key: {field} is a field of {base}, give "
            f"-c '{base}={{\"{field}\": …}}' (or set it in cdk.json or stages/<stage>.json)"
        )
    names = [known.removeprefix(PREFIX) for known in CONTEXT_KEYS]  # the prefix is no clue
    close = difflib.get_close_matches(key.removeprefix(PREFIX), names, n=1, cutoff=0.6)
    hint = (
        f"did you mean {PREFIX}{close[0]}?" if close else f"the keys are {', '.join(CONTEXT_KEYS)}"
    )
    return f"{key} is not a context key: {hint}"


def stage_settings_path(stage: str, directory: Path | None = None) -> Path:
    return (directory or STAGES_DIR) / f"{stage}.json"


def apply_stage_settings(
    scope: Construct, *, defaults: Mapping[str, Any] | None = None, directory: Path | None = None
) -> Path | None:
    """Put ``stages/<stage>.json`` into the context of ``scope`` (an app with no stack yet).

    The file's values take the place of ``cdk.json``'s; a value given on the command line
    (one that is neither ``cdk.json``'s nor the file's) is refused. Answers the file read, or
    ``None`` without a stage or (outside production) without a file.
    """
    stage = scope.node.try_get_context(c.STAGE_CONTEXT_KEY)
    if not stage:
        return None
    path = stage_settings_path(str(stage), directory)
    if not path.exists():
        if stage in c.PRODUCTION_STAGES:
            raise c.ConfigError(
                f"{c.STAGE_CONTEXT_KEY}={stage} is a production stage: commit its settings in "
                f"stages/{stage}.json first (docs/deploy.md), so that no deploy depends on "
                "remembering a -c"
            )
        return None
    settings = _read_settings(path)
    defaults = c.cdk_json_context() if defaults is None else defaults
    for key, value in settings.items():
        given = scope.node.try_get_context(key)
        if given is not None and not _same(given, value) and not _same(given, defaults.get(key)):
            raise c.ConfigError(
                f"{key}: the command line gives {_text(given)}, {path.name} says {_text(value)}; "
                f"change stages/{path.name} (committed), not the command"
            )
        scope.node.set_context(key, value)
    return path


def _read_settings(path: Path) -> dict[str, Any]:
    try:
        settings = json.loads(path.read_text())
    except ValueError as error:
        raise c.ConfigError(f"stages/{path.name}: not valid JSON ({error})") from None
    if not isinstance(settings, dict):
        raise c.ConfigError(f"stages/{path.name}: expected an object of ibi: keys")
    for key in settings:
        if key == c.STAGE_CONTEXT_KEY:
            raise c.ConfigError(f"stages/{path.name}: the stage is the file's name, not a key")
        if not key.startswith(PREFIX) or key not in CONTEXT_KEYS:
            raise c.ConfigError(f"stages/{path.name}: {_unknown_key(key)}")
    return settings


def _same(given: Any, value: Any) -> bool:
    """Equal once a ``-c`` string is read as the JSON it holds."""
    return bool(_parsed(given) == _parsed(value))


def _parsed(value: Any) -> Any:
    """A context value as JSON data, a ``-c`` string read, null fields dropped (the context
    drops them on its way through jsii: ``{"alarm_email": null}`` arrives as ``{}``)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, Mapping):
        return {key: _parsed(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_parsed(item) for item in value]
    return value


def _text(value: Any) -> str:
    return json.dumps(_parsed(value), separators=(",", ":"))


def check_production(scope: Construct) -> None:
    """In a production stage: no documentation value anywhere, and somewhere to page."""
    deployment = c.deployment_config(scope)
    if deployment.stage not in c.PRODUCTION_STAGES:
        return
    found = [f"{name} = {value}" for name, value in documentation_values(scope)]
    if found:
        raise c.ConfigError(
            f"{c.STAGE_CONTEXT_KEY}={deployment.stage} is a production stage and these are "
            f"documentation values (RFC 5737/3849/2606): {'; '.join(found)}. Put the "
            f"institution's own in stages/{deployment.stage}.json: IBIs minted under a "
            "documentation prefix cannot be withdrawn"
        )
    if c.operations_config(scope).page_address is None:
        raise c.ConfigError(
            f"{c.STAGE_CONTEXT_KEY}={deployment.stage} is a production stage: give its alarms "
            f'somewhere to go, {c.OPERATIONS_CONTEXT_KEY}={{"page_email": "on-call@…", '
            '"ticket_email": "team@…"}'
        )


def documentation_values(scope: Construct) -> Iterator[tuple[str, str]]:
    """(field, value) of every host, address, URL or e-mail domain reserved for documentation."""
    minting = c.minting_config(scope)
    for subsystem in minting.subsystems:
        field = f"{c.MINTING_CONTEXT_KEY}.subsystems[{subsystem.name}]"
        if is_documentation_host(subsystem.host):
            yield f"{field}.host", subsystem.host
        if is_documentation_host(subsystem.ip):
            yield f"{field}.ip", subsystem.ip
    archive = c.archive_config(scope)
    resolver = c.resolver_config(scope)
    operations = c.operations_config(scope)
    waf = c.waf_config(scope)
    canary = c.canary_config(scope)
    candidates = {
        f"{c.ARCHIVE_CONTEXT_KEY}.base_url": archive.base_url,
        f"{c.ARCHIVE_CONTEXT_KEY}.join.resolver_url": archive.join_resolver_url,
        f"{c.RESOLVER_CONTEXT_KEY}.domain_name": resolver.domain_name,
        f"{c.WAF_CONTEXT_KEY}.archive_domain_name": waf.archive_domain_name if waf else None,
        f"{c.CANARY_CONTEXT_KEY}.resolver_url": canary.resolver_url if canary else None,
        **{
            f"{c.OPERATIONS_CONTEXT_KEY}.{name}": getattr(operations, name)
            for name in c.OPERATIONS_FIELDS
        },
    }
    for field, value in candidates.items():
        if value is not None and is_documentation_host(_host(value)):
            yield field, value


def _host(value: str) -> str:
    """The host of a URL, the domain of an e-mail address, or the value itself."""
    if "://" in value:
        return urlsplit(value).hostname or ""
    return value.rpartition("@")[2]


def is_documentation_host(host: str) -> bool:
    """Whether ``host`` (a DNS name or an address) is reserved for documentation or tests."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = host.lower().rstrip(".")
        return name.rpartition(".")[2] in DOCUMENTATION_TLDS or any(
            name == domain or name.endswith(f".{domain}") for domain in DOCUMENTATION_DOMAINS
        )
    return any(address in network for network in DOCUMENTATION_NETWORKS)
