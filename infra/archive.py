"""An Archive: its items table, its files bucket, its Lambda and the HTTP API in front of it."""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk.aws_apigatewayv2_authorizers import HttpIamAuthorizer
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from infra.bundling import ARCHITECTURE, RUNTIME, function_code
from infra.minting import MintingService, acknowledge_function, logged_stage

GET = apigwv2.HttpMethod.GET
POST = apigwv2.HttpMethod.POST
PATCH = apigwv2.HttpMethod.PATCH
DELETE = apigwv2.HttpMethod.DELETE

# Each action the Archive Lambda performs, and nothing else (least privilege).
ITEMS_TABLE_ACTIONS = (
    "dynamodb:GetItem",  # store.py: an item, an alias, #service, #profile
    "dynamodb:PutItem",  # store.py: a new item or alias, #service, a urlkey
    "dynamodb:UpdateItem",  # store.py: replace an item, #profile, spend a urlkey, count an access
    "dynamodb:DeleteItem",  # store.py: undo an alias when the IBI turns out to be taken
    "dynamodb:Scan",  # store.py: GET /api/items and POST /api/verify page through the items
)
# files.py: GetObject reads, hashes and presigns downloads (HeadObject is GetObject too);
# PutObject is what the presigned upload URLs carry out.
FILE_ACTIONS = ("s3:GetObject", "s3:PutObject")
# With ListBucket, S3 answers a missing file with 404 (FileMissing: "upload it first", a
# "missing" problem in verify) instead of 403, which the code must take for a failure.
BUCKET_ACTIONS = ("s3:ListBucket",)
FILES_PREFIX = "items/"  # files.py: S3FileStore's prefix, one segment per item below it

MINT_PATH = "/mint"  # the minting API's route the Archive calls (ibi/client.py)

HANDLER = "functions.archive.handler.lambda_handler"
# The HTTP API gives up on an integration after 30 s.
TIMEOUT = Duration.seconds(29)
MEMORY_MB = 512
DEFAULT_URLKEY_TTL_SECONDS = 600

# Public: the service protocol at /<archive service IBI>, /col/…, /list/…, /metadata/….
PUBLIC_ROUTE = (GET, "/{proxy+}")
# The deposit API (functions/archive/handler.py), each route IAM-authorized by name.
DEPOSIT_ROUTES = (
    (GET, "/api/service"),
    (POST, "/api/items"),
    (POST, "/api/copies"),
    (GET, "/api/item"),
    (PATCH, "/api/item"),
    (DELETE, "/api/item"),
    (POST, "/api/item/links"),
    (GET, "/api/items"),
    (POST, "/api/item/uploads"),
    (POST, "/api/item/files"),
    (POST, "/api/verify"),
    (POST, "/api/item/transfer"),
)
# Any other GET under /api/ would fall to the public catch-all: this more specific route
# keeps the whole /api/ namespace behind IAM, even for a route added to the Lambda only.
DEPOSIT_GUARD_ROUTE = (GET, "/api/{proxy+}")


class Archive(Construct):
    """An IBI Archive: one Lambda behind an HTTP API, its items table and its files bucket.

    * the items table: items by label, their aliases, the Archive's own service item and
      profile, and the urlkeys it issues (expiring through the table's TTL);
    * the files bucket: the files of the items, under ``items/``, versioned; its server access
      log goes to a bucket of its own;
    * the API: the service protocol and the public pages for anyone (the resolver, browsers),
      the deposit API under ``/api/`` for IAM (SigV4-signed) callers only.

    ``mint_endpoint`` is the base URL of the minting API the Archive mints through: its own
    service IBI on its first request, then the IBIs of new originals. The Archive signs those
    calls with its role; let the role call ``POST /mint`` with :func:`grant_mint`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        mint_endpoint: str,
        mint_subsystem: str | None = None,
        base_url: str | None = None,
        platform_software: str | None = None,
        urlkey_ttl_seconds: int = DEFAULT_URLKEY_TTL_SECONDS,
        join_resolver_url: str | None = None,
        registration_key_parameter: str | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        log_level: str = "INFO",
        code: lambda_.Code | None = None,
    ) -> None:
        super().__init__(scope, construct_id)

        self.items_table = dynamodb.Table(
            self,
            "ItemsTable",
            partition_key=dynamodb.Attribute(name="label", type=dynamodb.AttributeType.STRING),
            time_to_live_attribute="expires_at",
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # The items are the Archive: deleting the stack must not delete them.
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.access_logs_bucket = s3.Bucket(
            self,
            "FilesAccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,  # the only one server access logs allow
            enforce_ssl=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.files_bucket = s3.Bucket(
            self,
            "FilesBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            # A file overwritten or deleted by mistake can be recovered.
            versioned=True,
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix="files/",
            removal_policy=RemovalPolicy.RETAIN,
            auto_delete_objects=False,
        )

        self.log_group = logs.LogGroup(
            self, "FunctionLogs", retention=log_retention, removal_policy=RemovalPolicy.RETAIN
        )
        self.role = iam.Role(
            self,
            "FunctionRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="The Archive Lambda: its log group, items table, files bucket, X-Ray",
        )
        environment = {
            "IBI_ARCHIVE_TABLE": self.items_table.table_name,
            "IBI_ARCHIVE_BUCKET": self.files_bucket.bucket_name,
            "IBI_MINT_ENDPOINT": mint_endpoint,
            "IBI_URLKEY_TTL_SECONDS": str(urlkey_ttl_seconds),
            "POWERTOOLS_SERVICE_NAME": "archive",
            "POWERTOOLS_METRICS_NAMESPACE": "ibi",
            "LOG_LEVEL": log_level,
        }
        optional = {
            "IBI_ARCHIVE_BASE_URL": base_url,
            "IBI_PLATFORM_SOFTWARE": platform_software,
            "IBI_MINT_SUBSYSTEM": mint_subsystem,
            "IBI_JOIN_RESOLVER_URL": join_resolver_url,
            "IBI_REGISTRATION_KEY_PARAMETER": registration_key_parameter,
        }
        environment.update({name: value for name, value in optional.items() if value})
        self.function = lambda_.Function(
            self,
            "Function",
            description="An IBI Archive: the service protocol, its pages and the deposit API",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            # The Archive's dependency closure (Powertools with the tracer) is the minting
            # function's: one pinned list, one wheelhouse.
            code=code or function_code("archive", requirements_of="minting"),
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            memory_size=MEMORY_MB,
            timeout=TIMEOUT,
            environment=environment,
        )
        self._grant_function_access()
        if registration_key_parameter:
            # Read the registration key to switch itself on at the resolver (one parameter).
            name = registration_key_parameter.lstrip("/")
            iam.Grant.add_to_principal(
                grantee=self.role,
                actions=["ssm:GetParameter"],
                resource_arns=[
                    Stack.of(self).format_arn(
                        service="ssm", resource="parameter", resource_name=name
                    )
                ],
            )

        self.api = apigwv2.HttpApi(
            self,
            "Api",
            api_name=f"{Stack.of(self).stack_name}-archive",
            description="IBI Archive: service protocol and pages (public), deposit API (IAM)",
            create_default_stage=False,
        )
        self.stage, self.access_logs = logged_stage(self, self.api, log_retention)
        integration = HttpLambdaIntegration("ArchiveIntegration", self.function)
        method, path = PUBLIC_ROUTE
        (self.public_route,) = self.api.add_routes(
            path=path,
            methods=[method],
            integration=integration,
            authorizer=apigwv2.HttpNoneAuthorizer(),
        )
        self.deposit_routes: list[apigwv2.HttpRoute] = []
        for method, path in (*DEPOSIT_ROUTES, DEPOSIT_GUARD_ROUTE):
            self.deposit_routes += self.api.add_routes(
                path=path,
                methods=[method],
                integration=integration,
                authorizer=HttpIamAuthorizer(),
            )
        self._acknowledge_findings()

    @property
    def url(self) -> str:
        """The API's base URL, ending in ``/``: the Archive's address, and ``ibi deposit``'s."""
        url = self.stage.url
        assert url is not None  # the $default stage always has one
        return url

    @property
    def deposit_url(self) -> str:
        """The base of the deposit API (IAM-authorized), ending in ``/``."""
        return f"{self.url}api/"

    def grant_deposit(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` call the deposit API (``execute-api:Invoke`` on each route)."""
        for route in self.deposit_routes:
            route.grant_invoke(grantee)

    def _grant_function_access(self) -> None:
        self.items_table.grant(self.function, *ITEMS_TABLE_ACTIONS)
        iam.Grant.add_to_principal(
            grantee=self.role,
            actions=list(FILE_ACTIONS),
            resource_arns=[self.files_bucket.arn_for_objects(f"{FILES_PREFIX}*")],
        )
        iam.Grant.add_to_principal(
            grantee=self.role,
            actions=list(BUCKET_ACTIONS),
            resource_arns=[self.files_bucket.bucket_arn],
        )
        self.log_group.grant_write(self.role)

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        bucket_id = _logical_id(self.files_bucket)
        acknowledge_function(self.role, self.function)
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{FILES_PREFIX}*]",
                reason=(
                    "The files of the items are objects under items/<item>/<path> in the "
                    "Archive's own bucket, made as items are deposited: no list of keys "
                    "exists in advance. Only GetObject and PutObject are allowed, only there."
                ),
            ),
        )
        Validations.of(self.public_route).acknowledge(
            Acknowledgment(
                id="AwsSolutions-APIG4",
                reason=(
                    "GET /{proxy+} is the Archive's public face by design: the IBI service "
                    "protocol that any resolver calls unsigned, and the files, file lists and "
                    "metadata that persistent URLs lead browsers to. It only reads; every "
                    "route that changes anything is under /api/ and IAM-authorized."
                ),
            )
        )


def grant_mint(minting: MintingService, role: iam.Role) -> iam.Grant:
    """Let ``role`` call ``POST /mint`` of ``minting``, and none of its other routes.

    ``MintingService.grant_invoke`` grants every route; an Archive only mints. ``role`` and
    ``minting`` are in one stack (the finding acknowledged names the API's logical id).
    """
    (route,) = [route for route in minting.routes if route.path == MINT_PATH]
    grant = route.grant_invoke(role, http_methods=[POST])
    _acknowledge_mint_grant(minting, role)
    return grant


def _acknowledge_mint_grant(minting: MintingService, role: iam.Role) -> None:
    """The cdk-nag finding :func:`grant_mint` accepts on purpose, with the reason it is safe."""
    Validations.of(role).acknowledge(
        Acknowledgment(
            id=(
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:"
                f"<AWS::AccountId>:<{_logical_id(minting.api)}>/*/POST{MINT_PATH}]"
            ),
            reason=(
                "The one wildcard is the stage: the minting API has a single stage, $default. "
                "The API, the method and the route are named, so the Archive may call POST "
                "/mint and no other route of the minting service."
            ),
        )
    )


def _logical_id(construct: Construct) -> str:
    """The template's name for an L2 construct's resource, as cdk-nag writes it."""
    stack = Stack.of(construct)
    child = construct.node.default_child
    assert isinstance(child, CfnElement)
    logical_id: str = stack.resolve(stack.get_logical_id(child))
    return logical_id
