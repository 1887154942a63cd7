"""The Archive stack's template: table, buckets, function, permissions, routes, outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from functions.archive.handler import app as archive_app
from functions.archive.settings import ArchiveSettings
from functions.archive.store import TABLE_SCHEMA
from infra.config import DEFAULT_SUBSYSTEMS
from infra.stacks import ArchiveStack
from tests.infra.support import Synthesized, actions, arn_of, granted

pytestmark = pytest.mark.infra

Archive = Synthesized[ArchiveStack]

ITEMS_TABLE_ACTIONS = {
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Scan",
}
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
LOG_ACTIONS = {"logs:CreateLogStream", "logs:PutLogEvents"}
DEPOSIT_ROUTE_KEYS = {
    "GET /api/service",
    "POST /api/items",
    "POST /api/copies",
    "GET /api/item",
    "PATCH /api/item",
    "DELETE /api/item",
    "POST /api/item/links",
    "DELETE /api/item/links",
    "GET /api/items",
    "POST /api/item/uploads",
    "POST /api/item/files",
    "POST /api/verify",
    "POST /api/item/transfer",
    "POST /api/item/files/replace",
    "GET /api/item/previous",
    "POST /api/imports",
    "POST /api/transfers",
    "POST /api/transfers/complete",
    "DELETE /api/transfers",
    "POST /api/item/offers",
    "POST /api/transfers/accept",
    "POST /api/links/check",
    "GET /api/links",
}
CONFIRM_ROUTE_KEY = "POST /transfers/confirm"  # public: an offer's HMAC authorizes it
OAI_ROUTE_KEY = "POST /oai"  # public: OAI-PMH's form-body requests (GET /oai too)
PUBLIC_ROUTE_KEY = "GET /{proxy+}"
PUBLIC_HEAD_ROUTE_KEY = "HEAD /{proxy+}"
GUARD_ROUTE_KEY = "GET /api/{proxy+}"
HEAD_GUARD_ROUTE_KEY = "HEAD /api/{proxy+}"
EVENTS = Path(__file__).resolve().parents[2] / "events" / "archive"


def _route_authorization(archive: Archive) -> dict[str, str]:
    routes = archive.resources("AWS::ApiGatewayV2::Route").values()
    archive_api = archive.logical_id(archive.stack.archive.api)
    return {
        route["Properties"]["RouteKey"]: route["Properties"]["AuthorizationType"]
        for route in routes
        if route["Properties"]["ApiId"] == {"Ref": archive_api}
    }


def _select_route(route_keys: set[str], method: str, path: str) -> str | None:
    """The route an HTTP API picks: an exact match, else the longest greedy prefix."""
    if f"{method} {path}" in route_keys:
        return f"{method} {path}"
    greedy = [
        key
        for key in route_keys
        if key.startswith(f"{method} ")
        and key.endswith("/{proxy+}")
        and path.startswith(key.split(" ", 1)[1].removesuffix("{proxy+}"))
        and len(path) > len(key.split(" ", 1)[1].removesuffix("{proxy+}"))
    ]
    return max(greedy, key=len, default=None)


# -- the items table and the files bucket -------------------------------------------------------


def test_items_table(archive_synthesized: Archive) -> None:
    table_id = archive_synthesized.logical_id(archive_synthesized.stack.archive.items_table)
    table = archive_synthesized.resources("AWS::DynamoDB::Table")[table_id]
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    # the key schema and OAI-PMH's index as the store makes them locally (store.TABLE_SCHEMA)
    assert table["Properties"] == {
        "KeySchema": TABLE_SCHEMA["KeySchema"],
        "AttributeDefinitions": TABLE_SCHEMA["AttributeDefinitions"],
        "GlobalSecondaryIndexes": TABLE_SCHEMA["GlobalSecondaryIndexes"],
        "BillingMode": "PAY_PER_REQUEST",
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "SSESpecification": {"SSEEnabled": True},
        "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        "DeletionProtectionEnabled": True,  # issue 13: no DeleteTable, no replacement
    }


def test_files_bucket_is_private_encrypted_versioned_logged_and_retained(
    archive_synthesized: Archive,
) -> None:
    archive = archive_synthesized.stack.archive
    buckets = archive_synthesized.resources("AWS::S3::Bucket")
    files = buckets[archive_synthesized.logical_id(archive.files_bucket)]
    logs_id = archive_synthesized.logical_id(archive.access_logs_bucket)
    assert set(buckets) == {archive_synthesized.logical_id(archive.files_bucket), logs_id}
    for bucket in buckets.values():
        assert bucket["DeletionPolicy"] == "Retain"
        assert bucket["UpdateReplacePolicy"] == "Retain"
        properties = bucket["Properties"]
        assert properties["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert properties["BucketEncryption"] == {
            "ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
            ]
        }
        assert "CorsConfiguration" not in properties
    assert files["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert files["Properties"]["LoggingConfiguration"] == {
        "DestinationBucketName": {"Ref": logs_id},
        "LogFilePrefix": "files/",
    }
    # auto_delete_objects off: no custom resource that would empty the bucket
    assert not archive_synthesized.resources("Custom::S3AutoDeleteObjects")


def test_only_uncommitted_uploads_expire(archive_synthesized: Archive) -> None:
    """Published files (items/) and replaced versions (history/) are kept for good."""
    archive = archive_synthesized.stack.archive
    files = archive_synthesized.resources("AWS::S3::Bucket")[
        archive_synthesized.logical_id(archive.files_bucket)
    ]
    assert files["Properties"]["LifecycleConfiguration"] == {
        "Rules": [
            {
                "Id": "ExpireUncommittedUploads",
                "Prefix": "uploads/",
                "Status": "Enabled",
                "ExpirationInDays": 1,
                "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            },
            # issue 13: versions overwritten or deleted (history/ holds current objects)
            {
                "Id": "ExpireNoncurrentVersions",
                "Status": "Enabled",
                "NoncurrentVersionExpiration": {"NoncurrentDays": 90},
            },
        ]
    }


def test_buckets_refuse_requests_without_tls(archive_synthesized: Archive) -> None:
    policies = archive_synthesized.resources("AWS::S3::BucketPolicy").values()
    assert len(policies) == 2
    for policy in policies:
        (deny,) = [
            statement
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Effect"] == "Deny"
        ]
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        assert deny["Principal"] == {"AWS": "*"}


# -- the function -----------------------------------------------------------------------------


def _archive_function(archive: Archive) -> dict[str, Any]:
    function_id = archive.logical_id(archive.stack.archive.function)
    return dict(archive.resources("AWS::Lambda::Function")[function_id]["Properties"])


def test_function_runtime_size_and_tracing(archive_synthesized: Archive) -> None:
    function = _archive_function(archive_synthesized)
    assert function["Runtime"] == "python3.13"
    assert function["Architectures"] == ["arm64"]
    assert function["Handler"] == "functions.archive.handler.lambda_handler"
    assert "TracingConfig" not in function  # X-Ray is a choice, off by default (ibi:tracing)
    assert function["Timeout"] == 29  # below the HTTP API's 30 s
    assert function["MemorySize"] == 512
    log_group = archive_synthesized.stack.archive.log_group
    assert function["LoggingConfig"] == {
        "LogGroup": {"Ref": archive_synthesized.logical_id(log_group)}
    }


def test_function_environment(archive_synthesized: Archive) -> None:
    stack = archive_synthesized.stack
    variables = _archive_function(archive_synthesized)["Environment"]["Variables"]
    minting_api = archive_synthesized.logical_id(stack.minting.api)
    assert variables == {
        "IBI_ARCHIVE_TABLE": {"Ref": archive_synthesized.logical_id(stack.archive.items_table)},
        "IBI_ARCHIVE_BUCKET": {"Ref": archive_synthesized.logical_id(stack.archive.files_bucket)},
        "IBI_MINT_ENDPOINT": {
            "Fn::Join": [
                "",
                [
                    "https://",
                    {"Ref": minting_api},
                    ".execute-api.",
                    {"Ref": "AWS::Region"},
                    ".",
                    {"Ref": "AWS::URLSuffix"},
                    "/",
                ],
            ]
        },
        # cdk.json leaves base_url, platform_software and mint_subsystem to the Lambda
        "IBI_URLKEY_TTL_SECONDS": "600",
        "IBI_URLKEY_SECRET_ARN": {
            "Ref": archive_synthesized.logical_id(stack.archive.urlkey_secret)
        },
        # its minting service's subsystems, both forms: the IBIs it takes originals for
        "IBI_ARCHIVE_SUBSYSTEM_PREFIXES": ",".join(
            prefix
            for subsystem in DEFAULT_SUBSYSTEMS
            for prefix in (subsystem.rep_prefix, subsystem.ibip_prefix)
        ),
        # who it is in a mint record (issued.py): its own role
        "IBI_ARCHIVE_PRINCIPAL": {
            "Fn::GetAtt": [archive_synthesized.logical_id(stack.archive.role), "Arn"]
        },
        "POWERTOOLS_SERVICE_NAME": "archive",
        "POWERTOOLS_METRICS_NAMESPACE": "ibi",
        "LOG_LEVEL": "INFO",
        "POWERTOOLS_TRACE_DISABLED": "true",  # X-Ray off by default (ibi:tracing)
    }


def test_the_function_accepts_its_environment(archive_synthesized: Archive) -> None:
    """The deployed variables pass the Lambda's own settings validation."""
    variables = _archive_function(archive_synthesized)["Environment"]["Variables"]
    placeholders = {
        "IBI_ARCHIVE_TABLE": "items-table",
        "IBI_ARCHIVE_BUCKET": "files-bucket",
        "IBI_MINT_ENDPOINT": "https://abc123.execute-api.eu-west-1.amazonaws.com/",
        "IBI_URLKEY_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:u-AbCdEf",
        "IBI_ARCHIVE_PRINCIPAL": "arn:aws:iam::123456789012:role/IbiArchive-ArchiveFunctionRole",
    }
    resolved = {
        name: value if isinstance(value, str) else placeholders[name]
        for name, value in variables.items()
    }
    settings = ArchiveSettings.from_environment(resolved)
    assert settings.table == "items-table"
    assert settings.bucket == "files-bucket"
    assert settings.mint_endpoint == placeholders["IBI_MINT_ENDPOINT"]
    assert settings.base_url is None  # the API's own domain
    assert settings.urlkey_ttl_seconds == 600
    assert settings.subsystem_prefixes == ("example.org/ibi", DEFAULT_SUBSYSTEMS[0].ibip_prefix)
    assert settings.allow_networks == ()  # a transfer reaches public addresses only
    assert settings.principal == placeholders["IBI_ARCHIVE_PRINCIPAL"]


def test_function_role_grants_exactly_what_the_function_does(
    archive_synthesized: Archive,
) -> None:
    stack = archive_synthesized.stack
    role_id = archive_synthesized.logical_id(stack.archive.role)
    role = archive_synthesized.resources("AWS::IAM::Role")[role_id]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert "Policies" not in role

    def logical_id(construct: Any) -> str:
        return archive_synthesized.logical_id(construct)

    def minting_route(route: str) -> dict[str, Any]:
        return {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":execute-api:",
                    {"Ref": "AWS::Region"},
                    ":",
                    {"Ref": "AWS::AccountId"},
                    ":",
                    {"Ref": logical_id(stack.minting.api)},
                    f"/*/{route}",
                ],
            ]
        }

    assert granted(archive_synthesized.template, role_id) == {
        arn_of(logical_id(stack.archive.items_table)): ITEMS_TABLE_ACTIONS,
        # OAI-PMH's index: Query, on it alone (not <table>/index/*)
        arn_of(logical_id(stack.archive.items_table), "/index/oai-datestamp"): {"dynamodb:Query"},
        # published files, uploads until their commit, replaced versions: nothing else
        json.dumps(
            [
                json.loads(arn_of(logical_id(stack.archive.files_bucket), f"/{prefix}*"))
                for prefix in ("history/", "items/", "uploads/")
            ],
            sort_keys=True,
        ): {"s3:GetObject", "s3:PutObject"},
        arn_of(logical_id(stack.archive.files_bucket)): {"s3:ListBucket"},
        arn_of(logical_id(stack.archive.log_group)): LOG_ACTIONS,
        # it mints, and reads an IBI's mint record (issued.py): no other minting route
        json.dumps([minting_route("GET/mints"), minting_route("POST/mint")], sort_keys=True): {
            "execute-api:Invoke"
        },
        json.dumps({"Ref": logical_id(stack.archive.urlkey_secret)}): {
            "secretsmanager:GetSecretValue"
        },
    }


def test_no_policy_uses_wildcard_actions_or_reaches_another_bucket(
    archive_synthesized: Archive,
) -> None:
    # BatchGetItem is granted on the items table alone (the urlRequest's one read)
    forbidden = {"dynamodb:BatchWriteItem", "s3:DeleteObject"}
    for policy in archive_synthesized.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            found = actions(statement)
            assert not any(action.endswith("*") for action in found), statement
            assert not found & forbidden, statement
            if any(action.startswith(("s3:", "dynamodb:")) for action in found):
                assert statement["Resource"] != "*", statement


# -- the API ----------------------------------------------------------------------------------


def test_every_route_and_its_authorization(archive_synthesized: Archive) -> None:
    authorization = _route_authorization(archive_synthesized)
    assert authorization == {
        PUBLIC_ROUTE_KEY: "NONE",
        PUBLIC_HEAD_ROUTE_KEY: "NONE",
        CONFIRM_ROUTE_KEY: "NONE",
        OAI_ROUTE_KEY: "NONE",
        "GET /oai": "NONE",
        GUARD_ROUTE_KEY: "AWS_IAM",
        HEAD_GUARD_ROUTE_KEY: "AWS_IAM",
        **dict.fromkeys(DEPOSIT_ROUTE_KEYS, "AWS_IAM"),
    }


def test_the_lambdas_deposit_routes_are_exactly_the_iam_routes() -> None:
    """A route the Lambda serves under /api/ is declared, and IAM-authorized, in the API."""
    app = archive_app
    # Powertools keeps its routes on private attributes; the list is what the Lambda serves.
    served = {(route.method, route.path) for route in app._static_routes + app._dynamic_routes}
    assert {f"{method} {path}" for method, path in served if path.startswith("/api/")} == (
        DEPOSIT_ROUTE_KEYS
    )
    # Everything else is read-only, reached through the public GET and HEAD catch-alls, but the
    # public confirmation of a signed offer and OAI-PMH's form-body requests, declared as routes.
    others = {(method, path) for method, path in served if not path.startswith("/api/")}
    assert {method for method, _ in others} == {"GET", "HEAD", "POST"}
    assert {f"{method} {path}" for method, path in others if method == "POST"} == {
        CONFIRM_ROUTE_KEY,
        OAI_ROUTE_KEY,
    }


@pytest.mark.parametrize("event", sorted(EVENTS.glob("*.json")), ids=lambda path: path.stem)
def test_each_recorded_event_takes_a_route_with_its_authorization(
    archive_synthesized: Archive, event: Path
) -> None:
    """events/archive/: deposit requests come signed (IAM), the protocol and pages do not."""
    request = json.loads(event.read_text())
    http = request["requestContext"]["http"]
    authorization = _route_authorization(archive_synthesized)
    route = _select_route(set(authorization), http["method"], request["rawPath"])
    assert route is not None
    signed = "iam" in (request["requestContext"].get("authorizer") or {})
    assert authorization[route] == ("AWS_IAM" if signed else "NONE"), route


@pytest.mark.parametrize(
    ("method", "path", "route"),
    [
        ("GET", "/8JMKD3MGP8W/3FSUP4L", PUBLIC_ROUTE_KEY),
        ("GET", "/col/8JMKD3MGP8W/35MME4E/a.txt", PUBLIC_ROUTE_KEY),
        ("GET", "/api/items", "GET /api/items"),
        ("GET", "/api/items/", GUARD_ROUTE_KEY),
        ("GET", "/api/anything/else", GUARD_ROUTE_KEY),
        ("HEAD", "/col/8JMKD3MGP8W/35MME4E/a.txt", PUBLIC_HEAD_ROUTE_KEY),
        ("HEAD", "/api/item", HEAD_GUARD_ROUTE_KEY),
        ("POST", "/api/anything", None),
        ("POST", "/col/x", None),
    ],
)
def test_no_path_under_api_reaches_the_public_catch_all(
    archive_synthesized: Archive, method: str, path: str, route: str | None
) -> None:
    authorization = _route_authorization(archive_synthesized)
    assert _select_route(set(authorization), method, path) == route


def test_routes_reach_the_archive_function_with_payload_v2(archive_synthesized: Archive) -> None:
    stack = archive_synthesized.stack
    api_id = {"Ref": archive_synthesized.logical_id(stack.archive.api)}
    function_arn = {"Fn::GetAtt": [archive_synthesized.logical_id(stack.archive.function), "Arn"]}
    integrations = [
        integration["Properties"]
        for integration in archive_synthesized.resources("AWS::ApiGatewayV2::Integration").values()
        if integration["Properties"]["ApiId"] == api_id
    ]
    assert len(integrations) == 1
    (integration,) = integrations
    assert integration["IntegrationType"] == "AWS_PROXY"
    assert integration["PayloadFormatVersion"] == "2.0"
    assert integration["IntegrationUri"] == function_arn


def test_stage_writes_json_access_logs(archive_synthesized: Archive) -> None:
    stack = archive_synthesized.stack
    stage_id = archive_synthesized.logical_id(stack.archive.stage)
    stage = archive_synthesized.resources("AWS::ApiGatewayV2::Stage")[stage_id]["Properties"]
    assert stage["StageName"] == "$default"
    assert stage["AutoDeploy"] is True
    access_logs_id = archive_synthesized.logical_id(stack.archive.access_logs)
    assert stage["AccessLogSettings"]["DestinationArn"] == {"Fn::GetAtt": [access_logs_id, "Arn"]}
    access_log = json.loads(stage["AccessLogSettings"]["Format"])
    assert access_log["routeKey"] == "$context.routeKey"
    assert access_log["userArn"] == "$context.identity.userArn"


def test_the_stack_holds_an_archive_and_its_own_minting_service(
    archive_synthesized: Archive,
) -> None:
    template = archive_synthesized.template
    template.resource_count_is("AWS::DynamoDB::Table", 4)  # items + minting's three
    template.resource_count_is("AWS::Lambda::Function", 3)  # and the link check
    template.resource_count_is("AWS::ApiGatewayV2::Api", 2)
    template.resource_count_is("AWS::Logs::LogGroup", 5)
    template.all_resources_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})
    minting_routes = {
        route["Properties"]["RouteKey"]
        for route in archive_synthesized.resources("AWS::ApiGatewayV2::Route").values()
        if route["Properties"]["ApiId"]
        == {"Ref": archive_synthesized.logical_id(archive_synthesized.stack.minting.api)}
    }
    assert minting_routes == {
        "POST /mint",
        "GET /mints",
        "GET /mints/verify",
        "GET /subsystems",
        "GET /openapi.json",
    }


def test_outputs(archive_synthesized: Archive) -> None:
    stack = archive_synthesized.stack
    template = archive_synthesized.template

    def url_ending(suffix: str) -> dict[str, Any]:
        return {
            "Value": {"Fn::Join": ["", Match.array_with([Match.string_like_regexp(f"{suffix}$")])]}
        }

    template.has_output("ArchiveUrl", url_ending("/"))
    template.has_output("DepositApiUrl", url_ending("/api/"))
    template.has_output("MintingApiUrl", url_ending("/"))
    template.has_output("MintUrl", url_ending("/mint"))
    for output, construct in (
        ("ItemsTableName", stack.archive.items_table),
        ("FilesBucketName", stack.archive.files_bucket),
        ("FilesAccessLogsBucketName", stack.archive.access_logs_bucket),
        ("ArchiveFunctionName", stack.archive.function),
        ("MintingFunctionName", stack.minting.function),
    ):
        template.has_output(output, {"Value": {"Ref": archive_synthesized.logical_id(construct)}})
    assert archive_synthesized.template.to_json()["Outputs"]["ArchiveUrl"]["Value"] == (
        archive_synthesized.stack.resolve(stack.archive.url)
    )
