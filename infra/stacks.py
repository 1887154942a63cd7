"""The stacks, and the one place that wires them into an app with its checks.

Stacks made of the services' constructs: ``IbiArchive`` (an Archive with a minting service of
its own) and ``IbiResolver`` by default; ``IbiMinting`` (a minting service alone) on request
(context ``ibi:stacks``). ``IbiMinting`` and ``IbiArchive`` are never in one app: each keeps
its own minting state, and two minting services for one subsystem would issue the same labels.
Each stack has its dashboard and alarms; the CI role (``ibi:ci``) goes into the stack that
mints, ``IbiArchive`` or ``IbiMinting``.

A stage (``ibi:stage``) suffixes every stack id (``IbiArchive-staging``), hence every name made
from the stack name; without one the ids are the ones above, as deployed before stages
existed. ``ibi:region``/``ibi:account`` pin the environment, ``ibi:tags`` tag every resource,
production stages are protected from termination; every API is throttled (``ibi:throttle``)
and the resolver may sit behind a rate-limited CloudFront distribution (``ibi:waf``).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, CfnOutput, Duration, Environment, Stack, Tags, Token, Validations
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from ibi.defaults import RESOLVER_SERVICE_IBI
from infra.archive import Archive, grant_mint
from infra.ci import CiMinter
from infra.config import (
    REGION_CONTEXT_KEY,
    RESOLVER_CONTEXT_KEY,
    WAF_CONTEXT_KEY,
    WAF_REGION,
    ArchiveConfig,
    CiConfig,
    ConfigError,
    DeploymentConfig,
    LifecycleConfig,
    MintingConfig,
    OperationsConfig,
    ResolverConfig,
    ThrottleConfig,
    WafConfig,
    archive_config,
    ci_config,
    deployment_config,
    minting_config,
    operations_config,
    resolver_config,
    stacks_config,
    throttle_config,
    waf_config,
)
from infra.edge import RateLimitedEdge
from infra.minting import MintingService
from infra.operations import Operations, Watched
from infra.resolver import DEADLINE_SECONDS, Resolver
from infra.throttling import throttle

MINTING_STACK_ID = "IbiMinting"
ARCHIVE_STACK_ID = "IbiArchive"
RESOLVER_STACK_ID = "IbiResolver"
STACK_DESCRIPTIONS = {
    MINTING_STACK_ID: "IBI minting service: HTTP API (IAM auth), Lambda, DynamoDB tables",
    ARCHIVE_STACK_ID: "IBI Archive with its own minting service: HTTP APIs, Lambdas, S3",
    RESOLVER_STACK_ID: "IBI resolver: HTTP API (public URLs, IAM admin), Lambda, DynamoDB",
}


def _minting_service(scope: Construct, config: MintingConfig) -> MintingService:
    return MintingService(
        scope,
        "Minting",
        subsystems=config.subsystems,
        default_subsystem=config.default_subsystem,
        max_wait_seconds=config.max_wait_seconds,
        log_retention=config.log_retention,
    )


def _outputs(stack: Stack, outputs: dict[str, tuple[str, str]]) -> None:
    for output_id, (value, description) in outputs.items():
        CfnOutput(stack, output_id, value=value, description=description)


def _ci_minter(
    stack: Stack, config: CiConfig | None, minting: MintingService, archive: Archive | None = None
) -> CiMinter | None:
    """The CI role, when ``ibi:ci`` asks for one, and its ARN as an output."""
    if config is None:
        return None
    ci = CiMinter(stack, "Ci", config=config, minting=minting, archive=archive)
    CfnOutput(
        stack,
        "CiRoleArn",
        value=ci.role.role_arn,
        description=f"role-to-assume of the CI workflow ({config.subject})",
    )
    return ci


class MintingStack(Stack):
    """The minting service and the outputs a caller needs to reach it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: MintingConfig,
        ci: CiConfig | None = None,
        operations: OperationsConfig | None = None,
        throttles: ThrottleConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.minting = _minting_service(self, config)
        # Every minting route is IAM-authorized: the signed limits are the stage's.
        throttle(self.minting.stage, throttles or ThrottleConfig(), default_signed=True)
        self.operations = Operations(
            self,
            "Operations",
            watched=[Watched("minting", self.minting.function, self.minting.api)],
            alarm_email=(operations or OperationsConfig()).alarm_email,
        )
        self.ci = _ci_minter(self, ci, self.minting)
        _outputs(
            self,
            {
                "ApiUrl": (self.minting.url, "Base URL of the minting API (IAM/SigV4 auth)"),
                "MintUrl": (self.minting.mint_url, "POST here to mint an IBI"),
                "StateTableName": (self.minting.state_table.table_name, "Subsystem state"),
                "RecordTableName": (self.minting.record_table.table_name, "The mint record"),
                "IdempotencyTableName": (
                    self.minting.idempotency_table.table_name,
                    "Idempotency records of POST /mint",
                ),
                "FunctionName": (self.minting.function.function_name, "The minting Lambda"),
            },
        )


class ArchiveStack(Stack):
    """An Archive and the minting service it mints its items' IBIs through."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ArchiveConfig,
        minting: MintingConfig,
        ci: CiConfig | None = None,
        operations: OperationsConfig | None = None,
        throttles: ThrottleConfig | None = None,
        resolver_service_ibi: str = RESOLVER_SERVICE_IBI,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config.check_minting(minting)
        self.minting = _minting_service(self, minting)
        self.archive = Archive(
            self,
            "Archive",
            mint_endpoint=self.minting.url,
            mint_subsystem=config.mint_subsystem,
            # Its own subsystems: the only IBIs it takes an original for without a transfer or
            # an operator's import (functions/archive/service.py).
            subsystem_prefixes=[
                prefix for s in minting.subsystems for prefix in (s.rep_prefix, s.ibip_prefix)
            ],
            base_url=config.base_url,
            platform_software=config.platform_software,
            urlkey_ttl_seconds=config.urlkey_ttl_seconds,
            log_retention=config.log_retention,
            join_resolver_url=config.join_resolver_url,
            registration_key_parameter=config.registration_key_parameter,
            resolver_service_ibi=config.join_resolver_service_ibi or resolver_service_ibi,
        )
        grant_mint(self.minting, self.archive.role)
        self._limit(config.lifecycle, throttles or ThrottleConfig())
        self.operations = Operations(
            self,
            "Operations",
            watched=[
                Watched("minting", self.minting.function, self.minting.api),
                Watched("archive", self.archive.function, self.archive.api),
            ],
            alarm_email=(operations or OperationsConfig()).alarm_email,
        )
        self.ci = _ci_minter(self, ci, self.minting, self.archive)
        _outputs(
            self,
            {
                "ArchiveUrl": (
                    self.archive.url,
                    "Base URL of the Archive: its service protocol and pages (public), and "
                    "the endpoint of `ibi deposit` (IBI_ARCHIVE_ENDPOINT)",
                ),
                "DepositApiUrl": (
                    self.archive.deposit_url,
                    "The deposit API under the Archive's URL (IAM/SigV4 auth)",
                ),
                "ItemsTableName": (self.archive.items_table.table_name, "The Archive's items"),
                "FilesBucketName": (
                    self.archive.files_bucket.bucket_name,
                    "The files of the items (under items/)",
                ),
                "FilesAccessLogsBucketName": (
                    self.archive.access_logs_bucket.bucket_name,
                    "Server access log of the files bucket",
                ),
                "ArchiveFunctionName": (self.archive.function.function_name, "The Archive Lambda"),
                "MintingApiUrl": (
                    self.minting.url,
                    "Base URL of the Archive's minting API (IAM/SigV4 auth)",
                ),
                "MintUrl": (self.minting.mint_url, "POST here to mint an IBI"),
                "MintingFunctionName": (
                    self.minting.function.function_name,
                    "The minting Lambda",
                ),
            },
        )

    def _limit(self, lifecycle: LifecycleConfig, throttles: ThrottleConfig) -> None:
        """The APIs' throttles, and how long the buckets keep old versions and logs."""
        throttle(self.minting.stage, throttles, default_signed=True)
        throttle(self.archive.stage, throttles, signed=self.archive.deposit_routes)
        _lifecycle(self.archive.files_bucket, self.archive.access_logs_bucket, lifecycle)


class ResolverStack(Stack):
    """The resolver and the outputs its users and administrators need."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ResolverConfig | None = None,
        operations: OperationsConfig | None = None,
        throttles: ThrottleConfig | None = None,
        waf: WafConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config = config or ResolverConfig()
        _check_certificate_region(self, config)
        _check_waf_region(self, waf)
        self.resolver = Resolver(
            self,
            "Resolver",
            service_ibi=config.service_ibi,
            name=config.name,
            domain_name=config.domain_name,
            certificate_arn=config.certificate_arn,
            log_retention=config.log_retention,
        )
        throttle(
            self.resolver.stage, throttles or ThrottleConfig(), signed=self.resolver.admin_routes
        )
        self.operations = Operations(
            self,
            "Operations",
            watched=[
                Watched(
                    "resolver",
                    self.resolver.function,
                    self.resolver.api,
                    # The fan-out stops at 80% of the deadline: a p99 there means Archives
                    # that make every resolution wait for them.
                    latency=Duration.millis(DEADLINE_SECONDS * 800),
                    client_errors=True,
                    dead_letters=self.resolver.dead_letters,
                )
            ],
            alarm_email=(operations or OperationsConfig()).alarm_email,
        )
        outputs = {
            "ResolverUrl": (
                self.resolver.url,
                "Base of persistent URLs: <ResolverUrl><ibi> (the custom domain if one is set)",
            ),
            "ResolverApiUrl": (
                self.resolver.api_url,
                "The API's own address: --endpoint of ibi resolver register (IAM/SigV4)",
            ),
            "AdminUrl": (
                f"{self.resolver.api_url}admin/archives",
                "Register Archives here (IAM/SigV4): ibi resolver register",
            ),
            "RegistryTableName": (self.resolver.registry_table.table_name, "The registry"),
            "PepperSecretArn": (
                self.resolver.pepper.secret_arn,
                "HMAC key under which registration keys are kept (retained; never rotate it "
                "automatically)",
            ),
            "ResolverFunctionName": (self.resolver.function.function_name, "The Lambda"),
            "AcknowledgmentDeadLettersArn": (
                self.resolver.dead_letters.queue_arn,
                "Acknowledgments that failed 5 deliveries: --source-arn of "
                "aws sqs start-message-move-task to redrive them",
            ),
        }
        self.edge: RateLimitedEdge | None = None
        if waf is not None:
            self.edge = RateLimitedEdge(self, "Edge", api=self.resolver.api, config=waf)
        _outputs(self, {**outputs, **self._entry_outputs(config)})

    def _entry_outputs(self, config: ResolverConfig) -> dict[str, tuple[str, str]]:
        """Where the public enters besides the API: the distribution, the custom domain."""
        outputs: dict[str, tuple[str, str]] = {}
        if self.edge is not None:
            outputs["EdgeUrl"] = (
                self.edge.url,
                "The resolver behind CloudFront and its rate-based WAF rule (ibi:waf): "
                "publish this, or point the custom domain's DNS here",
            )
        if self.resolver.domain is not None:
            outputs["DomainTarget"] = (
                self.resolver.domain.regional_domain_name,
                f"Point {config.domain_name} here: a CNAME, or a Route 53 alias with "
                "DomainHostedZoneId",
            )
            outputs["DomainHostedZoneId"] = (
                self.resolver.domain.regional_hosted_zone_id,
                "Hosted zone of DomainTarget, for a Route 53 alias record",
            )
        return outputs


def _check_waf_region(stack: Stack, waf: WafConfig | None) -> None:
    """A web ACL of CloudFront scope can only be made in us-east-1."""
    if waf is not None and stack.region != WAF_REGION:
        raise ConfigError(
            f"{WAF_CONTEXT_KEY} needs {REGION_CONTEXT_KEY}={WAF_REGION}: a web ACL for "
            "CloudFront exists only there (the stack's region: "
            f"{'not pinned' if Token.is_unresolved(stack.region) else stack.region})"
        )


def _check_certificate_region(stack: Stack, config: ResolverConfig) -> None:
    """A custom domain's certificate must be in the stack's region, which must be known.

    An environment-agnostic stack's region is only known at deploy time, where a certificate
    of another region fails the deploy halfway: a domain needs ``ibi:region``.
    """
    region = config.certificate_region
    if region is None:
        return
    if Token.is_unresolved(stack.region):
        raise ConfigError(
            f"{RESOLVER_CONTEXT_KEY}.domain_name needs {REGION_CONTEXT_KEY}: the stack must "
            f"know its region to check that the certificate (in {region}) is there"
        )
    if region != stack.region:
        raise ConfigError(
            f"{RESOLVER_CONTEXT_KEY}.certificate_arn: the certificate is in {region}, the "
            f"stack in {stack.region}; an HTTP API's domain needs one in its own region"
        )


def _lifecycle(files: s3.Bucket, access_logs: s3.Bucket, config: LifecycleConfig) -> None:
    """Expire the files bucket's noncurrent versions and the access log's old objects."""
    files.add_lifecycle_rule(
        id="ExpireNoncurrentVersions",
        noncurrent_version_expiration=Duration.days(config.noncurrent_version_days),
    )
    access_logs.add_lifecycle_rule(
        id="ExpireAccessLogs", expiration=Duration.days(config.access_log_days)
    )


def build_app(app: App) -> App:
    """Add the chosen stacks to ``app`` (context ``ibi:stacks``), and the cdk-nag checks.

    Each stack's id is its base id for the stage (``ibi:stage``: ``IbiArchive-staging``), in
    the environment of ``ibi:region``/``ibi:account`` if given, tagged, and protected from
    termination in production (:class:`infra.config.DeploymentConfig`).
    """
    chosen = stacks_config(app)
    deployment = deployment_config(app)
    common = {"operations": operations_config(app), "throttles": throttle_config(app)}
    stacks: list[Stack] = []
    if "minting" in chosen:
        options = {**common, **_stack_options(MINTING_STACK_ID, deployment)}
        stacks.append(
            MintingStack(
                app,
                deployment.stack_id(MINTING_STACK_ID),
                config=minting_config(app),
                ci=ci_config(app),
                **options,
            )
        )
    if "archive" in chosen:
        archive, minting = archive_config(app), minting_config(app)
        options = {"ci": ci_config(app), **common, **_stack_options(ARCHIVE_STACK_ID, deployment)}
        stacks.append(
            ArchiveStack(
                app,
                deployment.stack_id(ARCHIVE_STACK_ID),
                config=archive,
                minting=minting,
                resolver_service_ibi=resolver_config(app).service_ibi,
                **options,
            )
        )
    if "resolver" in chosen:
        options = {**common, **_stack_options(RESOLVER_STACK_ID, deployment)}
        stacks.append(
            ResolverStack(
                app,
                deployment.stack_id(RESOLVER_STACK_ID),
                config=resolver_config(app),
                waf=waf_config(app),
                **options,
            )
        )
    for stack in stacks:
        for key, value in deployment.all_tags.items():
            Tags.of(stack).add(key, value)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def _stack_options(stack_id: str, deployment: DeploymentConfig) -> dict[str, Any]:
    description = STACK_DESCRIPTIONS[stack_id]
    if deployment.stage is not None:
        description = f"{description} (stage {deployment.stage})"
    options: dict[str, Any] = {
        "description": description,
        "termination_protection": deployment.termination_protection,
    }
    if deployment.region is not None or deployment.account is not None:
        options["env"] = Environment(account=deployment.account, region=deployment.region)
    return options
