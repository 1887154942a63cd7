"""The deployment's settings, read once from the CDK context and validated.

The context comes from ``cdk.json`` and ``cdk -c KEY=VALUE``; each service has one key
(``ibi:minting``, ``ibi:archive``, ``ibi:resolver``, ``ibi:ci``, ``ibi:operations``) whose value
is an object, or that object as a JSON string (how ``-c`` passes it). A missing key or field
takes the default below; anything wrong stops the synth with a message naming the field.
Values are checked by the rules the Lambdas apply (``ibi.core.subsystem``, ``ibi.core.labels``,
the Archive's settings), so a configuration a Lambda would refuse is never deployed.
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
from ibi.defaults import RESOLVER_SERVICE_IBI, URLKEY_TTL_RANGE, URLKEY_TTL_SECONDS

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
    "lifecycle",
    "log_retention",
)

RESOLVER_CONTEXT_KEY = "ibi:resolver"
RESOLVER_FIELDS = ("domain_name", "certificate_arn", "service_ibi", "name", "log_retention")

CI_CONTEXT_KEY = "ibi:ci"
CI_FIELDS = ("repository", "branch", "environment", "provider_arn")

OPERATIONS_CONTEXT_KEY = "ibi:operations"
OPERATIONS_FIELDS = ("alarm_email", "page_email", "ticket_email")

# The fields of one IBI_SUBSYSTEMS entry, as functions/minting/settings.py reads them.
SUBSYSTEM_FIELDS = ("name", "host", "ip", "rep_port", "ibip_port", "granularity")

# The HTTP API gives up on its integration after 29 s; the Lambda's timeout is the wait plus
# a margin (infra/minting.py) and must stay below that.
MAX_WAIT_LIMIT_SECONDS = 15
# Lambda refuses an environment over 4 KB in all; leave room for the other variables.
MAX_SUBSYSTEMS_JSON_BYTES = 3000

# What functions/archive/settings.py accepts: the base URL of the persistent content is
# ``http(s)://host[:port]`` with no path, and a urlkey lives within URLKEY_TTL_RANGE.
BASE_URL_PATTERN = re.compile(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?")

# A DNS name for persistent URLs, and the ACM certificate that serves it (regional).
DOMAIN_NAME_PATTERN = re.compile(
    r"(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?"
)
CERTIFICATE_ARN_PATTERN = re.compile(
    r"arn:aws(-[a-z]+)*:acm:(?P<region>[a-z]{2}(-[a-z]+)+-\d):\d{12}:certificate/[A-Za-z0-9-]+"
)
# GitHub names: an owner or repository, a branch or environment. No wildcard (* ? [ ]), no
# "..", nothing GitHub's OIDC subject would not carry literally.
GITHUB_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")
GITHUB_REF_PATTERN = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
GITHUB_PROVIDER_ARN_PATTERN = re.compile(
    r"arn:aws(-[a-z]+)*:iam::\d{12}:oidc-provider/token\.actions\.githubusercontent\.com"
)
EMAIL_PATTERN = re.compile(r"[^@\s\"'<>]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")

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


# The files bucket's lifecycle (ibi:archive.lifecycle): days before S3 deletes a noncurrent
# version (an object overwritten or deleted: the Archive keeps replaced files under history/
# itself), and days the server access log is kept.
LIFECYCLE_CONTEXT_KEY = "ibi:archive.lifecycle"
LIFECYCLE_FIELDS = ("noncurrent_version_days", "access_log_days")


@dataclass(frozen=True, slots=True)
class LifecycleConfig:
    """How long the files bucket keeps noncurrent versions, and its access log its objects."""

    noncurrent_version_days: int = 90
    access_log_days: int = 365

    def __post_init__(self) -> None:
        for name in LIFECYCLE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 36500:
                raise ConfigError(f"{LIFECYCLE_CONTEXT_KEY}.{name}: {value!r} is not 1-36500")

    @classmethod
    def from_context(cls, raw: Any) -> LifecycleConfig:
        if raw is None:
            return cls()
        raw = _context_object(raw, LIFECYCLE_CONTEXT_KEY, LIFECYCLE_FIELDS)
        return cls(**{n: raw[n] for n in LIFECYCLE_FIELDS if raw.get(n) is not None})


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
    urlkey_ttl_seconds: int = URLKEY_TTL_SECONDS
    log_retention: logs.RetentionDays = field(default=logs.RetentionDays.ONE_MONTH)
    # The resolver the Archive joins when it starts, and the SSM SecureString (name) holding
    # its registration key: {"resolver_url": …, "registration_key_parameter": …}.
    join_resolver_url: str | None = None
    registration_key_parameter: str | None = None
    # The joined resolver's service IBI (the path of its inclusion protocol): ``join``'s
    # ``resolver_service_ibi``; without it, the app's ``ibi:resolver.service_ibi``.
    join_resolver_service_ibi: str | None = None
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)

    def __post_init__(self) -> None:
        key = ARCHIVE_CONTEXT_KEY
        if self.join_resolver_service_ibi is not None:
            if self.join_resolver_url is None:
                raise ConfigError(f"{key}.join.resolver_service_ibi: give resolver_url too")
            canonical = _ibi(self.join_resolver_service_ibi, f"{key}.join.resolver_service_ibi")
            object.__setattr__(self, "join_resolver_service_ibi", canonical)
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
        values = _plain_values(
            raw,
            ("base_url", "platform_software", "mint_subsystem", "urlkey_ttl_seconds"),
            ARCHIVE_CONTEXT_KEY,
        )
        join = raw.get("join")
        if join is not None:
            if not isinstance(join, Mapping) or not (
                {"resolver_url", "registration_key_parameter"}
                <= set(join)
                <= {"resolver_url", "registration_key_parameter", "resolver_service_ibi"}
            ):
                raise ConfigError(
                    f"{ARCHIVE_CONTEXT_KEY}.join: {{resolver_url, registration_key_parameter"
                    "[, resolver_service_ibi]}"
                )
            values["join_resolver_url"] = join["resolver_url"]
            values["registration_key_parameter"] = join["registration_key_parameter"]
            if join.get("resolver_service_ibi") is not None:
                values["join_resolver_service_ibi"] = join["resolver_service_ibi"]
        values["lifecycle"] = LifecycleConfig.from_context(raw.get("lifecycle"))
        return cls(**values)

    def check_minting(self, minting: MintingConfig) -> None:
        """The subsystem the Archive mints in must be one the minting service knows."""
        names = [subsystem.name for subsystem in minting.subsystems]
        if self.mint_subsystem is not None and self.mint_subsystem not in names:
            raise ConfigError(
                f"{ARCHIVE_CONTEXT_KEY}.mint_subsystem: {self.mint_subsystem!r} is not one of "
                f"the {MINTING_CONTEXT_KEY} subsystems {names}"
            )


@dataclass(frozen=True, slots=True)
class ResolverConfig:
    """What the resolver is deployed with (context key ``ibi:resolver``).

    ``domain_name`` and ``certificate_arn`` (an ACM certificate in the stack's region) go
    together: the custom domain of persistent URLs. Without them, persistent URLs are under
    the API's own ``execute-api`` address.
    """

    domain_name: str | None = None
    certificate_arn: str | None = None
    service_ibi: str = RESOLVER_SERVICE_IBI
    name: str = "IBI resolver"
    log_retention: logs.RetentionDays = field(default=logs.RetentionDays.ONE_MONTH)

    def __post_init__(self) -> None:
        key = RESOLVER_CONTEXT_KEY
        if (self.domain_name is None) != (self.certificate_arn is None):
            raise ConfigError(
                f"{key}: give domain_name and certificate_arn together (the custom domain of "
                "persistent URLs and its ACM certificate), or neither"
            )
        domain = self.domain_name
        if domain is not None:
            if not isinstance(domain, str) or not DOMAIN_NAME_PATTERN.fullmatch(
                domain.lower().rstrip(".")
            ):
                raise ConfigError(f"{key}.domain_name: {domain!r} is not a DNS name")
            object.__setattr__(self, "domain_name", domain.lower().rstrip("."))
        arn = self.certificate_arn
        if arn is not None and (
            not isinstance(arn, str) or not CERTIFICATE_ARN_PATTERN.fullmatch(arn)
        ):
            raise ConfigError(f"{key}.certificate_arn: {arn!r} is not an ACM certificate ARN")
        service = self.service_ibi
        if not isinstance(service, str):
            raise ConfigError(f"{key}.service_ibi: {service!r} is not an IBI")
        try:
            object.__setattr__(self, "service_ibi", parse_label(service).label)
        except InvalidInput as error:
            raise ConfigError(f"{key}.service_ibi: {error}") from None
        name = self.name
        if not isinstance(name, str) or not 1 <= len(name.strip()) <= 100:
            raise ConfigError(f"{key}.name: {name!r} is not a name of 1-100 characters")

    @property
    def certificate_region(self) -> str | None:
        """The region of the certificate: an HTTP API's domain needs one in its own region."""
        if self.certificate_arn is None:
            return None
        match = CERTIFICATE_ARN_PATTERN.fullmatch(self.certificate_arn)
        assert match is not None  # checked above
        return match["region"]

    @classmethod
    def from_context(cls, raw: Any) -> ResolverConfig:
        """Parse the context value; ``None`` (key absent) gives the defaults."""
        if raw is None:
            return cls()
        raw = _context_object(raw, RESOLVER_CONTEXT_KEY, RESOLVER_FIELDS)
        fields = ("domain_name", "certificate_arn", "service_ibi", "name")
        return cls(**_plain_values(raw, fields, RESOLVER_CONTEXT_KEY))


@dataclass(frozen=True, slots=True)
class CiConfig:
    """The CI role's one trusted workflow (context key ``ibi:ci``): GitHub Actions by OIDC.

    ``repository`` is ``OWNER/REPO``; exactly one of ``branch`` and ``environment`` names what
    may assume the role. ``provider_arn`` reuses the account's GitHub OIDC provider (an
    account has at most one); without it the stack creates it.
    """

    repository: str
    branch: str | None = None
    environment: str | None = None
    provider_arn: str | None = None

    def __post_init__(self) -> None:
        key = CI_CONTEXT_KEY
        repository = self.repository
        owner, _, name = str(repository).partition("/")
        if not (
            isinstance(repository, str)
            and GITHUB_NAME_PATTERN.fullmatch(owner)
            and GITHUB_NAME_PATTERN.fullmatch(name)
        ):
            raise ConfigError(f"{key}.repository: {repository!r} is not OWNER/REPO (no wildcard)")
        if (self.branch is None) == (self.environment is None):
            raise ConfigError(f"{key}: give exactly one of branch and environment")
        field_name = "branch" if self.branch is not None else "environment"
        value = self.branch if self.branch is not None else self.environment
        if (
            not isinstance(value, str)
            or not GITHUB_REF_PATTERN.fullmatch(value)
            or ".." in value
            or value.startswith("refs/")
            or (field_name == "environment" and "/" in value)
        ):
            raise ConfigError(
                f"{key}.{field_name}: {value!r} is not one {field_name} (a plain name, no "
                "wildcard, no refs/ prefix)"
            )
        provider = self.provider_arn
        if provider is not None and (
            not isinstance(provider, str) or not GITHUB_PROVIDER_ARN_PATTERN.fullmatch(provider)
        ):
            raise ConfigError(
                f"{key}.provider_arn: {provider!r} is not the ARN of an IAM OIDC provider for "
                "token.actions.githubusercontent.com"
            )

    @property
    def subject(self) -> str:
        """The one ``sub`` claim the role trusts."""
        if self.branch is not None:
            return f"repo:{self.repository}:ref:refs/heads/{self.branch}"
        return f"repo:{self.repository}:environment:{self.environment}"

    @classmethod
    def from_context(cls, raw: Any) -> CiConfig | None:
        """Parse the context value; ``None`` (key absent): no CI role."""
        if raw is None:
            return None
        raw = _context_object(raw, CI_CONTEXT_KEY, CI_FIELDS)
        if "repository" not in raw:
            raise ConfigError(f"{CI_CONTEXT_KEY}.repository: missing (OWNER/REPO)")
        return cls(**{name: raw[name] for name in CI_FIELDS if raw.get(name) is not None})


@dataclass(frozen=True, slots=True)
class OperationsConfig:
    """Where alarms go (context key ``ibi:operations``): two SNS topics per stack, or nowhere.

    ``page_email`` (the on-call address) gets the alarms that mean readers are failing now
    (the canary, 5xx rates, a resolution path too slow); ``ticket_email`` (the team's list)
    gets the ones that can wait for working hours (errors, throttles, dead letters, a 409…).
    ``alarm_email`` is the address of both where the other is not given. Each topic publishes
    its alarms and their return to OK; AWS mails each address a confirmation link first.
    """

    alarm_email: str | None = None
    page_email: str | None = None
    ticket_email: str | None = None

    def __post_init__(self) -> None:
        for name in OPERATIONS_FIELDS:
            email = getattr(self, name)
            if email is not None and (
                not isinstance(email, str) or not EMAIL_PATTERN.fullmatch(email)
            ):
                raise ConfigError(f"{OPERATIONS_CONTEXT_KEY}.{name}: {email!r} is not an address")

    @property
    def page_address(self) -> str | None:
        """Where paging alarms go: ``page_email``, else ``alarm_email``."""
        return self.page_email or self.alarm_email

    @property
    def ticket_address(self) -> str | None:
        """Where ticket alarms go: ``ticket_email``, else ``alarm_email``."""
        return self.ticket_email or self.alarm_email

    @classmethod
    def from_context(cls, raw: Any) -> OperationsConfig:
        """Parse the context value; ``None`` (key absent) gives the defaults."""
        if raw is None:
            return cls()
        raw = _context_object(raw, OPERATIONS_CONTEXT_KEY, OPERATIONS_FIELDS)
        return cls(**_plain_values(raw, OPERATIONS_FIELDS, OPERATIONS_CONTEXT_KEY))


def _plain_values(raw: Mapping[str, Any], names: Iterable[str], key: str) -> dict[str, Any]:
    """The given fields that are set, as they are, and ``log_retention`` parsed."""
    values: dict[str, Any] = {name: raw[name] for name in names if raw.get(name) is not None}
    if raw.get("log_retention") is not None:
        values["log_retention"] = _retention(raw["log_retention"], key)
    return values


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


def _ibi(value: Any, name: str) -> str:
    """``value`` as a canonical IBI, or a ConfigError naming the field."""
    if not isinstance(value, str):
        raise ConfigError(f"{name}: {value!r} is not an IBI")
    try:
        return parse_label(value).label
    except InvalidInput as error:
        raise ConfigError(f"{name}: {error}") from None


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


def resolver_config(scope: Construct) -> ResolverConfig:
    """The resolver settings from the context visible at ``scope``."""
    return ResolverConfig.from_context(scope.node.try_get_context(RESOLVER_CONTEXT_KEY))


def ci_config(scope: Construct) -> CiConfig | None:
    """The CI role's settings from the context visible at ``scope``; ``None``: no CI role."""
    return CiConfig.from_context(scope.node.try_get_context(CI_CONTEXT_KEY))


def operations_config(scope: Construct) -> OperationsConfig:
    """Where alarms go, from the context visible at ``scope``."""
    return OperationsConfig.from_context(scope.node.try_get_context(OPERATIONS_CONTEXT_KEY))


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
    chosen = tuple(dict.fromkeys(raw))
    if scope.node.try_get_context(CI_CONTEXT_KEY) is not None and not {
        "minting",
        "archive",
    } & set(chosen):
        raise ConfigError(
            f"{CI_CONTEXT_KEY}: the CI role mints and deposits, so it needs the 'archive' or the "
            f"'minting' stack in {STACKS_CONTEXT_KEY} (chosen: {list(chosen)})"
        )
    return chosen


# Where and as what the stacks are deployed: one key each, so `-c ibi:stage=staging` works.
STAGE_CONTEXT_KEY = "ibi:stage"
REGION_CONTEXT_KEY = "ibi:region"
ACCOUNT_CONTEXT_KEY = "ibi:account"
TERMINATION_PROTECTION_CONTEXT_KEY = "ibi:termination_protection"
TAGS_CONTEXT_KEY = "ibi:tags"
# A stage names stacks (``IbiArchive-staging``), so it must fit a stack name, short.
STAGE_PATTERN = re.compile(r"[a-z][a-z0-9]{0,15}")
PRODUCTION_STAGES = frozenset({"prod", "production"})
REGION_PATTERN = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")
ACCOUNT_PATTERN = re.compile(r"\d{12}")
# AWS tag keys and values (cost allocation tags are ordinary tags, activated in Billing).
TAG_KEY_PATTERN = re.compile(r"[\w.:/=+\-@ ]{1,128}")
TAG_VALUE_PATTERN = re.compile(r"[\w.:/=+\-@ ]{0,256}")


@dataclass(frozen=True, slots=True)
class DeploymentConfig:
    """One deployment of the app: its stage, where it goes, how it is tagged and protected.

    ``stage`` (context ``ibi:stage``) suffixes every stack id (``IbiArchive-staging``), and so
    the stack names and everything named after them (APIs, dashboards, alarm topics): two
    stages share an account and a region. No stage: the ids of every earlier deploy, unchanged.
    ``region``/``account`` (``ibi:region``, ``ibi:account``) pin the stacks' environment;
    without them the stacks are environment-agnostic (deployed where the CLI's profile points).
    ``termination_protection`` (``ibi:termination_protection``) defaults to on for the stages
    ``prod`` and ``production`` and off otherwise. ``tags`` (``ibi:tags``) go on every resource,
    with ``ibi:stage`` when there is a stage: cost allocation tags once activated in Billing.
    """

    stage: str | None = None
    region: str | None = None
    account: str | None = None
    termination_protection: bool = False
    tags: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.stage is not None and (
            not isinstance(self.stage, str) or not STAGE_PATTERN.fullmatch(self.stage)
        ):
            raise ConfigError(
                f"{STAGE_CONTEXT_KEY}: {self.stage!r} is not a stage (a-z then a-z0-9, 1-16)"
            )
        if self.region is not None and (
            not isinstance(self.region, str) or not REGION_PATTERN.fullmatch(self.region)
        ):
            raise ConfigError(f"{REGION_CONTEXT_KEY}: {self.region!r} is not an AWS region")
        if self.account is not None and (
            not isinstance(self.account, str) or not ACCOUNT_PATTERN.fullmatch(self.account)
        ):
            raise ConfigError(f"{ACCOUNT_CONTEXT_KEY}: {self.account!r} is not 12 digits")
        for key, value in self.tags:
            if not TAG_KEY_PATTERN.fullmatch(key) or key.lower().startswith("aws:"):
                raise ConfigError(f"{TAGS_CONTEXT_KEY}: {key!r} is not a tag key")
            if not isinstance(value, str) or not TAG_VALUE_PATTERN.fullmatch(value):
                raise ConfigError(f"{TAGS_CONTEXT_KEY}.{key}: {value!r} is not a tag value")

    def stack_id(self, base: str) -> str:
        """``base`` (``IbiArchive``…) for this stage: itself without one."""
        return base if self.stage is None else f"{base}-{self.stage}"

    @property
    def all_tags(self) -> dict[str, str]:
        """Every tag of every resource: ``ibi:tags``, and ``ibi:stage``."""
        tags = dict(self.tags)
        if self.stage is not None:
            tags["ibi:stage"] = self.stage
        return tags

    @classmethod
    def from_context(cls, scope: Construct) -> DeploymentConfig:
        """The deployment's settings from the context visible at ``scope``."""

        def get(key: str) -> Any:
            return scope.node.try_get_context(key)

        stage = get(STAGE_CONTEXT_KEY) or None
        protection = _flag(get(TERMINATION_PROTECTION_CONTEXT_KEY), stage)
        raw_tags = get(TAGS_CONTEXT_KEY)
        if isinstance(raw_tags, str):
            try:
                raw_tags = json.loads(raw_tags)
            except json.JSONDecodeError as error:
                raise ConfigError(f"{TAGS_CONTEXT_KEY}: not valid JSON ({error})") from None
        if raw_tags is not None and not isinstance(raw_tags, Mapping):
            raise ConfigError(f"{TAGS_CONTEXT_KEY}: expected an object of key: value")
        return cls(
            stage=stage,
            region=get(REGION_CONTEXT_KEY) or None,
            account=str(get(ACCOUNT_CONTEXT_KEY)) if get(ACCOUNT_CONTEXT_KEY) else None,
            termination_protection=protection,
            tags=tuple(sorted((str(k), v) for k, v in (raw_tags or {}).items())),
        )


def _flag(raw: Any, stage: Any) -> bool:
    """``ibi:termination_protection``: true/false (or their strings); unset: production."""
    if raw is None:
        return stage in PRODUCTION_STAGES
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in {"true", "false"}:
        return raw.lower() == "true"
    raise ConfigError(f"{TERMINATION_PROTECTION_CONTEXT_KEY}: {raw!r} is not true or false")


def deployment_config(scope: Construct) -> DeploymentConfig:
    """The stage, environment, tags and protection from the context visible at ``scope``."""
    return DeploymentConfig.from_context(scope)


THROTTLE_CONTEXT_KEY = "ibi:throttle"
THROTTLE_FIELDS = (
    "public_rate",
    "public_burst",
    "signed_rate",
    "signed_burst",
    "oai_rate",
    "oai_burst",
)
# API Gateway's own ceiling: 10,000 requests per second and a burst of 5,000 per account and
# region, shared by every API there. A route's limits cannot exceed them usefully.
THROTTLE_MAX_RATE = 10_000
THROTTLE_MAX_BURST = 5_000

Limit = tuple[int, int]  # requests per second, burst


@dataclass(frozen=True, slots=True)
class ThrottleConfig:
    """The routes' throttles (context ``ibi:throttle``), in requests per second and burst.

    Each route has a bucket of its own (a route setting of its API's stage). ``public_*``:
    every unsigned route (persistent URLs, the service protocol, the pages) and the stage's
    default, which covers any route added later. ``signed_*``: every IAM route (the deposit
    API, the resolver's administration, every minting route) and the few unsigned ones only
    machines call rarely (the inclusion protocol, a transfer's confirmation). ``oai_*``: the
    Archive's OAI-PMH routes, whose requests read many rows. A request over a limit gets 429
    from API Gateway before the Lambda runs.
    """

    public_rate: int = 100
    public_burst: int = 200
    signed_rate: int = 20
    signed_burst: int = 40
    oai_rate: int = 5
    oai_burst: int = 10

    def __post_init__(self) -> None:
        for name in THROTTLE_FIELDS:
            high = THROTTLE_MAX_BURST if name.endswith("burst") else THROTTLE_MAX_RATE
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ConfigError(f"{THROTTLE_CONTEXT_KEY}.{name}: {value!r} is not in 1-{high}")

    @property
    def public(self) -> Limit:
        return self.public_rate, self.public_burst

    @property
    def signed(self) -> Limit:
        return self.signed_rate, self.signed_burst

    @property
    def oai(self) -> Limit:
        return self.oai_rate, self.oai_burst

    @classmethod
    def from_context(cls, raw: Any) -> ThrottleConfig:
        """Parse the context value; ``None`` (key absent) gives the defaults."""
        if raw is None:
            return cls()
        raw = _context_object(raw, THROTTLE_CONTEXT_KEY, THROTTLE_FIELDS)
        return cls(**{name: raw[name] for name in THROTTLE_FIELDS if raw.get(name) is not None})


def throttle_config(scope: Construct) -> ThrottleConfig:
    """The APIs' throttles from the context visible at ``scope``."""
    return ThrottleConfig.from_context(scope.node.try_get_context(THROTTLE_CONTEXT_KEY))


WAF_CONTEXT_KEY = "ibi:waf"
WAF_FIELDS = (
    "rate_limit",
    "retry_after_seconds",
    "archive_domain_name",
    "archive_certificate_arn",
    "archive_rate_limit",
    "log_retention",
)
# AWS WAF's bounds for a rate-based rule's limit (requests per address per evaluation window).
WAF_LIMITS = (10, 2_000_000_000)
WAF_REGION = "us-east-1"  # a web ACL of CloudFront scope, and a distribution's certificate


@dataclass(frozen=True, slots=True)
class WafConfig:
    """The edge (context ``ibi:waf``): a stack in us-east-1 whose CloudFront distributions,
    with a rate-based web ACL, front the resolver's public routes and, given
    ``archive_domain_name``, the Archive's (``infra/edge.py``). The regional stacks may be in
    any region. ``rate_limit``: requests per client address per 5 minutes to the resolver;
    over it, ``429`` with ``Retry-After``. ``archive_rate_limit``: the same for the Archive,
    whose callers are resolvers, a few addresses making many requests. The Archive's
    distribution needs a domain of its own and a certificate for it in us-east-1: the
    Archive's links must name the distribution, never the API it fronts."""

    rate_limit: int = 1000
    retry_after_seconds: int = 60
    archive_domain_name: str | None = None
    archive_certificate_arn: str | None = None
    archive_rate_limit: int = 20_000
    log_retention: logs.RetentionDays = field(default=logs.RetentionDays.ONE_MONTH)

    def __post_init__(self) -> None:
        key = WAF_CONTEXT_KEY
        low, high = WAF_LIMITS
        for name in ("rate_limit", "archive_rate_limit"):
            limit = getattr(self, name)
            if isinstance(limit, bool) or not isinstance(limit, int) or not low <= limit <= high:
                raise ConfigError(f"{key}.{name}: {limit!r} is not in {low}-{high}")
        wait = self.retry_after_seconds
        if isinstance(wait, bool) or not isinstance(wait, int) or not 1 <= wait <= 3600:
            raise ConfigError(f"{key}.retry_after_seconds: {wait!r} is not 1-3600")
        if (self.archive_domain_name is None) != (self.archive_certificate_arn is None):
            raise ConfigError(
                f"{key}: give archive_domain_name and archive_certificate_arn together, or "
                "neither (the Archive is then not behind the edge)"
            )
        if self.archive_domain_name is not None:
            domain = _domain(self.archive_domain_name, f"{key}.archive_domain_name")
            object.__setattr__(self, "archive_domain_name", domain)
            _edge_certificate(self.archive_certificate_arn, f"{key}.archive_certificate_arn")

    @classmethod
    def from_context(cls, raw: Any) -> WafConfig | None:
        """``None`` (absent, null or false): no edge stack."""
        if raw is None or raw is False or raw == "false":
            return None
        if raw is True or raw == "true":
            return cls()
        raw = _context_object(raw, WAF_CONTEXT_KEY, WAF_FIELDS)
        return cls(
            **_plain_values(
                raw, [name for name in WAF_FIELDS if name != "log_retention"], WAF_CONTEXT_KEY
            )
        )


def _domain(value: Any, name: str) -> str:
    """``value`` as a lower-case DNS name, or a ConfigError naming the field."""
    if not isinstance(value, str) or not DOMAIN_NAME_PATTERN.fullmatch(value.lower().rstrip(".")):
        raise ConfigError(f"{name}: {value!r} is not a DNS name")
    return value.lower().rstrip(".")


def _edge_certificate(arn: Any, name: str) -> None:
    """A CloudFront distribution's certificate: an ACM certificate in us-east-1."""
    match = CERTIFICATE_ARN_PATTERN.fullmatch(arn) if isinstance(arn, str) else None
    if match is None:
        raise ConfigError(f"{name}: {arn!r} is not an ACM certificate ARN")
    if match["region"] != WAF_REGION:
        raise ConfigError(
            f"{name}: the certificate is in {match['region']}; CloudFront takes one in "
            f"{WAF_REGION} only (request or import it there)"
        )


def waf_config(scope: Construct) -> WafConfig | None:
    """The edge's settings, or ``None`` when there is no edge."""
    return WafConfig.from_context(scope.node.try_get_context(WAF_CONTEXT_KEY))


SNAPSTART_CONTEXT_KEY = "ibi:snapstart"


def snapstart_enabled(scope: Construct) -> bool:
    """``ibi:snapstart``: true/false (or their strings); off when unset."""
    return _bool_context(scope, SNAPSTART_CONTEXT_KEY)


TRACING_CONTEXT_KEY = "ibi:tracing"


def tracing_enabled(scope: Construct) -> bool:
    """``ibi:tracing``: X-Ray active tracing of every function (true/false); off when unset.

    On, each function samples by the account's X-Ray sampling rules (by default the first
    request each second and 5% of the rest): about 3 traces per resolution at low traffic,
    priced in docs/scale.md. Off, the functions send no segments and need no X-Ray grant.
    """
    return _bool_context(scope, TRACING_CONTEXT_KEY)


def _bool_context(scope: Construct, key: str) -> bool:
    raw = scope.node.try_get_context(key)
    if raw is None or isinstance(raw, bool):
        return bool(raw)
    if isinstance(raw, str) and raw.lower() in {"true", "false"}:
        return raw.lower() == "true"
    raise ConfigError(f"{key}: {raw!r} is not true or false")


CONCURRENCY_CONTEXT_KEY = "ibi:concurrency"
CONCURRENCY_FIELDS = ("minting", "archive", "resolver")
# Lambda keeps at least 100 of an account's concurrency unreserved (10 on a new account with a
# limit of 10, where nothing can be reserved): a reservation is at most the limit less that.
CONCURRENCY_MAX = 10_000


@dataclass(frozen=True, slots=True)
class ConcurrencyConfig:
    """Reserved concurrency per function (context ``ibi:concurrency``), ``None``: none.

    A reservation is both a floor and a ceiling: the minting and resolver functions keep
    their share of the account's concurrency whatever an Archive does, and an Archive held up
    by slow callers cannot take more than its own. Unset (the default), every function draws
    on the account's unreserved pool, as a new account (concurrency limit 10) requires.
    """

    minting: int | None = None
    archive: int | None = None
    resolver: int | None = None

    def __post_init__(self) -> None:
        for name in CONCURRENCY_FIELDS:
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 1 <= value <= CONCURRENCY_MAX
            ):
                raise ConfigError(
                    f"{CONCURRENCY_CONTEXT_KEY}.{name}: {value!r} is not in 1-{CONCURRENCY_MAX}"
                )

    @classmethod
    def from_context(cls, raw: Any) -> ConcurrencyConfig:
        if raw is None:
            return cls()
        raw = _context_object(raw, CONCURRENCY_CONTEXT_KEY, CONCURRENCY_FIELDS)
        return cls(**{name: raw[name] for name in CONCURRENCY_FIELDS if raw.get(name) is not None})


def concurrency_config(scope: Construct) -> ConcurrencyConfig:
    """The functions' reserved concurrency from the context visible at ``scope``."""
    return ConcurrencyConfig.from_context(scope.node.try_get_context(CONCURRENCY_CONTEXT_KEY))


CANARY_CONTEXT_KEY = "ibi:canary"
CANARY_FIELDS = ("ibi", "resolver_url", "every_minutes")


@dataclass(frozen=True, slots=True)
class CanaryConfig:
    """The canary (context ``ibi:canary``): every ``every_minutes`` a function of the resolver
    stack resolves ``ibi`` at ``resolver_url`` as a reader would (the resolver's 302, then the
    Archive's file) and publishes whether it got the file (``infra/canary.py``).

    ``ibi`` is an IBI this deployment holds (deposit one first); ``resolver_url`` is where
    readers resolve (default: the custom domain, or the API's own address when nothing fronts
    it; behind the edge without a custom domain, the edge stack's ``EdgeUrl``, given here).
    """

    ibi: str
    resolver_url: str | None = None
    every_minutes: int = 5

    def __post_init__(self) -> None:
        key = CANARY_CONTEXT_KEY
        object.__setattr__(self, "ibi", _ibi(self.ibi, f"{key}.ibi"))
        url = self.resolver_url
        if url is not None:
            if not isinstance(url, str) or not re.fullmatch(
                r"https://[A-Za-z0-9.-]+(:\d{1,5})?/?", url
            ):
                raise ConfigError(f"{key}.resolver_url: {url!r} is not https://host/")
            object.__setattr__(self, "resolver_url", url.rstrip("/") + "/")
        every = self.every_minutes
        if isinstance(every, bool) or not isinstance(every, int) or not 1 <= every <= 60:
            raise ConfigError(f"{key}.every_minutes: {every!r} is not 1-60")

    @classmethod
    def from_context(cls, raw: Any) -> CanaryConfig | None:
        """``None`` (key absent): no canary."""
        if raw is None:
            return None
        raw = _context_object(raw, CANARY_CONTEXT_KEY, CANARY_FIELDS)
        if raw.get("ibi") is None:
            raise ConfigError(f"{CANARY_CONTEXT_KEY}.ibi: missing (an IBI this deployment holds)")
        return cls(**{name: raw[name] for name in CANARY_FIELDS if raw.get(name) is not None})


def canary_config(scope: Construct) -> CanaryConfig | None:
    """The canary's settings, or ``None`` when there is no canary."""
    return CanaryConfig.from_context(scope.node.try_get_context(CANARY_CONTEXT_KEY))
