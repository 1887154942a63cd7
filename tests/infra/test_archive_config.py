"""The ``ibi:archive`` context: defaults, the forms it takes, the errors it names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk import aws_logs as logs

from functions.archive.settings import ArchiveSettings, ConfigurationError
from infra.config import (
    ARCHIVE_CONTEXT_KEY,
    ArchiveConfig,
    ConfigError,
    MintingConfig,
    archive_config,
    cdk_json_context,
)
from infra.stacks import ArchiveStack

pytestmark = pytest.mark.infra


def test_defaults_leave_the_optional_settings_to_the_lambda() -> None:
    config = ArchiveConfig.from_context(None)
    assert config == ArchiveConfig()
    assert config.base_url is None
    assert config.platform_software is None
    assert config.mint_subsystem is None
    assert config.urlkey_ttl_seconds == 600
    assert config.log_retention == logs.RetentionDays.ONE_MONTH


def test_cdk_json_states_the_defaults() -> None:
    context = cdk_json_context()
    assert ArchiveConfig.from_context(context[ARCHIVE_CONTEXT_KEY]) == ArchiveConfig()


def test_context_as_an_object_or_a_json_string() -> None:
    raw = {
        "base_url": "https://archive.example.org/",
        "platform_software": "sid.inpe.br/mtc-m18/2009/07.21.13.23",
        "mint_subsystem": "default",
        "urlkey_ttl_seconds": 3600,
        "log_retention": "ONE_YEAR",
    }
    for form in (raw, json.dumps(raw)):
        config = archive_config(App(context={ARCHIVE_CONTEXT_KEY: form}))
        assert config.base_url == "https://archive.example.org"  # as the Lambda keeps it
        assert config.platform_software == "sid.inpe.br/mtc-m18/2009/07.21.13.23"
        assert config.mint_subsystem == "default"
        assert config.urlkey_ttl_seconds == 3600
        assert config.log_retention == logs.RetentionDays.ONE_YEAR


def test_null_fields_take_defaults() -> None:
    config = ArchiveConfig.from_context({"base_url": None, "urlkey_ttl_seconds": None})
    assert config == ArchiveConfig()


def test_platform_software_is_kept_canonical() -> None:
    config = ArchiveConfig.from_context(
        {"platform_software": "Sid.INPE.br/mtc-m18/2009/07.21.13.23"}
    )
    assert config.platform_software == "sid.inpe.br/mtc-m18/2009/07.21.13.23"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "not valid JSON"),
        ([], "expected an object"),
        ({"baseurl": "https://x"}, "unknown fields ['baseurl']"),
        ({"base_url": "archive.example.org"}, "base_url: 'archive.example.org' is not https://"),
        ({"base_url": "https://archive.example.org/ibi"}, "base_url"),
        ({"base_url": "ftp://archive.example.org"}, "base_url"),
        ({"base_url": 80}, "base_url"),
        ({"platform_software": "not an ibi"}, "platform_software"),
        ({"platform_software": "8JMKD3MGP8W"}, "platform_software"),
        ({"platform_software": 7}, "platform_software: 7 is not an IBI"),
        ({"mint_subsystem": ""}, "mint_subsystem: '' is not a subsystem name"),
        ({"mint_subsystem": 3}, "mint_subsystem"),
        ({"urlkey_ttl_seconds": 9}, "urlkey_ttl_seconds: 9 is not in 10-86400"),
        ({"urlkey_ttl_seconds": 86401}, "urlkey_ttl_seconds: 86401 is not in 10-86400"),
        ({"urlkey_ttl_seconds": "600"}, "urlkey_ttl_seconds: '600' is not a whole number"),
        ({"urlkey_ttl_seconds": True}, "is not a whole number"),
        ({"log_retention": "A_WHILE"}, "log_retention: 'A_WHILE' is not one of ONE_DAY"),
    ],
)
def test_errors_name_the_field(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^ibi:archive") as error:
        ArchiveConfig.from_context(raw)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("field", "value", "variable"),
    [
        ("base_url", "https://archive.example.org", "IBI_ARCHIVE_BASE_URL"),
        ("base_url", "http://127.0.0.1:8810", "IBI_ARCHIVE_BASE_URL"),
        ("base_url", "https://archive.example.org/path", "IBI_ARCHIVE_BASE_URL"),
        ("base_url", "archive.example.org", "IBI_ARCHIVE_BASE_URL"),
        ("platform_software", "8JMKD3MGP8W/3FSUP4L", "IBI_PLATFORM_SOFTWARE"),
        ("platform_software", "8JMKD3MGP8W", "IBI_PLATFORM_SOFTWARE"),
        ("urlkey_ttl_seconds", 10, "IBI_URLKEY_TTL_SECONDS"),
        ("urlkey_ttl_seconds", 86400, "IBI_URLKEY_TTL_SECONDS"),
        ("urlkey_ttl_seconds", 9, "IBI_URLKEY_TTL_SECONDS"),
        ("urlkey_ttl_seconds", 86401, "IBI_URLKEY_TTL_SECONDS"),
    ],
)
def test_the_context_accepts_what_the_lambda_accepts(field: str, value: Any, variable: str) -> None:
    """One rule: a value synth accepts is one the Archive Lambda starts with, and conversely."""
    try:
        ArchiveConfig.from_context({field: value})
        synth_accepts = True
    except ConfigError:
        synth_accepts = False
    try:
        ArchiveSettings.from_environment({"IBI_ARCHIVE_TABLE": "t", variable: str(value)})
        lambda_accepts = True
    except ConfigurationError:
        lambda_accepts = False
    assert synth_accepts == lambda_accepts


def test_mint_subsystem_must_be_a_minting_subsystem() -> None:
    minting = MintingConfig()
    ArchiveConfig(mint_subsystem="default").check_minting(minting)
    with pytest.raises(ConfigError, match=r"mint_subsystem: 'other' is not one of .*\['default'\]"):
        ArchiveConfig(mint_subsystem="other").check_minting(minting)
    app = App()
    with pytest.raises(ConfigError, match="mint_subsystem"):
        ArchiveStack(
            app, "Bad", config=ArchiveConfig(mint_subsystem="other"), minting=MintingConfig()
        )
