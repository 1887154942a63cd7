"""Issue 13: every AWS call each function made in this session, allowed by its role.

tests/aws_calls.py records the calls made under a Lambda entry point while the integration and
e2e tests run (this module runs last: tests/conftest.py), and checks each against the policy
statements of that function's role in the synthesized templates (the default app and the one
with every option on). It fails on any call the role would deny, and writes the granted actions
no test used to .cache/iam-unused.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack

from tests import aws_calls

pytestmark = pytest.mark.infra


def _templates(*apps: tuple[App, Path]) -> list[dict[str, Any]]:
    templates = []
    for app, _ in apps:
        assembly = app.synth()
        for child in app.node.children:
            if isinstance(child, Stack):
                templates.append(assembly.get_stack_by_name(child.stack_name).template)
    return templates


def test_every_recorded_call_is_allowed_by_the_function_s_role(
    aws_call_log: Path,
    synthesized_app: tuple[App, Path],
    everything_app: tuple[App, Path],
) -> None:
    calls = aws_calls.read(aws_call_log)
    roles = aws_calls.roles(_templates(synthesized_app, everything_app))
    assert set(roles) == {"minting", "archive", "resolver", "drain", "linkcheck"}
    # integration or e2e tests ran (or this test is not collected): some call was recorded
    assert calls, "no AWS call recorded under a Lambda entry point"
    denied, unused = aws_calls.evaluate(calls, roles)
    report = Path(aws_call_log).with_name("iam-unused.json")
    report.write_text(json.dumps({k: sorted(v) for k, v in unused.items()}, indent=2))
    print("granted, never used by a test:", {k: sorted(v) for k, v in unused.items() if v})
    assert not denied, "calls the role would deny:\n" + aws_calls.lines(denied)


def test_the_check_denies_what_no_statement_grants() -> None:
    """The checker itself: an action not granted, a resource of another table, a key outside
    the granted prefix are denied; the granted ones pass."""
    role = aws_calls.Role(
        statements=[
            ({"dynamodb:GetItem"}, ["<Items>"]),
            ({"s3:GetObject"}, ["<Files>/items/*"]),
        ],
        variables={"IBI_ARCHIVE_TABLE": "<Items>", "IBI_OTHER": "<Other>", "IBI_BUCKET": "<Files>"},
    )
    call = aws_calls.Call
    assert aws_calls.allowed(call("archive", "dynamodb:GetItem", "t", ("IBI_ARCHIVE_TABLE",)), role)
    assert not aws_calls.allowed(
        call("archive", "dynamodb:PutItem", "t", ("IBI_ARCHIVE_TABLE",)), role
    )
    assert not aws_calls.allowed(call("archive", "dynamodb:GetItem", "o", ("IBI_OTHER",)), role)
    assert aws_calls.allowed(
        call("archive", "s3:GetObject", "b/items/x/a.txt", ("IBI_BUCKET",)), role
    )
    assert not aws_calls.allowed(
        call("archive", "s3:GetObject", "b/secret/a", ("IBI_BUCKET",)), role
    )
    # a Query of an index is allowed by a grant on that index, not by one on its table
    indexed = aws_calls.Role(
        statements=[({"dynamodb:Query"}, ["<Items>/index/oai-datestamp"])],
        variables={"IBI_ARCHIVE_TABLE": "<Items>"},
    )
    query = call("archive", "dynamodb:Query", "t/index/oai-datestamp", ("IBI_ARCHIVE_TABLE",))
    assert aws_calls.allowed(query, indexed)
    on_table = call("archive", "dynamodb:Query", "t", ("IBI_ARCHIVE_TABLE",))
    assert not aws_calls.allowed(on_table, indexed)
    table_only = aws_calls.Role(
        statements=[({"dynamodb:Query"}, ["<Items>"])], variables=indexed.variables
    )
    assert not aws_calls.allowed(query, table_only)
    denied, unused = aws_calls.evaluate(
        [call("archive", "dynamodb:DeleteTable", "t", ("IBI_ARCHIVE_TABLE",))], {"archive": role}
    )
    assert len(denied) == 1 and unused["archive"] == {"dynamodb:GetItem", "s3:GetObject"}
