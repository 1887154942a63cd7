"""A role for CI pipelines (GitHub Actions, OIDC) that may mint and deposit, and nothing else.

The trust policy accepts only GitHub's OIDC tokens for ``sts.amazonaws.com`` whose subject is
one repository and one branch (``repo:OWNER/REPO:ref:refs/heads/BRANCH``) or one environment
(``repo:OWNER/REPO:environment:ENV``): no wildcard. Sessions last at most an hour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.archive import Archive, _logical_id
from infra.minting import MintingService

GITHUB_OIDC_URL = "https://token.actions.githubusercontent.com"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
AUDIENCE = "sts.amazonaws.com"
# What a pipeline needs to deposit a release artefact (``ibi deposit``): read the Archive's
# service, create originals and copies, upload and commit files, read an item back. Not
# PATCH, DELETE, links, transfer, verify, listing.
CI_DEPOSIT_ROUTES = (
    ("GET", "/api/service"),
    ("POST", "/api/items"),
    ("POST", "/api/copies"),
    ("POST", "/api/item/uploads"),
    ("POST", "/api/item/files"),
    ("GET", "/api/item"),
)
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


class CiConfigError(ValueError):
    """``ibi:ci`` is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class CiConfig:
    repository: str  # OWNER/REPO
    branch: str | None = None
    environment: str | None = None
    provider_arn: str | None = None  # an existing GitHub OIDC provider (one per account)

    @classmethod
    def from_context(cls, raw: Any) -> CiConfig | None:
        if raw is None:
            return None
        if not isinstance(raw, dict) or set(raw) - {
            "repository",
            "branch",
            "environment",
            "provider_arn",
        }:
            raise CiConfigError("ibi:ci: {repository, branch | environment, provider_arn?}")
        repository = str(raw.get("repository", ""))
        owner, _, name = repository.partition("/")
        if not (_NAME.fullmatch(owner) and _NAME.fullmatch(name)):
            raise CiConfigError(
                f"ibi:ci.repository: {repository!r} is not OWNER/REPO (no wildcard)"
            )
        branch, environment = raw.get("branch"), raw.get("environment")
        if (branch is None) == (environment is None):
            raise CiConfigError("ibi:ci: give exactly one of branch or environment")
        value = str(branch or environment)
        if not re.fullmatch(r"[A-Za-z0-9_./-]+", value) or ".." in value:
            raise CiConfigError(f"ibi:ci: {value!r} is not one branch or environment (no wildcard)")
        provider = raw.get("provider_arn")
        if provider is not None and not str(provider).startswith("arn:aws"):
            raise CiConfigError("ibi:ci.provider_arn: an IAM OIDC provider ARN")
        return cls(repository, branch, environment, provider)

    @property
    def subject(self) -> str:
        if self.branch is not None:
            return f"repo:{self.repository}:ref:refs/heads/{self.branch}"
        return f"repo:{self.repository}:environment:{self.environment}"


class CiMinter(Construct):
    """GitHub's OIDC provider (unless one exists) and the role a pipeline assumes."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: CiConfig,
        minting: MintingService,
        archive: Archive | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if config.provider_arn:
            provider_arn = config.provider_arn
        else:
            provider = iam.CfnOIDCProvider(
                self, "GitHubProvider", url=GITHUB_OIDC_URL, client_id_list=[AUDIENCE]
            )
            provider_arn = provider.attr_arn
        self.role = iam.Role(
            self,
            "Role",
            description=f"CI of {config.repository}: mint IBIs and deposit artefacts, nothing else",
            max_session_duration=Duration.hours(1),
            assumed_by=iam.WebIdentityPrincipal(
                provider_arn,
                conditions={
                    "StringEquals": {
                        f"{GITHUB_OIDC_HOST}:aud": AUDIENCE,
                        f"{GITHUB_OIDC_HOST}:sub": config.subject,
                    }
                },
            ),
        )
        allowed = [minting.api.arn_for_execute_api("POST", "/mint", "*")]
        if archive is not None:
            allowed += [
                archive.api.arn_for_execute_api(method, path, "*")
                for method, path in CI_DEPOSIT_ROUTES
            ]
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["execute-api:Invoke"], resources=allowed)
        )
        wildcard_stage = (
            "The one wildcard is the API stage (each API has a single stage, $default); the "
            "API, the method and the route are named, so the pipeline may mint and deposit "
            "and call nothing else."
        )
        named = [(minting.api, "POST", "/mint")]
        if archive is not None:
            named += [(archive.api, method, path) for method, path in CI_DEPOSIT_ROUTES]
        Validations.of(self.role).acknowledge(
            *(
                Acknowledgment(
                    id=(
                        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:"
                        f"<AWS::Region>:<AWS::AccountId>:<{_logical_id(api)}>/*/{method}{path}]"
                    ),
                    reason=wildcard_stage,
                )
                for api, method, path in named
            )
        )
