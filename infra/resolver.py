"""The resolver: its registry table, its pepper secret, its Lambda and its HTTP API."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from aws_cdk.aws_apigatewayv2_authorizers import HttpIamAuthorizer
from aws_cdk.aws_lambda_event_sources import SqsEventSource
from constructs import Construct

from functions.resolver.queue import BATCH, MAX_RECEIVES, VISIBILITY_SECONDS
from ibi.defaults import RESOLVER_SERVICE_IBI
from infra.bundling import function_code
from infra.service import (
    LambdaService,
    acknowledge_function,
    acknowledge_open_routes,
    own_function,
    powertools_environment,
)

GET = apigwv2.HttpMethod.GET
HEAD = apigwv2.HttpMethod.HEAD
POST = apigwv2.HttpMethod.POST
DELETE = apigwv2.HttpMethod.DELETE

# Each action the resolver Lambda performs, and nothing else (registry.py).
REGISTRY_ACTIONS = (
    "dynamodb:GetItem",  # an Archive's record, the generation (directory.py: every 5 s)
    "dynamodb:UpdateItem",  # register, claim prefixes, switch, bump the generation, note answers
    "dynamodb:Scan",  # every Archive, when the generation moved (one item per Archive)
    "dynamodb:DeleteItem",  # a prefix's claim released (release_prefixes); deregister
)
# throttle.py: the counters of wrong registration keys, read and counted; never scanned.
THROTTLE_ACTIONS = ("dynamodb:GetItem", "dynamodb:UpdateItem")
# kept.py: what each authority last answered, read when it does not answer, written when its
# answer changed (or a day after it was last written); never scanned.
KEPT_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem")
# pepper.py's SecretPepper.load reads the secret's value, once per execution environment
# (wiring.py builds the registration service with it).
PEPPER_ACTIONS = ("secretsmanager:GetSecretValue",)
# queue.py's SqsQueue: one message per acknowledgment (acknowledgments.py), on the
# acknowledgment queue only.
QUEUE_ACTIONS = ("sqs:SendMessage",)
HANDLER = "functions.resolver.handler.lambda_handler"
ARCHIVE_TIMEOUT_SECONDS = 3  # one Archive's answer
DEADLINE_SECONDS = 10  # a whole resolution (every round); API Gateway gives up at 30 s
TIMEOUT = Duration.seconds(DEADLINE_SECONDS + 5)  # the deadline, then the answer
MEMORY_MB = 1024  # network-bound; more memory is more CPU for 64 concurrent requests

# The acknowledgment drain (drain.py): the resolver's asset, a role of its own. It reads the
# registry (directory.py: the generation, then every Archive) and nothing else.
DRAIN_HANDLER = "functions.resolver.drain.lambda_handler"
DRAIN_REGISTRY_ACTIONS = ("dynamodb:GetItem", "dynamodb:Scan")
# A batch of 10, one Archive after another at 3 s each at worst: 30 s, then 10 s to spare.
DRAIN_TIMEOUT = Duration.seconds(BATCH * ARCHIVE_TIMEOUT_SECONDS + 10)
# Lambda's advice for an SQS event source: a visibility timeout of 6 times the function's
# timeout (queue.py's VISIBILITY_SECONDS, which local mode's queue keeps too), so that a batch
# the poller retries after a throttled invocation is not delivered twice meanwhile. A failed
# delivery is retried after it; after MAX_RECEIVES the message is a dead letter.
DRAIN_VISIBILITY = Duration.seconds(VISIBILITY_SECONDS)
DRAIN_MEMORY_MB = 256  # one Archive request at a time
DRAIN_WINDOW = Duration.seconds(1)  # wait up to 1 s to fill a batch: acknowledgments are not urgent

# Public: persistent URLs, the service protocol, the pages. IAM: the administration.
PUBLIC_ROUTES = ((GET, "/"), (GET, "/{proxy+}"), (HEAD, "/{proxy+}"))
ADMIN_ROUTES = (
    (POST, "/admin/archives"),
    (GET, "/admin/archives"),
    (DELETE, "/admin/archives"),  # deregister (issue 39)
    (POST, "/admin/prefixes"),
    (POST, "/admin/switch"),  # the administrator's switch and key rotation (issue 39)
)
# GET and HEAD /{proxy+} are public: these more specific routes keep the whole /admin/
# namespace behind IAM, even for a route added to the Lambda only (as the Archive's /api/).
ADMIN_GUARD_ROUTES = ((GET, "/admin/{proxy+}"), (HEAD, "/admin/{proxy+}"))


class Resolver(LambdaService):
    """The IBI resolver: one Lambda behind an HTTP API, its registry, its pepper.

    * the registry table: one item per registered Archive (its key only as an HMAC) and the
      generation counter (its TTL only lets the throttle records of earlier versions expire);
    * the throttle table: counters of wrong registration keys per (source, Archive) and per
      Archive, for registered Archives only, each expiring through the TTL after its window;
    * the pepper: a generated Secrets Manager secret, the HMAC key of registration keys;
    * the API: persistent URLs, the inclusion/exclusion protocol and the pages for anyone,
      ``/admin/`` (registering, switching, re-keying, deregistering Archives) for IAM
      (SigV4-signed) callers only;
    * an optional custom domain (``domain_name`` + ``certificate_arn``) for persistent URLs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service_ibi: str = RESOLVER_SERVICE_IBI,
        name: str = "IBI resolver",
        domain_name: str | None = None,
        certificate_arn: str | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        log_level: str = "INFO",
        code: lambda_.Code | None = None,
        reserved_concurrency: int | None = None,
        public_authorizer: apigwv2.IHttpRouteAuthorizer | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if (domain_name is None) != (certificate_arn is None):
            raise ValueError("domain_name and certificate_arn go together, or neither is given")
        self._add_tables()
        self.pepper = secretsmanager.Secret(
            self,
            "Pepper",
            description="HMAC key under which the resolver keeps registration keys",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
            # Without it every registered key stops matching: keep it with the registry.
            removal_policy=RemovalPolicy.RETAIN,
        )
        self._add_acknowledgment_queue()
        code = code or function_code("resolver")  # one asset for the resolver and its drain
        self._add_function(
            service="resolver",
            handler=HANDLER,
            description="The IBI resolver: persistent URLs, Archive registration, pages",
            role_description=(
                "The resolver Lambda: its log group, registry, throttle and kept answers' "
                "tables, pepper, X-Ray"
            ),
            memory_size=MEMORY_MB,
            timeout=TIMEOUT,
            environment={
                "IBI_RESOLVER_TABLE": self.registry_table.table_name,
                "IBI_THROTTLE_TABLE": self.throttle_table.table_name,
                "IBI_KEPT_TABLE": self.kept_table.table_name,
                "IBI_RESOLVER_SERVICE_IBI": service_ibi,
                "IBI_PEPPER_SECRET_ARN": self.pepper.secret_arn,
                "IBI_ARCHIVE_TIMEOUT_SECONDS": str(ARCHIVE_TIMEOUT_SECONDS),
                "IBI_RESOLUTION_DEADLINE_SECONDS": str(DEADLINE_SECONDS),
                "IBI_RESOLVER_NAME": name,
                "IBI_ACK_QUEUE_URL": self.acknowledgment_queue.queue_url,
                # IBI_ALLOW_NETWORKS is left unset (empty): in AWS the resolver contacts
                # public addresses only, never a private or link-local one (network.py).
            },
            log_retention=log_retention,
            log_level=log_level,
            code=code,
            # Not pepper.grant_read: it adds DescribeSecret, which the function never calls.
            # The secret is encrypted with the AWS-managed key, which needs no grant of its own.
            grants=[
                (PEPPER_ACTIONS, [self.pepper.secret_arn]),
                (QUEUE_ACTIONS, [self.acknowledgment_queue.queue_arn]),
            ],
            reserved_concurrency=reserved_concurrency,
        )
        self._add_drain(code, log_retention, log_level)
        self._add_http_api(log_retention, service_ibi, public_authorizer)
        self.domain: apigwv2.DomainName | None = None
        if domain_name is not None and certificate_arn is not None:
            self.domain = self._add_domain(domain_name, certificate_arn)
        self._acknowledge_findings()

    def _add_tables(self) -> None:
        """The registry, the wrong-key counters and the authorities' kept answers."""
        self.registry_table = self._add_table(
            "RegistryTable",
            partition_key="service",
            time_to_live_attribute="expires_at",
            actions=REGISTRY_ACTIONS,
        )
        self.throttle_table = self._add_table(
            "ThrottleTable",
            partition_key="counter",
            time_to_live_attribute="expires_at",
            actions=THROTTLE_ACTIONS,
        )
        self.kept_table = self._add_table(
            "KeptTable",
            partition_key="request",
            time_to_live_attribute="expires_at",
            actions=KEPT_ACTIONS,
        )

    def _add_acknowledgment_queue(self) -> None:
        """The durable queue acknowledgments wait in (encrypted, TLS only), and its DLQ."""
        self.dead_letters = sqs.Queue(
            self,
            "AcknowledgmentDeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),  # the longest SQS keeps: time to look
        )
        self.acknowledgment_queue = sqs.Queue(
            self,
            "AcknowledgmentQueue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=DRAIN_VISIBILITY,
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=MAX_RECEIVES, queue=self.dead_letters
            ),
        )

    def _add_drain(
        self, code: lambda_.Code, log_retention: logs.RetentionDays, log_level: str
    ) -> None:
        """The drain: the queue's event source, delivering each acknowledgment (drain.py)."""
        own = own_function(
            self,
            ids=("DrainLogs", "DrainRole"),
            function_id="DrainFunction",
            service="resolver",
            handler=DRAIN_HANDLER,
            description="Delivers the resolver's queued acknowledgments to their Archives",
            role_description=(
                "The acknowledgment drain: its queue, log group, registry reads, X-Ray"
            ),
            memory_size=DRAIN_MEMORY_MB,
            timeout=DRAIN_TIMEOUT,
            environment={
                "IBI_RESOLVER_TABLE": self.registry_table.table_name,
                "IBI_ARCHIVE_TIMEOUT_SECONDS": str(ARCHIVE_TIMEOUT_SECONDS),
                **powertools_environment("resolver", log_level),
            },
            log_retention=log_retention,
            code=code,
        )
        self.drain_logs, self.drain_role, self.drain = own.log_group, own.role, own.function
        self.registry_table.grant(self.drain, *DRAIN_REGISTRY_ACTIONS)
        self.drain_logs.grant_write(self.drain_role)
        # Grants ReceiveMessage, DeleteMessage, ChangeMessageVisibility, GetQueueAttributes
        # and GetQueueUrl on this queue only.
        self.drain.add_event_source(
            SqsEventSource(
                self.acknowledgment_queue,
                batch_size=BATCH,
                max_batching_window=DRAIN_WINDOW,
                report_batch_item_failures=True,
            )
        )

    def _add_http_api(
        self,
        log_retention: logs.RetentionDays,
        service_ibi: str,
        public_authorizer: apigwv2.IHttpRouteAuthorizer | None,
    ) -> None:
        """The API: public routes for anyone (behind the edge, for the edge only: the origin
        check of ``public_authorizer``), the administration behind IAM.

        Behind the edge the inclusion protocol keeps a route of its own at the API's address,
        without the origin check: Archives switch on there, each counted by its own address
        in the wrong-key counters, which behind CloudFront would count per edge location. The
        registration key authenticates it; those counters and the stage throttle it.
        """
        integration = self._add_api(
            name="resolver",
            description="IBI resolver: persistent URLs and pages (public), administration (IAM)",
            integration_id="ResolverIntegration",
            log_retention=log_retention,
        )
        self.public_routes = self._add_routes(
            PUBLIC_ROUTES, integration, public_authorizer or apigwv2.HttpNoneAuthorizer()
        )
        self.protocol_routes: list[apigwv2.HttpRoute] = []
        self.behind_edge = public_authorizer is not None
        if public_authorizer is not None:
            self.protocol_routes = self._add_routes(
                ((GET, f"/{service_ibi}"),), integration, apigwv2.HttpNoneAuthorizer()
            )
        self.admin_routes = self._add_routes(
            (*ADMIN_ROUTES, *ADMIN_GUARD_ROUTES), integration, HttpIamAuthorizer()
        )

    def _add_domain(self, domain_name: str, certificate_arn: str) -> apigwv2.DomainName:
        """The custom domain of persistent URLs, mapped to the API's stage."""
        domain = apigwv2.DomainName(
            self,
            "Domain",
            domain_name=domain_name,
            certificate=acm.Certificate.from_certificate_arn(self, "Certificate", certificate_arn),
        )
        apigwv2.ApiMapping(self, "Mapping", api=self.api, domain_name=domain, stage=self.stage)
        return domain

    @property
    def url(self) -> str:
        """The base of persistent URLs: the custom domain when there is one."""
        if self.domain is not None:
            return f"https://{self.domain.name}/"
        return self.api_url

    @property
    def api_url(self) -> str:
        """The API's own ``execute-api`` address, ending in ``/``: ``ibi resolver register``
        signs its requests there without being told the region (``--sign --region``)."""
        return super().api_url

    def grant_admin(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` register Archives (``execute-api:Invoke`` on ``/admin/``)."""
        self._grant_routes(self.admin_routes, grantee)

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings accepted on purpose, each with the reason it is safe."""
        super()._acknowledge_findings()
        acknowledge_function(self.drain_role, self.drain, tracing=self.tracing)
        Validations.of(self.pepper).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SMG4",
                reason=(
                    "The pepper cannot be rotated automatically: every registration key is kept "
                    "only as an HMAC under it, so a new pepper means re-registering every "
                    "Archive. Rotating it is a manual procedure, documented in docs/deploy.md."
                ),
            )
        )
        public = self.protocol_routes if self.behind_edge else self.public_routes
        acknowledge_open_routes(
            public,
            (
                "Persistent URLs, the inclusion/exclusion protocol (authenticated by the "
                "registration key it carries) and the pages are public by design: any "
                "browser and any Archive must reach them unsigned. The administration "
                "is under /admin/ and IAM-authorized."
            ),
        )
