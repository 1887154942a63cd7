"""The deployment's settings, read once from the CDK context and validated.

The context comes from ``cdk.json`` and ``cdk -c KEY=VALUE``; each service has one key
(``ibi:minting``, ``ibi:archive``) whose value is an object, or that object as a JSON string
(how ``-c`` passes it). A missing key or field takes the default below; anything wrong stops the
synth with a message naming the field. Values are checked by the rules the Lambdas apply
(``ibi.core.subsystem``, ``ibi.core.labels``, the Archive's settings), so a configuration a
Lambda would refuse is never deployed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import aws_logs as logs
from constructs import Construct

from ibi.core.distributor import Granularity
from ibi.core.errors import InvalidInput
from ibi.core.labels import parse_label
from ibi.core.subsystem import Subsystem, check_distinct

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = REPO_ROOT / "cdk.json"

MINTING_CONTEXT_KEY = "ibi:minting"
MINTING_FIELDS = ("subsystems", "default_subsystem", "max_wait_seconds", "log_retention")

ARCHIVE_CONTEXT_KEY = "ibi:archive"
ARCHIVE_FIELDS = (
    "base_url",
    "platform_software",
    "mint_subsystem",
    "urlkey_ttl_seconds",
    "join",
    "log_retention",
)

# The fields of one IBI_SUBSYSTEMS entry, as functions/minting/settings.py reads them.
SUBSYSTEM_FIELDS = ("name", "host", "ip", "rep_port", "ibip_port", "granularity")

# The HTTP API gives up on its integration after 29 s; the Lambda's timeout is the wait plus
# a margin (infra/minting.py) and must stay below that.
MAX_WAIT_LIMIT_SECONDS = 15
# Lambda refuses an environment over 4 KB in all; leave room for the other variables.
MAX_SUBSYSTEMS_JSON_BYTES = 3000

# What functions/archive/settings.py accepts: the base URL of the persistent content is
# ``http(s)://host[:port]`` with no path, and a urlkey lives from 10 s to a day.
BASE_URL_PATTERN = re.compile(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?")
URLKEY_TTL_RANGE = (10, 86400)

DEFAULT_SUBSYSTEMS = (
    Subsystem(
        name="default",
        host="ibi.example.org",
        ip="192.0.2.10",  # TEST-NET-1, an address for documentation (RFC 5737)
        granularity=Granularity("0.001"),
    ),
)


class ConfigError(ValueError):
    """A context value is malformed or inconsistent; the message names the field."""


@dataclass(frozen=True, slots=True)
class MintingConfig:
    """What the minting service is deployed with (context key ``ibi:minting``)."""

    subsystems: tuple[Subsystem, ...] = DEFAULT_SUBSYSTEMS
    default_subsystem: str = "default"
    max_wait_seconds: int = 5
    log_retention: logs.RetentionDays = field(default=logs.RetentionDays.ONE_MONTH)

    def __post_init__(self) -> None:
        try:
            names = list(check_distinct(self.subsystems))
        except InvalidInput as error:
            raise ConfigError(f"{MINTING_CONTEXT_KEY}.{error}") from None
        if self.default_subsystem not in names:
            raise ConfigError(
                f"{MINTING_CONTEXT_KEY}.default_subsystem: "
                f"{self.default_subsystem!r} is not one of {names}"
            )
        wait = self.max_wait_seconds
        if isinstance(wait, bool) or not isinstance(wait, int):
            raise ConfigError(
                f"{MINTING_CONTEXT_KEY}.max_wait_seconds: {wait!r} is not a whole number"
            )
        if not 0 <= wait <= MAX_WAIT_LIMIT_SECONDS:
            raise ConfigError(
                f"{MINTING_CONTEXT_KEY}.max_wait_seconds: {wait} is not in "
                f"0-{MAX_WAIT_LIMIT_SECONDS}"
            )
        size = len(subsystems_json(self.subsystems).encode())
        if size > MAX_SUBSYSTEMS_JSON_BYTES:
            raise ConfigError(
                f"{MINTING_CONTEXT_KEY}.subsystems: {size} bytes of JSON, more than the "
                f"{MAX_SUBSYSTEMS_JSON_BYTES} that fit in the Lambda's environment"
            )

    @classmethod
    def from_context(cls, raw: Any) -> MintingConfig:
        """Parse the context value; ``None`` (key absent) gives the defaults."""
        if raw is None:
            return cls()
        raw = _context_object(raw, MINTING_CONTEXT_KEY, MINTING_FIELDS)
        values: dict[str, Any] = {
            name: raw[name] for name in ("default_subsystem", "max_wait_seconds") if name in raw
        }
        if "subsystems" in raw:
            values["subsystems"] = _subsystems(raw["subsystems"])
        if "log_retention" in raw:
            values["log_retention"] = _retention(raw["log_retention"], MINTING_CONTEXT_KEY)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class ArchiveConfig:
    """What the Archive is deployed with (context key ``ibi:archive``).

    ``None`` leaves the Lambda's own default: the base URL is then the API's own domain, the
    Archive names no platform software, and it mints in the minting service's default
    subsystem.
    """

    base_url: str | None = None
    platform_software: str | None = None
    mint_subsystem: str | None = None
    urlkey_ttl_seconds: int = 600
    log_retention: logs.RetentionDays = field(default=logs.RetentionDays.ONE_MONTH)
    # The resolver the Archive joins when it starts, and the SSM SecureString (name) holding
    # its registration key: {"resolver_url": …, "registration_key_parameter": …}.
    join_resolver_url: str | None = None
    registration_key_parameter: str | None = None

    def __post_init__(self) -> None:
        key = ARCHIVE_CONTEXT_KEY
        if (self.join_resolver_url is None) != (self.registration_key_parameter is None):
            raise ConfigError(f"{key}.join: give resolver_url and registration_key_parameter")
        if self.join_resolver_url is not None and not BASE_URL_PATTERN.fullmatch(
            str(self.join_resolver_url).rstrip("/")
        ):
            raise ConfigError(
                f"{key}.join.resolver_url: {self.join_resolver_url!r} is not https://host"
            )
        parameter = self.registration_key_parameter
        if parameter is not None and not re.fullmatch(
            r"/?[A-Za-z0-9_.\-/]{1,1000}", str(parameter)
        ):
            raise ConfigError(
                f"{key}.join.registration_key_parameter: {parameter!r} is not an SSM name"
            )
        base_url = self.base_url
        if base_url is not None:
            if not isinstance(base_url, str) or not BASE_URL_PATTERN.fullmatch(
                base_url.rstrip("/")
            ):
                raise ConfigError(f"{key}.base_url: {base_url!r} is not https://host[:port]")
            object.__setattr__(self, "base_url", base_url.rstrip("/"))
        platform = self.platform_software
        if platform is not None:
            if not isinstance(platform, str):
                raise ConfigError(f"{key}.platform_software: {platform!r} is not an IBI")
            try:
                canonical = parse_label(platform).label
            except InvalidInput as error:
                raise ConfigError(f"{key}.platform_software: {error}") from None
            object.__setattr__(self, "platform_software", canonical)
        subsystem = self.mint_subsystem
        if subsystem is not None and (not isinstance(subsystem, str) or not subsystem):
            raise ConfigError(f"{key}.mint_subsystem: {subsystem!r} is not a subsystem name")
        ttl = self.urlkey_ttl_seconds
        low, high = URLKEY_TTL_RANGE
        if isinstance(ttl, bool) or not isinstance(ttl, int):
            raise ConfigError(f"{key}.urlkey_ttl_seconds: {ttl!r} is not a whole number")
        if not low <= ttl <= high:
            raise ConfigError(f"{key}.urlkey_ttl_seconds: {ttl} is not in {low}-{high}")

    @classmethod
    def from_context(cls, raw: Any) -> ArchiveConfig:
        """Parse the context value; ``None`` (key absent) gives the defaults."""
        if raw is None:
            return cls()
        raw = _context_object(raw, ARCHIVE_CONTEXT_KEY, ARCHIVE_FIELDS)
        values: dict[str, Any] = {
            name: raw[name]
            for name in ("base_url", "platform_software", "mint_subsystem", "urlkey_ttl_seconds")
            if raw.get(name) is not None
        }
        if raw.get("log_retention") is not None:
            values["log_retention"] = _retention(raw["log_retention"], ARCHIVE_CONTEXT_KEY)
        join = raw.get("join")
        if join is not None:
            if not isinstance(join, Mapping) or set(join) != {
                "resolver_url",
                "registration_key_parameter",
            }:
                raise ConfigError(
                    f"{ARCHIVE_CONTEXT_KEY}.join: {{resolver_url, registration_key_parameter}}"
                )
            values["join_resolver_url"] = join["resolver_url"]
            values["registration_key_parameter"] = join["registration_key_parameter"]
        return cls(**values)

    def check_minting(self, minting: MintingConfig) -> None:
        """The subsystem the Archive mints in must be one the minting service knows."""
        names = [subsystem.name for subsystem in minting.subsystems]
        if self.mint_subsystem is not None and self.mint_subsystem not in names:
            raise ConfigError(
                f"{ARCHIVE_CONTEXT_KEY}.mint_subsystem: {self.mint_subsystem!r} is not one of "
                f"the {MINTING_CONTEXT_KEY} subsystems {names}"
            )


def _context_object(raw: Any, key: str, fields: Iterable[str]) -> Mapping[str, Any]:
    """A service's context value as a mapping of known fields (parsed if given as JSON)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{key}: not valid JSON ({error})") from None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{key}: expected an object, got {raw!r}")
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(f"{key}: unknown fields {unknown}")
    return raw


def _subsystems(raw: Any) -> tuple[Subsystem, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{MINTING_CONTEXT_KEY}.subsystems: expected a list, got {raw!r}")
    try:
        return tuple(Subsystem.from_mapping(item) for item in raw)
    except InvalidInput as error:
        raise ConfigError(f"{MINTING_CONTEXT_KEY}.subsystems: {error}") from None


def _retention(name: Any, key: str) -> logs.RetentionDays:
    """A ``logs.RetentionDays`` member from its name, e.g. ``"ONE_MONTH"``."""
    try:
        return logs.RetentionDays[str(name)]
    except KeyError:
        choices = ", ".join(member.name for member in logs.RetentionDays)
        raise ConfigError(f"{key}.log_retention: {name!r} is not one of {choices}") from None


def subsystems_json(subsystems: Iterable[Subsystem]) -> str:
    """The IBI_SUBSYSTEMS value: a compact JSON list, one object per subsystem."""
    entries = []
    for subsystem in subsystems:
        mapping = subsystem.to_mapping()
        entries.append({name: mapping[name] for name in SUBSYSTEM_FIELDS})
    return json.dumps(entries, separators=(",", ":"))


def minting_config(scope: Construct) -> MintingConfig:
    """The minting settings from the context visible at ``scope``."""
    return MintingConfig.from_context(scope.node.try_get_context(MINTING_CONTEXT_KEY))


def archive_config(scope: Construct) -> ArchiveConfig:
    """The Archive settings from the context visible at ``scope``."""
    return ArchiveConfig.from_context(scope.node.try_get_context(ARCHIVE_CONTEXT_KEY))


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The ``context`` of ``cdk.json``, for apps synthesized without the CLI (tests, scripts).

    Pass it as ``App(context=...)``: context given by the CLI takes precedence over it, so the
    app sees the same settings and feature flags however it is run.
    """
    if not path.exists():
        return {}
    context = json.loads(path.read_text()).get("context", {})
    if not isinstance(context, dict):
        raise ConfigError(f"{path}: 'context' must be an object")
    return context


STACKS_CONTEXT_KEY = "ibi:stacks"
STACK_CHOICES = ("minting", "archive", "resolver")
DEFAULT_STACKS = ("archive", "resolver")


def stacks_config(scope: Construct) -> tuple[str, ...]:
    """Which stacks the app holds (context ``ibi:stacks``; default: an Archive and a resolver).

    ``minting`` (a minting service alone) and ``archive`` (an Archive with its own minting
    service) never go together: both would mint for the same subsystems from two states, and
    could issue the same IBI twice.
    """
    raw = scope.node.try_get_context(STACKS_CONTEXT_KEY)
    if raw is None:
        return DEFAULT_STACKS
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = [part.strip() for part in raw.split(",") if part.strip()]
    if not isinstance(raw, list) or not raw or not all(isinstance(x, str) for x in raw):
        raise ConfigError(f"{STACKS_CONTEXT_KEY}: a non-empty list of {list(STACK_CHOICES)}")
    unknown = sorted(set(raw) - set(STACK_CHOICES))
    if unknown:
        raise ConfigError(
            f"{STACKS_CONTEXT_KEY}: unknown stack(s) {unknown}; choose from {list(STACK_CHOICES)}"
        )
    if {"minting", "archive"} <= set(raw):
        raise ConfigError(
            f"{STACKS_CONTEXT_KEY}: 'minting' and 'archive' cannot be deployed together: the "
            "Archive stack has its own minting service, and two minting services for the same "
            "subsystems could issue the same IBI twice"
        )
    return tuple(dict.fromkeys(raw))
