"""The stacks, and the one place that wires them into an app with its checks.

Stacks made of the services' constructs: ``IbiArchive`` (an Archive with a minting service of
its own) and ``IbiResolver`` by default; ``IbiMinting`` (a minting service alone) on request
(context ``ibi:stacks``). ``IbiMinting`` and ``IbiArchive`` are never in one app: each keeps
its own minting state, and two minting services for one subsystem would issue the same labels.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, CfnOutput, Stack, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.archive import Archive, grant_mint
from infra.ci import CiConfig, CiMinter
from infra.config import (
    ArchiveConfig,
    MintingConfig,
    archive_config,
    minting_config,
    stacks_config,
)
from infra.minting import MintingService
from infra.operations import Operations, Watched
from infra.resolver import Resolver

MINTING_STACK_ID = "IbiMinting"
ARCHIVE_STACK_ID = "IbiArchive"
RESOLVER_STACK_ID = "IbiResolver"


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


class MintingStack(Stack):
    """The minting service and the outputs a caller needs to reach it."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: MintingConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.minting = _minting_service(self, config)
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
            base_url=config.base_url,
            platform_software=config.platform_software,
            urlkey_ttl_seconds=config.urlkey_ttl_seconds,
            log_retention=config.log_retention,
            join_resolver_url=config.join_resolver_url,
            registration_key_parameter=config.registration_key_parameter,
        )
        grant_mint(self.minting, self.archive.role)
        self.operations = Operations(
            self,
            "Operations",
            watched=[
                Watched("minting", self.minting.function, self.minting.api),
                Watched("archive", self.archive.function, self.archive.api),
            ],
        )
        self.ci: CiMinter | None = None
        if ci is not None:
            self.ci = CiMinter(self, "Ci", config=ci, minting=self.minting, archive=self.archive)
            CfnOutput(self, "CiRoleArn", value=self.ci.role.role_arn, description="CI role")
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


class ResolverStack(Stack):
    """The resolver and the outputs its users and administrators need."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain_name: str | None = None,
        certificate_arn: str | None = None,
        service_ibi: str = "J8LNKB5R7W/3FUQHC5",
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.resolver = Resolver(
            self,
            "Resolver",
            service_ibi=service_ibi,
            domain_name=domain_name,
            certificate_arn=certificate_arn,
        )
        self.operations = Operations(
            self,
            "Operations",
            watched=[Watched("resolver", self.resolver.function, self.resolver.api)],
        )
        _outputs(
            self,
            {
                "ResolverUrl": (self.resolver.url, "Base of persistent URLs: <ResolverUrl><ibi>"),
                "AdminUrl": (
                    f"{self.resolver.stage.url}admin/archives",
                    "Register Archives here (IAM/SigV4): ibi resolver register",
                ),
                "RegistryTableName": (self.resolver.registry_table.table_name, "The registry"),
                "PepperSecretArn": (self.resolver.pepper.secret_arn, "HMAC key of the keys"),
                "ResolverFunctionName": (self.resolver.function.function_name, "The Lambda"),
            },
        )


def build_app(app: App) -> App:
    """Add the chosen stacks to ``app`` (context ``ibi:stacks``), and the cdk-nag checks."""
    chosen = stacks_config(app)
    if "minting" in chosen:
        MintingStack(
            app,
            MINTING_STACK_ID,
            config=minting_config(app),
            description="IBI minting service: HTTP API (IAM auth), Lambda, DynamoDB tables",
        )
    if "archive" in chosen:
        ArchiveStack(
            app,
            ARCHIVE_STACK_ID,
            config=archive_config(app),
            minting=minting_config(app),
            ci=CiConfig.from_context(app.node.try_get_context("ibi:ci")),
            description="IBI Archive with its own minting service: HTTP APIs, Lambdas, S3",
        )
    if "resolver" in chosen:
        resolver = app.node.try_get_context("ibi:resolver") or {}
        ResolverStack(
            app,
            RESOLVER_STACK_ID,
            domain_name=resolver.get("domain_name"),
            certificate_arn=resolver.get("certificate_arn"),
            service_ibi=resolver.get("service_ibi", "J8LNKB5R7W/3FUQHC5"),
            description="IBI resolver: HTTP API (public URLs, IAM admin), Lambda, DynamoDB",
        )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app
