"""The Archive's urlkey secret (issue 13, item 2): generated, read by the Archive's role only."""

from __future__ import annotations

import json

import pytest

from infra.stacks import ArchiveStack
from tests.infra.support import Synthesized

pytestmark = pytest.mark.infra

Archive = Synthesized[ArchiveStack]


def test_the_urlkey_secret_is_generated_and_named_to_the_function(
    archive_synthesized: Archive,
) -> None:
    archive = archive_synthesized.stack.archive
    secret_id = archive_synthesized.logical_id(archive.urlkey_secret)
    secret = archive_synthesized.resources("AWS::SecretsManager::Secret")[secret_id]
    generated = secret["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] == 64 and generated["ExcludePunctuation"] is True
    assert "SecretString" not in secret["Properties"]  # no value in the template
    function_id = archive_synthesized.logical_id(archive.function)
    function = archive_synthesized.resources("AWS::Lambda::Function")[function_id]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["IBI_URLKEY_SECRET_ARN"] == {"Ref": secret_id}


def test_only_the_archive_role_reads_the_urlkey_secret(archive_synthesized: Archive) -> None:
    archive = archive_synthesized.stack.archive
    secret = {"Ref": archive_synthesized.logical_id(archive.urlkey_secret)}
    role = {"Ref": archive_synthesized.logical_id(archive.role)}
    readers = []
    for policy in archive_synthesized.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if secret in [statement["Resource"], *list(statement["Resource"])]:
                readers.append((policy["Properties"]["Roles"], statement["Action"]))
    assert readers == [([role], "secretsmanager:GetSecretValue")]
    for resource in archive_synthesized.resources("AWS::SecretsManager::ResourcePolicy").values():
        pytest.fail(f"no resource policy expected: {json.dumps(resource)}")
