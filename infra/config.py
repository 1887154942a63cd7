"""The deployment's settings, read once from the CDK context and validated.

The context comes from ``cdk.json`` and ``cdk -c KEY=VALUE``; each service has one key
(``ibi:minting``) whose value is an object, or that object as a JSON string (how ``-c`` passes
it). A missing key or field takes the default below; anything wrong stops the synth with a
message naming the field. Subsystems are checked by the same rules the minting Lambda applies
(``ibi.core.subsystem``), so a configuration the Lambda would refuse is never deployed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import aws_logs as logs
from constructs import Construct

from ibi.core.distributor import Granularity
from ibi.core.errors import InvalidInput
from ibi.core.subsystem import Subsystem, check_distinct

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = REPO_ROOT / "cdk.json"

MINTING_CONTEXT_KEY = "ibi:minting"
MINTING_FIELDS = ("subsystems", "default_subsystem", "max_wait_seconds", "log_retention")

# The fields of one IBI_SUBSYSTEMS entry, as functions/minting/settings.py reads them.
SUBSYSTEM_FIELDS = ("name", "host", "ip", "rep_port", "ibip_port", "granularity")

# The HTTP API gives up on its integration after 29 s; the Lambda's timeout is the wait plus
# a margin (infra/minting.py) and must stay below that.
MAX_WAIT_LIMIT_SECONDS = 15
# Lambda refuses an environment over 4 KB in all; leave room for the other variables.
MAX_SUBSYSTEMS_JSON_BYTES = 3000

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
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as error:
                raise ConfigError(f"{MINTING_CONTEXT_KEY}: not valid JSON ({error})") from None
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{MINTING_CONTEXT_KEY}: expected an object, got {raw!r}")
        unknown = sorted(set(raw) - set(MINTING_FIELDS))
        if unknown:
            raise ConfigError(f"{MINTING_CONTEXT_KEY}: unknown fields {unknown}")
        values: dict[str, Any] = {
            name: raw[name] for name in ("default_subsystem", "max_wait_seconds") if name in raw
        }
        if "subsystems" in raw:
            values["subsystems"] = _subsystems(raw["subsystems"])
        if "log_retention" in raw:
            values["log_retention"] = _retention(raw["log_retention"])
        return cls(**values)


def _subsystems(raw: Any) -> tuple[Subsystem, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{MINTING_CONTEXT_KEY}.subsystems: expected a list, got {raw!r}")
    try:
        return tuple(Subsystem.from_mapping(item) for item in raw)
    except InvalidInput as error:
        raise ConfigError(f"{MINTING_CONTEXT_KEY}.subsystems: {error}") from None


def _retention(name: Any) -> logs.RetentionDays:
    """A ``logs.RetentionDays`` member from its name, e.g. ``"ONE_MONTH"``."""
    try:
        return logs.RetentionDays[str(name)]
    except KeyError:
        choices = ", ".join(member.name for member in logs.RetentionDays)
        raise ConfigError(
            f"{MINTING_CONTEXT_KEY}.log_retention: {name!r} is not one of {choices}"
        ) from None


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
