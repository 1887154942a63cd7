"""An Archive: its items table, its files bucket, its Lambda and the HTTP API in front of it."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.aws_apigatewayv2_authorizers import HttpIamAuthorizer
from constructs import Construct

from functions.archive.store import (
    DATESTAMP_ATTRIBUTE,
    DATESTAMP_INDEX,
    DATESTAMP_INDEX_SCHEMA,
    SET_ATTRIBUTE,
)
from ibi.defaults import URLKEY_TTL_SECONDS
from infra.bundling import function_code
from infra.minting import MintingService
from infra.service import (
    LambdaService,
    acknowledge_function,
    acknowledge_open_routes,
    logical_id,
    nag_arn_prefix,
    own_function,
    powertools_environment,
)

GET = apigwv2.HttpMethod.GET
POST = apigwv2.HttpMethod.POST
PATCH = apigwv2.HttpMethod.PATCH
DELETE = apigwv2.HttpMethod.DELETE
HEAD = apigwv2.HttpMethod.HEAD

# Each action the Archive Lambda performs, and nothing else (least privilege).
ITEMS_TABLE_ACTIONS = (
    "dynamodb:GetItem",  # store.py: an item, an alias, #service, #profile
    "dynamodb:BatchGetItem",  # store.py: #profile and the item asked, one round per urlRequest
    "dynamodb:PutItem",  # store.py: a new item or alias, #service, spend a urlkey (conditional)
    "dynamodb:UpdateItem",  # store.py: replace an item, #profile, count an access
    "dynamodb:DeleteItem",  # store.py: undo an alias when the IBI turns out to be taken
    "dynamodb:Scan",  # store.py: GET /api/items and POST /api/verify page through the items
)
# On OAI-PMH's index only (<table>/index/oai-datestamp), nothing else.
DATESTAMP_INDEX_ACTIONS = ("dynamodb:Query",)  # store.py: query_datestamps (OAI-PMH's lists)
# files.py: GetObject reads, hashes and presigns downloads (HeadObject is GetObject too);
# PutObject is what the presigned upload URLs carry out, and (with GetObject on the source) the
# copies that publish an upload and keep a replaced version.
FILE_ACTIONS = ("s3:GetObject", "s3:PutObject")
# With ListBucket, S3 answers a missing file with 404 (FileMissing: "upload it first", a
# "missing" problem in verify) instead of 403, which the code must take for a failure.
BUCKET_ACTIONS = ("s3:ListBucket",)
FILES_PREFIX = "items/"  # files.py: S3FileStore's prefix, one segment per item below it
UPLOADS_PREFIX = "uploads/"  # files.py: where presigned PUTs land, until their commit
HISTORY_PREFIX = "history/"  # files.py: replaced versions, under their SHA-256, kept for good
FILE_PREFIXES = (FILES_PREFIX, UPLOADS_PREFIX, HISTORY_PREFIX)
UPLOADS_EXPIRE = Duration.days(1)  # an upload never committed is deleted after a day

# urlkeys.py: the HMAC key urlkeys are signed under, read once per execution environment
# (AWSCURRENT, and AWSPREVIOUS after a rotation). Not grant_read: it adds DescribeSecret.
URLKEY_SECRET_ACTIONS = ("secretsmanager:GetSecretValue",)

MINT_PATH = "/mint"  # the minting API's routes the Archive calls (ibi/client/)
MINTS_PATH = "/mints"

HANDLER = "functions.archive.handler.lambda_handler"
# The HTTP API gives up on an integration after 30 s.
TIMEOUT = Duration.seconds(29)
MEMORY_MB = 512

# The link check (functions/archive/linkcheck.py): the Archive's asset, a role of its own, run
# by an EventBridge rule every ibi:archive.link_check.every_hours. It reads the items a Scan
# page at a time (store.py's scan), writes each item's link_check (note_link_check, an
# UpdateItem), and re-reads an item that changed meanwhile (get: GetItem). Nothing else.
LINK_CHECK_HANDLER = "functions.archive.linkcheck.lambda_handler"
LINK_CHECK_TABLE_ACTIONS = ("dynamodb:Scan", "dynamodb:GetItem", "dynamodb:UpdateItem")
# A run checks until 30 s before this (linkcheck.MARGIN_SECONDS), one request per host a
# second; the next run resumes with the items checked longest ago.
LINK_CHECK_TIMEOUT = Duration.minutes(5)
LINK_CHECK_MEMORY_MB = 256  # network-bound: four checks at a time

# Public: the service protocol at /<archive service IBI>, /col/…, /list/…, /metadata/…, /linkset/…
# (GET, and HEAD for the Signposting Link headers without the body).
PUBLIC_ROUTES = ((GET, "/{proxy+}"), (HEAD, "/{proxy+}"))
# Public too: a receiving Archive of another institution confirms one of this Archive's signed
# offers (functions/archive/offers.py); the HMAC of the offer, not IAM, authorizes it.
CONFIRM_ROUTES = ((POST, "/transfers/confirm"),)
# Public: OAI-PMH, in a query or a form body; routes of their own, so that harvesting has a
# throttle of its own (ibi:throttle.oai_rate), below the one of persistent URLs.
OAI_ROUTES = ((GET, "/oai"), (POST, "/oai"))
# The deposit API (functions/archive/handler.py), each route IAM-authorized by name.
DEPOSIT_ROUTES = (
    (GET, "/api/service"),
    (POST, "/api/items"),
    (POST, "/api/copies"),
    (GET, "/api/item"),
    (PATCH, "/api/item"),
    (DELETE, "/api/item"),
    (POST, "/api/item/links"),
    (DELETE, "/api/item/links"),
    (GET, "/api/items"),
    (POST, "/api/item/uploads"),
    (POST, "/api/item/files"),
    (POST, "/api/verify"),
    (POST, "/api/item/transfer"),
    # The items' external URLs: check them now (functions/archive/links.py), list broken ones.
    (POST, "/api/links/check"),
    (GET, "/api/links"),
    # An operator's: add or replace files of any item (recorded), read a replaced version,
    # import an original of another subsystem (recorded).
    (POST, "/api/item/files/replace"),
    (GET, "/api/item/previous"),
    (POST, "/api/imports"),
    # The receiving side of a transfer: what a sending Archive calls (grant_transfer_in).
    (POST, "/api/transfers"),
    (POST, "/api/transfers/complete"),
    (DELETE, "/api/transfers"),
    # A transfer between institutions (offers.py): the sender's owner offers, the receiver's
    # owner accepts; each calls its own Archive only.
    (POST, "/api/item/offers"),
    (POST, "/api/transfers/accept"),
)
# What a sending Archive's role calls on this one to transfer an original here (transfer.py).
TRANSFER_IN_ROUTES = (
    (POST, "/api/transfers"),
    (POST, "/api/item/uploads"),
    (POST, "/api/item/files"),
    (GET, "/api/item"),
    (POST, "/api/transfers/complete"),
    (DELETE, "/api/transfers"),
)
# Any other GET or HEAD under /api/ would fall to a public catch-all: these more specific routes
# keep the whole /api/ namespace behind IAM, even for a route added to the Lambda only.
DEPOSIT_GUARD_ROUTES = ((GET, "/api/{proxy+}"), (HEAD, "/api/{proxy+}"))


class Archive(LambdaService):
    """An IBI Archive: one Lambda behind an HTTP API, its items table and its files bucket.

    * the items table: items by label, their aliases, the Archive's own service item and
      profile, and the urlkeys acknowledgments spent (expiring through the table's TTL);
    * the urlkey secret: a generated Secrets Manager secret, the HMAC key urlkeys are signed
      under, so that answering a urlRequest writes nothing (functions/archive/urlkeys.py);
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
        subsystem_prefixes: Sequence[str] = (),
        base_url: str | None = None,
        platform_software: str | None = None,
        urlkey_ttl_seconds: int = URLKEY_TTL_SECONDS,
        join_resolver_url: str | None = None,
        registration_key_parameter: str | None = None,
        resolver_service_ibi: str | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        log_level: str = "INFO",
        code: lambda_.Code | None = None,
        reserved_concurrency: int | None = None,
        public_authorizer: apigwv2.IHttpRouteAuthorizer | None = None,
        link_check_every_hours: int = 0,
    ) -> None:
        super().__init__(scope, construct_id)
        code = code or function_code("archive", requirements_of="minting")  # one asset for two
        self.items_table = self._add_table(
            "ItemsTable",
            partition_key="label",
            time_to_live_attribute="expires_at",
            actions=ITEMS_TABLE_ACTIONS,
        )
        self.access_logs_bucket, self.files_bucket = self._add_buckets()
        self.urlkey_secret = self._add_urlkey_secret()
        environment = self._environment(
            mint_endpoint=mint_endpoint,
            urlkey_ttl_seconds=urlkey_ttl_seconds,
            optional={
                "IBI_ARCHIVE_BASE_URL": base_url,
                "IBI_PLATFORM_SOFTWARE": platform_software,
                "IBI_MINT_SUBSYSTEM": mint_subsystem,
                "IBI_JOIN_RESOLVER_URL": join_resolver_url,
                "IBI_REGISTRATION_KEY_PARAMETER": registration_key_parameter,
                # The path of the joined resolver's inclusion protocol: without it the Archive
                # switches on at the default resolver IBI's path, and another resolver 404s/504s.
                "IBI_RESOLVER_SERVICE_IBI": resolver_service_ibi if join_resolver_url else None,
                "IBI_ARCHIVE_SUBSYSTEM_PREFIXES": ",".join(subsystem_prefixes),
            },
        )
        self._add_function(
            service="archive",
            handler=HANDLER,
            description="An IBI Archive: the service protocol, its pages and the deposit API",
            role_description=(
                "The Archive Lambda: its log group, items table, files bucket, urlkey secret, X-Ray"
            ),
            memory_size=MEMORY_MB,
            timeout=TIMEOUT,
            environment=environment,
            log_retention=log_retention,
            log_level=log_level,
            code=code,
            # The Archive's dependency closure (Powertools with the tracer) is the minting
            # function's: one pinned list, one wheelhouse.
            requirements_of="minting",
            grants=[
                (
                    FILE_ACTIONS,
                    [self.files_bucket.arn_for_objects(f"{p}*") for p in FILE_PREFIXES],
                ),
                (BUCKET_ACTIONS, [self.files_bucket.bucket_arn]),
                (URLKEY_SECRET_ACTIONS, [self.urlkey_secret.secret_arn]),
            ],
            reserved_concurrency=reserved_concurrency,
        )
        self._add_datestamp_index()
        self._name_itself(registration_key_parameter)
        # Behind the edge (ibi:waf) the public routes are the edge's only: its origin check.
        self.behind_edge = public_authorizer is not None
        self._add_http_api(log_retention, public_authorizer or apigwv2.HttpNoneAuthorizer())
        self._add_link_check(code, link_check_every_hours, base_url, log_retention, log_level)
        self._acknowledge_findings()

    def _name_itself(self, registration_key_parameter: str | None) -> None:
        """Who the Archive is: in a mint record (issued.py) its role, which a record names as
        the assumed role (a value, not a grant); at its resolver the key it may read."""
        self.function.add_environment("IBI_ARCHIVE_PRINCIPAL", self.role.role_arn)
        if registration_key_parameter:
            self._grant_parameter_read(registration_key_parameter)

    def _environment(
        self, *, mint_endpoint: str, urlkey_ttl_seconds: int, optional: dict[str, str | None]
    ) -> dict[str, str]:
        """The Archive function's variables: its resources', then each optional one given."""
        environment = {
            "IBI_ARCHIVE_TABLE": self.items_table.table_name,
            "IBI_URLKEY_SECRET_ARN": self.urlkey_secret.secret_arn,
            "IBI_ARCHIVE_BUCKET": self.files_bucket.bucket_name,
            "IBI_MINT_ENDPOINT": mint_endpoint,
            "IBI_URLKEY_TTL_SECONDS": str(urlkey_ttl_seconds),
        }
        environment.update({name: value for name, value in optional.items() if value})
        return environment

    def _add_link_check(
        self,
        code: lambda_.Code,
        every_hours: int,
        base_url: str | None,
        log_retention: logs.RetentionDays,
        log_level: str,
    ) -> None:
        """The scheduled link check (linkcheck.py), every ``every_hours`` (0: none): its log
        group, its role (the items table's :data:`LINK_CHECK_TABLE_ACTIONS` only), its
        function and its EventBridge rule."""
        self.link_check: lambda_.Function | None = None
        self.link_check_every: Duration | None = None
        if not every_hours:
            return
        every = Duration.hours(every_hours)
        own = own_function(
            self,
            ids=("LinkCheckLogs", "LinkCheckRole"),
            function_id="LinkCheckFunction",
            service="archive",
            handler=LINK_CHECK_HANDLER,
            description="Checks the external URLs of the Archive's items (HEAD, then GET)",
            role_description=(
                "The link check: its log group, the items table's scan and link checks"
            ),
            memory_size=LINK_CHECK_MEMORY_MB,
            timeout=LINK_CHECK_TIMEOUT,
            environment={
                "IBI_ARCHIVE_TABLE": self.items_table.table_name,
                # what is outside the Archive: URLs of another scheme or host than this
                "IBI_ARCHIVE_BASE_URL": base_url or self.url.rstrip("/"),
                **powertools_environment("archive", log_level),
            },
            log_retention=log_retention,
            code=code,
        )
        self.link_check_logs, self.link_check_role = own.log_group, own.role
        self.link_check = own.function
        # On the table itself: table.grant would add its indexes, which the check never reads.
        iam.Grant.add_to_principal(
            grantee=self.link_check_role,
            actions=list(LINK_CHECK_TABLE_ACTIONS),
            resource_arns=[self.items_table.table_arn],
        )
        self.link_check_logs.grant_write(self.link_check_role)
        self.link_check_every = every
        self.link_check_schedule = events.Rule(
            self,
            "LinkCheckSchedule",
            description=f"Checks the Archive's external URLs every {every.to_hours():.0f} h",
            schedule=events.Schedule.rate(every),
            # A run that failed leaves its items due: the next run takes them first.
            targets=[targets.LambdaFunction(self.link_check, retry_attempts=0)],
        )

    def _add_datestamp_index(self) -> None:
        """OAI-PMH's records by set and datestamp (store.py), which the function may Query;
        CloudFormation adds it to a table made before it (one index per stack update;
        docs/deploy-archive.md)."""
        self.items_table.add_global_secondary_index(
            index_name=DATESTAMP_INDEX,
            partition_key=dynamodb.Attribute(
                name=SET_ATTRIBUTE, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(
                name=DATESTAMP_ATTRIBUTE, type=dynamodb.AttributeType.NUMBER
            ),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(DATESTAMP_INDEX_SCHEMA["Projection"]["NonKeyAttributes"]),
        )
        iam.Grant.add_to_principal(  # on this index only, not <table>/index/*
            grantee=self.role,
            actions=list(DATESTAMP_INDEX_ACTIONS),
            resource_arns=[f"{self.items_table.table_arn}/index/{DATESTAMP_INDEX}"],
        )

    def _add_urlkey_secret(self) -> secretsmanager.Secret:
        """The HMAC key urlkeys are signed under (functions/archive/urlkeys.py), generated."""
        return secretsmanager.Secret(
            self,
            "UrlkeySecret",
            description="HMAC key under which the Archive signs the urlkeys it answers with",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
            # Nothing outlives it but the urlkeys of the last IBI_URLKEY_TTL_SECONDS.
            removal_policy=RemovalPolicy.DESTROY,
        )

    def _add_buckets(self) -> tuple[s3.Bucket, s3.Bucket]:
        """The files bucket, and the bucket its server access log goes to."""
        access_logs_bucket = s3.Bucket(
            self,
            "FilesAccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,  # the only one server access logs allow
            enforce_ssl=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        files_bucket = s3.Bucket(
            self,
            "FilesBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            # A file overwritten or deleted by mistake can be recovered.
            versioned=True,
            server_access_logs_bucket=access_logs_bucket,
            server_access_logs_prefix="files/",
            removal_policy=RemovalPolicy.RETAIN,
            auto_delete_objects=False,
            # Uploads never committed (and their older versions) go after a day; published
            # files and replaced versions are never expired.
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireUncommittedUploads",
                    prefix=UPLOADS_PREFIX,
                    expiration=UPLOADS_EXPIRE,
                    noncurrent_version_expiration=UPLOADS_EXPIRE,
                    abort_incomplete_multipart_upload_after=UPLOADS_EXPIRE,
                )
            ],
        )
        return access_logs_bucket, files_bucket

    def _add_http_api(
        self, log_retention: logs.RetentionDays, public: apigwv2.IHttpRouteAuthorizer
    ) -> None:
        """The API: the public routes (``public``: none, or behind the edge its origin check),
        and every deposit route behind IAM."""
        integration = self._add_api(
            name="archive",
            description="IBI Archive: service protocol and pages (public), deposit API (IAM)",
            integration_id="ArchiveIntegration",
            log_retention=log_retention,
        )
        self.public_routes = self._add_routes(PUBLIC_ROUTES, integration, public)
        self.confirm_routes = self._add_routes(CONFIRM_ROUTES, integration, public)
        self.oai_routes = self._add_routes(OAI_ROUTES, integration, public)
        self.deposit_routes = self._add_routes(
            (*DEPOSIT_ROUTES, *DEPOSIT_GUARD_ROUTES), integration, HttpIamAuthorizer()
        )

    @property
    def deposit_url(self) -> str:
        """The base of the deposit API (IAM-authorized), ending in ``/``."""
        return f"{self.url}api/"

    def grant_deposit(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` (an operator) call the whole deposit API (``execute-api:Invoke`` on
        each route): revisions, imports and transfers included. The CI role gets a few routes
        only (``infra/ci.py``)."""
        self._grant_routes(self.deposit_routes, grantee)

    def grant_transfer_in(self, sender: iam.IGrantable) -> None:
        """Let ``sender`` (another Archive's role) transfer originals to this Archive: the
        routes of :data:`TRANSFER_IN_ROUTES`, nothing else."""
        wanted = {(method.value, path) for method, path in TRANSFER_IN_ROUTES}
        routes = [
            route
            for route, (method, path) in zip(self.deposit_routes, DEPOSIT_ROUTES, strict=False)
            if (method.value, path) in wanted
        ]
        self._grant_routes(routes, sender)

    def _grant_parameter_read(self, parameter: str) -> None:
        """Read the registration key to switch itself on at the resolver (one parameter)."""
        iam.Grant.add_to_principal(
            grantee=self.role,
            actions=["ssm:GetParameter"],
            resource_arns=[
                Stack.of(self).format_arn(
                    service="ssm", resource="parameter", resource_name=parameter.lstrip("/")
                )
            ],
        )

    def _acknowledge_link_check(self) -> None:
        """The link check's: its runtime, and X-Ray's ``*`` if on (as every function's)."""
        if self.link_check is not None:
            acknowledge_function(self.link_check_role, self.link_check, tracing=self.tracing)

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        bucket_id = logical_id(self.files_bucket)
        super()._acknowledge_findings()
        self._acknowledge_link_check()
        Validations.of(self.role).acknowledge(
            *(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{prefix}*]",
                    reason=(
                        "The files of the items are objects under items/<item>/<path> (published), "
                        "uploads/<item>/<sha256>/<path> (uploads until their commit) and "
                        "history/<item>/<sha256>/<path> (replaced versions) in the Archive's own "
                        "bucket, made as items are deposited: no list of keys exists in advance. "
                        "Only GetObject and PutObject are allowed, only there."
                    ),
                )
                for prefix in FILE_PREFIXES
            )
        )
        Validations.of(self.urlkey_secret).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SMG4",
                reason=(
                    "The urlkey secret is rotated by hand (docs/archive.md): a new value with "
                    "put-secret-value; the Archive verifies under AWSCURRENT and AWSPREVIOUS, "
                    "so no urlkey is lost, and an automatic rotation Lambda would add nothing."
                ),
            )
        )
        if self.behind_edge:
            return  # every public route has the edge's origin check: nothing to accept
        acknowledge_open_routes(
            self.public_routes,
            (
                "GET and HEAD /{proxy+} are the Archive's public face by design: the "
                "IBI service protocol that any resolver calls unsigned, and the files, "
                "file lists, metadata and linksets that persistent URLs lead browsers "
                "and machines to. They change no item's content; they write three "
                "things only: an acknowledgment spends its urlkey (one conditional "
                "write, only for a key the Archive's HMAC verifies within its window) "
                "and counts the access; a file that fails its SHA-256 is recorded "
                "damaged once; the first request ever claims the #service item. "
                "Deposits, revisions and transfers are under /api/ and IAM-authorized "
                "(a transfer between institutions is confirmed on the public POST "
                "/transfers/confirm, which acts only on an offer this Archive signed); "
                "the stage throttles every route (ibi:throttle)."
            ),
        )
        acknowledge_open_routes(
            self.confirm_routes,
            (
                "POST /transfers/confirm is how another institution's Archive, which "
                "holds no credentials of this account, confirms a transfer this "
                "Archive's owner offered (docs/archive.md#transfers-between-"
                "institutions). It acts only on an offer whose HMAC verifies under the "
                "Archive's own key, for the receiver and item version it names, before "
                "its expiry, and demotes that one original once (a conditional write); "
                "anything else is refused without a write. The stage throttles it."
            ),
        )
        acknowledge_open_routes(
            self.oai_routes,
            (
                "GET and POST /oai are OAI-PMH 2.0, which harvesters call unsigned, "
                "with the arguments in a query or a form body (docs/oai-pmh.md): they "
                "read items' public metadata, a bounded number of rows per request, and "
                "write nothing. A route throttle of their own (ibi:throttle.oai_rate) "
                "keeps harvesting below the persistent URLs' limit."
            ),
        )


def grant_mint(minting: MintingService, role: iam.Role) -> list[iam.Grant]:
    """Let ``role`` call ``POST /mint`` and ``GET /mints`` of ``minting``, and none of its
    other routes: it mints, and reads the record of an IBI a depositor names (issue 35: an
    original only for an IBI issued to it or to its depositor, functions/archive/issued.py).

    ``MintingService.grant_invoke`` grants every route. ``role`` and ``minting`` are in one
    stack (the findings acknowledged name the API's logical id).
    """
    grants = []
    for path, method in ((MINT_PATH, POST), (MINTS_PATH, GET)):
        (route,) = [route for route in minting.routes if route.path == path]
        grants.append(route.grant_invoke(role, http_methods=[method]))
        _acknowledge_mint_grant(minting, role, f"{method.value}{path}")
    return grants


def _acknowledge_mint_grant(minting: MintingService, role: iam.Role, route: str) -> None:
    """The cdk-nag finding :func:`grant_mint` accepts on purpose, with the reason it is safe."""
    Validations.of(role).acknowledge(
        Acknowledgment(
            id=(
                "AwsSolutions-IAM5[Resource::"
                f"{nag_arn_prefix(role, 'execute-api', literal_partition=False)}:"
                f"<{logical_id(minting.api)}>/*/{route}]"
            ),
            reason=(
                "The one wildcard is the stage: the minting API has a single stage, $default. "
                "The API, the method and the route are named, so the Archive may call POST "
                "/mint and GET /mints (an IBI's record) and no other route of the minting "
                "service."
            ),
        )
    )
