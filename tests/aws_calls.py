"""Every AWS call a function makes in the tests, checked against its role in the template.

Issue 13: a check that needs no AWS account. :func:`install` wraps botocore's
``BaseClient._make_api_call`` for the whole test session (forked local-gateway workers inherit
it) and appends one JSON line per call to a log: the function whose Lambda entry point is on
the stack (``functions.<service>.handler``, the resolver's ``drain`` or the Archive's
``linkcheck``; calls a test makes to
set up tables, buckets or secrets, through function code or not, have none and are not
recorded), the IAM action, and the resource it names, with the ``IBI_*`` environment variables
whose value that resource is (the way each Lambda learns its tables, bucket, secrets and queue).

:func:`evaluate` reads the synthesized templates: each function's role's policy statements,
and each environment variable's resource (``Ref``/``Fn::GetAtt`` of a logical id). A call is
allowed when a statement of that role grants its action on its resource; where the resource's
variable is not known (a test that built settings by hand), on a resource of that service.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOG_VARIABLE = "IBI_TEST_AWS_CALL_LOG"
ENTRY_MODULES = {
    "functions.minting.handler": "minting",
    "functions.archive.handler": "archive",
    "functions.resolver.handler": "resolver",
    "functions.resolver.drain": "drain",
    "functions.archive.linkcheck": "linkcheck",
}
HANDLERS = {
    "functions.minting.handler.lambda_handler": "minting",
    "functions.archive.handler.lambda_handler": "archive",
    "functions.resolver.handler.lambda_handler": "resolver",
    "functions.resolver.drain.lambda_handler": "drain",
    "functions.archive.linkcheck.lambda_handler": "linkcheck",
}
# S3 operations whose IAM action has another name.
S3_ACTIONS = {"HeadObject": "GetObject", "ListObjectsV2": "ListBucket", "HeadBucket": "ListBucket"}


@dataclass(frozen=True)
class Call:
    function: str
    action: str
    resource: str  # a table, bucket/key, secret, parameter or queue, as the call named it
    variables: tuple[str, ...]  # IBI_* variables whose value is the resource (or its bucket)


def _function() -> str | None:
    """The function whose Lambda entry point is on the calling stack, innermost first."""
    frame = sys._getframe(2)
    while frame is not None:
        found = ENTRY_MODULES.get(frame.f_globals.get("__name__", ""))
        if found is not None:
            return found
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _copy_source(params: dict[str, Any]) -> str:
    source = params["CopySource"]
    if isinstance(source, dict):
        return f"{source['Bucket']}/{source['Key']}"
    return str(source).lstrip("/").split("?", 1)[0]


def _actions(service: str, operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """(IAM action, resource) of one call: CopyObject is GetObject on its source and PutObject
    on its destination."""
    if service == "s3" and operation == "CopyObject":
        destination = f"{params['Bucket']}/{params['Key']}"
        return [("s3:GetObject", _copy_source(params)), ("s3:PutObject", destination)]
    return [(_action(service, operation), r) for r in _resources(service, operation, params)]


def _resources(service: str, operation: str, params: dict[str, Any]) -> list[str]:
    if service == "dynamodb":
        if "TableName" in params and "IndexName" in params:  # a Query of an index: its own ARN
            return [f"{params['TableName']}/index/{params['IndexName']}"]
        if "TableName" in params:
            return [str(params["TableName"])]
        if "RequestItems" in params:
            return [str(name) for name in params["RequestItems"]]
        if "TransactItems" in params:
            return [str(next(iter(item.values()))["TableName"]) for item in params["TransactItems"]]
    if service == "s3" and "Bucket" in params:
        return [f"{params['Bucket']}/{params.get('Key', '')}"]
    for key in ("SecretId", "Name", "QueueUrl"):
        if key in params:
            return [str(params[key])]
    return ["*"]


def _action(service: str, operation: str) -> str:
    if service == "s3":
        operation = S3_ACTIONS.get(operation, operation)
    return f"{service}:{operation}"


# IBI_* value -> variable names, from every environment a function's settings were read from
# (tests mostly hand ``from_environment`` a dict rather than set os.environ).
_SEEN: dict[str, set[str]] = {}
SETTINGS = (
    ("functions.minting.settings", "Settings"),
    ("functions.archive.settings", "ArchiveSettings"),
    ("functions.resolver.settings", "ResolverSettings"),
    ("functions.resolver.settings", "DrainSettings"),
)


def _remember(environ: Any) -> None:
    for key, value in dict(os.environ if environ is None else environ).items():
        if key.startswith("IBI_") and isinstance(value, str) and value:
            _SEEN.setdefault(value, set()).add(key)


def _watch_settings() -> None:
    """Wrap each ``from_environment`` so that the names it was given are remembered."""
    import importlib

    for module_name, class_name in SETTINGS:
        cls = getattr(importlib.import_module(module_name), class_name)
        original = cls.__dict__["from_environment"].__func__

        def reading(cls: Any, environ: Any = None, _original: Any = original) -> Any:
            _remember(environ)
            return _original(cls, environ)

        cls.from_environment = classmethod(reading)


def _variables(resource: str) -> list[str]:
    found = set(_SEEN.get(resource, set()))
    found |= {k for k, v in os.environ.items() if k.startswith("IBI_") and v == resource}
    return sorted(found)


def install(log: Path) -> None:
    """Record every call made under a Lambda entry point to ``log`` (JSON lines): botocore's
    clients, and local mode's tables (``ibi_tools/local/tables/``), which take the same
    DynamoDB calls in process. With ``IBI_RECORD_DYNAMO_SHAPES`` set, the stores' DynamoDB
    calls are recorded too, with what they found (``tests/dynamo_shapes.py``)."""
    from botocore.client import BaseClient

    from ibi_tools.local.tables import LocalTablesClient
    from tests import dynamo_shapes

    _watch_settings()

    original = BaseClient._make_api_call
    if getattr(original, "_records_calls", False):
        return
    os.environ[LOG_VARIABLE] = str(log)

    def record(service: str, operation_name: str, api_params: dict[str, Any]) -> None:
        function = _function()
        if function is None:
            return
        with open(os.environ.get(LOG_VARIABLE, str(log)), "a") as out:
            for action, resource in _actions(service, operation_name, api_params):
                base = resource.split("/", 1)[0] if service in ("s3", "dynamodb") else resource
                variables = _variables(base)
                entry = {
                    "function": function,
                    "action": action,
                    "resource": resource,
                    "variables": variables,
                }
                out.write(json.dumps(entry) + "\n")

    def recording(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        service = self.meta.service_model.endpoint_prefix
        record("sqs" if service == "queue" else service, operation_name, api_params)
        if service == "dynamodb" and dynamo_shapes.recording():
            return dynamo_shapes.capture(
                lambda name, params: original(self, name, params), operation_name, api_params
            )
        return original(self, operation_name, api_params)

    local_original = LocalTablesClient._make_api_call

    def recording_locally(
        self: Any, operation_name: str, api_params: dict[str, Any]
    ) -> dict[str, Any]:
        record("dynamodb", operation_name, api_params)
        if dynamo_shapes.recording():
            return dynamo_shapes.capture(
                lambda name, params: local_original(self, name, params), operation_name, api_params
            )
        return local_original(self, operation_name, api_params)

    recording._records_calls = True  # type: ignore[attr-defined]
    BaseClient._make_api_call = recording  # type: ignore[method-assign]
    LocalTablesClient._make_api_call = recording_locally  # type: ignore[method-assign]


def read(log: Path) -> list[Call]:
    if not log.exists():
        return []
    calls = set()
    for line in log.read_text().splitlines():
        record = json.loads(line)
        calls.add(
            Call(
                record["function"], record["action"], record["resource"], tuple(record["variables"])
            )
        )
    return sorted(calls, key=lambda c: (c.function, c.action, c.resource))


# ---------------------------------------------------------------------------- the templates


def _pattern(value: Any) -> str:
    """A resource of a statement as a glob over ``<logical id>`` names: tokens become ``*``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return f"<{value['Fn::GetAtt'][0]}>"
        if "Ref" in value:
            return f"<{value['Ref']}>" if not value["Ref"].startswith("AWS::") else "*"
        if "Fn::Join" in value:
            separator, parts = value["Fn::Join"]
            return separator.join(_pattern(part) for part in parts)
    return "*"


@dataclass
class Role:
    statements: list[tuple[set[str], list[str]]] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)  # IBI_* -> <logical id>

    def granted(self) -> set[str]:
        return {action for actions, _ in self.statements for action in actions}


def roles(templates: Iterable[dict[str, Any]]) -> dict[str, Role]:
    """Each function's role: its statements and its environment's resources."""
    found: dict[str, Role] = {}
    for template in templates:
        resources = template["Resources"]
        for function in resources.values():
            if function["Type"] != "AWS::Lambda::Function":
                continue
            name = HANDLERS.get(function["Properties"].get("Handler", ""))
            if name is None:
                continue
            role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
            role = found.setdefault(name, Role())
            for key, value in (
                function["Properties"].get("Environment", {}).get("Variables", {}).items()
            ):
                if key.startswith("IBI_") and not isinstance(value, str):
                    role.variables[key] = _pattern(value)
            for policy in resources.values():
                if policy["Type"] != "AWS::IAM::Policy":
                    continue
                if {"Ref": role_id} not in policy["Properties"].get("Roles", []):
                    continue
                for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                    if statement.get("Effect") != "Allow":
                        continue
                    actions = statement["Action"]
                    targets = statement["Resource"]
                    role.statements.append(
                        (
                            {actions} if isinstance(actions, str) else set(actions),
                            [
                                _pattern(t)
                                for t in (targets if isinstance(targets, list) else [targets])
                            ],
                        )
                    )
    return found


def allowed(call: Call, role: Role) -> bool:
    """Whether ``role`` grants ``call``: its action on its resource (see the module)."""
    statements = [targets for actions, targets in role.statements if call.action in actions]
    if not statements:
        return False
    known = [role.variables[v] for v in call.variables if v in role.variables]
    if not known:  # the resource's variable is unknown: a resource of that service suffices
        return True
    for target in known:  # e.g. <FilesBucket…> for the bucket, then its key below it
        path = (  # a key in a bucket, an index of a table
            call.resource.split("/", 1)[1]
            if call.action.startswith(("s3:", "dynamodb:")) and "/" in call.resource
            else ""
        )
        wanted = f"{target}/{path}" if path else target
        for targets in statements:
            for pattern in targets:
                if pattern == "*" or fnmatch.fnmatchcase(wanted, pattern):
                    return True
                if pattern == target and not path:  # (a table's grant is not its indexes')
                    return True
                if pattern.startswith(target) and fnmatch.fnmatchcase(wanted, pattern):
                    return True
    return False


def evaluate(
    calls: Iterable[Call], found: dict[str, Role]
) -> tuple[list[Call], dict[str, set[str]]]:
    """The calls each role would deny, and each role's granted actions no call used."""
    denied = [
        call
        for call in calls
        if call.function not in found or not allowed(call, found[call.function])
    ]
    used: dict[str, set[str]] = {}
    for call in calls:
        used.setdefault(call.function, set()).add(call.action)
    unused = {name: role.granted() - used.get(name, set()) for name, role in found.items()}
    return denied, unused


def lines(calls: Iterator[Call] | list[Call]) -> str:
    return "\n".join(
        f"  {c.function}: {c.action} on {c.resource} {list(c.variables)}" for c in calls
    )
