"""A role for CI pipelines (GitHub Actions, OIDC) that may mint and deposit, and nothing else.

The trust policy accepts only GitHub's OIDC tokens for ``sts.amazonaws.com`` whose subject is
one repository and one branch (``repo:OWNER/REPO:ref:refs/heads/BRANCH``) or one environment
(``repo:OWNER/REPO:environment:ENV``): no wildcard (``infra.config.CiConfig`` refuses one).
Sessions last at most an hour, and each is named ``gh-…`` (``sts:RoleSessionName``; the
workflow names it ``gh-<run id>``, which its re-run attempts share, as they share the run's
idempotency keys): the session name is part of the principal the Archive records as an item's
depositor, and only that principal adds files to the item, within an hour of depositing it
(``functions/archive/deposits.py``).
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.archive import Archive
from infra.config import CiConfig
from infra.minting import MintingService
from infra.service import logical_id, nag_arn_prefix

GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
GITHUB_OIDC_URL = f"https://{GITHUB_OIDC_HOST}"
AUDIENCE = "sts.amazonaws.com"
MAX_SESSION = Duration.hours(1)
# Every session of the role is named after its run (AssumeRoleWithWebIdentity takes this
# condition key): the deposit records that principal, so one run's items are its own.
SESSION_NAME_PATTERN = "gh-*"

# The minting API's route a pipeline may call.
CI_MINT_ROUTE = ("POST", "/mint")
# What a pipeline needs to deposit a release artefact (``ibi deposit``, ibi/client/): read the
# Archive's service, create originals and copies, upload and commit files, read an item back
# (also each version of a release's edition chain, ``ibi_tools/release.py`` ``walk``), and link
# a release as the next edition of the last version (``link_next_version``, which sends
# ``"if_none": true``: it never replaces a next edition). Not PATCH, DELETE, unlinking,
# transfer, verify, listing; not the operator's routes (replacing a file, importing an
# original of another subsystem, receiving a transfer). The Archive itself lets a commit add
# files only to items the same session deposited within the hour, and never change a
# published file.
CI_DEPOSIT_ROUTES = (
    ("GET", "/api/service"),
    ("POST", "/api/items"),
    ("POST", "/api/copies"),
    ("POST", "/api/item/uploads"),
    ("POST", "/api/item/files"),
    ("GET", "/api/item"),
    ("POST", "/api/item/links"),
)


class CiMinter(Construct):
    """GitHub's OIDC provider (unless the account's is given) and the role a pipeline assumes.

    The role may call ``POST /mint`` of ``minting`` and, with an ``archive``, the deposit routes
    of :data:`CI_DEPOSIT_ROUTES`: ``execute-api:Invoke`` on each, by name.
    """

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
        self.provider: iam.CfnOIDCProvider | None = None
        if config.provider_arn:
            provider_arn = config.provider_arn
        else:
            self.provider = iam.CfnOIDCProvider(
                self, "GitHubProvider", url=GITHUB_OIDC_URL, client_id_list=[AUDIENCE]
            )
            provider_arn = self.provider.attr_arn
        self.role = iam.Role(
            self,
            "Role",
            description=f"CI of {config.repository}: mint IBIs and deposit artefacts, nothing else",
            max_session_duration=MAX_SESSION,
            assumed_by=iam.WebIdentityPrincipal(
                provider_arn,
                conditions={
                    "StringEquals": {
                        f"{GITHUB_OIDC_HOST}:aud": AUDIENCE,
                        f"{GITHUB_OIDC_HOST}:sub": config.subject,
                    },
                    "StringLike": {"sts:RoleSessionName": SESSION_NAME_PATTERN},
                },
            ),
        )
        method, path = CI_MINT_ROUTE
        self.allowed: list[tuple[apigwv2.HttpApi, str, str]] = [(minting.api, method, path)]
        if archive is not None:
            self.allowed += [(archive.api, method, path) for method, path in CI_DEPOSIT_ROUTES]
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["execute-api:Invoke"],
                resources=[
                    api.arn_for_execute_api(method, path, "*") for api, method, path in self.allowed
                ],
            )
        )
        self._acknowledge_findings()

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        Validations.of(self.role).acknowledge(
            *(
                Acknowledgment(
                    id=(
                        f"AwsSolutions-IAM5[Resource::{nag_arn_prefix(self.role, 'execute-api')}"
                        f":<{logical_id(api)}>/*/{method}{path}]"
                    ),
                    reason=(
                        "The one wildcard is the API stage (each API has a single stage, "
                        "$default); the API, the method and the route are named, so the "
                        "pipeline may mint and deposit and call nothing else."
                    ),
                )
                for api, method, path in self.allowed
            )
        )
