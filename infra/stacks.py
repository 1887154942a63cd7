"""The stacks, and the one place that wires them into an app with its checks.

Stacks made of the services' constructs: ``IbiArchive`` (an Archive with a minting service of
its own) and ``IbiResolver`` by default; ``IbiMinting`` (a minting service alone) on request
(context ``ibi:stacks``). ``IbiMinting`` and ``IbiArchive`` are never in one app: each keeps
its own minting state, and two minting services for one subsystem would issue the same labels.
Each stack has its dashboard and alarms; the CI role (``ibi:ci``) goes into the stack that
mints, ``IbiArchive`` or ``IbiMinting``; the canary (``ibi:canary``) into ``IbiResolver``.

A stage (``ibi:stage``) suffixes every stack id (``IbiArchive-staging``), hence every name made
from the stack name; without one the ids are the ones above, as deployed before stages
existed. A stage's settings come from ``stages/<stage>.json`` (infra/guardrails.py).
``ibi:region``/``ibi:account`` pin the environment, ``ibi:tags`` tag every resource,
production stages are protected from termination and refuse documentation values; every
route is throttled (``ibi:throttle``), and with ``ibi:waf`` an edge stack in us-east-1
(``IbiEdge``, infra/edge.py) fronts the resolver, and the Archive, in their region.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, CfnOutput, Duration, Environment, Stack, Tags, Token, Validations
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from ibi.defaults import RESOLVER_SERVICE_IBI
from infra.archive import Archive, grant_mint
from infra.canary import Canary
from infra.ci import CiMinter
from infra.config import (
    CANARY_CONTEXT_KEY,
    REGION_CONTEXT_KEY,
    RESOLVER_CONTEXT_KEY,
    WAF_CONTEXT_KEY,
    WAF_REGION,
    ArchiveConfig,
    CanaryConfig,
    CiConfig,
    ConcurrencyConfig,
    ConfigError,
    DeploymentConfig,
    LifecycleConfig,
    MintingConfig,
    OperationsConfig,
    ResolverConfig,
    ThrottleConfig,
    WafConfig,
    archive_config,
    canary_config,
    ci_config,
    concurrency_config,
    deployment_config,
    minting_config,
    operations_config,
    resolver_config,
    stacks_config,
    throttle_config,
    waf_config,
)
from infra.edge import EdgeStack, Front, OriginVerify
from infra.guardrails import apply_stage_settings, check_context_keys, check_production
from infra.minting import MintingService
from infra.operations import Operations, Watched
from infra.resolver import DEADLINE_SECONDS, Resolver
from infra.throttling import throttle

MINTING_STACK_ID = "IbiMinting"
ARCHIVE_STACK_ID = "IbiArchive"
RESOLVER_STACK_ID = "IbiResolver"
EDGE_STACK_ID = "IbiEdge"
STACK_DESCRIPTIONS = {
    MINTING_STACK_ID: "IBI minting service: HTTP API (IAM auth), Lambda, DynamoDB tables",
    ARCHIVE_STACK_ID: "IBI Archive with its own minting service: HTTP APIs, Lambdas, S3",
    RESOLVER_STACK_ID: "IBI resolver: HTTP API (public URLs, IAM admin), Lambda, DynamoDB",
    EDGE_STACK_ID: "IBI edge: CloudFront and a rate-based WAF web ACL (us-east-1)",
}


def _minting_service(
    scope: Construct, config: MintingConfig, concurrency: ConcurrencyConfig
) -> MintingService:
    return MintingService(
        scope,
        "Minting",
        subsystems=config.subsystems,
        default_subsystem=config.default_subsystem,
        max_wait_seconds=config.max_wait_seconds,
        log_retention=config.log_retention,
        reserved_concurrency=concurrency.minting,
    )


def _throttle_minting(minting: MintingService, throttles: ThrottleConfig) -> None:
    """Every minting route is IAM-authorized: the signed limits, but the public document's."""
    throttle(
        minting.stage,
        default=throttles.signed,
        routes=[(minting.routes, throttles.signed), (minting.public_routes, throttles.public)],
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
        concurrency: ConcurrencyConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.minting = _minting_service(self, config, concurrency or ConcurrencyConfig())
        _throttle_minting(self.minting, throttles or ThrottleConfig())
        self.operations = Operations(
            self,
            "Operations",
            watched=[
                Watched(
                    "minting",
                    self.minting.function,
                    self.minting.api,
                    access_logs=self.minting.access_logs,
                )
            ],
            config=operations,
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
    """An Archive and the minting service it mints its items' IBIs through.

    With an edge that fronts the Archive (``ibi:waf.archive_domain_name``), the public routes
    take the edge's origin check and the Archive's base URL is that domain.
    """

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
        concurrency: ConcurrencyConfig | None = None,
        waf: WafConfig | None = None,
        resolver_service_ibi: str = RESOLVER_SERVICE_IBI,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config.check_minting(minting)
        concurrency = concurrency or ConcurrencyConfig()
        self.minting = _minting_service(self, minting, concurrency)
        self.origin: OriginVerify | None = None
        self.edge_domain = waf.archive_domain_name if waf is not None else None
        base_url = config.base_url
        if self.edge_domain is not None:
            _check_edge_region(self)
            base_url = _edge_base_url(config, self.edge_domain)
            self.origin = OriginVerify(self, "OriginVerify", log_retention=config.log_retention)
        self.archive = Archive(
            self,
            "Archive",
            mint_endpoint=self.minting.url,
            mint_subsystem=config.mint_subsystem,
            # Its own subsystems: the only IBIs it takes an original for without a transfer or
            # an operator's import (functions/archive/deposits.py).
            subsystem_prefixes=[
                prefix for s in minting.subsystems for prefix in (s.rep_prefix, s.ibip_prefix)
            ],
            base_url=base_url,
            platform_software=config.platform_software,
            urlkey_ttl_seconds=config.urlkey_ttl_seconds,
            log_retention=config.log_retention,
            join_resolver_url=config.join_resolver_url,
            registration_key_parameter=config.registration_key_parameter,
            resolver_service_ibi=config.join_resolver_service_ibi or resolver_service_ibi,
            reserved_concurrency=concurrency.archive,
            public_authorizer=self.origin.authorizer if self.origin else None,
            link_check_every_hours=config.link_check.every_hours,
        )
        grant_mint(self.minting, self.archive.role)
        self._limit(config.lifecycle, throttles or ThrottleConfig())
        self.operations = Operations(
            self,
            "Operations",
            watched=[
                Watched(
                    "minting",
                    self.minting.function,
                    self.minting.api,
                    access_logs=self.minting.access_logs,
                ),
                Watched(
                    "archive",
                    self.archive.function,
                    self.archive.api,
                    access_logs=self.archive.access_logs,
                ),
            ],
            config=operations,
        )
        if self.archive.link_check_every is not None:
            self.operations.watch_links(self.archive.link_check_every)
        self.ci = _ci_minter(self, ci, self.minting, self.archive)
        self._add_outputs()

    def _add_outputs(self) -> None:
        _outputs(
            self,
            {
                "ArchiveUrl": (
                    f"https://{self.edge_domain}/" if self.edge_domain else self.archive.url,
                    "Base URL of the Archive: its service protocol and pages (public), and "
                    "the endpoint of `ibi deposit` (IBI_ARCHIVE_ENDPOINT)",
                ),
                "ArchiveApiUrl": (
                    self.archive.url,
                    "The Archive API's own address: the deposit API under it (IAM/SigV4); "
                    "behind the edge its public routes answer the edge only",
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
        """The routes' throttles, and how long the buckets keep old versions and logs."""
        _throttle_minting(self.minting, throttles)
        archive = self.archive
        throttle(
            archive.stage,
            default=throttles.public,
            routes=[
                (archive.public_routes, throttles.public),
                (archive.oai_routes, throttles.oai),
                (archive.confirm_routes, throttles.signed),
                (archive.deposit_routes, throttles.signed),
            ],
        )
        _lifecycle(self.archive.files_bucket, self.archive.access_logs_bucket, lifecycle)


def _edge_base_url(config: ArchiveConfig, domain: str) -> str:
    """Behind the edge the Archive's links name its domain there, and nothing else."""
    base_url = f"https://{domain}"
    if config.base_url is not None and config.base_url != base_url:
        raise ConfigError(
            f"ibi:archive.base_url is {config.base_url}, but the edge fronts the Archive at "
            f"{base_url} ({WAF_CONTEXT_KEY}.archive_domain_name): leave base_url out, or give "
            "the same"
        )
    return base_url


class ResolverStack(Stack):
    """The resolver and the outputs its users and administrators need.

    With ``waf`` (``ibi:waf``) the resolver's public routes take the edge's origin check, and
    its custom domain, if any, goes on the edge's distribution (a us-east-1 certificate), not
    on the API.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ResolverConfig | None = None,
        operations: OperationsConfig | None = None,
        throttles: ThrottleConfig | None = None,
        waf: WafConfig | None = None,
        canary: CanaryConfig | None = None,
        concurrency: ConcurrencyConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config = config or ResolverConfig()
        self.origin: OriginVerify | None = None
        if waf is None:
            _check_certificate_region(self, config)
        else:
            _check_edge_region(self)
            _check_edge_certificate(config)
            self.origin = OriginVerify(self, "OriginVerify", log_retention=config.log_retention)
        on_api = waf is None and config.domain_name is not None
        self.resolver = Resolver(
            self,
            "Resolver",
            service_ibi=config.service_ibi,
            name=config.name,
            domain_name=config.domain_name if on_api else None,
            certificate_arn=config.certificate_arn if on_api else None,
            log_retention=config.log_retention,
            reserved_concurrency=(concurrency or ConcurrencyConfig()).resolver,
            public_authorizer=self.origin.authorizer if self.origin else None,
        )
        self._throttle(throttles or ThrottleConfig())
        # Where readers resolve: the custom domain (on the API or the edge), else the API's
        # own address; behind the edge without a domain, only the edge stack knows it.
        self.public_url: str | None = (
            f"https://{config.domain_name}/" if config.domain_name else None
        )
        if waf is None and self.public_url is None:
            self.public_url = self.resolver.url
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
                    latency_pages=True,
                    client_errors=True,
                    queue=self.resolver.acknowledgment_queue,
                    dead_letters=self.resolver.dead_letters,
                    access_logs=self.resolver.access_logs,
                )
            ],
            config=operations,
        )
        self.canary = self._canary(canary, config)
        self._add_outputs(config)

    def _throttle(self, throttles: ThrottleConfig) -> None:
        throttle(
            self.resolver.stage,
            default=throttles.public,
            routes=[
                (self.resolver.public_routes, throttles.public),
                (self.resolver.protocol_routes, throttles.signed),
                (self.resolver.admin_routes, throttles.signed),
            ],
        )

    def _add_outputs(self, config: ResolverConfig) -> None:
        outputs = {
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
                "Acknowledgments that failed every delivery: --source-arn of "
                "aws sqs start-message-move-task to redrive them",
            ),
        }
        if self.public_url is not None:
            outputs["ResolverUrl"] = (
                self.public_url,
                "Base of persistent URLs: <ResolverUrl><ibi> (the custom domain if one is set)",
            )
        _outputs(self, {**outputs, **self._domain_outputs(config)})

    def _canary(self, config: CanaryConfig | None, resolver: ResolverConfig) -> Canary | None:
        """The canary, resolving at its own URL or where readers resolve."""
        if config is None:
            return None
        url = config.resolver_url or self.public_url
        if url is None:
            raise ConfigError(
                f"{CANARY_CONTEXT_KEY}.resolver_url: behind the edge without "
                f"{RESOLVER_CONTEXT_KEY}.domain_name, give the edge's address (the "
                f"ResolverEdgeUrl output of {EDGE_STACK_ID})"
            )
        canary = Canary(self, "Canary", config=config, resolver_url=url)
        self.operations.watch_canary(canary.function, canary.every)
        return canary

    def _domain_outputs(self, config: ResolverConfig) -> dict[str, tuple[str, str]]:
        """Where to point the custom domain when it is on the API (the edge says its own)."""
        if self.resolver.domain is None:
            return {}
        return {
            "DomainTarget": (
                self.resolver.domain.regional_domain_name,
                f"Point {config.domain_name} here: a CNAME, or a Route 53 alias with "
                "DomainHostedZoneId",
            ),
            "DomainHostedZoneId": (
                self.resolver.domain.regional_hosted_zone_id,
                "Hosted zone of DomainTarget, for a Route 53 alias record",
            ),
        }


def _check_edge_region(stack: Stack) -> None:
    """The edge stack reads the stack's outputs in its region: it must be known."""
    if Token.is_unresolved(stack.region):
        raise ConfigError(
            f"{WAF_CONTEXT_KEY} needs {REGION_CONTEXT_KEY}: the edge stack in {WAF_REGION} "
            "reads the APIs it fronts from their stacks, in a region it must know (any region)"
        )


def _check_edge_certificate(config: ResolverConfig) -> None:
    """Behind the edge the custom domain is the distribution's: a us-east-1 certificate."""
    region = config.certificate_region
    if region is not None and region != WAF_REGION:
        raise ConfigError(
            f"{RESOLVER_CONTEXT_KEY}.certificate_arn: with {WAF_CONTEXT_KEY} the domain is "
            f"CloudFront's, whose certificate must be in {WAF_REGION} (this one is in {region})"
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

    First the guardrails (infra/guardrails.py): every ``ibi:`` key known, the stage's
    committed settings applied, a production stage free of documentation values. Each stack's
    id is its base id for the stage (``ibi:stage``: ``IbiArchive-staging``), in the
    environment of ``ibi:region``/``ibi:account`` if given, tagged, and protected from
    termination in production (:class:`infra.config.DeploymentConfig`).
    """
    check_context_keys(app)
    apply_stage_settings(app)
    check_production(app)
    chosen = stacks_config(app)
    deployment = deployment_config(app)
    waf = waf_config(app)
    common = {
        "operations": operations_config(app),
        "throttles": throttle_config(app),
        "concurrency": concurrency_config(app),
    }
    stacks: list[Stack] = []
    archive_stack: ArchiveStack | None = None
    resolver_stack: ResolverStack | None = None
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
        archive_stack = ArchiveStack(
            app,
            deployment.stack_id(ARCHIVE_STACK_ID),
            config=archive,
            minting=minting,
            waf=waf,
            resolver_service_ibi=resolver_config(app).service_ibi,
            **options,
        )
        stacks.append(archive_stack)
    if "resolver" in chosen:
        options = {**common, **_stack_options(RESOLVER_STACK_ID, deployment)}
        resolver_stack = ResolverStack(
            app,
            deployment.stack_id(RESOLVER_STACK_ID),
            config=resolver_config(app),
            waf=waf,
            canary=canary_config(app),
            **options,
        )
        stacks.append(resolver_stack)
    elif canary_config(app) is not None:
        raise ConfigError(f"{CANARY_CONTEXT_KEY}: the canary goes in the resolver's stack")
    if waf is not None:
        stacks.append(_edge(app, deployment, waf, archive_stack, resolver_stack))
    for stack in stacks:
        for key, value in deployment.all_tags.items():
            Tags.of(stack).add(key, value)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def _edge(
    app: App,
    deployment: DeploymentConfig,
    waf: WafConfig,
    archive: ArchiveStack | None,
    resolver: ResolverStack | None,
) -> EdgeStack:
    """The edge stack in us-east-1, fronting what the app's stacks hold, deployed after them."""
    fronts = []
    if resolver is not None:
        assert resolver.origin is not None
        config = resolver_config(app)
        fronts.append(
            Front(
                name="resolver",
                api=resolver.resolver.api,
                secret_name=resolver.origin.secret_name,
                methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD,
                rate_limit=waf.rate_limit,
                domain_name=config.domain_name,
                certificate_arn=config.certificate_arn,
            )
        )
    if archive is not None and archive.origin is not None:
        fronts.append(
            Front(
                name="archive",
                api=archive.archive.api,
                secret_name=archive.origin.secret_name,
                # POST /oai and POST /transfers/confirm are public too.
                methods=cloudfront.AllowedMethods.ALLOW_ALL,
                rate_limit=waf.archive_rate_limit,
                domain_name=waf.archive_domain_name,
                certificate_arn=waf.archive_certificate_arn,
            )
        )
    if not fronts:
        raise ConfigError(
            f"{WAF_CONTEXT_KEY}: nothing to front; the edge needs the resolver in ibi:stacks, "
            "or the Archive with archive_domain_name"
        )
    options = _stack_options(EDGE_STACK_ID, deployment)
    options["env"] = Environment(account=deployment.account, region=WAF_REGION)
    edge = EdgeStack(app, deployment.stack_id(EDGE_STACK_ID), fronts=fronts, config=waf, **options)
    for stack in (archive, resolver):
        if stack is not None and stack.origin is not None:
            edge.add_stack_dependency(stack, "the edge reads the API it fronts from this stack")
    return edge


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
