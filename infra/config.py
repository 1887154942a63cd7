"""The deployment's settings, read once from the CDK context and validated.

The context comes from ``cdk.json`` and ``cdk -c KEY=VALUE``; each service has one key
(``ibi:minting``, ``ibi:archive``, ``ibi:resolver``, ``ibi:ci``, ``ibi:operations``…) whose value
is an object, or that object as a JSON string (how ``-c`` passes it). Each is a section
(``infra/config_schema.py``): a dataclass whose fields carry their rules in their annotations,
read by one reader that refuses unknown fields. A missing key or field takes the default below;
anything wrong stops the synth with a message naming the field. Values are checked by the rules
the Lambdas apply (``ibi.core.subsystem``, ``ibi.core.labels``, the Archive's settings), so a
configuration a Lambda would refuse is never deployed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar

from aws_cdk import aws_logs as logs
from constructs import Construct

from ibi.core.distributor import Granularity
from ibi.core.errors import InvalidInput
from ibi.core.subsystem import Subsystem, check_distinct
from ibi.defaults import RESOLVER_SERVICE_IBI, URLKEY_TTL_RANGE, URLKEY_TTL_SECONDS
from infra.config_schema import (
    Check,
    Choice,
    Label,
    Nested,
    OptionalSection,
    Section,
    Text,
    Whole,
    field_names,
    read,
)
from infra.config_schema import ConfigError as ConfigError  # noqa: PLC0414 (re-exported)

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = REPO_ROOT / "cdk.json"

MINTING_CONTEXT_KEY = "ibi:minting"
ARCHIVE_CONTEXT_KEY = "ibi:archive"
RESOLVER_CONTEXT_KEY = "ibi:resolver"
CI_CONTEXT_KEY = "ibi:ci"
OPERATIONS_CONTEXT_KEY = "ibi:operations"

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
# "..", no refs/ prefix, nothing GitHub's OIDC subject would not carry literally.
GITHUB_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")
GITHUB_REPOSITORY_PATTERN = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
GITHUB_REF_PATTERN = re.compile(r"(?!refs/)(?!.*\.\.)[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")
GITHUB_ENVIRONMENT_PATTERN = re.compile(r"(?!.*\.\.)[A-Za-z0-9_.-]+")
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


# The rules fields share.
RETENTION = Choice(logs.RetentionDays)
DOMAIN = Text(DOMAIN_NAME_PATTERN, "a DNS name", lambda name: name.lower().rstrip("."))
CERTIFICATE = Text(CERTIFICATE_ARN_PATTERN, "an ACM certificate ARN")
BASE_URL = Text(BASE_URL_PATTERN, "https://host[:port]", lambda url: url.rstrip("/"))
EMAIL = Text(EMAIL_PATTERN, "an address")
SUBSYSTEM_NAME = Text(re.compile(".+", re.S), "a subsystem name")
ONE_MONTH = logs.RetentionDays.ONE_MONTH


@dataclass(frozen=True, slots=True)
class Subsystems(Check):
    """The minting subsystems: IBI_SUBSYSTEMS entries, distinct, that fit in the environment."""

    what: str = "a list of subsystems"

    def __call__(self, value: Any, path: str) -> tuple[Subsystem, ...]:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{path}: expected a list, got {value!r}")
        try:
            subsystems = tuple(
                item if isinstance(item, Subsystem) else Subsystem.from_mapping(item)
                for item in value
            )
        except InvalidInput as error:
            raise ConfigError(f"{path}: {error}") from None
        try:
            check_distinct(subsystems)
        except InvalidInput as error:
            raise ConfigError(f"{path}: {error.reason}") from None
        size = len(subsystems_json(subsystems).encode())
        if size > MAX_SUBSYSTEMS_JSON_BYTES:
            raise ConfigError(
                f"{path}: {size} bytes of JSON, more than the {MAX_SUBSYSTEMS_JSON_BYTES} that "
                "fit in the Lambda's environment"
            )
        return subsystems


@dataclass(frozen=True, slots=True)
class MintingConfig(Section):
    """What the minting service is deployed with (context key ``ibi:minting``)."""

    KEY: ClassVar[str] = MINTING_CONTEXT_KEY

    subsystems: Annotated[tuple[Subsystem, ...], Subsystems()] = DEFAULT_SUBSYSTEMS
    default_subsystem: Annotated[str, SUBSYSTEM_NAME] = "default"
    max_wait_seconds: Annotated[int, Whole(0, MAX_WAIT_LIMIT_SECONDS)] = 5
    log_retention: Annotated[logs.RetentionDays, RETENTION] = ONE_MONTH

    def check(self) -> None:
        names = [subsystem.name for subsystem in self.subsystems]
        if self.default_subsystem not in names:
            raise ConfigError(
                f"{self.KEY}.default_subsystem: {self.default_subsystem!r} is not one of {names}"
            )


@dataclass(frozen=True, slots=True)
class LifecycleConfig(Section):
    """How long the files bucket keeps noncurrent versions, and its access log its objects.

    Days before S3 deletes a noncurrent version (an object overwritten or deleted: the Archive
    keeps replaced files under history/ itself), and days the server access log is kept.
    """

    KEY: ClassVar[str] = f"{ARCHIVE_CONTEXT_KEY}.lifecycle"

    noncurrent_version_days: Annotated[int, Whole(1, 36500)] = 90
    access_log_days: Annotated[int, Whole(1, 36500)] = 365


@dataclass(frozen=True, slots=True)
class JoinConfig(Section):
    """The resolver an Archive joins when it starts (``ibi:archive.join``): its address, the
    SSM SecureString (name) holding the registration key, and optionally its service IBI (the
    path of its inclusion protocol; without it, the app's ``ibi:resolver.service_ibi``)."""

    KEY: ClassVar[str] = f"{ARCHIVE_CONTEXT_KEY}.join"

    resolver_url: Annotated[str, Text(re.compile(rf"{BASE_URL_PATTERN.pattern}/*"), "https://host")]
    registration_key_parameter: Annotated[
        str, Text(re.compile(r"/?[A-Za-z0-9_.\-/]{1,1000}"), "an SSM name")
    ]
    resolver_service_ibi: Annotated[str | None, Label()] = None


@dataclass(frozen=True, slots=True)
class LinkCheckConfig(Section):
    """How often the Archive checks its items' external URLs (``ibi:archive.link_check``):
    every ``every_hours`` hours (24: daily), or never (0: no schedule; ``ibi archive
    check-links`` still checks on demand). functions/archive/linkcheck.py."""

    KEY: ClassVar[str] = f"{ARCHIVE_CONTEXT_KEY}.link_check"

    every_hours: Annotated[int, Whole(0, 24 * 31)] = 24


@dataclass(frozen=True, slots=True)
class ArchiveConfig(Section):
    """What the Archive is deployed with (context key ``ibi:archive``).

    ``None`` leaves the Lambda's own default: the base URL is then the API's own domain, the
    Archive names no platform software, and it mints in the minting service's default
    subsystem.
    """

    KEY: ClassVar[str] = ARCHIVE_CONTEXT_KEY

    base_url: Annotated[str | None, BASE_URL] = None
    platform_software: Annotated[str | None, Label()] = None
    mint_subsystem: Annotated[str | None, SUBSYSTEM_NAME] = None
    urlkey_ttl_seconds: Annotated[int, Whole(*URLKEY_TTL_RANGE)] = URLKEY_TTL_SECONDS
    log_retention: Annotated[logs.RetentionDays, RETENTION] = ONE_MONTH
    join: Annotated[JoinConfig | None, Nested(JoinConfig)] = None
    lifecycle: Annotated[LifecycleConfig, Nested(LifecycleConfig)] = field(
        default_factory=LifecycleConfig
    )
    link_check: Annotated[LinkCheckConfig, Nested(LinkCheckConfig)] = field(
        default_factory=LinkCheckConfig
    )

    @property
    def join_resolver_url(self) -> str | None:
        return None if self.join is None else self.join.resolver_url

    @property
    def registration_key_parameter(self) -> str | None:
        return None if self.join is None else self.join.registration_key_parameter

    @property
    def join_resolver_service_ibi(self) -> str | None:
        return None if self.join is None else self.join.resolver_service_ibi

    def check_minting(self, minting: MintingConfig) -> None:
        """The subsystem the Archive mints in must be one the minting service knows."""
        names = [subsystem.name for subsystem in minting.subsystems]
        if self.mint_subsystem is not None and self.mint_subsystem not in names:
            raise ConfigError(
                f"{ARCHIVE_CONTEXT_KEY}.mint_subsystem: {self.mint_subsystem!r} is not one of "
                f"the {MINTING_CONTEXT_KEY} subsystems {names}"
            )


@dataclass(frozen=True, slots=True)
class ResolverConfig(Section):
    """What the resolver is deployed with (context key ``ibi:resolver``).

    ``domain_name`` and ``certificate_arn`` (an ACM certificate in the stack's region) go
    together: the custom domain of persistent URLs. Without them, persistent URLs are under
    the API's own ``execute-api`` address.
    """

    KEY: ClassVar[str] = RESOLVER_CONTEXT_KEY

    domain_name: Annotated[str | None, DOMAIN] = None
    certificate_arn: Annotated[str | None, CERTIFICATE] = None
    service_ibi: Annotated[str, Label()] = RESOLVER_SERVICE_IBI
    name: Annotated[
        str, Text(re.compile(r"\s*\S(.{0,98}\S)?\s*", re.S), "a name of 1-100 characters")
    ] = "IBI resolver"
    log_retention: Annotated[logs.RetentionDays, RETENTION] = ONE_MONTH

    def check(self) -> None:
        self.both_or_neither(
            "domain_name",
            "certificate_arn",
            " (the custom domain of persistent URLs and its ACM certificate), or neither",
        )

    @property
    def certificate_region(self) -> str | None:
        """The region of the certificate: an HTTP API's domain needs one in its own region."""
        if self.certificate_arn is None:
            return None
        match = CERTIFICATE_ARN_PATTERN.fullmatch(self.certificate_arn)
        assert match is not None  # checked above
        return match["region"]


@dataclass(frozen=True, slots=True)
class CiConfig(OptionalSection):
    """The CI role's one trusted workflow (context key ``ibi:ci``): GitHub Actions by OIDC.

    ``repository`` is ``OWNER/REPO``; exactly one of ``branch`` and ``environment`` names what
    may assume the role. ``provider_arn`` reuses the account's GitHub OIDC provider (an
    account has at most one); without it the stack creates it.
    """

    KEY: ClassVar[str] = CI_CONTEXT_KEY

    repository: Annotated[str, Text(GITHUB_REPOSITORY_PATTERN, "OWNER/REPO (no wildcard)")]
    branch: Annotated[
        str | None,
        Text(GITHUB_REF_PATTERN, "one branch (a plain name, no wildcard, no refs/ prefix)"),
    ] = None
    environment: Annotated[
        str | None,
        Text(GITHUB_ENVIRONMENT_PATTERN, "one environment (a plain name, no wildcard)"),
    ] = None
    provider_arn: Annotated[
        str | None,
        Text(
            GITHUB_PROVIDER_ARN_PATTERN,
            "the ARN of an IAM OIDC provider for token.actions.githubusercontent.com",
        ),
    ] = None

    def check(self) -> None:
        if (self.branch is None) == (self.environment is None):
            raise ConfigError(f"{self.KEY}: give exactly one of branch and environment")

    @property
    def subject(self) -> str:
        """The one ``sub`` claim the role trusts."""
        if self.branch is not None:
            return f"repo:{self.repository}:ref:refs/heads/{self.branch}"
        return f"repo:{self.repository}:environment:{self.environment}"


@dataclass(frozen=True, slots=True)
class OperationsConfig(Section):
    """Where alarms go (context key ``ibi:operations``): two SNS topics per stack, or nowhere.

    ``page_email`` (the on-call address) gets the alarms that mean readers are failing now
    (the canary, 5xx rates, a resolution path too slow); ``ticket_email`` (the team's list)
    gets the ones that can wait for working hours (errors, throttles, dead letters, a 409…).
    ``alarm_email`` is the address of both where the other is not given. Each topic publishes
    its alarms and their return to OK; AWS mails each address a confirmation link first.
    """

    KEY: ClassVar[str] = OPERATIONS_CONTEXT_KEY

    alarm_email: Annotated[str | None, EMAIL] = None
    page_email: Annotated[str | None, EMAIL] = None
    ticket_email: Annotated[str | None, EMAIL] = None

    @property
    def page_address(self) -> str | None:
        """Where paging alarms go: ``page_email``, else ``alarm_email``."""
        return self.page_email or self.alarm_email

    @property
    def ticket_address(self) -> str | None:
        """Where ticket alarms go: ``ticket_email``, else ``alarm_email``."""
        return self.ticket_email or self.alarm_email


OPERATIONS_FIELDS = field_names(OperationsConfig)


def subsystems_json(subsystems: Iterable[Subsystem]) -> str:
    """The IBI_SUBSYSTEMS value: a compact JSON list, one object per subsystem."""
    entries = []
    for subsystem in subsystems:
        mapping = subsystem.to_mapping()
        entries.append({name: mapping[name] for name in SUBSYSTEM_FIELDS})
    return json.dumps(entries, separators=(",", ":"))


def minting_config(scope: Construct) -> MintingConfig:
    """The minting settings from the context visible at ``scope``."""
    return MintingConfig.from_scope(scope)


def archive_config(scope: Construct) -> ArchiveConfig:
    """The Archive settings from the context visible at ``scope``."""
    return ArchiveConfig.from_scope(scope)


def resolver_config(scope: Construct) -> ResolverConfig:
    """The resolver settings from the context visible at ``scope``."""
    return ResolverConfig.from_scope(scope)


def ci_config(scope: Construct) -> CiConfig | None:
    """The CI role's settings from the context visible at ``scope``; ``None``: no CI role."""
    return CiConfig.from_scope(scope)


def operations_config(scope: Construct) -> OperationsConfig:
    """Where alarms go, from the context visible at ``scope``."""
    return OperationsConfig.from_scope(scope)


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
    Each field is a context key of its own, checked as a section's field is.
    """

    stage: str | None = None
    region: str | None = None
    account: str | None = None
    termination_protection: bool = False
    tags: tuple[tuple[str, str], ...] = ()

    CHECKS: ClassVar[dict[str, tuple[str, Check]]] = {
        "stage": (STAGE_CONTEXT_KEY, Text(STAGE_PATTERN, "a stage (a-z then a-z0-9, 1-16)")),
        "region": (REGION_CONTEXT_KEY, Text(REGION_PATTERN, "an AWS region")),
        "account": (ACCOUNT_CONTEXT_KEY, Text(ACCOUNT_PATTERN, "12 digits")),
    }

    def __post_init__(self) -> None:
        for name, (key, check) in self.CHECKS.items():
            if getattr(self, name) is not None:
                check(getattr(self, name), key)
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
        protection = _flag(
            get(TERMINATION_PROTECTION_CONTEXT_KEY), TERMINATION_PROTECTION_CONTEXT_KEY
        )
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
            termination_protection=stage in PRODUCTION_STAGES if protection is None else protection,
            tags=tuple(sorted((str(k), v) for k, v in (raw_tags or {}).items())),
        )


def _flag(raw: Any, key: str) -> bool | None:
    """A true/false context value (or their strings); ``None`` when unset."""
    if raw is None or isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in {"true", "false"}:
        return raw.lower() == "true"
    raise ConfigError(f"{key}: {raw!r} is not true or false")


def deployment_config(scope: Construct) -> DeploymentConfig:
    """The stage, environment, tags and protection from the context visible at ``scope``."""
    return DeploymentConfig.from_context(scope)


THROTTLE_CONTEXT_KEY = "ibi:throttle"
# API Gateway's own ceiling: 10,000 requests per second and a burst of 5,000 per account and
# region, shared by every API there. A route's limits cannot exceed them usefully.
THROTTLE_MAX_RATE = 10_000
THROTTLE_MAX_BURST = 5_000
RATE = Whole(1, THROTTLE_MAX_RATE)
BURST = Whole(1, THROTTLE_MAX_BURST)

Limit = tuple[int, int]  # requests per second, burst


@dataclass(frozen=True, slots=True)
class ThrottleConfig(Section):
    """The routes' throttles (context ``ibi:throttle``), in requests per second and burst.

    Each route has a bucket of its own (a route setting of its API's stage). ``public_*``:
    every unsigned route (persistent URLs, the service protocol, the pages) and the stage's
    default, which covers any route added later. ``signed_*``: every IAM route (the deposit
    API, the resolver's administration, every minting route) and the few unsigned ones only
    machines call rarely (the inclusion protocol, a transfer's confirmation). ``oai_*``: the
    Archive's OAI-PMH routes, whose requests read many rows. A request over a limit gets 429
    from API Gateway before the Lambda runs.
    """

    KEY: ClassVar[str] = THROTTLE_CONTEXT_KEY

    public_rate: Annotated[int, RATE] = 100
    public_burst: Annotated[int, BURST] = 200
    signed_rate: Annotated[int, RATE] = 20
    signed_burst: Annotated[int, BURST] = 40
    oai_rate: Annotated[int, RATE] = 5
    oai_burst: Annotated[int, BURST] = 10

    @property
    def public(self) -> Limit:
        return self.public_rate, self.public_burst

    @property
    def signed(self) -> Limit:
        return self.signed_rate, self.signed_burst

    @property
    def oai(self) -> Limit:
        return self.oai_rate, self.oai_burst


def throttle_config(scope: Construct) -> ThrottleConfig:
    """The APIs' throttles from the context visible at ``scope``."""
    return ThrottleConfig.from_scope(scope)


WAF_CONTEXT_KEY = "ibi:waf"
# AWS WAF's bounds for a rate-based rule's limit (requests per address per evaluation window).
WAF_LIMITS = (10, 2_000_000_000)
WAF_REGION = "us-east-1"  # a web ACL of CloudFront scope, and a distribution's certificate


@dataclass(frozen=True, slots=True)
class EdgeCertificate(Check):
    """A CloudFront distribution's certificate: an ACM certificate in us-east-1."""

    what: str = f"an ACM certificate ARN in {WAF_REGION}"

    def __call__(self, value: Any, path: str) -> str:
        arn: str = CERTIFICATE(value, path)
        region = CERTIFICATE_ARN_PATTERN.fullmatch(arn)["region"]  # type: ignore[index]
        if region != WAF_REGION:
            raise ConfigError(
                f"{path}: the certificate is in {region}; CloudFront takes one in "
                f"{WAF_REGION} only (request or import it there)"
            )
        return arn


@dataclass(frozen=True, slots=True)
class WafConfig(OptionalSection):
    """The edge (context ``ibi:waf``): a stack in us-east-1 whose CloudFront distributions,
    with a rate-based web ACL, front the resolver's public routes and, given
    ``archive_domain_name``, the Archive's (``infra/edge.py``). The regional stacks may be in
    any region. ``rate_limit``: requests per client address per 5 minutes to the resolver;
    over it, ``429`` with ``Retry-After``. ``archive_rate_limit``: the same for the Archive,
    whose callers are resolvers, a few addresses making many requests. The Archive's
    distribution needs a domain of its own and a certificate for it in us-east-1: the
    Archive's links must name the distribution, never the API it fronts."""

    KEY: ClassVar[str] = WAF_CONTEXT_KEY

    rate_limit: Annotated[int, Whole(*WAF_LIMITS)] = 1000
    retry_after_seconds: Annotated[int, Whole(1, 3600)] = 60
    archive_domain_name: Annotated[str | None, DOMAIN] = None
    archive_certificate_arn: Annotated[str | None, EdgeCertificate()] = None
    archive_rate_limit: Annotated[int, Whole(*WAF_LIMITS)] = 20_000
    log_retention: Annotated[logs.RetentionDays, RETENTION] = ONE_MONTH

    def check(self) -> None:
        self.both_or_neither(
            "archive_domain_name",
            "archive_certificate_arn",
            ", or neither (the Archive is then not behind the edge)",
        )

    @classmethod
    def from_context(cls, raw: Any) -> WafConfig | None:
        """``None`` (absent, null or false): no edge stack; ``true``: the defaults."""
        if raw is None or raw is False or raw == "false":
            return None
        return cls() if raw is True or raw == "true" else read(cls, raw)


def waf_config(scope: Construct) -> WafConfig | None:
    """The edge's settings, or ``None`` when there is no edge."""
    return WafConfig.from_scope(scope)


SNAPSTART_CONTEXT_KEY = "ibi:snapstart"


def snapstart_enabled(scope: Construct) -> bool:
    """``ibi:snapstart``: true/false (or their strings); off when unset."""
    return bool(_flag(scope.node.try_get_context(SNAPSTART_CONTEXT_KEY), SNAPSTART_CONTEXT_KEY))


TRACING_CONTEXT_KEY = "ibi:tracing"


def tracing_enabled(scope: Construct) -> bool:
    """``ibi:tracing``: X-Ray active tracing of every function (true/false); off when unset.

    On, each function samples by the account's X-Ray sampling rules (by default the first
    request each second and 5% of the rest): about 3 traces per resolution at low traffic,
    priced in docs/scale.md. Off, the functions send no segments and need no X-Ray grant.
    """
    return bool(_flag(scope.node.try_get_context(TRACING_CONTEXT_KEY), TRACING_CONTEXT_KEY))


CONCURRENCY_CONTEXT_KEY = "ibi:concurrency"
# Lambda keeps at least 100 of an account's concurrency unreserved (10 on a new account with a
# limit of 10, where nothing can be reserved): a reservation is at most the limit less that.
CONCURRENCY_MAX = 10_000
RESERVATION = Whole(1, CONCURRENCY_MAX)


@dataclass(frozen=True, slots=True)
class ConcurrencyConfig(Section):
    """Reserved concurrency per function (context ``ibi:concurrency``), ``None``: none.

    A reservation is both a floor and a ceiling: the minting and resolver functions keep
    their share of the account's concurrency whatever an Archive does, and an Archive held up
    by slow callers cannot take more than its own. Unset (the default), every function draws
    on the account's unreserved pool, as a new account (concurrency limit 10) requires.
    """

    KEY: ClassVar[str] = CONCURRENCY_CONTEXT_KEY

    minting: Annotated[int | None, RESERVATION] = None
    archive: Annotated[int | None, RESERVATION] = None
    resolver: Annotated[int | None, RESERVATION] = None


def concurrency_config(scope: Construct) -> ConcurrencyConfig:
    """The functions' reserved concurrency from the context visible at ``scope``."""
    return ConcurrencyConfig.from_scope(scope)


CANARY_CONTEXT_KEY = "ibi:canary"


@dataclass(frozen=True, slots=True)
class CanaryConfig(OptionalSection):
    """The canary (context ``ibi:canary``): every ``every_minutes`` a function of the resolver
    stack resolves ``ibi`` at ``resolver_url`` as a reader would (the resolver's 302, then the
    Archive's file) and publishes whether it got the file (``infra/canary.py``).

    ``ibi`` is an IBI this deployment holds (deposit one first); ``resolver_url`` is where
    readers resolve (default: the custom domain, or the API's own address when nothing fronts
    it; behind the edge without a custom domain, the edge stack's ``EdgeUrl``, given here).
    """

    KEY: ClassVar[str] = CANARY_CONTEXT_KEY

    ibi: Annotated[str, Label("an IBI this deployment holds")]
    resolver_url: Annotated[
        str | None,
        Text(
            re.compile(r"https://[A-Za-z0-9.-]+(:\d{1,5})?/"),
            "https://host/",
            lambda url: url.rstrip("/") + "/",
        ),
    ] = None
    every_minutes: Annotated[int, Whole(1, 60)] = 5


def canary_config(scope: Construct) -> CanaryConfig | None:
    """The canary's settings, or ``None`` when there is no canary."""
    return CanaryConfig.from_scope(scope)
